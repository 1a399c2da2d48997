package azsessions

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
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

// Execution states (OperationState of the executions contract).
const (
	ExecutionStatusNotStarted ExecutionStatus = "NotStarted"
	ExecutionStatusRunning    ExecutionStatus = "Running"
	ExecutionStatusSucceeded  ExecutionStatus = "Succeeded"
	ExecutionStatusFailed     ExecutionStatus = "Failed"
	ExecutionStatusCanceled   ExecutionStatus = "Canceled"
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
	// expression; "nan" for NaN), null for None, or an object such as an image
	// (see Image). Nil while an execution is running.
	Result json.RawMessage
	// ExecutionTime is how long the code ran, as the service measured it
	// (millisecond resolution; zero while running).
	ExecutionTime time.Duration

	outputCap int
}

// ExecutionError is the error Execution.Err returns for a failed or canceled execution.
type ExecutionError struct {
	// Status is ExecutionStatusFailed or ExecutionStatusCanceled.
	Status ExecutionStatus
	// Message is the last non-empty line of Stderr, such as
	// "SyntaxError: illegal target for annotation".
	Message string
}

// Error returns "execution <status>: <message>".
func (e *ExecutionError) Error() string {
	if e.Message == "" {
		return "azsessions: execution " + strings.ToLower(string(e.Status))
	}
	return "azsessions: execution " + strings.ToLower(string(e.Status)) + ": " + e.Message
}

// Err returns nil unless the execution Failed or was Canceled, in which case
// it returns an *ExecutionError carrying the last line of Stderr.
func (e Execution) Err() error {
	if e.Status != ExecutionStatusFailed && e.Status != ExecutionStatusCanceled {
		return nil
	}
	msg := ""
	lines := strings.Split(strings.TrimRight(e.Stderr, "\n\r\t "), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			msg = l
			break
		}
	}
	return &ExecutionError{Status: e.Status, Message: msg}
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
	limit := e.outputCap
	if limit <= 0 {
		limit = DefaultOutputStreamsMaxLength
	}
	return utf8.RuneCountInString(e.Stdout) >= limit || utf8.RuneCountInString(e.Stderr) >= limit
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
	// OperationID sets the execution's id, sent as the operation-id header on
	// the executions contract (2024-10-02-preview and later); empty means a
	// fresh UUID. Execute uses it to find out whether an execution whose
	// answer was lost ran, so that code is never run twice. Ignored on the
	// legacy api-versions.
	OperationID string
}

// ExecuteResponse is the answer of Session.Execute.
type ExecuteResponse struct {
	Execution
}

// ErrExecutionOutcomeUnknown is wrapped by the error Execute returns when the
// request may have reached the service but its answer was lost (a reset
// connection, a timeout or a 500/502/503/504 after the request was sent) and
// the client could not find out whether the code ran. Retrying could run the
// code twice; the caller decides.
var ErrExecutionOutcomeUnknown = errors.New("azsessions: the code may or may not have run")

// Execute runs Python code in the session and waits for it to finish.
//
// REST: POST {endpoint}/executions (2024-10-02-preview and later; 200, or 202
// then GET executions/{id} until done) or POST {endpoint}/code/execute (the
// legacy 2024-02-02-preview and 2024-08-02-preview). Variables, imports and
// files persist between executions of a session.
//
// A program error is data: the response has Status ExecutionStatusFailed and
// the traceback in Stderr, and err is nil. err is non-nil for bad input
// (before any I/O: empty code, ErrInvalidIdentifier, ErrUnsupported, a
// timeout outside 0–220 s), for service errors (*azcore.ResponseError, or
// *AuthError for 401/403), and for transport failures.
//
// Execute never runs code twice. It is retried by the client only when the
// service provably did not run it (429 Too Many Requests honouring
// Retry-After, or a connection that was never made). When the outcome is
// ambiguous on the executions contract, Execute looks the execution up by its
// operation-id: it returns the recorded result if the service has one and
// sends again only if the service says it has none. On the legacy contract,
// or when the look-up fails, the error wraps ErrExecutionOutcomeUnknown (and
// ctx's error when ctx ended).
func (s *Session) Execute(ctx context.Context, code string, options *ExecuteOptions) (ExecuteResponse, error) {
	const op = "Session.Execute"
	var err error
	if options == nil {
		options = &ExecuteOptions{}
	}
	timeout, err := s.checkExecute(code, options)
	if err != nil {
		return ExecuteResponse{}, err
	}
	ctx, end := s.client.startOp(ctx, op)
	defer func() { end(err) }()
	var exec Execution
	if s.client.features.Legacy {
		exec, err = s.executeLegacy(ctx, code, timeout)
	} else {
		exec, err = s.executeOnce(ctx, code, timeout, options)
	}
	if err != nil {
		return ExecuteResponse{}, err
	}
	exec.outputCap = int(options.OutputStreamsMaxLength)
	return ExecuteResponse{Execution: exec}, nil
}

// checkExecute validates the arguments of Execute and BeginExecute and returns
// the timeout in seconds.
func (s *Session) checkExecute(code string, options *ExecuteOptions) (int32, error) {
	if err := s.validate(); err != nil {
		return 0, err
	}
	if strings.TrimSpace(code) == "" {
		return 0, errors.New("azsessions: code is empty")
	}
	if options.Timeout < 0 || options.Timeout > DefaultExecutionTimeout {
		return 0, fmt.Errorf("azsessions: timeout %v is outside 0–%v (the service's cap)", options.Timeout, DefaultExecutionTimeout)
	}
	timeout := int32(wire.MaxExecutionSeconds)
	if options.Timeout > 0 {
		timeout = int32((options.Timeout + time.Second - 1) / time.Second)
	}
	if options.OutputStreamsMaxLength < 0 {
		return 0, errors.New("azsessions: OutputStreamsMaxLength is negative")
	}
	if options.OutputStreamsMaxLength > 0 && !s.client.features.OutputStreamsMaxLength {
		return 0, fmt.Errorf("%w: OutputStreamsMaxLength needs api-version %s (client uses %s)", ErrUnsupported, APIVersion20251002Preview, s.client.version)
	}
	return timeout, nil
}

// executeRetryContext limits the pipeline's retries for an execution request
// to answers that prove the code did not run: 429, or a connection that was
// never established.
func (c *Client) executeRetryContext(ctx context.Context) context.Context {
	return policy.WithRetryOptions(ctx, c.executeRetry)
}

// shouldRetryExecute is the ShouldRetry of execution requests.
func shouldRetryExecute(resp *http.Response, err error) bool {
	if err != nil {
		return notSent(err)
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

// ambiguous reports whether a failed execution request may have run the code.
func ambiguous(resp *http.Response, err error) bool {
	if err != nil {
		return !notSent(err)
	}
	switch resp.StatusCode {
	case http.StatusRequestTimeout, http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// outcomeUnknown wraps err so that it matches ErrExecutionOutcomeUnknown, and
// ctx's error when ctx ended.
func outcomeUnknown(ctx context.Context, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(err, ctxErr) {
		return fmt.Errorf("%w: %w (%w)", ErrExecutionOutcomeUnknown, err, ctxErr)
	}
	return fmt.Errorf("%w: %w", ErrExecutionOutcomeUnknown, err)
}

func (s *Session) executeLegacy(ctx context.Context, code string, timeout int32) (Execution, error) {
	req, err := s.client.newRequest(s.client.executeRetryContext(ctx), http.MethodPost, "code/execute", s.identifier, nil)
	if err != nil {
		return Execution{}, err
	}
	body := wire.LegacyExecuteRequest{Properties: &wire.LegacyExecuteProperties{
		CodeInputType: "inline", ExecutionType: "synchronous", Code: code, TimeoutInSeconds: timeout,
	}}
	if err := runtime.MarshalAsJSON(req, body); err != nil {
		return Execution{}, err
	}
	resp, err := s.client.internal.Pipeline().Do(req)
	if err != nil {
		if ambiguous(nil, err) {
			return Execution{}, outcomeUnknown(ctx, err)
		}
		return Execution{}, err
	}
	if !runtime.HasStatusCode(resp, http.StatusOK, http.StatusAccepted) {
		// only the status code decides: a 4xx (or an exhausted 429) proves
		// nothing ran twice and is an ordinary service error
		err = wrapAuthError(runtime.NewResponseError(resp))
		if ambiguous(resp, nil) {
			return Execution{}, outcomeUnknown(ctx, err)
		}
		return Execution{}, err
	}
	var w wire.LegacyExecuteResponse
	if err := runtime.UnmarshalAsJSON(resp, &w); err != nil {
		return Execution{}, outcomeUnknown(ctx, err)
	}
	return legacyExecution(w, s.identifier), nil
}

func legacyExecution(w wire.LegacyExecuteResponse, identifier string) Execution {
	p := w.Properties
	e := Execution{Identifier: identifier, Status: normalizeStatus(p.Status), Stdout: p.Stdout, Stderr: p.Stderr, Result: p.Result}
	if len(e.Result) == 0 {
		e.Result = p.ExecutionResult
	}
	if p.ExecutionTimeInMilliseconds != nil {
		e.ExecutionTime = time.Duration(*p.ExecutionTimeInMilliseconds) * time.Millisecond
	}
	return e
}

func executionFromWire(w wire.ExecuteResponse) Execution {
	e := Execution{ID: w.ID, Identifier: w.Identifier, Status: normalizeStatus(w.Status)}
	if r := w.Result; r != nil {
		e.Stdout, e.Stderr, e.Result = r.Stdout, r.Stderr, r.ExecutionResult
		if r.ExecutionTimeInMilliseconds != nil {
			e.ExecutionTime = time.Duration(*r.ExecutionTimeInMilliseconds) * time.Millisecond
		}
	}
	if w.Error != nil && e.Stderr == "" && w.Error.Error.Message != "" {
		e.Stderr = w.Error.Error.Code + ": " + w.Error.Error.Message
	}
	return e
}

func (s *Session) newExecuteRequest(ctx context.Context, code string, timeout int32, options *ExecuteOptions, executionType, operationID string) (*policy.Request, error) {
	req, err := s.client.newRequest(s.client.executeRetryContext(ctx), http.MethodPost, "executions", s.identifier, nil)
	if err != nil {
		return nil, err
	}
	req.Raw().Header.Set("operation-id", operationID)
	body := wire.ExecuteRequest{CodeInputType: wire.CodeInputInline, ExecutionType: executionType, Code: code, TimeoutInSeconds: timeout}
	if options.OutputStreamsMaxLength > 0 {
		body.OutputStreamsMaxLength = &options.OutputStreamsMaxLength
	}
	return req, runtime.MarshalAsJSON(req, body)
}

// executeOnce runs code on the executions contract with exactly-once
// semantics (see Execute) and waits for it to finish.
func (s *Session) executeOnce(ctx context.Context, code string, timeout int32, options *ExecuteOptions) (Execution, error) {
	w, err := s.submitExecution(ctx, code, timeout, options, wire.ExecutionSynchronous)
	if err != nil {
		return Execution{}, err
	}
	exec := executionFromWire(w)
	if exec.Status.Terminal() {
		return exec, nil
	}
	return s.pollExecution(ctx, exec.ID)
}

// submitExecution POSTs an execution under an operation-id and returns the
// first state the service reports, sending again only when the service says
// it has no execution of that id (GET executions/{id} answers 404) after an
// ambiguous failure. The returned state's ID is never empty.
func (s *Session) submitExecution(ctx context.Context, code string, timeout int32, options *ExecuteOptions, executionType string) (wire.ExecuteResponse, error) {
	operationID := options.OperationID
	if operationID == "" {
		operationID = uuid.New()
	}
	withID := func(w wire.ExecuteResponse) wire.ExecuteResponse {
		if w.ID == "" {
			w.ID = operationID
		}
		return w
	}
	delay := s.client.retryDelay()
	for attempt := 0; ; attempt++ {
		req, err := s.newExecuteRequest(ctx, code, timeout, options, executionType, operationID)
		if err != nil {
			return wire.ExecuteResponse{}, err
		}
		resp, err := s.client.internal.Pipeline().Do(req)
		if err == nil && runtime.HasStatusCode(resp, http.StatusOK, http.StatusAccepted) {
			var w wire.ExecuteResponse
			if err = runtime.UnmarshalAsJSON(resp, &w); err == nil {
				return withID(w), nil
			}
			// the answer was cut: fall through to the look-up
		} else if err == nil {
			err = wrapAuthError(runtime.NewResponseError(resp))
			if !ambiguous(resp, nil) {
				return wire.ExecuteResponse{}, err
			}
		} else if !ambiguous(nil, err) || ctx.Err() != nil {
			if ctx.Err() != nil {
				return wire.ExecuteResponse{}, outcomeUnknown(ctx, err)
			}
			return wire.ExecuteResponse{}, err
		}
		// Ambiguous: did the service record the execution?
		w, found, lookupErr := s.lookupExecution(ctx, operationID)
		switch {
		case lookupErr != nil:
			return wire.ExecuteResponse{}, outcomeUnknown(ctx, errors.Join(err, lookupErr))
		case found:
			return withID(w), nil
		case attempt >= s.client.maxRetries():
			return wire.ExecuteResponse{}, fmt.Errorf("azsessions: execution not run after %d attempts: %w", attempt+1, err)
		}
		// The service has no such execution: sending again cannot run it twice.
		if err := sleep(ctx, delay); err != nil {
			return wire.ExecuteResponse{}, err
		}
		delay *= 2
	}
}

// lookupExecution asks GET executions/{id}. found is false when the service
// answers 404 (it has no such execution).
func (s *Session) lookupExecution(ctx context.Context, operationID string) (wire.ExecuteResponse, bool, error) {
	req, err := s.client.newRequest(ctx, http.MethodGet, "executions/"+pathEscape(operationID), s.identifier, nil)
	if err != nil {
		return wire.ExecuteResponse{}, false, err
	}
	resp, err := s.client.internal.Pipeline().Do(req)
	if err != nil {
		return wire.ExecuteResponse{}, false, err
	}
	if !runtime.HasStatusCode(resp, http.StatusOK) {
		err := runtime.NewResponseError(resp)
		if executionNotFound(err) {
			return wire.ExecuteResponse{}, false, nil
		}
		return wire.ExecuteResponse{}, false, wrapAuthError(err)
	}
	var w wire.ExecuteResponse
	if err := runtime.UnmarshalAsJSON(resp, &w); err != nil {
		return wire.ExecuteResponse{}, false, err
	}
	return w, true, nil
}

// executionNotFound reports whether err is the service saying it has no
// execution of that id: a 404 whose error code is NotFound or names an
// execution or an operation, or that has no code (the in-container server answers a plain
// "No execution available for operation Id" string). Any other 404 (a route
// the pool does not serve, a full pool) proves nothing, so the code is not
// sent again.
func executionNotFound(err error) bool {
	var re *azcore.ResponseError
	if !errors.As(err, &re) || re.StatusCode != http.StatusNotFound {
		return false
	}
	code := strings.ToLower(re.ErrorCode)
	return code == "" || code == "notfound" || strings.Contains(code, "execution") || strings.Contains(code, "operation")
}

// pollInterval is how often a running execution is polled.
const pollInterval = 500 * time.Millisecond

// pollExecution polls GET executions/{id} until the execution is terminal.
func (s *Session) pollExecution(ctx context.Context, operationID string) (Execution, error) {
	for {
		if err := sleep(ctx, pollInterval); err != nil {
			return Execution{}, outcomeUnknown(ctx, err)
		}
		w, found, err := s.lookupExecution(ctx, operationID)
		if err != nil {
			return Execution{}, outcomeUnknown(ctx, err)
		}
		if !found {
			return Execution{}, outcomeUnknown(ctx, errors.New("the service no longer knows the execution"))
		}
		if exec := executionFromWire(w); exec.Status.Terminal() {
			return exec, nil
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *Client) retryDelay() time.Duration {
	if c.retry.RetryDelay > 0 {
		return c.retry.RetryDelay
	}
	return 800 * time.Millisecond
}

func (c *Client) maxRetries() int {
	switch {
	case c.retry.MaxRetries < 0:
		return 0
	case c.retry.MaxRetries == 0:
		return 3
	}
	return int(c.retry.MaxRetries)
}

// BeginExecuteOptions contains the optional parameters of Session.BeginExecute.
type BeginExecuteOptions struct {
	ExecuteOptions
	// ResumeToken resumes a poller from Poller.ResumeToken instead of starting
	// a new execution; code is then ignored. The token holds the session
	// identifier: keep it secret.
	ResumeToken string
}

// BeginExecute starts an asynchronous execution (executionType Asynchronous)
// and returns a poller for it: POST {endpoint}/executions answers at once
// (202 or 200, status Running or NotStarted, Operation-Location), then the
// poller GETs executions/{id} until the execution is Succeeded, Failed or
// Canceled. Use it for code that runs for long or when the caller wants to
// keep the execution's id. Only on the executions contract (2024-10-02-preview
// and later); the legacy api-versions give ErrUnsupported before any I/O.
// Errors are those of Execute; a program error is data in the final result.
func (s *Session) BeginExecute(ctx context.Context, code string, options *BeginExecuteOptions) (*runtime.Poller[ExecuteResponse], error) {
	const op = "Session.BeginExecute"
	if options == nil {
		options = &BeginExecuteOptions{}
	}
	if s.client.features.Legacy {
		return nil, fmt.Errorf("%w: %s needs api-version %s or later (client uses %s)", ErrUnsupported, op, APIVersion20241002Preview, s.client.version)
	}
	if options.ResumeToken != "" {
		if err := s.validate(); err != nil {
			return nil, err
		}
		return runtime.NewPollerFromResumeToken(options.ResumeToken, s.client.internal.Pipeline(), &runtime.NewPollerFromResumeTokenOptions[ExecuteResponse]{
			Handler: &executionPoller{session: s},
			Tracer:  s.client.internal.Tracer(),
		})
	}
	timeout, err := s.checkExecute(code, &options.ExecuteOptions)
	if err != nil {
		return nil, err
	}
	ctx, end := s.client.startOp(ctx, op)
	defer func() { end(err) }()
	state, err := s.submitExecution(ctx, code, timeout, &options.ExecuteOptions, wire.ExecutionAsynchronous)
	if err != nil {
		return nil, err
	}
	h := &executionPoller{session: s, OperationID: state.ID, OutputCap: int(options.OutputStreamsMaxLength), State: state}
	return runtime.NewPoller(nil, s.client.internal.Pipeline(), &runtime.NewPollerOptions[ExecuteResponse]{
		Handler: h,
		Tracer:  s.client.internal.Tracer(),
	})
}

// executionPoller is the runtime.PollingHandler of BeginExecute. Its exported
// fields are the resume token.
type executionPoller struct {
	session     *Session
	OperationID string               `json:"operationId"`
	OutputCap   int                  `json:"outputCap,omitempty"`
	State       wire.ExecuteResponse `json:"state"`
}

func (p *executionPoller) Done() bool { return normalizeStatus(p.State.Status).Terminal() }

func (p *executionPoller) Poll(ctx context.Context) (*http.Response, error) {
	s := p.session
	req, err := s.client.newRequest(ctx, http.MethodGet, "executions/"+pathEscape(p.OperationID), s.identifier, nil)
	if err != nil {
		return nil, err
	}
	resp, err := s.client.do(req, http.StatusOK)
	if err != nil {
		return nil, err
	}
	var w wire.ExecuteResponse
	if err := runtime.UnmarshalAsJSON(resp, &w); err != nil {
		return nil, err
	}
	p.State = w
	return resp, nil
}

func (p *executionPoller) Result(ctx context.Context, out *ExecuteResponse) error {
	exec := executionFromWire(p.State)
	if exec.ID == "" {
		exec.ID = p.OperationID
	}
	exec.outputCap = p.OutputCap
	out.Execution = exec
	return nil
}

var _ runtime.PollingHandler[ExecuteResponse] = (*executionPoller)(nil)
