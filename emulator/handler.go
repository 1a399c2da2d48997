package emulator

import (
	"cmp"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/azsessions/azsessions/internal/uuid"
	"github.com/azsessions/azsessions/internal/wire"
)

// Defaults of Options.
const (
	DefaultCooldown         = wire.DefaultCooldownSeconds * time.Second
	DefaultMaxSessions      = wire.DefaultMaxSessions
	DefaultMaxExecutionTime = wire.MaxExecutionSeconds * time.Second
	DefaultMaxUploadBytes   = wire.MaxUploadBytes
	// DefaultOutputStreamsMaxLength is the output cap of Options, in
	// characters (the service's default outputStreamsMaxLength).
	DefaultOutputStreamsMaxLength = wire.DefaultOutputStreamsMaxLength
	// DefaultOutputMaxLength is the former name of
	// DefaultOutputStreamsMaxLength.
	//
	// Deprecated: use DefaultOutputStreamsMaxLength.
	DefaultOutputMaxLength = DefaultOutputStreamsMaxLength
	DefaultSubscriptionID  = "00000000-0000-0000-0000-000000000000"
	DefaultResourceGroup   = "local"
	DefaultPoolName        = "emulator"
	DefaultSweepInterval   = time.Second
	// DefaultListSessionsPageSize is the page size of GET listSessions.
	DefaultListSessionsPageSize = 300
	// DefaultMaxQueuedExecutions is how many executions may wait behind the
	// running one of a session.
	DefaultMaxQueuedExecutions = 32
	// DefaultMaxRecordedBytes bounds the recorded execution results of a
	// session, in bytes.
	DefaultMaxRecordedBytes = 32 << 20
	// DefaultMaxTotalRecordedBytes bounds the recorded execution results of
	// all sessions together, in bytes.
	DefaultMaxTotalRecordedBytes = 512 << 20
	// DefaultMaxListEntries bounds the entries of one file listing.
	DefaultMaxListEntries = 10000
	// DefaultBodyReadTimeout is how long a request body may send nothing.
	DefaultBodyReadTimeout = time.Minute
	// DefaultMinBodyRate is the slowest average rate, in bytes per second,
	// at which a request body may arrive once BodyReadTimeout has passed.
	DefaultMinBodyRate = 4 << 10
	// DefaultMaxBodyMemoryBytes bounds the execution request bodies held
	// in memory at once, across the pool.
	DefaultMaxBodyMemoryBytes = 128 << 20
	// MaxOutputStreamsMaxLength is the largest output cap, in characters: a
	// request's outputStreamsMaxLength above it is refused with 400
	// SessionRequestValidationFailed (it is never clamped silently), and so
	// is an Options.OutputStreamsMaxLength above it. Each of stdout and
	// stderr of an execution is buffered up to this many characters (the
	// sandbox executor's own cap is the same number; sandbox_linux.go fails
	// to compile if they differ).
	MaxOutputStreamsMaxLength = 1 << 20
	// MaxOutputMaxLength is the former name of MaxOutputStreamsMaxLength.
	//
	// Deprecated: use MaxOutputStreamsMaxLength.
	MaxOutputMaxLength = MaxOutputStreamsMaxLength
)

// Error codes the emulator answers with beyond those of package wire: all
// emulator-specific (no public source shows the service's code for these
// cases; see "Error codes" in the package docs).
const (
	// CodePoolFull (404): the pool already has MaxSessions live sessions.
	CodePoolFull = "NoSessionsAvailable"
	// CodeRouteNotFound (404): no such path or method under the pool, or a
	// route the api-version does not have.
	CodeRouteNotFound = "RouteNotFound"
	// CodeExecutionNotFound (404): GET executions/{id} of an unknown id.
	CodeExecutionNotFound = "ExecutionNotFound"
	// CodeFileNotFound (404): no such file or directory.
	CodeFileNotFound = "FileNotFound"
	// CodeUnauthorized (401): RequireToken is set and no bearer token came.
	CodeUnauthorized = "Unauthorized"
	// CodeInvalidAPIVersion (400): missing or unknown api-version.
	CodeInvalidAPIVersion = "InvalidApiVersion"
	// CodePayloadTooLarge (413): the upload is over MaxUploadBytes.
	CodePayloadTooLarge = "PayloadTooLarge"
	// CodeOperationIDConflict (409): an execution request reuses the
	// operation-id of a recorded execution with different code.
	CodeOperationIDConflict = "OperationIdConflict"
	// CodeExecutionResultForgotten (409): an execution request retries the
	// operation-id and the code of an execution that already ran and whose
	// result the session has forgotten (Options.MaxRecordedBytes,
	// MaxTotalRecordedBytes): the code is not run again.
	CodeExecutionResultForgotten = "ExecutionResultForgotten"
	// CodeFileListTooLarge (400): a file listing is over its bounds
	// (Options.MaxListEntries entries, 256 directory levels below the listed
	// directory, 16 MiB of paths).
	CodeFileListTooLarge = "FileListTooLarge"
	// CodeDataDirFull (413): an upload would pass the disk limit of the
	// session's data directory (kernels that implement
	// kernel.SpaceReporter, such as the sandbox's). Nothing of the file is
	// left; a file it would replace counts as freed.
	CodeDataDirFull = "DataDirFull"
	// CodeTooManyRequests (429, with Retry-After): the session already has
	// MaxQueuedExecutions executions waiting.
	CodeTooManyRequests = "TooManyRequests"
	// CodeInternal (500): the executor failed to start or run a kernel.
	CodeInternal = "InternalServerError"
	// CodeUnavailable (503): the handler is closed.
	CodeUnavailable = "ServiceUnavailable"
)

// Options configures a Handler. Only Executor is required; zero values take
// the defaults named on each field.
type Options struct {
	// Executor starts one kernel per session. Required. Handler.Close closes it.
	Executor Executor
	// Cooldown is how long a session lives after its last request (default 300 s).
	Cooldown time.Duration
	// MaxSessions is the number of live sessions the pool holds; one more
	// gives 404 NoSessionsAvailable (default 600).
	MaxSessions int
	// MaxExecutionTime caps every execution (default 220 s). An execution runs
	// for min(timeoutInSeconds, MaxExecutionTime); timeoutInSeconds 0 means 220 s.
	MaxExecutionTime time.Duration
	// MaxUploadBytes is the largest file an upload may carry (default 128 MiB);
	// above it the answer is 413. When the session's kernel reports a disk
	// limit (kernel.SpaceReporter), an upload that would pass it is refused
	// with 413 DataDirFull too (a file it replaces counts as freed).
	MaxUploadBytes int64
	// PoolType is the kind of session pool the emulator is: PoolTypePythonLTS
	// (the default, "") or PoolTypeShell (executions take shellCommand or
	// execCommandAndArgs with stdin, run in the session's sandbox with
	// /mnt/data as working directory, and answer the exit code as status).
	// PoolTypeCustomContainer (every request outside .management/ is
	// forwarded to ContainerCommand, run per session in its sandbox), or
	// PoolTypeNodeLTS (executions take JavaScript, run by an executor of
	// SandboxRuntimeNode).
	PoolType string
	// ContainerCommand is what a CustomContainer pool runs in each new
	// session's sandbox (with /bin/sh -c, working directory /mnt/data):
	// an HTTP server listening on 127.0.0.1:TargetPort (or 0.0.0.0) inside
	// the sandbox, which has no other network. Required for, and only
	// allowed with, PoolTypeCustomContainer.
	ContainerCommand string
	// TargetPort is the port ContainerCommand listens on (the pool's
	// ingress targetPort; 1-65535).
	TargetPort int
	// ContainerDir, when not empty, is a host directory whose files are
	// copied into each new CustomContainer session's /mnt/data before
	// ContainerCommand starts (the files of the container's image, such as
	// its server program; regular files and directories only).
	ContainerDir string
	// ContainerStartTimeout bounds a CustomContainer session's cold start:
	// how long its command may take to accept connections on TargetPort
	// (default 1 min). A command that does not is killed and the request
	// answered 504 ContainerStartFailed.
	ContainerStartTimeout time.Duration
	// OutputStreamsMaxLength caps stdout and stderr, each, in characters
	// (default 4096, at most MaxOutputStreamsMaxLength): the pool's default
	// for the request field of the same name, which 2025-10-02-preview
	// requests may set instead, up to MaxOutputStreamsMaxLength.
	OutputStreamsMaxLength int
	// OutputMaxLength is the former name of OutputStreamsMaxLength: either
	// may be set; NewHandler refuses both set to different values.
	//
	// Deprecated: use OutputStreamsMaxLength.
	OutputMaxLength int
	// MaxQueuedExecutions is how many executions of one session may wait
	// behind the running one (default 32); one more is answered 429
	// TooManyRequests with Retry-After: 1, without running it. Each waiting
	// execution holds its code (up to 16 MiB); finished ones keep only their
	// results (see MaxRecordedBytes).
	MaxQueuedExecutions int
	// MaxRecordedBytes bounds the memory of the execution records of one
	// session (default 32 MiB): the results (stdout, stderr, value, plus a
	// fixed 512 bytes each) of finished executions that GET executions/{id}
	// and a retried operation-id answer. Beyond this many bytes a session
	// forgets the results of its oldest finished executions first, each
	// leaving a tombstone counted as 256 bytes (no output; GET
	// executions/{id} then answers 404 ExecutionNotFound, and a retry of the
	// operation-id with the same code 409 ExecutionResultForgotten without
	// running it again). Running executions and the most recently finished
	// one are always kept, even when that one alone is over the bound, and
	// tombstones are never dropped for bytes, so a session holds at most
	// about MaxRecordedBytes + one record of up to 8 MiB of output plus its
	// value, or 1,000 tombstones (256 KB) when that is more. A session
	// remembers at most its last 1,000 executions, records and tombstones
	// together, its oldest tombstone dropped first: only then may a retry
	// run its code again. MaxTotalRecordedBytes bounds all sessions
	// together.
	MaxRecordedBytes int64
	// MaxTotalRecordedBytes bounds the memory of the execution records of
	// all live sessions together (default 512 MiB), as MaxRecordedBytes
	// bounds one session's: without it the default 600 sessions could hold
	// 600 × 32 MiB ≈ 19 GiB of results, and a client (or code run across
	// many sessions) could make the emulator itself run out of memory.
	// When a finished execution brings the pool over it, the emulator
	// forgets finished records, each time the oldest one of the session
	// that records the most bytes, until the pool is within the bound; each
	// leaves a 256-byte tombstone, as for the per-session bound (GET
	// executions/{id} answers 404 ExecutionNotFound, a retry of the
	// operation-id with the same code 409 ExecutionResultForgotten, not
	// run). Running executions and the one that has just finished are never
	// forgotten, nor tombstones, so the pool holds at most
	// MaxTotalRecordedBytes plus one record, or its tombstones when they
	// alone are more (at most 256 KB a session, 150 MB for 600 sessions);
	// the other sessions' most recently finished records may go. A
	// session's bytes, records and tombstones, leave the account when it
	// ends (expiry, DELETE, stopSession, Close). The default is a fixed
	// figure rather than a share of the host's RAM, so that the emulator
	// behaves the same on every machine: 16 sessions' worth of the
	// per-session default, and with the 128 MiB of MaxBodyMemoryBytes
	// under 1 GiB of the emulator's own memory. The bound is the emulator's
	// choice for its own memory; the service documents none.
	MaxTotalRecordedBytes int64
	// MaxListEntries bounds one GET files (default 10,000): the entries a
	// listing collects (on the legacy contract, which lists files only, the
	// directories it enters count too). A listing over it, deeper than 256
	// levels below its directory or with more than 16 MiB of paths is
	// refused with 400 FileListTooLarge rather than cut short silently; list
	// a subdirectory, or without recursive=true, instead. A listing stops
	// when its client goes away or its session ends.
	MaxListEntries int
	// BodyReadTimeout is how long the body of an upload or an execution may
	// go without sending a byte (default 1 min): the deadline slides as bytes
	// arrive, so slow but steady uploads of any size pass, while a client
	// that stalls gets 400 and no longer holds its session (which could then
	// never expire).
	BodyReadTimeout time.Duration
	// MinBodyRate is the slowest average rate, in bytes per second, at which
	// the body of an upload or an execution may arrive (default 4 KiB/s):
	// a body must be complete within BodyReadTimeout plus its size divided
	// by this rate, so a client that trickles a byte now and then cannot
	// hold a connection, its handler and its session for ever.
	MinBodyRate int64
	// MaxBodyMemoryBytes bounds the execution request bodies the pool holds
	// in memory at once (default 128 MiB; each is at most 16 MiB and held
	// while its request is served). A request whose body does not fit is
	// answered 429 TooManyRequests with Retry-After: 1 before its body is
	// read. Uploads stream to disk and are not counted.
	MaxBodyMemoryBytes int64
	// RequireToken makes every request without "Authorization: Bearer ..."
	// fail with 401. Without Token the token itself is not checked (any
	// non-empty one passes): that only catches clients that forget to
	// authenticate, it is no protection.
	RequireToken bool
	// Token, when not empty (with RequireToken), is the one bearer token
	// accepted: any other is answered 401. It is compared in constant time
	// and never logged. The emulator cannot validate Microsoft Entra
	// tokens; a shared token is what protects an emulator reachable from
	// other machines (see CheckListenAddr).
	Token string
	// Now is the clock of session expiry and timestamps (default time.Now).
	Now func() time.Time
	// Logger receives one record per request (method, route template, status,
	// duration) and lifecycle errors (default: discard).
	Logger *slog.Logger
	// SubscriptionID, ResourceGroup and PoolName make up PoolPath (defaults
	// DefaultSubscriptionID, "local", "emulator").
	SubscriptionID, ResourceGroup, PoolName string
	// SweepInterval is how often the janitor expires idle sessions, in real
	// time (default 1 s). Requests also expire sessions lazily.
	SweepInterval time.Duration
	// ListSessionsPageSize is the page size of GET listSessions (default 300).
	ListSessionsPageSize int
}

// outputStreamsMaxLength takes the output cap from OutputStreamsMaxLength or
// its deprecated name OutputMaxLength, whichever is set, into
// OutputStreamsMaxLength; it refuses the two set to different values and a
// cap over MaxOutputStreamsMaxLength.
func outputStreamsMaxLength(opt *Options) error {
	n, old := opt.OutputStreamsMaxLength, opt.OutputMaxLength
	if n != 0 && old != 0 && n != old {
		return fmt.Errorf("emulator: Options.OutputStreamsMaxLength (%d) and its deprecated name Options.OutputMaxLength (%d) differ: set only OutputStreamsMaxLength", n, old)
	}
	n = cmp.Or(n, old)
	if n > MaxOutputStreamsMaxLength {
		return fmt.Errorf("emulator: Options.OutputStreamsMaxLength is over %d characters", MaxOutputStreamsMaxLength)
	}
	opt.OutputStreamsMaxLength = n
	return nil
}

// Handler is the emulated pool management endpoint. Create it with
// NewHandler and release it with Close.
type Handler struct {
	opt      Options
	exec     Executor
	log      *slog.Logger
	poolPath string
	started  time.Time

	ctx    context.Context // canceled by Close; parent of every execution
	cancel context.CancelFunc
	wg     sync.WaitGroup // background executions, janitor
	closed chan struct{}
	once   sync.Once

	pool *pool

	statsMu  sync.Mutex
	total    int64
	perIdent map[string]int64

	bodyMu    sync.Mutex
	bodyBytes int64 // execution bodies reserved (reserveBody)

	// runHook, when set, runs first in each execution's goroutine with the
	// execution's operation-id (tests: delays it to prove the order is
	// taken when the request is accepted).
	runHook func(operationID string)
}

// NewHandler checks the options, fills in defaults and starts the janitor
// that expires idle sessions. It fails when Executor is nil or a limit is
// negative.
func NewHandler(opt Options) (*Handler, error) {
	if opt.Executor == nil {
		return nil, errors.New("emulator: Options.Executor is required")
	}
	if opt.Cooldown < 0 || opt.MinBodyRate < 0 || opt.MaxBodyMemoryBytes < 0 || opt.MaxSessions < 0 || opt.MaxExecutionTime < 0 || opt.MaxUploadBytes < 0 || opt.OutputStreamsMaxLength < 0 || opt.OutputMaxLength < 0 || opt.ListSessionsPageSize < 0 || opt.MaxQueuedExecutions < 0 || opt.BodyReadTimeout < 0 || opt.MaxRecordedBytes < 0 || opt.MaxTotalRecordedBytes < 0 || opt.MaxListEntries < 0 {
		return nil, errors.New("emulator: negative limit in Options")
	}
	if err := checkPoolType(opt.PoolType); err != nil {
		return nil, err
	}
	if err := checkExecutorRuntime(opt.PoolType, opt.Executor.Info()); err != nil {
		return nil, err
	}
	if err := checkContainerOptions(&opt); err != nil {
		return nil, err
	}
	if err := outputStreamsMaxLength(&opt); err != nil {
		return nil, err
	}
	opt.MaxQueuedExecutions = cmp.Or(opt.MaxQueuedExecutions, DefaultMaxQueuedExecutions)
	opt.MaxListEntries = cmp.Or(opt.MaxListEntries, DefaultMaxListEntries)
	opt.MaxRecordedBytes = cmp.Or(opt.MaxRecordedBytes, DefaultMaxRecordedBytes)
	opt.MaxTotalRecordedBytes = cmp.Or(opt.MaxTotalRecordedBytes, DefaultMaxTotalRecordedBytes)
	opt.BodyReadTimeout = cmp.Or(opt.BodyReadTimeout, DefaultBodyReadTimeout)
	opt.MinBodyRate = cmp.Or(opt.MinBodyRate, DefaultMinBodyRate)
	opt.MaxBodyMemoryBytes = cmp.Or(opt.MaxBodyMemoryBytes, DefaultMaxBodyMemoryBytes)
	if opt.MaxBodyMemoryBytes < maxExecuteBody {
		return nil, fmt.Errorf("emulator: Options.MaxBodyMemoryBytes must be at least %d (one execution body)", maxExecuteBody)
	}
	if opt.Token != "" && !opt.RequireToken {
		return nil, errors.New("emulator: Options.Token needs RequireToken")
	}
	opt.SubscriptionID = cmp.Or(opt.SubscriptionID, DefaultSubscriptionID)
	opt.ResourceGroup = cmp.Or(opt.ResourceGroup, DefaultResourceGroup)
	opt.PoolName = cmp.Or(opt.PoolName, DefaultPoolName)
	opt.Cooldown = cmp.Or(opt.Cooldown, DefaultCooldown)
	opt.MaxSessions = cmp.Or(opt.MaxSessions, DefaultMaxSessions)
	opt.MaxExecutionTime = cmp.Or(opt.MaxExecutionTime, DefaultMaxExecutionTime)
	opt.MaxUploadBytes = cmp.Or(opt.MaxUploadBytes, DefaultMaxUploadBytes)
	opt.OutputStreamsMaxLength = cmp.Or(opt.OutputStreamsMaxLength, DefaultOutputStreamsMaxLength)
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	if opt.SweepInterval <= 0 {
		opt.SweepInterval = DefaultSweepInterval
	}
	opt.ListSessionsPageSize = cmp.Or(opt.ListSessionsPageSize, DefaultListSessionsPageSize)
	for _, s := range []string{opt.SubscriptionID, opt.ResourceGroup, opt.PoolName} {
		if strings.ContainsAny(s, "/?#%") {
			return nil, errors.New("emulator: SubscriptionID, ResourceGroup and PoolName must not contain / ? # %")
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &Handler{
		opt:      opt,
		exec:     opt.Executor,
		log:      opt.Logger,
		poolPath: "/subscriptions/" + opt.SubscriptionID + "/resourceGroups/" + opt.ResourceGroup + "/sessionPools/" + opt.PoolName,
		started:  opt.Now().UTC(),
		ctx:      ctx,
		cancel:   cancel,
		closed:   make(chan struct{}),
		perIdent: map[string]int64{},
	}
	h.pool = newPool(ctx, opt.Executor, opt)
	if opt.PoolType == PoolTypeCustomContainer {
		h.pool.start = h.startContainer
	}
	h.wg.Add(1)
	go h.janitor()
	return h, nil
}

// PoolPath is the path of the pool endpoint,
// /subscriptions/{SubscriptionID}/resourceGroups/{ResourceGroup}/sessionPools/{PoolName}.
// Prefix it with the server's scheme and host to get the endpoint URL.
func (h *Handler) PoolPath() string { return h.poolPath }

// Close ends every session (canceling running executions and closing their
// kernels), stops the janitor, waits for background executions and closes
// the Executor. Requests after Close get 503. Close is idempotent.
func (h *Handler) Close() error {
	var err error
	h.once.Do(func() {
		close(h.closed)
		h.cancel()
		closeErr := h.pool.closeAll()
		h.wg.Wait()
		err = errors.Join(closeErr, h.exec.Close())
	})
	return err
}

// Stats counts executions that actually reached a kernel.
type Stats struct {
	// Executions is the number of executions run since NewHandler.
	Executions int64
	// ByIdentifier counts executions per session identifier (kept after the
	// session ends).
	ByIdentifier map[string]int64
	// Sessions is the number of live sessions.
	Sessions int
}

// Stats returns a snapshot of the execution counters. Tests use it to prove
// that a retried request ran its code exactly once.
func (h *Handler) Stats() Stats {
	h.statsMu.Lock()
	st := Stats{Executions: h.total, ByIdentifier: make(map[string]int64, len(h.perIdent))}
	for k, v := range h.perIdent {
		st.ByIdentifier[k] = v
	}
	h.statsMu.Unlock()
	st.Sessions = h.pool.len()
	return st
}

func (h *Handler) countExecution(id string) {
	h.statsMu.Lock()
	h.total++
	h.perIdent[id]++
	h.statsMu.Unlock()
}

// call is one request being served.
type call struct {
	w       http.ResponseWriter
	r       *http.Request
	route   *route
	version string
	feat    wire.Features
	params  map[string]string
	ident   string
	sess    *session
	// release gives sess back to the pool, once (nil without a session).
	release func()
}

// answering is called by the handler just before the first byte of its
// answer: it releases the call's session, so that a client that has its
// answer sees the session idle (serve releases it too when the handler
// returns; the release happens once).
func (c *call) answering() {
	if c.release != nil {
		c.release()
	}
}

// writeJSON answers v as JSON with status, after releasing the session.
func (c *call) writeJSON(status int, v any) {
	c.answering()
	writeJSON(c.w, status, v)
}

// writeHeader answers status, after releasing the session.
func (c *call) writeHeader(status int) {
	c.answering()
	c.w.WriteHeader(status)
}

// apiError is an error answer.
type apiError struct {
	status    int
	code, msg string
}

func (e *apiError) Error() string { return e.code + ": " + e.msg }

func errorf(status int, code, format string, args ...any) *apiError {
	return &apiError{status: status, code: code, msg: fmt.Sprintf(format, args...)}
}

func badRequest(format string, args ...any) *apiError {
	return errorf(http.StatusBadRequest, wire.CodeSessionRequestValidationFailed, format, args...)
}

func internal(format string, args ...any) *apiError {
	return errorf(http.StatusInternalServerError, CodeInternal, format, args...)
}

// writeError answers {"error":{code,message,traceId}} with x-ms-error-code.
func writeError(w http.ResponseWriter, e *apiError) {
	w.Header().Set(wire.ErrorCodeHeader, e.code)
	writeJSON(w, e.status, wire.ErrorResponse{Error: wire.ErrorDetail{Code: e.code, Message: e.msg, TraceID: uuid.New()}})
}

// writeJSON answers v as JSON with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":{"code":"InternalServerError","message":"encoding the answer failed"}}`)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// statusWriter records the status for the access log.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) answer(code int) {
	if s.status == 0 {
		s.status = code
	}
}

func (s *statusWriter) WriteHeader(code int) {
	s.answer(code)
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	s.answer(http.StatusOK)
	return s.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// watchBody makes the request body fail when the client sends nothing for
// BodyReadTimeout: before each read it moves the connection's read deadline
// that far ahead. At the end of the body the deadline is cleared (net/http
// reads the connection in the background while the handler runs, and a
// deadline left behind would cancel a long synchronous execution). Call the
// returned function when the handler is done with the body: a body that
// broke keeps an expired deadline, so that net/http does not wait for the
// rest of it and closes the connection; one not read to its end keeps a
// deadline BodyReadTimeout ahead for what net/http discards. Servers without
// deadline support are left alone.
func (h *Handler) watchBody(c *call) (done func()) {
	rc := http.NewResponseController(c.w)
	if err := rc.SetReadDeadline(time.Now().Add(h.opt.BodyReadTimeout)); err != nil {
		return func() {}
	}
	b := &idleBody{ReadCloser: c.r.Body, rc: rc, d: h.opt.BodyReadTimeout, rate: h.opt.MinBodyRate, start: time.Now()}
	c.r.Body = b
	return func() {
		switch {
		case b.eof:
		case b.failed:
			_ = rc.SetReadDeadline(time.Now())
		default:
			_ = rc.SetReadDeadline(time.Now().Add(b.d))
		}
	}
}

// idleBody is a request body whose every read gets a fresh deadline: d from
// now, but never later than d plus what the bytes read so far allow at the
// minimum rate, counted from the start of the body.
type idleBody struct {
	io.ReadCloser
	rc          *http.ResponseController
	d           time.Duration
	rate        int64 // bytes per second
	start       time.Time
	n           int64 // bytes read
	eof, failed bool
}

// deadline is the read deadline of the next read.
func (b *idleBody) deadline(now time.Time) time.Time {
	idle := now.Add(b.d)
	earned := time.Duration(float64(b.n) / float64(b.rate) * float64(time.Second))
	if total := b.start.Add(b.d + earned); total.Before(idle) {
		return total
	}
	return idle
}

func (b *idleBody) Read(p []byte) (int, error) {
	if b.eof || b.failed {
		return b.ReadCloser.Read(p)
	}
	_ = b.rc.SetReadDeadline(b.deadline(time.Now()))
	n, err := b.ReadCloser.Read(p)
	b.n += int64(n)
	switch {
	case err == io.EOF:
		b.eof = true
		_ = b.rc.SetReadDeadline(time.Time{})
	case err != nil:
		b.failed = true
		_ = b.rc.SetReadDeadline(time.Now())
	}
	return n, err
}

// ServeHTTP serves the pool management API; see the package documentation
// for the routes.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	sw := &statusWriter{ResponseWriter: w}
	rt := h.serve(sw, r)
	name := "unmatched"
	if rt != nil {
		name = rt.template()
	}
	h.log.LogAttrs(r.Context(), slog.LevelInfo, "request",
		slog.String("method", r.Method),
		slog.String("route", name),
		slog.Int("status", sw.status),
		slog.Duration("duration", time.Since(start)))
}

// Route returns the operation name (one of the Op constants) and the route
// template (such as "POST executions" or "GET files/{name}/content") that r
// would be served by, and false when r matches no route of its api-version.
// The fake server uses it to inject faults per route.
func (h *Handler) Route(r *http.Request) (op, template string, ok bool) {
	rt, _, _, err := h.match(r)
	if err != nil || rt == nil {
		return "", "", false
	}
	return rt.op, rt.template(), true
}

// serve answers the request and returns the route it matched, if any.
func (h *Handler) serve(w *statusWriter, r *http.Request) *route {
	select {
	case <-h.closed:
		writeError(w, errorf(http.StatusServiceUnavailable, CodeUnavailable, "the emulator is shutting down"))
		return nil
	default:
	}
	rt, params, version, aerr := h.match(r)
	if h.opt.RequireToken && !h.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Bearer authorization_uri="https://login.microsoftonline.com/common/oauth2/authorize", resource_id="https://dynamicsessions.io"`)
		msg := "a bearer token is required (Authorization: Bearer ...)"
		if h.opt.Token != "" && bearerToken(r) != "" {
			// Never the token itself, either one.
			msg = "the bearer token is not the one this emulator accepts (Options.Token, AZSESSIONS_EMULATOR_TOKEN)"
		}
		writeError(w, errorf(http.StatusUnauthorized, CodeUnauthorized, "%s", msg))
		return rt
	}
	if aerr != nil {
		writeError(w, aerr)
		return rt
	}
	if rt.op == OpExecute {
		release, aerr := h.reserveBody(r)
		if aerr != nil {
			w.Header().Set("Retry-After", "1")
			writeError(w, aerr)
			return rt
		}
		defer release()
	}
	feat, _ := wire.Lookup(version)
	c := &call{w: w, r: r, route: rt, version: version, feat: feat, params: params}
	if rt.scope != scopePool {
		c.ident = r.URL.Query().Get("identifier")
		if err := wire.ValidateIdentifier(cmp.Or(version, wire.DefaultVersion), c.ident); err != nil {
			writeError(w, badRequest("%s", err.Error()))
			return rt
		}
		s, err := h.pool.acquire(c.ident, rt.scope == scopeCreate)
		if err != nil {
			aerr := h.poolError(err)
			if rt.scope == scopeExisting && aerr.code == wire.CodeSessionWithIdentifierNotFound && rt.missing != nil {
				aerr = rt.missing
			}
			writeError(w, aerr)
			return rt
		}
		c.sess = s
		// A proxied request holds its session while the answer streams:
		// the session is idle (and may expire) only from its end.
		touch := rt.op == OpProxy
		c.release = sync.OnceFunc(func() { h.pool.release(s, touch) })
		defer c.release()
	}
	if aerr := rt.handle(h, c); aerr != nil {
		c.answering()
		writeError(w, aerr)
	}
	return rt
}

// poolError is the service's answer to an error of pool.acquire.
func (h *Handler) poolError(err error) *apiError {
	switch {
	case errors.Is(err, errSessionNotFound):
		return errorf(http.StatusBadRequest, wire.CodeSessionWithIdentifierNotFound, "no session with this identifier exists in the pool (it may have expired)")
	case errors.Is(err, ErrPoolFull):
		// The executor's pool-wide memory or disk budget, not MaxSessions.
		return errorf(http.StatusNotFound, CodePoolFull, "the session pool is full: no more sessions are being allocated (no room for one more sandbox within the pool-wide memory and disk limits)")
	case errors.Is(err, errPoolFull):
		return errorf(http.StatusNotFound, CodePoolFull, "the session pool is full: no more sessions are being allocated (max %d sessions)", h.opt.MaxSessions)
	default:
		if aerr := containerStartError(err); aerr != nil {
			return aerr
		}
		return internal("starting the session's interpreter failed")
	}
}

// authorized says whether r carries a bearer token that RequireToken accepts:
// any non-empty one, or exactly Options.Token when it is set.
func (h *Handler) authorized(r *http.Request) bool {
	tok := bearerToken(r)
	if tok == "" {
		return false
	}
	if h.opt.Token == "" {
		return tok != ""
	}
	return subtle.ConstantTimeCompare([]byte(tok), []byte(h.opt.Token)) == 1
}

// bearerToken is the token of r's Authorization: Bearer header ("" when
// there is none).
func bearerToken(r *http.Request) string {
	a := r.Header.Get("Authorization")
	if len(a) <= len("Bearer ") || !strings.EqualFold(a[:len("Bearer ")], "Bearer ") {
		return ""
	}
	return strings.TrimSpace(a[len("Bearer "):])
}

// reserveBody reserves room for r's body in the pool-wide budget of
// execution bodies held in memory (Options.MaxBodyMemoryBytes): its
// Content-Length, or the largest body allowed when the length is not known
// (chunked). It fails with 429 when the budget is taken, before anything is
// read. The returned function gives the room back.
func (h *Handler) reserveBody(r *http.Request) (release func(), aerr *apiError) {
	n := int64(maxExecuteBody)
	if r.ContentLength >= 0 && r.ContentLength < n {
		n = r.ContentLength
	}
	h.bodyMu.Lock()
	defer h.bodyMu.Unlock()
	if h.bodyBytes+n > h.opt.MaxBodyMemoryBytes {
		return nil, errorf(http.StatusTooManyRequests, CodeTooManyRequests, "the emulator holds %d bytes of execution requests already; retry when they are done", h.bodyBytes)
	}
	h.bodyBytes += n
	var once sync.Once
	return func() {
		once.Do(func() {
			h.bodyMu.Lock()
			h.bodyBytes -= n
			h.bodyMu.Unlock()
		})
	}, nil
}

// match finds the route of r. It returns the route (when the path matched),
// the path parameters and the api-version, or the error to answer.
func (h *Handler) match(r *http.Request) (*route, map[string]string, string, *apiError) {
	p := r.URL.EscapedPath()
	if p != h.poolPath && !strings.HasPrefix(p, h.poolPath+"/") {
		return nil, nil, "", errorf(http.StatusNotFound, CodeRouteNotFound, "no session pool at this path; the pool endpoint is %s", h.poolPath)
	}
	rest := strings.TrimPrefix(strings.TrimPrefix(p, h.poolPath), "/")
	if h.opt.PoolType == PoolTypeCustomContainer {
		if _, err := url.PathUnescape(rest); err != nil {
			return nil, nil, "", badRequest("the path is not validly escaped")
		}
		return h.matchContainer(r, rest)
	}
	rest = strings.TrimSuffix(rest, "/")
	var segs []string
	if rest != "" {
		for _, s := range strings.Split(rest, "/") {
			u, err := url.PathUnescape(s)
			if err != nil {
				return nil, nil, "", badRequest("the path is not validly escaped")
			}
			segs = append(segs, u)
		}
	}
	version := r.URL.Query().Get("api-version")
	feat, ok := wire.Lookup(version)
	if !ok {
		if version == "" {
			return nil, nil, "", errorf(http.StatusBadRequest, CodeInvalidAPIVersion, "the api-version query parameter is required; supported: %s", strings.Join(wire.Versions, ", "))
		}
		return nil, nil, "", errorf(http.StatusBadRequest, CodeInvalidAPIVersion, "unsupported api-version; supported: %s", strings.Join(wire.Versions, ", "))
	}
	for i := range routes {
		rt := &routes[i]
		if rt.legacy != feat.Legacy || (rt.need != nil && !rt.need(feat)) {
			continue
		}
		if rt.method != r.Method {
			continue
		}
		if params, ok := rt.matchPath(segs); ok {
			return rt, params, version, nil
		}
	}
	return nil, nil, version, errorf(http.StatusNotFound, CodeRouteNotFound, "api-version %s has no %s route at this path", version, r.Method)
}
