package azsessions

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"

	"github.com/azsessions/azsessions/internal/uuid"
	"github.com/azsessions/azsessions/internal/wire"
)

// ExecutionStatus is the state of an execution. The legacy api-versions'
// Success and Failure are reported as ExecutionStatusSucceeded and
// ExecutionStatusFailed; any other value the service sends (for example a
// Shell pool's exit code "0") is kept verbatim.
type ExecutionStatus string

// Execution states (OperationState of the executions contract; the words
// of internal/wire, which the emulator answers too): "NotStarted",
// "Running", "Succeeded", "Failed" and "Canceled".
const (
	ExecutionStatusNotStarted ExecutionStatus = wire.StatusNotStarted
	ExecutionStatusRunning    ExecutionStatus = wire.StatusRunning
	ExecutionStatusSucceeded  ExecutionStatus = wire.StatusSucceeded
	ExecutionStatusFailed     ExecutionStatus = wire.StatusFailed
	ExecutionStatusCanceled   ExecutionStatus = wire.StatusCanceled
)

// normalizeStatus maps both generations' words, in any case, to ExecutionStatus.
func normalizeStatus(s string) ExecutionStatus {
	for _, known := range []ExecutionStatus{ExecutionStatusNotStarted, ExecutionStatusRunning, ExecutionStatusSucceeded, ExecutionStatusFailed, ExecutionStatusCanceled} {
		if strings.EqualFold(s, string(known)) {
			return known
		}
	}
	switch {
	case strings.EqualFold(s, wire.LegacySuccess):
		return ExecutionStatusSucceeded
	case strings.EqualFold(s, wire.LegacyFailure):
		return ExecutionStatusFailed
	}
	return ExecutionStatus(s)
}

// Terminal reports whether the status is final (Succeeded, Failed, Canceled,
// or a value the client does not know, such as a Shell exit code).
func (s ExecutionStatus) Terminal() bool {
	return s != ExecutionStatusNotStarted && s != ExecutionStatusRunning && s != ""
}

// DefaultExecutionTimeout is the timeout sent when ExecuteOptions.Timeout is
// zero, and the largest one allowed: the service stops every execution after
// 220 s.
const DefaultExecutionTimeout = 220 * time.Second

// DefaultOutputStreamsMaxLength is the service's cap on stdout and stderr,
// each, in characters, when ExecuteOptions.OutputStreamsMaxLength is zero.
const DefaultOutputStreamsMaxLength = 4096

// Execution is the outcome of running code in a session.
//
// A program that raised an exception or had a syntax error is an Execution
// with Status ExecutionStatusFailed and the traceback in Stderr, not a Go
// error: Err turns it into one when the caller wants that.
type Execution struct {
	// ID is the execution's id (the operation-id); empty on the legacy api-versions.
	ID string
	// Identifier is the session's identifier.
	Identifier string
	// Status of the execution.
	Status ExecutionStatus
	// Stdout and Stderr are what the code printed, each cut by the service at
	// the output cap (see Truncated).
	Stdout, Stderr string
	// Result is the raw JSON of the last expression's value (legacy "result",
	// new "executionResult"): a number, a string ("" when the code has no last
	// expression), null for None and for a float NaN (as the spec example
	// CodeExecution_Execute_Result_NaN_and_None shows; "nan" with
	// ExecuteOptions.ReturnJupyterFormatExecutionResult), or an object such
	// as an image (see Image). Nil while an execution is running.
	Result json.RawMessage
	// ExecutionTime is how long the code ran, as the service measured it
	// (millisecond resolution; zero while running).
	ExecutionTime time.Duration
	// ErrorCode is the service's error code for a failed execution, when it
	// sent one (executions contract "error.code"; "" otherwise).
	ErrorCode string

	outputMax int
	timeout   time.Duration // the timeout the execution was started with (0: unknown)
}

// TimedOut reports whether the execution failed by passing its timeout: its
// status is Failed or Canceled and either the service's error code names a
// timeout or the execution ran for at least the timeout it was started with
// (ExecuteOptions.Timeout, or 220 s; unknown for ResumeExecution, so only
// the error code counts there).
//
// No public source says how the service reports a timed-out execution (see
// the spec and the in-container server's documentation, which lists an
// execution error named "Timeout"); this rule is inferred from those two
// signals and needs no parsing of Stderr.
func (e Execution) TimedOut() bool {
	if e.Status != ExecutionStatusFailed && e.Status != ExecutionStatusCanceled {
		return false
	}
	if strings.Contains(strings.ToLower(e.ErrorCode), "timeout") {
		return true
	}
	return e.timeout > 0 && e.ExecutionTime >= e.timeout
}

// ResultText returns Result as text: a JSON string is unquoted ("nan", "",
// "'hello'" in Jupyter format), null is "", and any other value (a number,
// an object) is its JSON text.
func (e Execution) ResultText() string {
	if len(e.Result) == 0 || string(e.Result) == "null" {
		return ""
	}
	if e.Result[0] == '"' {
		var s string
		if json.Unmarshal(e.Result, &s) == nil {
			return s
		}
	}
	return string(e.Result)
}

// DecodeResult decodes Result into v with encoding/json (for example a
// number into an int, an object into a struct). It returns an error when
// there is no result.
func (e Execution) DecodeResult(v any) error {
	if len(e.Result) == 0 {
		return errors.New("azsessions: the execution has no result")
	}
	return json.Unmarshal(e.Result, v)
}

// ExecutionError is the error Execution.Err returns for a failed or canceled execution.
type ExecutionError struct {
	// Status is ExecutionStatusFailed or ExecutionStatusCanceled.
	Status ExecutionStatus
	// Message is the last non-empty line of Stderr, such as
	// "SyntaxError: illegal target for annotation" (or of the service's
	// error message when Stderr is empty).
	Message string
	// TimedOut says the execution passed its timeout (Execution.TimedOut).
	TimedOut bool
	// StderrCut says Stderr was cut at the output cap (Execution.Truncated),
	// so the traceback's beginning or end may be missing; Message is then
	// the last complete line that arrived.
	StderrCut bool
}

// Error returns "azsessions: execution <status>[ (timed out)]: <message>",
// followed by " (stderr was cut at the output cap)" when StderrCut is set,
// for example "azsessions: execution failed: NameError: name 'x' is not defined".
func (e *ExecutionError) Error() string {
	msg := "azsessions: execution " + strings.ToLower(string(e.Status))
	if e.TimedOut {
		msg += " (timed out)"
	}
	if e.Message != "" {
		msg += ": " + e.Message
	}
	if e.StderrCut {
		msg += " (stderr was cut at the output cap; the exception line may be missing: raise ExecuteOptions.OutputStreamsMaxLength or write the traceback to a file)"
	}
	return msg
}

// Err returns nil unless the execution Failed or was Canceled, in which case
// it returns an *ExecutionError carrying the last line of Stderr (the
// exception line of a Python traceback). When Stderr was cut at the output
// cap, a last line that was cut mid-way is skipped and StderrCut is set.
func (e Execution) Err() error {
	if e.Status != ExecutionStatusFailed && e.Status != ExecutionStatusCanceled {
		return nil
	}
	cut := e.stderrCut()
	stderr := e.Stderr
	if cut && !strings.HasSuffix(stderr, "\n") {
		// the last line is incomplete: keep the last complete one
		if i := strings.LastIndexByte(stderr, '\n'); i >= 0 {
			stderr = stderr[:i]
		}
	}
	msg := ""
	lines := strings.Split(strings.TrimRight(stderr, "\n\r\t "), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			msg = l
			break
		}
	}
	return &ExecutionError{Status: e.Status, Message: msg, TimedOut: e.TimedOut(), StderrCut: cut}
}

// Image is a picture the code returned as its last value, for example a
// matplotlib figure.
type Image struct {
	// Format such as "png".
	Format string
	// Data holds the decoded image bytes.
	Data []byte
}

// Image returns the image when Result is the service's image object
// {"type":"image","format":"png","base64_data":"..."}; ok is false otherwise.
// Images are documented for Python pools only (matplotlib figures); no
// public source shows a NodeLTS pool returning one.
func (e Execution) Image() (img Image, ok bool) {
	if len(e.Result) == 0 || e.Result[0] != '{' {
		return Image{}, false
	}
	var w wire.Image
	if json.Unmarshal(e.Result, &w) != nil || !strings.EqualFold(w.Type, "image") {
		return Image{}, false
	}
	data, err := base64.StdEncoding.DecodeString(w.Base64Data)
	if err != nil {
		return Image{}, false
	}
	return Image{Format: w.Format, Data: data}, true
}

// Truncated reports whether Stdout or Stderr reached the output cap (4096
// characters unless ExecuteOptions.OutputStreamsMaxLength said otherwise),
// which means the service probably cut it: write large output to a file under
// /mnt/data and download it instead.
func (e Execution) Truncated() bool {
	return reachedOutputMax(e.Stdout, e.outputMax) || e.stderrCut()
}

func (e Execution) stderrCut() bool { return reachedOutputMax(e.Stderr, e.outputMax) }

// reachedOutputMax says whether s reached the output cap outputMax, in
// characters (DefaultOutputStreamsMaxLength when outputMax <= 0): the service
// cuts a stream there without saying so.
func reachedOutputMax(s string, outputMax int) bool {
	if outputMax <= 0 {
		outputMax = DefaultOutputStreamsMaxLength
	}
	return utf8.RuneCountInString(s) >= outputMax
}

// ExecuteOptions contains the optional parameters of Session.Execute.
type ExecuteOptions struct {
	// Timeout bounds the execution on the service side, sent as
	// timeoutInSeconds (whole seconds, rounded up). Zero means
	// DefaultExecutionTimeout (220 s), which is also the maximum. The caller's
	// ctx bounds the whole call, retries and look-ups included.
	Timeout time.Duration
	// OutputStreamsMaxLength caps stdout and stderr, each, in characters
	// (api-version 2025-10-02-preview; other versions give ErrUnsupported).
	// Zero means the service default (4096).
	OutputStreamsMaxLength int32
	// ReturnJupyterFormatExecutionResult asks for the value of the last
	// expression in the Jupyter kernel's text/plain form, sent as the request
	// field returnJupyterFormatExecutionResult (api-version
	// 2025-10-02-preview; other versions give ErrUnsupported before any
	// I/O): a string comes back with its quotes ("'nan'" for the string
	// "nan", see the spec example
	// CodeExecution_Execute_Result_StringNaN_JupyterFormat.json), a float NaN
	// as "nan", None still as null. Documented for Python pools only (what a
	// NodeLTS pool answers is not; the emulator gives util.inspect's form).
	ReturnJupyterFormatExecutionResult bool
	// OperationID sets the execution's id, sent as the operation-id header on
	// the executions contract (2024-10-02-preview and later); empty means a
	// fresh UUID. It must be printable ASCII without spaces, at most 128
	// bytes. It is not an idempotency key: sending code again under the same
	// id is refused. An id this Client has already sent for the session
	// (whatever the outcome, even ErrExecutionOutcomeUnknown, and while
	// another call with it is in flight) is refused before any I/O with an
	// error wrapping ErrOperationIDInUse, unless its POST was refused with a
	// 4xx (nothing ran; not the emulator's 409 ExecutionResultForgotten,
	// which is an *ExecutionOutcomeUnknownError: the code ran); an id the service already knows (GET
	// executions/{id}, asked first) is refused the same way, because the
	// service's record cannot tell whose code it ran. To wait for or read an
	// earlier execution use Session.ResumeExecution or Session.GetExecution.
	// Ignored on the legacy api-versions.
	OperationID string
}

// ExecuteResponse is the answer of Session.Execute.
type ExecuteResponse struct {
	Execution
}

// ErrExecutionOutcomeUnknown is matched (errors.Is) by the error Execute and
// BeginExecute return when the request may have reached the service but the
// client cannot tell whether the code ran: the answer was lost or unusable
// (a reset connection or HTTP/2 stream, a per-try timeout, any 5xx, a 408,
// a 3xx, a 2xx other than 200 and 202, a cut or malformed body) and the
// execution could not be found by its operation-id, or ctx ended first. The error is an *ExecutionOutcomeUnknownError carrying
// the operation-id. Sending the code again could run it twice; the caller
// decides (see ExecutionOutcomeUnknownError).
var ErrExecutionOutcomeUnknown = errors.New("azsessions: the code may or may not have run")

// ErrOperationIDInUse is wrapped by the error Execute and BeginExecute return,
// before sending the code, when ExecuteOptions.OperationID names an execution
// the session already has, or one this Client already sent for the session.
var ErrOperationIDInUse = errors.New("azsessions: the operation-id names an existing execution")

// ExecutionOutcomeUnknownError is the error of an execution whose outcome the
// client could not learn. errors.Is(err, ErrExecutionOutcomeUnknown) is true,
// and errors.Is/As also see Err (for example context.DeadlineExceeded or an
// *azcore.ResponseError).
//
// On the executions contract the execution can still be found later by
// OperationID: Session.GetExecution returns its state, and
// Session.ResumeExecution a poller that waits for its end. A GetExecution
// answer of 404 means the service has no record of it yet; the request may
// still be travelling or queued, so it is not proof that the code will never
// run. Sending the code again is the caller's decision; doing it only after
// the execution's own timeout (ExecuteOptions.Timeout, at most 220 s) has
// passed since the call keeps the risk of a double run small. On the legacy
// contract (OperationID is empty) there is no way to ask.
type ExecutionOutcomeUnknownError struct {
	// OperationID is the execution's operation-id (empty on the legacy
	// api-versions).
	OperationID string
	// Err is the failure that left the outcome unknown.
	Err error
}

// Error returns "azsessions: the code may or may not have run (operation-id
// <id>): <cause>".
func (e *ExecutionOutcomeUnknownError) Error() string {
	msg := ErrExecutionOutcomeUnknown.Error()
	if e.OperationID != "" {
		msg += " (operation-id " + e.OperationID + ")"
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns ErrExecutionOutcomeUnknown and Err.
func (e *ExecutionOutcomeUnknownError) Unwrap() []error {
	return []error{ErrExecutionOutcomeUnknown, e.Err}
}

// outcomeUnknown returns an *ExecutionOutcomeUnknownError for err that also
// matches ctx's error when ctx ended.
func outcomeUnknown(ctx context.Context, operationID string, err error) error {
	var already *ExecutionOutcomeUnknownError
	if errors.As(err, &already) {
		return err
	}
	if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(err, ctxErr) {
		err = fmt.Errorf("%w (%w)", err, ctxErr)
	}
	return &ExecutionOutcomeUnknownError{OperationID: operationID, Err: err}
}

// Execute runs Python code in the session (JavaScript on a NodeLTS pool)
// and waits for it to finish.
//
// REST: POST {endpoint}/executions (2024-10-02-preview and later; 200, or 202
// then GET executions/{id} until done) or POST {endpoint}/code/execute (the
// legacy 2024-02-02-preview and 2024-08-02-preview). Variables, imports and
// files persist between executions of a session. Execute is BeginExecute
// (with executionType Synchronous) followed by PollUntilDone: the service
// usually answers with the finished execution, and otherwise the poller asks
// GET executions/{id} every second, or as the service's Retry-After says.
//
// A program error is data: the response has Status ExecutionStatusFailed and
// the traceback in Stderr, and err is nil. err is non-nil for bad input
// (before any I/O: empty code, ErrInvalidIdentifier, ErrUnsupported, a
// timeout outside 0–220 s, an invalid OperationID), for service errors
// (*azcore.ResponseError, or *AuthError for 401/403), and for transport
// failures.
//
// Execute never runs code twice. The request is sent again only when the
// service provably did not run it: a 429 (honouring Retry-After), a 401
// answered before the code was looked at (once, with a fresh token), or a
// connection that was never made. When the answer is lost after the request
// may have left, Execute looks the execution up by its operation-id (executions
// contract): it returns the recorded execution if the service has one, and
// otherwise an *ExecutionOutcomeUnknownError (errors.Is
// ErrExecutionOutcomeUnknown) with the operation-id, without sending again.
// On the legacy contract a lost answer is always ErrExecutionOutcomeUnknown.
// A failure before anything was sent (ctx ended first, the credential failed,
// a TLS handshake failed) is a plain error: the code did not run.
func (s *Session) Execute(ctx context.Context, code string, options *ExecuteOptions) (ExecuteResponse, error) {
	const op = "Session.Execute"
	var err error
	if options == nil {
		options = &ExecuteOptions{}
	}
	ctx, end := s.client.startOp(ctx, op)
	defer func() { end(err) }()
	req, p, err := s.executeCreateRequest(ctx, op, code, options, wire.ExecutionSynchronous)
	if err != nil {
		return ExecuteResponse{}, err
	}
	poller, err := s.beginExecution(ctx, req, p)
	if err != nil {
		return ExecuteResponse{}, err
	}
	resp, err := poller.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: executePollFrequency})
	if err != nil {
		err = outcomeUnknown(ctx, p.operationID, err)
		return ExecuteResponse{}, err
	}
	return resp, nil
}

// executePollFrequency is how often Execute polls an execution the service
// answered as still running, when the service gives no Retry-After.
const executePollFrequency = time.Second

// executeParams are what sending one execution request and reading its
// answer need from its builder (executeCreateRequest, shellCreateRequest).
type executeParams struct {
	timeout     int32
	operationID string // "" on the legacy contract
	// userID says operationID came from the caller's OperationID.
	userID bool
	// outputMax is the OutputStreamsMaxLength sent (0: the service default).
	outputMax int
	// tracker observes the request's tries (newExecuteRequest).
	tracker *sendTracker
}

// executeTimeout checks an execution's Timeout (at most max) and returns
// it in whole seconds, rounded up; zero means def.
func executeTimeout(timeout, def, max time.Duration) (int32, error) {
	if timeout < 0 || timeout > max {
		return 0, fmt.Errorf("azsessions: timeout %v is outside 0–%v (the service's cap)", timeout, max)
	}
	if timeout == 0 {
		timeout = def
	}
	return int32((timeout + time.Second - 1) / time.Second), nil
}

// newOperationID checks the caller's OperationID and returns it (userID
// true), or a fresh UUID when it is empty.
func newOperationID(id string) (_ string, userID bool, _ error) {
	if id == "" {
		return uuid.New(), false, nil
	}
	if err := checkOperationID(id); err != nil {
		return "", false, err
	}
	return id, true, nil
}

// checkOperationID refuses an operation-id that cannot be sent as a header
// value and a path segment unchanged: control characters (a CR or LF would
// split the header), spaces, non-ASCII, or more than 128 bytes.
func checkOperationID(id string) error {
	if id == "." || id == ".." {
		// GET executions/.. would be normalised to another resource by any
		// proxy or server
		return fmt.Errorf("azsessions: OperationID %q is a dot segment", id)
	}
	if len(id) > 128 {
		return fmt.Errorf("azsessions: OperationID is %d bytes long (at most 128)", len(id))
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c <= ' ' || c >= 0x7f {
			return fmt.Errorf("azsessions: OperationID has the byte %#02x at %d: only printable ASCII without spaces is allowed", c, i)
		}
	}
	return nil
}

// checkExecutionID checks the operation-id naming an existing execution
// (GetExecution, ResumeExecution): not empty, and as checkOperationID.
func checkExecutionID(id string) error {
	if err := checkOperationID(id); err != nil {
		return err
	}
	if id == "" {
		return errors.New("azsessions: operation-id is empty")
	}
	return nil
}

// Exactly once: the design.
//
// An execution request is the one request of this API that is not
// idempotent: sending it twice may run the code twice. So the client sends
// it again only when an answer proves that the earlier attempt did not run
// and cannot still run:
//
//   - 429 Too Many Requests: the service refused it (azcore's retry policy
//     waits for Retry-After; sendTracker.shouldRetry allows nothing else);
//   - a dial or DNS error, or a connection that failed before the whole
//     request was written (sendTracker): the service never got it;
//   - a credential failure: the bearer policy never called the transport;
//   - 401: the service refused the token before looking at the request
//     (retryUnauthorizedPolicy sends it once more with a fresh token).
//
// Everything else after the request may have left is ambiguous, and the
// request is never sent again, because an earlier attempt for that
// operation-id can still be alive somewhere. The interleavings this covers:
//
//  1. Lost answer, execution recorded (reset after the handler, 500/502/504
//     after it, a body cut mid-way): the look-up GET executions/{id} finds
//     it and the caller gets its result.
//  2. Slow first POST: a per-try timeout (Retry.TryTimeout) or a gateway
//     504 ends the client's wait while the service is still receiving or
//     queueing the POST. The look-up may answer 404 ("not recorded yet") and
//     the POST may be recorded a moment later. Re-sending here would run the
//     code twice, so a 404 look-up gives ErrExecutionOutcomeUnknown with the
//     operation-id; GetExecution/ResumeExecution find the execution later.
//  3. A 404 look-up that is not the service's (a proxy's HTML page, no error
//     code): same as 2, it proves nothing.
//  4. Look-up fails (reset, 5xx after azcore's retries, ctx ended): unknown.
//  5. Nothing sent (ctx ended before the call, during a Retry-After wait or
//     while the credential was pending; TLS handshake failure): sendTracker
//     saw no request headers written, so the error is plain, not unknown.
//  6. Operation-id reuse: a caller-chosen id is looked up before the POST,
//     and a known id is refused (ErrOperationIDInUse), so that a record
//     found after a lost answer is always this call's execution (a
//     generated id is a fresh UUIDv4).
//  7. Legacy contract (no operation-id, no look-up): any ambiguous failure,
//     and a 2xx answer without a status, is ErrExecutionOutcomeUnknown.
//
// The service's deduplication of a repeated operation-id is not documented,
// so no client logic depends on it.

// beginExecution sends the execution request req, built and checked by
// executeCreateRequest or shellCreateRequest, once (see the design above)
// and returns a poller whose state is the first one the service reported.
// A caller-chosen operation-id is claimed and looked up first, before req
// is sent.
func (s *Session) beginExecution(ctx context.Context, req *policy.Request, p executeParams) (_ *runtime.Poller[ExecuteResponse], err error) {
	if p.userID {
		// Claimed before any I/O, released only when nothing was sent
		// (see operationIDs).
		if !s.client.opIDs.claim(s.identifier, p.operationID) {
			return nil, fmt.Errorf("%w: OperationID %s was already sent by this client for this session (use Session.ResumeExecution or Session.GetExecution to follow it, or a new id for new code)", ErrOperationIDInUse, p.operationID)
		}
		sent := false
		defer func() {
			if err != nil && !sent {
				s.client.opIDs.release(s.identifier, p.operationID)
			}
		}()
		if _, found, err := s.lookupExecution(ctx, p.operationID); err != nil {
			return nil, fmt.Errorf("azsessions: checking that OperationID %s is unused: %w", p.operationID, err)
		} else if found {
			return nil, fmt.Errorf("%w: OperationID %s (use Session.ResumeExecution or Session.GetExecution to follow it, or a new id for new code)", ErrOperationIDInUse, p.operationID)
		}
		resp, err := s.client.internal.Pipeline().Do(req)
		// a 4xx refusal (other than 408) proves the code did not run: the id
		// may be used again; anything else keeps it claimed
		if err != nil {
			sent = p.tracker.maybeSent() && !notSent(err)
		} else {
			sent = ambiguousStatus(resp.StatusCode) || ranBefore(resp)
		}
		state, err := s.executeHandleResponse(ctx, resp, err, p)
		if err != nil {
			return nil, err
		}
		return s.newExecutionPoller(p.operationID, p.outputMax, p.timeout, state)
	}
	resp, err := s.client.internal.Pipeline().Do(req)
	state, err := s.executeHandleResponse(ctx, resp, err, p)
	if err != nil {
		return nil, err
	}
	return s.newExecutionPoller(p.operationID, p.outputMax, p.timeout, state)
}

// operationIDs remembers, per session identifier, the caller-chosen
// operation-ids this Client has sent or is sending (Execute, BeginExecute).
//
// The service's record (GET executions/{id}) cannot prove that an id is
// unused: after a lost answer or a gateway's 504 the first POST may still be
// travelling or queued, and the look-up answers 404 until it is recorded.
// So the client refuses, before any I/O, an OperationID it has already sent
// for the session, whatever the look-up says. The interleavings covered:
//
//   - two concurrent calls with one id: the second finds the claim of the
//     first (taken before the first call's look-up) and is refused;
//   - a call after ErrExecutionOutcomeUnknown with the same id (an
//     idempotency key used as a retry): refused, the first POST may be
//     alive; Session.ResumeExecution or Session.GetExecution follow it;
//   - a call after a finished execution: refused here, and by the look-up
//     in another Client or process;
//   - a call after a failure that proves nothing was sent or run (bad
//     input, the pre-check failed, a 4xx refusal, nothing left the
//     machine): the claim is released and the id may be used again.
//
// Generated ids (fresh UUIDv4s) are not kept. The set grows by one entry
// per caller-chosen id sent; it lives as long as the Client.
type operationIDs struct {
	mu   sync.Mutex
	sent map[string]struct{}
}

func (o *operationIDs) claim(identifier, id string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	k := identifier + "\x00" + id
	if _, ok := o.sent[k]; ok {
		return false
	}
	if o.sent == nil {
		o.sent = map[string]struct{}{}
	}
	o.sent[k] = struct{}{}
	return true
}

func (o *operationIDs) release(identifier, id string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.sent, identifier+"\x00"+id)
}

// executeCreateRequest checks the arguments of Execute and BeginExecute
// (op) before any I/O and builds POST executions (flat body, operation-id
// header) or, on the legacy contract, POST code/execute (properties-wrapped
// body, no operation-id; an asynchronous execution is refused).
func (s *Session) executeCreateRequest(ctx context.Context, op, code string, options *ExecuteOptions, executionType string) (*policy.Request, executeParams, error) {
	legacy := s.client.features.Legacy
	if legacy && executionType == wire.ExecutionAsynchronous {
		return nil, executeParams{}, s.client.errNeedsExecutions(op)
	}
	if err := s.validate(); err != nil {
		return nil, executeParams{}, err
	}
	if strings.TrimSpace(code) == "" {
		return nil, executeParams{}, errors.New("azsessions: code is empty")
	}
	if !utf8.ValidString(code) {
		// encoding/json would send each bad byte as U+FFFD: other code than
		// the caller's would run
		return nil, executeParams{}, errors.New("azsessions: code is not valid UTF-8")
	}
	timeout, err := executeTimeout(options.Timeout, DefaultExecutionTimeout, DefaultExecutionTimeout)
	if err != nil {
		return nil, executeParams{}, err
	}
	if options.OutputStreamsMaxLength < 0 {
		return nil, executeParams{}, errors.New("azsessions: OutputStreamsMaxLength is negative")
	}
	if options.OutputStreamsMaxLength > 0 && !s.client.features.OutputStreamsMaxLength {
		return nil, executeParams{}, fmt.Errorf("%w: OutputStreamsMaxLength needs api-version %s (client uses %s)", ErrUnsupported, APIVersion20251002Preview, s.client.version)
	}
	if options.ReturnJupyterFormatExecutionResult && !s.client.features.ExecutionOptions {
		return nil, executeParams{}, fmt.Errorf("%w: ReturnJupyterFormatExecutionResult needs api-version %s (client uses %s)", ErrUnsupported, APIVersion20251002Preview, s.client.version)
	}
	p := executeParams{timeout: timeout, outputMax: int(options.OutputStreamsMaxLength)}
	if legacy {
		// OperationID is ignored: the legacy contract has no operation-id
		return s.newExecuteRequest(ctx, "code/execute", wire.LegacyExecuteRequest{Properties: &wire.LegacyExecuteProperties{
			CodeInputType: "inline", ExecutionType: "synchronous", Code: code, TimeoutInSeconds: timeout,
		}}, p)
	}
	if p.operationID, p.userID, err = newOperationID(options.OperationID); err != nil {
		return nil, executeParams{}, err
	}
	b := wire.ExecuteRequest{CodeInputType: wire.CodeInputInline, ExecutionType: executionType, Code: code, TimeoutInSeconds: timeout}
	if options.OutputStreamsMaxLength > 0 {
		b.OutputStreamsMaxLength = &options.OutputStreamsMaxLength
	}
	if options.ReturnJupyterFormatExecutionResult {
		jupyter := true
		b.ReturnJupyterFormatExecutionResult = &jupyter
	}
	return s.newExecuteRequest(ctx, "executions", b, p)
}

// newExecuteRequest builds the POST of an execution request (code or Shell)
// with body, the operation-id header when p has one, and its own retry
// options: its retries are limited by sendTracker.shouldRetry and observed
// by the same sendTracker (returned in p.tracker).
func (s *Session) newExecuteRequest(ctx context.Context, route string, body any, p executeParams) (*policy.Request, executeParams, error) {
	tracker := &sendTracker{}
	retry := s.client.executeRetry
	retry.ShouldRetry = tracker.shouldRetry
	if retry.TryTimeout == 0 {
		// a synchronous execution is answered within its own timeout; a
		// POST unanswered after that and ExecutionGrace never will be
		// (ambiguous: looked up, never sent again)
		retry.TryTimeout = time.Duration(p.timeout)*time.Second + ExecutionGrace
	}
	ctx = policy.WithRetryOptions(ctx, retry)
	req, err := s.client.newRequest(ctx, http.MethodPost, route, s.identifier, nil)
	if err != nil {
		return nil, executeParams{}, err
	}
	if p.operationID != "" {
		req.Raw().Header.Set("operation-id", p.operationID)
	}
	if err := runtime.MarshalAsJSON(req, body); err != nil {
		return nil, executeParams{}, err
	}
	req.SetOperationValue(tracker)
	p.tracker = tracker
	return req, p, nil
}

// executeHandleResponse turns the pipeline's answer to an execution request
// into the first state of the execution, resolving an ambiguous failure by
// a look-up (never by sending again; see the design above).
func (s *Session) executeHandleResponse(ctx context.Context, resp *http.Response, err error, p executeParams) (wire.ExecuteResponse, error) {
	legacy := s.client.features.Legacy
	switch {
	case err != nil:
		if !p.tracker.maybeSent() || notSent(err) {
			return wire.ExecuteResponse{}, err // nothing left: the code did not run
		}
	case !runtime.HasStatusCode(resp, http.StatusOK, http.StatusAccepted):
		// only the status decides: a 4xx other than 408 (or an exhausted
		// 429) proves nothing ran; anything else may follow a run
		ran := ranBefore(resp)
		err = s.client.responseError(resp)
		if ran {
			// A 4xx that follows a run: never a plain refusal a caller
			// could take for "nothing ran" and send again under a new id.
			return wire.ExecuteResponse{}, outcomeUnknown(ctx, p.operationID, fmt.Errorf("the service says the execution of this operation-id already ran and its result was forgotten (it was not run again): %w", err))
		}
		if !ambiguousStatus(resp.StatusCode) {
			return wire.ExecuteResponse{}, err
		}
	case legacy:
		var w wire.LegacyExecuteResponse
		if err = runtime.UnmarshalAsJSON(resp, &w); err == nil && w.Properties.Status == "" {
			err = errors.New("the answer has no execution status")
		}
		if err == nil {
			state := legacyState(w, s.identifier)
			if st := normalizeStatus(state.Status); !st.Terminal() {
				// The legacy contract answers when the code has finished and
				// has no GET executions/{id} to follow it: the poller would
				// GET executions/ (no operation-id) and take any record for
				// this execution's (red-team finding, redcli). The code may
				// be running: its outcome is unknown.
				return wire.ExecuteResponse{}, outcomeUnknown(ctx, "", fmt.Errorf("the service answered the synchronous execution with status %s, which the legacy contract cannot follow", st))
			}
			return state, nil
		}
	default:
		var w wire.ExecuteResponse
		if err = runtime.UnmarshalAsJSON(resp, &w); err == nil && w.Status == "" {
			err = errors.New("the answer has no execution status")
		}
		if err == nil && w.ID != "" && w.ID != p.operationID {
			// The service echoes the operation-id as the execution's id (every
			// spec example). Another id is another execution's answer (a
			// confused proxy or cache): ours may or may not have run, so it is
			// looked up by its own id below, never returned as this call's.
			err = errOtherExecution
		}
		if err == nil {
			if w.ID == "" {
				w.ID = p.operationID
			}
			return w, nil
		}
	}
	// Ambiguous: the code may have run.
	if legacy || ctx.Err() != nil {
		return wire.ExecuteResponse{}, outcomeUnknown(ctx, p.operationID, err)
	}
	w, found, lookupErr := s.lookupExecution(ctx, p.operationID)
	switch {
	case lookupErr != nil:
		return wire.ExecuteResponse{}, outcomeUnknown(ctx, p.operationID, errors.Join(err, fmt.Errorf("looking the execution up: %w", lookupErr)))
	case !found:
		return wire.ExecuteResponse{}, outcomeUnknown(ctx, p.operationID, errors.Join(err,
			errors.New("the service has no record of the execution yet; it is not sent again because the first request may still be on its way (look it up later with Session.GetExecution)")))
	}
	if w.ID == "" {
		w.ID = p.operationID
	}
	return w, nil
}

// codeExecutionResultForgotten is the error code of the emulator's 409 to a
// retried operation-id whose execution ran and whose result it has forgotten
// (emulator.CodeExecutionResultForgotten); the service documents no such
// answer.
const codeExecutionResultForgotten = "ExecutionResultForgotten"

// ranBefore reports whether an answer to an execution request is a refusal
// that nevertheless says the code ran (the emulator's 409
// ExecutionResultForgotten, by its x-ms-error-code header): the only 4xx
// that does not prove nothing ran.
func ranBefore(resp *http.Response) bool {
	return resp.StatusCode == http.StatusConflict && strings.EqualFold(resp.Header.Get(wire.ErrorCodeHeader), codeExecutionResultForgotten)
}

// ambiguousStatus reports whether an answer with this status to an
// execution request may come after the code ran. Only a 4xx other than 408
// is a refusal before the code was looked at (bad input, auth, not found,
// conflict, an exhausted 429). Everything else is ambiguous:
//
//   - every 5xx, not only 500/502/503/504: gateways answer 520–527 (524: the
//     origin accepted the request and is still working on it), 598/599 and
//     others after forwarding the request;
//   - 408: a gateway's timeout while the backend may have it;
//   - a 2xx other than 200 and 202 (201, 203, 204, ...): the request was
//     accepted by something, and the execution may have run;
//   - a 3xx (not followed: guardTransport): a 303 says the POST was processed;
//   - a status outside 100–599.
func ambiguousStatus(status int) bool {
	return status == http.StatusRequestTimeout || status < 400 || status >= 500
}

// shouldRetry is the ShouldRetry of an execution request: only answers
// that prove the code did not run (429), and failures before the request
// was complete, except a certificate the client does not trust (trying again
// cannot help).
func (t *sendTracker) shouldRetry(resp *http.Response, err error) bool {
	if err != nil {
		var certErr *tls.CertificateVerificationError
		if errors.As(err, &certErr) {
			return false
		}
		return notSent(err) || !t.maybeSent()
	}
	return resp.StatusCode == http.StatusTooManyRequests
}

// notSent reports whether err proves that the request never left: the
// connection could not be made (dial or DNS failure), or the credential
// failed before it was sent.
func notSent(err error) bool {
	var credErr *credentialError
	if errors.As(err, &credErr) {
		return true
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) && opErr.Op == "dial" {
		return true
	}
	var dnsErr *net.DNSError
	return errors.As(err, &dnsErr)
}

// sendTracker records, for one execution request, whether its last try may
// have made the service run the code: sendTrackerPolicy sets it for each
// try that reaches the transport. A try with an answer counts unless its
// status proves a refusal (ambiguousStatus: a 4xx other than 408), even a
// 200: azcore's retry policy returns the caller's context error instead of
// the answer when that context ended as the answer arrived, and that error
// must then say the outcome is unknown (TestExecuteAnswerAsContextEnds). A
// failed try counts once net/http wrote the whole
// request (headers and body) or an answer began to arrive (net/http waits
// for its writer before it returns an error, so the flag is settled then;
// with an answer, WroteRequest may come late, GotFirstResponseByte does
// not), or once the transport read the whole body unless the write is
// known to have failed (HTTP/2 returns on the try's context without
// waiting for its writer, whose last frame may still go out:
// TestExecuteH2LastFrameFlushedAfterTry), or when the transport cannot be
// observed (a custom Transporter that reports no connection events). It does not count
// when ctx had ended before the try, or the connection failed before the
// request was complete (dial, TLS handshake, a reset while the body was
// being written): a server cannot run a request whose body it did not get
// (Content-Length framing).
type sendTracker struct {
	sent atomic.Bool
}

func (t *sendTracker) maybeSent() bool { return t.sent.Load() }

// sendTrackerPolicy is the last of the client's per-try policies (below the
// bearer policy, so a credential failure never reaches it).
type sendTrackerPolicy struct{}

func (sendTrackerPolicy) Do(req *policy.Request) (*http.Response, error) {
	var t *sendTracker
	if !req.OperationValue(&t) || t == nil {
		return req.Next()
	}
	if err := req.Raw().Context().Err(); err != nil {
		t.sent.Store(false)
		return nil, err
	}
	var gotConn, wrote, writeFailed, bodyRead atomic.Bool
	ctx := httptrace.WithClientTrace(req.Raw().Context(), &httptrace.ClientTrace{
		GetConn:              func(string) { gotConn.Store(true) },
		GotFirstResponseByte: func() { wrote.Store(true) },
		WroteRequest: func(info httptrace.WroteRequestInfo) {
			if info.Err == nil {
				wrote.Store(true)
			} else {
				writeFailed.Store(true)
			}
		},
	})
	try := req.WithContext(ctx)
	// HTTP/2 writes the request from a goroutine of its own, and RoundTrip
	// returns as soon as the try's context ends, without waiting for that
	// writer: a write of the last DATA frame (END_STREAM) held back by TCP
	// back-pressure completes afterwards, and WroteRequest comes too late
	// (TestExecuteH2LastFrameFlushedAfterTry: the code ran, and ran twice
	// after a per-try timeout). So a try whose body the transport read
	// whole counts as sent unless its write is known to have failed.
	if b := try.Raw().Body; b != nil && b != http.NoBody {
		try.Raw().Body = &bodyReadTracker{ReadCloser: b, left: try.Raw().ContentLength, done: &bodyRead}
	}
	// The transport must not re-send the body by itself: net/http's HTTP/2
	// client replays a request whose stream the peer reset (PROTOCOL_ERROR,
	// REFUSED_STREAM) or after a GOAWAY when GetBody is set, which azcore
	// does for every body, and none of those re-sends would pass through
	// the retry policy or this tracker: a server that ran the code and then
	// reset the stream would run it again. Without GetBody it replays only
	// a request whose body it has not started to send
	// (errClientConnUnusable) and returns every other failure, which is
	// then ambiguous as any lost answer. The same holds for http.Client's
	// 307/308 handling. azcore's own retries rewind the body without
	// GetBody (policy.Request.RewindBody).
	try.Raw().GetBody = nil
	resp, err := try.Next()
	if err == nil {
		// An answer: the request arrived, and only a refusal's status
		// proves the code did not run. Kept even for a 200, because the
		// retry policy may still return ctx's error in its place (the
		// caller's deadline passing as the answer came back).
		t.sent.Store(ambiguousStatus(resp.StatusCode) || ranBefore(resp))
	} else {
		t.sent.Store(wrote.Load() || !gotConn.Load() || (bodyRead.Load() && !writeFailed.Load()))
	}
	return resp, err
}

// bodyReadTracker sets done once the transport has read the whole request
// body (io.EOF, or its Content-Length): from then on its last bytes may be
// on their way to the service (sendTrackerPolicy).
type bodyReadTracker struct {
	io.ReadCloser
	left int64 // bytes of the Content-Length still unread (<= 0: unknown or none)
	done *atomic.Bool
}

func (b *bodyReadTracker) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if b.left > 0 {
		b.left -= int64(n)
		if b.left <= 0 {
			b.done.Store(true)
		}
	}
	if err == io.EOF {
		b.done.Store(true)
	}
	return n, err
}

// legacyState maps a legacy answer to the executions contract's shape.
func legacyState(w wire.LegacyExecuteResponse, identifier string) wire.ExecuteResponse {
	p := w.Properties
	result := p.Result
	if len(result) == 0 {
		result = p.ExecutionResult
	}
	return wire.ExecuteResponse{Identifier: identifier, Status: p.Status, Result: &wire.ExecuteResult{
		Stdout: p.Stdout, Stderr: p.Stderr, ExecutionResult: result, ExecutionTimeInMilliseconds: p.ExecutionTimeInMilliseconds,
	}}
}

func executionFromWire(w wire.ExecuteResponse) Execution {
	e := Execution{ID: w.ID, Identifier: w.Identifier, Status: normalizeStatus(w.Status)}
	if r := w.Result; r != nil {
		e.Stdout, e.Stderr, e.Result = r.Stdout, r.Stderr, r.ExecutionResult
		if r.ExecutionTimeInMilliseconds != nil {
			e.ExecutionTime = time.Duration(*r.ExecutionTimeInMilliseconds) * time.Millisecond
		}
	}
	if w.Error != nil {
		e.ErrorCode = w.Error.Error.Code
		if e.Stderr == "" && w.Error.Error.Message != "" {
			e.Stderr = w.Error.Error.Code + ": " + w.Error.Error.Message
		}
	}
	return e
}

// lookupExecution asks GET executions/{id}. found is false only when the
// service itself says it has no such execution (serviceNotFound); any other
// failure is an error.
func (s *Session) lookupExecution(ctx context.Context, operationID string) (wire.ExecuteResponse, bool, error) {
	req, err := s.newGetExecutionRequest(ctx, operationID)
	if err != nil {
		return wire.ExecuteResponse{}, false, err
	}
	resp, err := s.client.internal.Pipeline().Do(req)
	if err != nil {
		return wire.ExecuteResponse{}, false, err
	}
	if !runtime.HasStatusCode(resp, http.StatusOK) {
		if serviceNotFound(resp) {
			runtime.Drain(resp)
			return wire.ExecuteResponse{}, false, nil
		}
		return wire.ExecuteResponse{}, false, s.client.responseError(resp)
	}
	w, err := s.getExecutionHandleResponse(resp, operationID)
	if err != nil {
		return wire.ExecuteResponse{}, false, err
	}
	return w, true, nil
}

// getExecutionCreateRequest checks the arguments of GetExecution (op) before
// any I/O (the legacy contract has no GET executions/{id}) and builds GET
// executions/{id}.
func (s *Session) getExecutionCreateRequest(ctx context.Context, op, operationID string) (*policy.Request, error) {
	if s.client.features.Legacy {
		return nil, s.client.errNeedsExecutions(op)
	}
	if err := s.validate(); err != nil {
		return nil, err
	}
	if err := checkExecutionID(operationID); err != nil {
		return nil, err
	}
	return s.newGetExecutionRequest(ctx, operationID)
}

// newGetExecutionRequest builds GET executions/{id} without checks, for
// the look-up of an execution being sent (lookupExecution) and the polls of
// a started or resumed one (executionPoller.Poll): their id is one that
// executeCreateRequest, shellCreateRequest or ResumeExecution checked, or a
// resume token's, which checkResumeToken checked.
func (s *Session) newGetExecutionRequest(ctx context.Context, operationID string) (*policy.Request, error) {
	if retry := s.client.executeRetry; retry.TryTimeout == 0 {
		// a GET that never answers must not hang the poll for ever
		retry.TryTimeout = ExecutionGrace
		ctx = policy.WithRetryOptions(ctx, retry)
	}
	return s.client.newRequest(ctx, http.MethodGet, "executions/"+pathEscape(operationID), s.identifier, nil)
}

// ExecutionGrace is the time, past an execution's own timeout
// (ExecuteOptions.Timeout, at most 220 s), after which the client stops
// waiting for it: a POST executions not answered by then fails its try
// (when ClientOptions.Retry.TryTimeout is zero; also each GET
// executions/{id} try is bounded by it), and a poller whose execution is
// still Running by then fails with ErrExecutionOutcomeUnknown and the
// operation-id (Session.GetExecution or ResumeExecution follow it later).
const ExecutionGrace = 60 * time.Second

// MaxPollDelay is the longest wait between two polls of a running
// execution: a longer Retry-After from the service is shortened to it.
const MaxPollDelay = 60 * time.Second

// getExecutionHandleResponse decodes a 200 answer of GET executions/{id}.
func (s *Session) getExecutionHandleResponse(resp *http.Response, operationID string) (wire.ExecuteResponse, error) {
	var w wire.ExecuteResponse
	if err := runtime.UnmarshalAsJSON(resp, &w); err != nil {
		return wire.ExecuteResponse{}, err
	}
	if w.Status == "" {
		return wire.ExecuteResponse{}, errors.New("azsessions: the execution record has no status")
	}
	if w.ID == "" {
		w.ID = operationID
	}
	if w.ID != operationID {
		return wire.ExecuteResponse{}, errOtherExecution
	}
	return w, nil
}

// errOtherExecution: an execution answer or record whose id is not the
// operation-id asked for (red-team finding 6). The id itself is not in the
// message.
var errOtherExecution = errors.New("azsessions: the service answered with the record of another execution (its id is not the operation-id asked for)")

// serviceNotFound reports whether a 404 is the service saying it has no
// execution of that id: the Azure Core error envelope (x-ms-error-code
// header or {"error":{"code":...}} body) with a code that is NotFound or
// names an execution or an operation, or the in-container server's plain
// "No execution available for operation Id" answer. Any other 404 (a
// proxy's HTML page, a route the pool does not serve, a full pool) proves
// nothing.
func serviceNotFound(resp *http.Response) bool {
	if resp.StatusCode != http.StatusNotFound {
		return false
	}
	body, err := runtime.Payload(resp)
	if err != nil {
		return false
	}
	code := resp.Header.Get(wire.ErrorCodeHeader)
	if code == "" {
		var env wire.ErrorResponse
		if json.Unmarshal(body, &env) == nil {
			code = env.Error.Code
		}
	}
	if code == "" {
		var text string
		if json.Unmarshal(body, &text) != nil {
			text = string(body)
		}
		return strings.HasPrefix(strings.TrimSpace(text), "No execution available for operation Id")
	}
	code = strings.ToLower(code)
	return code == "notfound" || strings.Contains(code, "execution") || strings.Contains(code, "operation")
}

// GetExecutionOptions contains the optional parameters of Session.GetExecution.
type GetExecutionOptions struct {
	// for future use
}

// GetExecutionResponse is the answer of Session.GetExecution.
type GetExecutionResponse struct {
	Execution
}

// GetExecution returns the current state of the execution named
// operationID (its ExecuteOptions.OperationID or Execution.ID): GET
// {endpoint}/executions/{id} (2024-10-02-preview and later; the legacy
// api-versions give ErrUnsupported before any I/O). The state may be
// Running. An unknown id gives an *azcore.ResponseError with status 404.
// Use it to learn what became of an execution that ended in
// ErrExecutionOutcomeUnknown.
func (s *Session) GetExecution(ctx context.Context, operationID string, options *GetExecutionOptions) (GetExecutionResponse, error) {
	const op = "Session.GetExecution"
	var err error
	ctx, end := s.client.startOp(ctx, op)
	defer func() { end(err) }()
	req, err := s.getExecutionCreateRequest(ctx, op, operationID)
	if err != nil {
		return GetExecutionResponse{}, err
	}
	resp, err := s.client.do(req, http.StatusOK)
	if err != nil {
		return GetExecutionResponse{}, err
	}
	w, err := s.getExecutionHandleResponse(resp, operationID)
	if err != nil {
		return GetExecutionResponse{}, err
	}
	return GetExecutionResponse{Execution: executionFromWire(w)}, nil
}

// errNeedsExecutions is the refusal of op on the legacy api-versions (the
// builders and the pollers' constructors of the executions contract return
// it).
func (c *Client) errNeedsExecutions(op string) error {
	return fmt.Errorf("%w: %s needs api-version %s or later (client uses %s)", ErrUnsupported, op, APIVersion20241002Preview, c.version)
}

// BeginExecuteOptions contains the optional parameters of Session.BeginExecute.
type BeginExecuteOptions struct {
	ExecuteOptions
	// ResumeToken resumes a poller from Poller.ResumeToken instead of starting
	// a new execution; code is then ignored. The token holds the
	// operation-id and the last state (output included) but not the session
	// identifier: resume it on the Session the execution belongs to. A
	// token that is not one of BeginExecute's pollers (or whose operation-id
	// ExecuteOptions.OperationID would refuse) fails before any I/O.
	ResumeToken string
}

// BeginExecute starts an asynchronous execution (executionType Asynchronous)
// and returns a poller for it: POST {endpoint}/executions answers at once
// (202 or 200, status Running or NotStarted, Operation-Location), then the
// poller GETs executions/{id} until the execution is Succeeded, Failed or
// Canceled. Use it for code that runs for long or when the caller wants to
// keep the execution's id. Only on the executions contract (2024-10-02-preview
// and later); the legacy api-versions give ErrUnsupported before any I/O.
// Errors are those of Execute (the same exactly-once rules); a program error
// is data in the final result.
//
// PollUntilDone honours the service's Retry-After; without one it waits
// PollUntilDoneOptions.Frequency, whose azcore default is 30 s. The emulator
// sends Retry-After: 1 on a running execution (its guess); no public source
// shows Azure sending one, so against Azure pass a Frequency of time.Second
// (azcore's minimum outside tests):
//
//	resp, err := poller.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: time.Second})
func (s *Session) BeginExecute(ctx context.Context, code string, options *BeginExecuteOptions) (*runtime.Poller[ExecuteResponse], error) {
	const op = "Session.BeginExecute"
	var err error
	if options == nil {
		options = &BeginExecuteOptions{}
	}
	ctx, end := s.client.startOp(ctx, op)
	defer func() { end(err) }()
	var poller *runtime.Poller[ExecuteResponse]
	if options.ResumeToken != "" {
		poller, err = s.newPollerFromResumeToken(op, options.ResumeToken)
		return poller, err
	}
	req, p, err := s.executeCreateRequest(ctx, op, code, &options.ExecuteOptions, wire.ExecutionAsynchronous)
	if err != nil {
		return nil, err
	}
	poller, err = s.beginExecution(ctx, req, p)
	return poller, err
}

// newPollerFromResumeToken is BeginExecute (op) with a ResumeToken: it
// sends nothing (the poller's Poll sends GET executions/{id}); it refuses,
// before any I/O, the legacy api-versions, an invalid identifier and a
// token that is not one of this client's execution pollers (checkResumeToken).
func (s *Session) newPollerFromResumeToken(op, token string) (*runtime.Poller[ExecuteResponse], error) {
	if s.client.features.Legacy {
		return nil, s.client.errNeedsExecutions(op)
	}
	if err := s.validate(); err != nil {
		return nil, err
	}
	if err := checkResumeToken(token); err != nil {
		return nil, err
	}
	return runtime.NewPollerFromResumeToken(token, s.client.internal.Pipeline(), &runtime.NewPollerFromResumeTokenOptions[ExecuteResponse]{
		Handler: &executionPoller{session: s},
		Tracer:  s.client.internal.Tracer(),
	})
}

// checkResumeToken refuses a resume token that the client's executionPoller
// did not make: a token is data, stored and passed around, and a forged one
// must not steer the client (red-team finding, redcli). azcore's
// NewPollerFromResumeToken resumes any token whose inner object has a
// "fakeURL" key with its own fake poller instead of the handler given, and
// that poller GETs the token's URL through the client's pipeline, bearer
// token included, on any host; and the poller sends the token's operation-id
// as it is (GET executions/{id}), so it gets the checks of a caller's
// (checkExecutionID: an empty one or ".." would name another resource). The
// token's content is not in the error.
func checkResumeToken(token string) error {
	var wrapper struct {
		Token json.RawMessage `json:"token"`
	}
	if err := json.Unmarshal([]byte(token), &wrapper); err != nil {
		return errors.New("azsessions: ResumeToken is not a resume token (not a JSON object)")
	}
	var inner map[string]json.RawMessage
	if err := json.Unmarshal(wrapper.Token, &inner); err != nil || inner == nil {
		return errors.New("azsessions: ResumeToken is not a resume token of Session.BeginExecute")
	}
	for k := range inner {
		if strings.EqualFold(k, "fakeURL") {
			// azcore looks for the exact key; any spelling is refused
			return errors.New("azsessions: ResumeToken is not a resume token of Session.BeginExecute (it names a URL)")
		}
	}
	var h executionPoller
	if err := json.Unmarshal(wrapper.Token, &h); err != nil {
		return errors.New("azsessions: ResumeToken is not a resume token of Session.BeginExecute")
	}
	if err := checkExecutionID(h.OperationID); err != nil {
		return fmt.Errorf("azsessions: ResumeToken: %w", err)
	}
	return nil
}

// ResumeExecutionOptions contains the optional parameters of Session.ResumeExecution.
type ResumeExecutionOptions struct {
	// OutputStreamsMaxLength is the cap the execution was started with, for
	// Execution.Truncated (0: the service default; negative is refused).
	OutputStreamsMaxLength int32
}

// ResumeExecution returns a poller for the execution named operationID,
// which this or another process started (its ExecuteOptions.OperationID, or
// ExecutionOutcomeUnknownError.OperationID). Nothing is sent until the
// poller polls GET {endpoint}/executions/{id}; an unknown id fails the poll
// with an *ExecutionOutcomeUnknownError wrapping the *azcore.ResponseError
// (404), as does a record that disappears while BeginExecute's poller
// follows it. Only on the executions contract
// (2024-10-02-preview and later); the legacy api-versions give
// ErrUnsupported.
func (s *Session) ResumeExecution(operationID string, options *ResumeExecutionOptions) (*runtime.Poller[ExecuteResponse], error) {
	if options == nil {
		options = &ResumeExecutionOptions{}
	}
	// No request is sent until the poller polls (newGetExecutionRequest):
	// the checks of GET executions/{id} are made here, before any I/O.
	if s.client.features.Legacy {
		return nil, s.client.errNeedsExecutions("Session.ResumeExecution")
	}
	if err := s.validate(); err != nil {
		return nil, err
	}
	if err := checkExecutionID(operationID); err != nil {
		return nil, err
	}
	if options.OutputStreamsMaxLength < 0 {
		// as Execute's (a negative cap would silently mean the default)
		return nil, errors.New("azsessions: OutputStreamsMaxLength is negative")
	}
	return s.newExecutionPoller(operationID, int(options.OutputStreamsMaxLength), 0, wire.ExecuteResponse{ID: operationID, Status: wire.StatusRunning})
}

func (s *Session) newExecutionPoller(operationID string, outputMax int, timeout int32, state wire.ExecuteResponse) (*runtime.Poller[ExecuteResponse], error) {
	limit := time.Duration(timeout) * time.Second
	if limit <= 0 {
		limit = DefaultExecutionTimeout // unknown (ResumeExecution): the service's cap
	}
	h := &executionPoller{session: s, OperationID: operationID, OutputMax: outputMax, TimeoutSeconds: timeout, State: state,
		GiveUpAt: time.Now().Add(limit + ExecutionGrace)}
	return runtime.NewPoller(nil, s.client.internal.Pipeline(), &runtime.NewPollerOptions[ExecuteResponse]{
		Handler: h,
		Tracer:  s.client.internal.Tracer(),
	})
}

// executionPoller is the runtime.PollingHandler of Execute, BeginExecute and
// ResumeExecution: the one polling path. Its exported fields are the resume
// token.
type executionPoller struct {
	session        *Session
	OperationID    string               `json:"operationId"`
	OutputMax      int                  `json:"outputCap,omitempty"` // the resume token's key since 0.1.0
	TimeoutSeconds int32                `json:"timeoutSeconds,omitempty"`
	State          wire.ExecuteResponse `json:"state"`
	// GiveUpAt is when a still running execution is given up
	// (ErrExecutionOutcomeUnknown): its timeout plus ExecutionGrace after
	// the poller was made. Zero (an older resume token): never.
	GiveUpAt time.Time `json:"giveUpAt,omitzero"`
}

// MarshalJSON writes the resume token without the session identifier (the
// state's identifier field): resuming uses the Session's own, and a token is
// made to be stored and passed around.
func (p *executionPoller) MarshalJSON() ([]byte, error) {
	type plain executionPoller
	cp := plain(*p)
	cp.State.Identifier = ""
	return json.Marshal(cp)
}

func (p *executionPoller) Done() bool { return normalizeStatus(p.State.Status).Terminal() }

// Poll asks GET executions/{id} (idempotent: azcore's retries apply).
func (p *executionPoller) Poll(ctx context.Context) (*http.Response, error) {
	s := p.session
	if p.OperationID == "" {
		// nothing names the execution (GET executions/ is another resource):
		// executeHandleResponse and checkResumeToken keep such a poller
		// from polling; this is the last guard
		return nil, &ExecutionOutcomeUnknownError{Err: errors.New("the execution has no operation-id to follow")}
	}
	req, err := s.newGetExecutionRequest(ctx, p.OperationID)
	if err != nil {
		return nil, err
	}
	resp, err := s.client.internal.Pipeline().Do(req)
	if err != nil {
		return nil, err
	}
	if !runtime.HasStatusCode(resp, http.StatusOK) {
		gone := serviceNotFound(resp)
		err := s.client.responseError(resp)
		if gone {
			// The execution was accepted (or is being followed after an
			// unknown outcome) and the service has no record of it: it may
			// have run, its record lost or forgotten (the emulator's
			// bounds), or not be recorded yet. Never a plain "not found"
			// that a caller could take for "did not run".
			return nil, &ExecutionOutcomeUnknownError{OperationID: p.OperationID,
				Err: fmt.Errorf("the service has no record of the execution (not recorded yet, or its record was lost or forgotten); the code may have run: %w", err)}
		}
		return nil, err
	}
	w, err := s.getExecutionHandleResponse(resp, p.OperationID)
	if err != nil {
		return nil, err
	}
	p.State = w
	if !normalizeStatus(w.Status).Terminal() {
		if !p.GiveUpAt.IsZero() && !time.Now().Before(p.GiveUpAt) {
			// the service stops every execution at its timeout; one still
			// Running long after it is a broken answer, not worth waiting for
			return nil, &ExecutionOutcomeUnknownError{OperationID: p.OperationID,
				Err: fmt.Errorf("the execution is still %s %v after its timeout (ExecutionGrace); stopped waiting", w.Status, ExecutionGrace)}
		}
		capRetryAfter(resp, MaxPollDelay)
	}
	return resp, nil
}

// capRetryAfter shortens the service's Retry-After (or retry-after-ms) on a
// poll answer to at most limit: azcore's PollUntilDone honours any value,
// and Retry-After: 86400 would sleep for a day.
func capRetryAfter(resp *http.Response, limit time.Duration) {
	var longest time.Duration
	for _, h := range []string{"retry-after-ms", "x-ms-retry-after-ms"} {
		if v := resp.Header.Get(h); v != "" {
			if ms, err := strconv.ParseInt(v, 10, 64); err == nil {
				longest = max(longest, time.Duration(min(ms, int64(limit/time.Millisecond)+1))*time.Millisecond)
			}
		}
	}
	if v := resp.Header.Get("Retry-After"); v != "" {
		if sec, err := strconv.ParseInt(v, 10, 64); err == nil {
			longest = max(longest, time.Duration(min(sec, int64(limit/time.Second)+1))*time.Second)
		} else if t, err := http.ParseTime(v); err == nil && time.Until(t) > limit {
			longest = limit + time.Second
		}
	}
	if longest > limit {
		for _, h := range []string{"retry-after-ms", "x-ms-retry-after-ms", "Retry-After"} {
			resp.Header.Del(h)
		}
		resp.Header.Set("Retry-After", strconv.Itoa(int(limit/time.Second)))
	}
}

func (p *executionPoller) Result(ctx context.Context, out *ExecuteResponse) error {
	exec := executionFromWire(p.State)
	if exec.Identifier == "" {
		exec.Identifier = p.session.identifier
	}
	if exec.ID == "" {
		exec.ID = p.OperationID
	}
	exec.outputMax = p.OutputMax
	exec.timeout = time.Duration(p.TimeoutSeconds) * time.Second
	out.Execution = exec
	return nil
}

var _ runtime.PollingHandler[ExecuteResponse] = (*executionPoller)(nil)
