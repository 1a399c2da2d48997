package emulator

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/azsessions/azsessions/internal/uuid"
	"github.com/azsessions/azsessions/internal/wire"
)

// maxExecuteBody bounds the JSON body of an execution request.
const maxExecuteBody = 16 << 20

// killGrace is how long past its timeout a kernel may take before the
// emulator cancels the execution's context.
const killGrace = 10 * time.Second

// execution is one recorded execution of a session.
type execution struct {
	id       string
	async    bool
	jupyter  bool              // returnJupyterFormatExecutionResult
	shell    bool              // a Shell pool's execution (shell.go)
	typ      string            // the request's executionType, echoed by a Shell execution
	codeHash [sha256.Size]byte // of the code, to tell a reused operation-id with other code
	done     chan struct{}

	// Guarded by session.execMu.
	finished   bool      // the result is in
	size       int64     // bytes the record holds, once finished
	finishedAt time.Time // by the pool's clock, once finished

	mu     sync.Mutex
	status string // wire.Status* word
	res    ExecutionResult
	kerr   bool // the kernel failed (not the code)
}

// execParams is a decoded execution request of either contract.
type execParams struct {
	code      string
	async     bool
	timeout   time.Duration
	outputMax int
	jupyter   bool
	shell     *ExecutionShell // a Shell pool's command (shell.go)
	typ       string          // the request's executionType as sent
}

// parseExecute decodes and checks the body of POST code/execute or POST executions.
func (h *Handler) parseExecute(c *call) (execParams, *apiError) {
	defer h.watchBody(c)()
	body, err := io.ReadAll(http.MaxBytesReader(c.w, c.r.Body, maxExecuteBody))
	if err != nil {
		return execParams{}, badRequest("the request body could not be read or is over %d bytes", maxExecuteBody)
	}
	var p wire.LegacyExecuteProperties
	var outMax *int32
	var jupyter bool
	if c.feat.Legacy {
		var req wire.LegacyExecuteRequest
		if err := json.Unmarshal(body, &req); err != nil {
			return execParams{}, jsonError(err, "the request body")
		}
		if req.Properties == nil {
			return execParams{}, errorf(http.StatusBadRequest, wire.CodeSessionPropertiesMissing, "api-version %s needs the body wrapped in {\"properties\":{...}}", c.version)
		}
		p = *req.Properties
	} else {
		var req wire.ExecuteRequest
		if err := json.Unmarshal(body, &req); err != nil {
			return execParams{}, jsonError(err, "the request body")
		}
		if h.opt.PoolType == PoolTypeShell && len(req.Properties) == 0 {
			return h.parseShellExecute(c, req)
		}
		fields := body
		if len(req.Properties) > 0 && !bytes.Equal(req.Properties, []byte("null")) {
			if c.feat.ExecutionOptions { // 2025-10-02-preview rejects the legacy wrapper
				return execParams{}, errorf(http.StatusBadRequest, wire.CodeSessionPropertiesMissing, "api-version %s takes a flat body; the {\"properties\":{...}} wrapper is not accepted", c.version)
			}
			if err := json.Unmarshal(req.Properties, &p); err != nil {
				return execParams{}, jsonError(err, "the properties object")
			}
			fields = req.Properties
		} else {
			p = wire.LegacyExecuteProperties{CodeInputType: req.CodeInputType, ExecutionType: req.ExecutionType, Code: req.Code, TimeoutInSeconds: req.TimeoutInSeconds}
			if c.feat.OutputStreamsMaxLength {
				outMax = req.OutputStreamsMaxLength
			}
			if c.feat.ExecutionOptions {
				jupyter = isTrue(req.ReturnJupyterFormatExecutionResult) || isTrue(req.ReturnJupyterFormat)
			}
		}
		if aerr := checkExecuteFields(c.feat, fields); aerr != nil {
			return execParams{}, aerr
		}
	}
	ep := execParams{code: p.Code, outputMax: h.opt.OutputStreamsMaxLength, jupyter: jupyter}
	switch {
	case p.ExecutionType == "" || strings.EqualFold(p.ExecutionType, wire.ExecutionSynchronous):
	case strings.EqualFold(p.ExecutionType, wire.ExecutionAsynchronous):
		ep.async = !c.feat.Legacy // the legacy contract has no asynchronous executions
	default:
		return execParams{}, badRequest("executionType must be Synchronous or Asynchronous")
	}
	switch strings.ToLower(p.CodeInputType) {
	case "", "inline", "inlinetext":
	case "inlinebase64":
		b, err := base64.StdEncoding.DecodeString(p.Code)
		if err != nil {
			return execParams{}, badRequest("code is not valid base64 (codeInputType InlineBase64)")
		}
		ep.code = string(b)
	default:
		return execParams{}, badRequest("codeInputType must be Inline, InlineBase64 or InlineText")
	}
	if p.TimeoutInSeconds < 0 {
		return execParams{}, badRequest("timeoutInSeconds must not be negative")
	}
	ep.timeout = time.Duration(p.TimeoutInSeconds) * time.Second
	if ep.timeout == 0 {
		ep.timeout = wire.MaxExecutionSeconds * time.Second
	}
	ep.timeout = min(ep.timeout, h.opt.MaxExecutionTime)
	if outMax != nil {
		if *outMax < 0 {
			return execParams{}, badRequest("outputStreamsMaxLength must not be negative")
		}
		if *outMax > MaxOutputStreamsMaxLength {
			return execParams{}, badRequest("outputStreamsMaxLength must be at most %d", MaxOutputStreamsMaxLength)
		}
		if *outMax > 0 {
			ep.outputMax = int(*outMax)
		}
	}
	return ep, nil
}

func isTrue(b *bool) bool { return b != nil && *b }

// requiredExecuteFields are the required fields of SessionCodeExecutionRequest
// on 2024-10-02-preview and 2025-02-02-preview (the regenerated swaggers
// preview/2024-10-02-preview/DynamicSessions.json @ 1230c993 and
// preview/2025-02-02-preview/DynamicSessions.json @ ca2bc853). The
// 2025-10-02-preview swagger requires only timeoutInSeconds, and a live call
// without it still answered 200 (api.md §4.3), so 2025-10-02-preview requires
// nothing.
var requiredExecuteFields = []string{"codeInputType", "executionType", "code", "timeoutInSeconds"}

// shellFields are the request fields of Shell pools (2025-10-02-preview
// swagger: "Only available for a `Shell` typed session pool"; LangChain's
// Bash tool sends shellCommand with 2025-02-02-preview). The emulator is a
// Python (PythonLTS) pool unless Options.PoolType is PoolTypeShell (shell.go).
var shellFields = []string{"shellCommand", "execCommandAndArgs", "stdin"}

// checkExecuteFields answers 400 SessionRequestValidationFailed for a body
// (or the inside of its properties wrapper) that lacks a required field of
// its api-version or carries a Shell-pool field. A field set to null counts
// as missing.
func checkExecuteFields(f wire.Features, body []byte) *apiError {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return badRequest("the request body must be a JSON object")
	}
	present := func(k string) bool { v, ok := m[k]; return ok && !bytes.Equal(bytes.TrimSpace(v), []byte("null")) }
	var missing, shell []string
	if !f.ExecutionOptions {
		for _, k := range requiredExecuteFields {
			if !present(k) {
				missing = append(missing, k)
			}
		}
	}
	for _, k := range shellFields {
		if present(k) {
			shell = append(shell, k)
		}
	}
	switch {
	case len(missing) > 0:
		return badRequest("the request is missing the required field(s) %s", strings.Join(missing, ", "))
	case len(shell) > 0:
		return badRequest("%s: only Shell session pools take these fields; this pool runs code", strings.Join(shell, ", "))
	}
	return nil
}

// jsonError is the 400 answer to a body that does not decode: it names the
// field whose value has the wrong type or is out of range (such as a
// timeoutInSeconds beyond int32).
func jsonError(err error, what string) *apiError {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return badRequest("%s is out of range or of the wrong type (want %s, got %s)", te.Field, te.Type, te.Value)
	}
	return badRequest("%s is not valid JSON", what)
}

// recordOverhead is what a finished execution record is counted for beyond
// the bytes of its stdout, stderr and value.
const recordOverhead = 512

// forgotten is the answer to a retried execution (its operation-id and its
// code) whose result the session has forgotten: 409
// ExecutionResultForgotten, never a second run.
func (t tombstone) forgotten() *apiError {
	return errorf(http.StatusConflict, CodeExecutionResultForgotten, "the execution of this operation-id already ran (%s, finished %s); its result was forgotten at %s to bound the session's records, so it cannot be answered, and it is not run again; use a new operation-id to run the code again",
		t.status, t.finishedAt.Format(time.RFC3339), t.forgottenAt.Format(time.RFC3339))
}

// execute serves POST code/execute and POST executions. The operation-id
// header names the execution; a name the session already knows answers the
// recorded execution without running the code again when the code is the
// same (a client retries an execution with its operation-id and its code),
// and 409 OperationIdConflict when the code differs. A name whose record
// was forgotten (its tombstone) answers 409 ExecutionResultForgotten with
// the same code, never running it again.
func (h *Handler) execute(c *call) *apiError {
	ep, aerr := h.parseExecute(c)
	if aerr != nil {
		return aerr
	}
	id := c.r.Header.Get("operation-id")
	if id == "" {
		id = uuid.New()
	}
	s := c.sess
	hashed := []byte(ep.code)
	if ep.shell != nil {
		hashed, _ = json.Marshal(ep.shell)
	}
	hash := sha256.Sum256(hashed)
	var prev, mine chan struct{} // the execution's turn (see session.turn)
	s.execMu.Lock()
	e, known := s.execs[id]
	if t, ok := s.tombs[id]; ok && !known {
		s.execMu.Unlock()
		if t.codeHash != hash {
			return errorf(http.StatusConflict, CodeOperationIDConflict, "the operation-id names an execution of other code; use a new operation-id for new code")
		}
		return t.forgotten()
	}
	if known && e.codeHash != hash {
		s.execMu.Unlock()
		return errorf(http.StatusConflict, CodeOperationIDConflict, "the operation-id names an execution of other code; use a new operation-id for new code")
	}
	if !known {
		// One execution runs, MaxQueuedExecutions may wait behind it.
		if s.pending > h.opt.MaxQueuedExecutions {
			s.execMu.Unlock()
			c.w.Header().Set("Retry-After", "1")
			return errorf(http.StatusTooManyRequests, CodeTooManyRequests, "the session already has %d executions waiting; retry after the running ones end", h.opt.MaxQueuedExecutions)
		}
		s.pending++
		prev, mine = s.turn, make(chan struct{})
		s.turn = mine
		e = &execution{id: id, async: ep.async, jupyter: ep.jupyter, shell: ep.shell != nil, typ: ep.typ, codeHash: hash, done: make(chan struct{}), status: wire.StatusRunning}
		s.recordLocked(e, h.opt.MaxRecordedBytes, h.opt.Now().UTC())
	}
	s.execMu.Unlock()
	if !known {
		h.pool.hold(s)
		h.wg.Add(1)
		// The deprecated OutputMaxLength is set too, for Executors that read it.
		//lint:ignore SA1019 see above
		go h.run(s, e, ExecutionRequest{Code: ep.code, Timeout: ep.timeout, OutputStreamsMaxLength: ep.outputMax, OutputMaxLength: ep.outputMax, Shell: ep.shell}, prev, mine)
	}
	h.setOperationHeaders(c, id)
	if ep.async {
		h.writeExecution(c, e, c.feat.ExecuteStatus)
		return nil
	}
	select {
	case <-e.done:
	case <-c.r.Context().Done():
		return nil // the client is gone; the execution goes on and stays recorded
	}
	h.writeExecution(c, e, c.feat.ExecuteStatus)
	return nil
}

// run executes e on the session's kernel after the executions accepted
// before it: it waits for prev, its predecessor's turn, and closes mine, its
// own, when it is done with the kernel (see session.turn). The order is
// taken when the request is accepted, not when this goroutine first runs:
// an asynchronous execution accepted before a synchronous one runs first.
func (h *Handler) run(s *session, e *execution, req ExecutionRequest, prev <-chan struct{}, mine chan<- struct{}) {
	defer h.wg.Done()
	defer close(e.done)           // third: the answer goes out after the release
	defer h.pool.release(s, true) // second
	defer func() {                // first: the code is no longer held
		s.execMu.Lock()
		s.pending--
		s.execMu.Unlock()
	}()
	finish := func(status string, res ExecutionResult, kerr bool) {
		e.mu.Lock()
		e.status, e.res, e.kerr = status, res, kerr
		e.mu.Unlock()
		size := int64(len(res.Stdout)+len(res.Stderr)+len(res.Value)) + recordOverhead
		h.pool.finished(s, e, size, h.opt.MaxRecordedBytes)
	}
	if h.runHook != nil {
		h.runHook(e.id)
	}
	select {
	case <-prev:
	case <-s.ctx.Done():
		close(mine)
		finish(wire.StatusCanceled, ExecutionResult{Status: Canceled, Stderr: "the session ended before the execution started"}, false)
		return
	}
	defer close(mine)
	if s.ctx.Err() != nil {
		finish(wire.StatusCanceled, ExecutionResult{Status: Canceled, Stderr: "the session ended before the execution started"}, false)
		return
	}
	ctx, cancel := s.ctx, func() {}
	if req.Timeout > 0 {
		ctx, cancel = context.WithTimeout(s.ctx, req.Timeout+killGrace)
	}
	defer cancel()
	h.countExecution(s.id)
	start := time.Now()
	res, err := s.kernel.Execute(ctx, req)
	if res.Duration == 0 {
		res.Duration = time.Since(start)
	}
	switch {
	case err != nil && s.ctx.Err() != nil:
		finish(wire.StatusCanceled, ExecutionResult{Status: Canceled, Stderr: "the session ended during the execution", Duration: res.Duration}, false)
		return
	case err != nil:
		h.log.Error("kernel execution failed", "err", err)
		finish(wire.StatusFailed, ExecutionResult{Status: Failed, Stderr: "the interpreter failed: " + err.Error(), Duration: res.Duration}, true)
		return
	}
	// The kernel has cut stdout and stderr at req's output cap, in
	// characters (kernel.Request): they are not cut again here.
	finish(res.Status.Word(), res, false)
}

// executionValue is the executionResult (or legacy result) of a finished
// execution, following the spec examples of 2025-10-02-preview
// (CodeExecution_Execute_Result_*.json):
//
//	cell                      default      returnJupyterFormatExecutionResult
//	print(7*9) (no value)     ""           ""  (emulator's guess)
//	a = None;a                ""           null
//	a = float('nan');a        null         "nan"
//	a = "nan";a               "nan"        "'nan'"
//
// Other values: numbers, booleans and strings as JSON; anything else as its
// text/plain form from IPython's display formatter, a long list broken over
// lines (AutoGen's ACADynamicSessionsCodeExecutor parses that form); with
// returnJupyterFormatExecutionResult every value but None as its text/plain
// string (the swagger names primitives only; that non-primitives do the same
// is the emulator's guess). An image stays the image object in both modes
// (guess).
func executionValue(res ExecutionResult, jupyter bool) json.RawMessage {
	v := res.Value
	if len(v) == 0 {
		v = json.RawMessage(`""`)
	}
	if jupyter && res.Text != nil {
		b, err := json.Marshal(*res.Text)
		if err == nil {
			return b
		}
	}
	if !jupyter && res.Text == nil && bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
		return json.RawMessage(`""`) // None
	}
	return v
}

// getExecution serves GET executions/{id}.
func (h *Handler) getExecution(c *call) *apiError {
	id := c.params["id"]
	c.sess.execMu.Lock()
	e := c.sess.execs[id]
	t, tomb := c.sess.tombs[id]
	c.sess.execMu.Unlock()
	if e == nil && tomb {
		return errorf(http.StatusNotFound, CodeExecutionNotFound, "the execution of this id ran (%s, finished %s) but its result was forgotten at %s to bound the session's records; a retry with this operation-id is refused, not run again",
			t.status, t.finishedAt.Format(time.RFC3339), t.forgottenAt.Format(time.RFC3339))
	}
	if e == nil {
		return errExecutionNotFound
	}
	h.setOperationHeaders(c, id)
	h.writeExecution(c, e, http.StatusOK)
	return nil
}

// setOperationHeaders sets operation-id and, on the new contract,
// Operation-Location (absolute, from the request's host).
func (h *Handler) setOperationHeaders(c *call, id string) {
	c.w.Header().Set("operation-id", id)
	if c.feat.Legacy {
		return
	}
	scheme := "http"
	if c.r.TLS != nil {
		scheme = "https"
	}
	q := url.Values{"api-version": {c.version}, "identifier": {c.ident}}
	c.w.Header().Set("Operation-Location", scheme+"://"+c.r.Host+h.poolPath+"/executions/"+url.PathEscape(id)+"?"+q.Encode())
}

// writeExecution answers the state of e in the shape of the request's contract.
func (h *Handler) writeExecution(c *call, e *execution, status int) {
	e.mu.Lock()
	st, res, kerr := e.status, e.res, e.kerr
	e.mu.Unlock()
	value := executionValue(res, e.jupyter)
	ms := res.Duration.Milliseconds()
	if c.feat.Legacy {
		// The legacy service answers "" for a cell whose value is None and
		// null for a failure, as the LlamaIndex walkthrough's transcript shows.
		word := wire.LegacySuccess
		if st != wire.StatusSucceeded {
			word = wire.LegacyFailure
			value = json.RawMessage("null")
		}
		if h.opt.PoolType == PoolTypeNodeLTS {
			c.writeJSON(status, nodeLegacyResponse{Properties: nodeLegacyProps{
				Status: word, Stdout: res.Stdout, Stderr: res.Stderr, ExecutionResult: value, ExecutionTimeInMilliseconds: ms,
			}})
			return
		}
		c.writeJSON(status, wire.LegacyExecuteResponse{ID: "1", Properties: wire.LegacyExecuteResultProps{
			ID: "2", Status: word, Stdout: res.Stdout, Stderr: res.Stderr, Result: value, ExecutionTimeInMilliseconds: &ms,
		}})
		return
	}
	if e.shell {
		out := shellExecuteResponse{ID: e.id, Identifier: c.ident, ExecutionType: e.typ, Status: st}
		if st == wire.StatusRunning || st == wire.StatusNotStarted {
			c.w.Header().Set("Retry-After", "1")
		} else {
			out.Status = shellStatus(st, res)
			out.Result = &shellResult{Stdout: res.Stdout, Stderr: res.Stderr, ExecutionTimeInMilliseconds: ms}
			switch {
			case res.TimedOut:
				out.Error = &wire.ErrorResponse{Error: wire.ErrorDetail{Code: CodeExecutionTimeout, Message: "the command timed out"}}
			case kerr:
				out.Error = &wire.ErrorResponse{Error: wire.ErrorDetail{Code: CodeInternal, Message: "the sandbox failed"}}
			}
		}
		c.writeJSON(status, out)
		return
	}
	typ := wire.ExecutionSynchronous
	if e.async {
		typ = wire.ExecutionAsynchronous
	}
	out := wire.ExecuteResponse{ID: e.id, Identifier: c.ident, ExecutionType: typ, Status: st}
	if st == wire.StatusRunning || st == wire.StatusNotStarted {
		// The emulator's guess: no public source shows the service sending
		// Retry-After on a running execution. The emulator sends one second
		// so that azcore's poller (BeginExecute + PollUntilDone with nil
		// options) polls every second instead of its 30 s default; no client
		// logic depends on it (Execute polls every second by itself).
		c.w.Header().Set("Retry-After", "1")
	} else {
		out.Result = &wire.ExecuteResult{Stdout: res.Stdout, Stderr: res.Stderr, ExecutionResult: value, ExecutionTimeInMilliseconds: &ms}
		switch {
		case res.TimedOut:
			out.Error = &wire.ErrorResponse{Error: wire.ErrorDetail{Code: CodeExecutionTimeout, Message: "the execution timed out"}}
		case kerr:
			out.Error = &wire.ErrorResponse{Error: wire.ErrorDetail{Code: CodeInternal, Message: "the interpreter failed"}}
		}
	}
	c.writeJSON(status, out)
}

// CodeExecutionTimeout is the error code in the error field of an execution
// that passed its timeout (status Failed, the stderr ending in a
// "TimeoutError: ..." line). No public source shows the service's code; the
// in-container code interpreter documentation lists an execution error named
// "Timeout" (api.md §4.3), which the emulator uses.
const CodeExecutionTimeout = "Timeout"
