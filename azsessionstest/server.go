// Package azsessionstest runs an in-process fake of the Azure Container Apps
// dynamic sessions pool management endpoint for unit tests, in the manner of
// net/http/httptest: Start (or NewServer) serves the emulator's handler on a
// loopback port and Server.Client hands back a ready *azsessions.Client.
//
// The fake speaks every api-version (see package emulator for the routes)
// and carries no Python interpreter: unless Options.Executor says
// otherwise, DefaultExecutor (EchoExecutor) answers every execution with
// its code on stdout. Canned answers by code, emulator.ScriptedExecutor by
// a function of the code, and emulator.NewSandboxExecutor runs real,
// sandboxed Python. The fake has a movable clock (Advance) to expire
// sessions, counts requests and executions, and injects faults (status codes
// with Retry-After, delays, connection resets before, after or in the middle
// of the handler) to test retry logic; with Options.InProcess it serves
// without a socket, so that a test can run inside a testing/synctest bubble
// (retry and delay waits on its fake clock). Server.Client returns a ready client;
// Server.ClientOptions lets the caller's own constructor and credential
// (for example azcore/fake.TokenCredential) reach the fake.
package azsessionstest

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"

	"github.com/azsessions/azsessions"
	"github.com/azsessions/azsessions/emulator"
	"github.com/azsessions/azsessions/internal/wire"
)

// Options configures a Server. The zero value (or nil) is a plain-HTTP
// server with DefaultExecutor (EchoExecutor: no code runs) and the
// emulator's defaults.
type Options struct {
	// Options are passed to emulator.NewHandler. Executor defaults to
	// DefaultExecutor(); Now is the base clock (default time.Now) that
	// Server.Advance shifts; Cooldown, MaxSessions, limits, RequireToken,
	// Logger and the pool names work as documented there.
	emulator.Options
	// TLS serves HTTPS with a self-signed certificate (httptest.NewTLSServer);
	// Server.Client trusts it.
	TLS bool
	// APIVersion is the api-version of the clients Server.Client returns
	// (default: the SDK's default, the newest).
	APIVersion string
	// InProcess serves requests without a listener or socket: the clients
	// of Client, NewClient and ClientOptions (and HTTPClient) get a
	// Transport that runs the handler in the calling goroutine and returns
	// what it wrote. For tests inside a testing/synctest bubble, whose fake
	// clock does not move while a goroutine waits on a socket: a
	// Retry-After of 1 s then takes 1 s of fake time, exactly, and no real
	// time. URL is then "http://azsessionstest.invalid". Not with TLS.
	// Faults that cut the connection (the Reset fields) make the request
	// fail with an error wrapping syscall.ECONNRESET, or its body when
	// the status was sent (ResetMidBody). A request whose context ends
	// while the handler runs (during a Delay, or while a synchronous
	// execution runs) fails with the context's error, as over a socket.
	InProcess bool
}

// Server is a running fake pool management endpoint.
type Server struct {
	// URL is the base URL of the server, scheme://127.0.0.1:port, without the
	// pool path; see Endpoint.
	URL string

	h     *emulator.Handler
	srv   *httptest.Server // nil InProcess
	clock *Clock
	opts  Options
	once  sync.Once
	done  chan struct{} // closed by Close; ends injected delays

	mu       sync.Mutex
	faults   []*injected
	requests map[[2]string]int // {op, template} -> count
}

// Start starts a Server and registers its Close with tb.Cleanup. It fails
// the test when the options are invalid.
func Start(tb testing.TB, opts *Options) *Server {
	tb.Helper()
	s, err := NewServer(opts)
	if err != nil {
		tb.Fatalf("azsessionstest: %v", err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("azsessionstest: close: %v", err)
		}
	})
	return s
}

// NewServer starts a Server; the caller must Close it. opts may be nil.
func NewServer(opts *Options) (*Server, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Executor == nil {
		o.Executor = DefaultExecutor()
	}
	if o.InProcess && o.TLS {
		return nil, errors.New("azsessionstest: InProcess serves no TLS")
	}
	if o.APIVersion != "" {
		if _, ok := wire.Lookup(o.APIVersion); !ok {
			return nil, errors.New("azsessionstest: unknown APIVersion " + strconv.Quote(o.APIVersion))
		}
	}
	base := o.Now
	if base == nil {
		base = time.Now
	}
	s := &Server{clock: &Clock{base: base}, opts: o, requests: map[[2]string]int{}, done: make(chan struct{})}
	eo := o.Options
	eo.Now = s.clock.Now
	h, err := emulator.NewHandler(eo)
	if err != nil {
		return nil, err
	}
	s.h = h
	switch {
	case o.InProcess:
		s.URL = inProcessURL
		return s, nil
	case o.TLS:
		s.srv = httptest.NewTLSServer(s)
	default:
		s.srv = httptest.NewServer(s)
	}
	s.URL = s.srv.URL
	return s, nil
}

// Close shuts the server down, ends every session and closes the executor.
// It is idempotent.
func (s *Server) Close() error {
	var err error
	s.once.Do(func() {
		close(s.done)
		if s.srv != nil {
			s.srv.CloseClientConnections()
			s.srv.Close()
		}
		err = s.h.Close()
	})
	return err
}

// Endpoint is the pool management endpoint URL, URL + the pool path
// (/subscriptions/.../sessionPools/...): what azsessions.NewClient takes.
func (s *Server) Endpoint() string { return s.URL + s.h.PoolPath() }

// Handler is the emulator handler behind the server.
func (s *Server) Handler() *emulator.Handler { return s.h }

// HTTPClient is an *http.Client that trusts the server's certificate (for
// raw requests); with Options.InProcess, one whose Transport serves them in
// process.
func (s *Server) HTTPClient() *http.Client {
	if s.srv == nil {
		return &http.Client{Transport: inProcessTransport{s}}
	}
	return s.srv.Client()
}

// Client returns a client of the real SDK for the server, with the
// api-version of Options.APIVersion and fast retries (10 ms base delay, at
// most 200 ms). A Retry-After or retry-after-ms hint is honoured only up to
// that 200 ms cap: azcore gives up on a longer one and returns the 429 or
// 503 at once, so test longer hints with NewClient and a larger
// Retry.MaxRetryDelay. Over TLS, or when RequireToken is set, it
// authenticates with azcore/fake.TokenCredential; otherwise it sends none. It
// panics when the client cannot be created, which the options rule out.
func (s *Server) Client() *azsessions.Client {
	c, err := s.NewClient(nil)
	if err != nil {
		panic("azsessionstest: " + err.Error())
	}
	return c
}

// NewClient is Client with options: the Transport is always the server's,
// and APIVersion and the retry delays take the Client defaults when unset.
// Over TLS, or when RequireToken is set, it authenticates with
// azcore/fake.TokenCredential; otherwise it sends no token.
func (s *Server) NewClient(options *azsessions.ClientOptions) (*azsessions.Client, error) {
	o := s.clientOptions(options)
	if s.opts.TLS || s.opts.RequireToken {
		return azsessions.NewClient(s.Endpoint(), &fake.TokenCredential{}, o)
	}
	return azsessions.NewClientWithNoCredential(s.Endpoint(), o)
}

// ClientOptions returns options that make a client built by the caller's
// own constructor reach this server, with any credential:
//
//	client, err := azsessions.NewClient(srv.Endpoint(), &fake.TokenCredential{}, srv.ClientOptions())
//
// They carry the server's Transport (which trusts its TLS certificate),
// the api-version of Options.APIVersion, the fast retries of Client (10 ms
// base delay, at most 200 ms) and, on a plain-HTTP server,
// InsecureAllowCredentialWithHTTP (a credential is otherwise only sent over
// https). Each call returns a new value the caller may change.
func (s *Server) ClientOptions() *azsessions.ClientOptions {
	return s.clientOptions(nil)
}

func (s *Server) clientOptions(options *azsessions.ClientOptions) *azsessions.ClientOptions {
	var o azsessions.ClientOptions
	if options != nil {
		o = *options
	}
	o.Transport = s.HTTPClient()
	if o.APIVersion == "" {
		o.APIVersion = s.opts.APIVersion
	}
	if o.Retry.RetryDelay == 0 {
		o.Retry.RetryDelay = 10 * time.Millisecond
	}
	if o.Retry.MaxRetryDelay == 0 {
		o.Retry.MaxRetryDelay = 200 * time.Millisecond
	}
	if !s.opts.TLS {
		o.InsecureAllowCredentialWithHTTP = true
	}
	return &o
}

// FakeCredential is an azcore.TokenCredential that returns the token of
// azcore/fake.TokenCredential ("fake_token", valid for a day). The fake
// server accepts any bearer token.
//
// Deprecated: use &fake.TokenCredential{} from
// github.com/Azure/azure-sdk-for-go/sdk/azcore/fake, which can also
// simulate a failing credential (SetError).
type FakeCredential struct{}

// GetToken implements azcore.TokenCredential.
func (FakeCredential) GetToken(ctx context.Context, options policy.TokenRequestOptions) (azcore.AccessToken, error) {
	return (&fake.TokenCredential{}).GetToken(ctx, options)
}

// Clock is the server's clock: the base clock (Options.Now, default
// time.Now) plus an offset that Advance grows.
type Clock struct {
	base   func() time.Time
	mu     sync.Mutex
	offset time.Duration
}

// Now returns the fake time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.base().Add(c.offset)
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.offset += d
	c.mu.Unlock()
}

// Clock returns the server's clock.
func (s *Server) Clock() *Clock { return s.clock }

// Advance moves the clock forward by d and ends, at once, every session idle
// for longer than the cooldown (its variables and files are gone; the same
// identifier then gets a fresh session).
func (s *Server) Advance(d time.Duration) {
	s.clock.Advance(d)
	s.h.Sweep()
}

// Stats returns the emulator's execution counters.
func (s *Server) Stats() emulator.Stats { return s.h.Stats() }

// Executions is the number of executions that actually ran code (a
// retried request answered from the record does not count).
func (s *Server) Executions() int64 { return s.h.Stats().Executions }

// ExecutionsFor is the number of executions run in the session identifier.
func (s *Server) ExecutionsFor(identifier string) int64 {
	return s.h.Stats().ByIdentifier[identifier]
}

// Requests is the number of requests seen for route (see InjectFault for
// the route syntax), faulted ones included.
func (s *Server) Requests(route string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for k, c := range s.requests {
		if routeMatches(route, k[0], k[1]) {
			n += c
		}
	}
	return n
}

// ServeHTTP counts the request, applies an injected fault if one is due and
// otherwise passes the request to the emulator.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	op, tpl, _ := s.h.Route(r)
	s.mu.Lock()
	s.requests[[2]string{op, tpl}]++
	f := s.takeFaultLocked(op, tpl)
	s.mu.Unlock()
	if f == nil {
		s.h.ServeHTTP(w, r)
		return
	}
	s.apply(f, w, r)
}

// routeMatches reports whether a route pattern names a request of operation
// op and template tpl ("" for requests that match no route).
func routeMatches(route, op, tpl string) bool {
	if route == "*" {
		return true
	}
	if tpl == "" {
		return false
	}
	_, path, _ := strings.Cut(tpl, " ")
	return route == op || route == tpl || route == path
}

// Operation names for InjectFault and Requests, the same on every
// api-version.
const (
	RouteExecute       = emulator.OpExecute       // POST code/execute, POST executions
	RouteGetExecution  = emulator.OpGetExecution  // GET executions/{id}
	RouteUpload        = emulator.OpUpload        // POST files/upload, POST files
	RouteListFiles     = emulator.OpListFiles     // GET files
	RouteGetFile       = emulator.OpGetFile       // GET files/{name}
	RouteDownload      = emulator.OpDownload      // GET files/content/{name}, GET files/{name}/content
	RouteDeleteFile    = emulator.OpDeleteFile    // DELETE files/{name}
	RouteGetSession    = emulator.OpGetSession    // GET session
	RouteDeleteSession = emulator.OpDeleteSession // DELETE session
	RouteListSessions  = emulator.OpListSessions  // GET listSessions
	RouteMetadata      = emulator.OpMetadata      // GET metadata
	RouteStopSession   = emulator.OpStopSession   // POST .management/stopSession
	RouteAny           = "*"                      // every request, even unmatched ones
)

// Fault is what to do to a request instead of (or around) serving it. The
// steps run in this order: Delay; ResetMidRequest; ResetBeforeHandler;
// Status without AfterHandler; then the real handler runs and, last,
// ResetAfterHandler, ResetMidBody or Status with AfterHandler replace its
// answer. A Fault with only Delay slows the request down.
type Fault struct {
	// Status answers this HTTP status with {"error":{"code":Code,...}} and
	// the x-ms-error-code header. Before the handler unless AfterHandler.
	Status int
	// Code is the error code of a Status answer (default "InjectedFault").
	Code string
	// RetryAfter is the Retry-After header of a Status answer, verbatim
	// (seconds such as "1", or an HTTP date).
	RetryAfter string
	// RetryAfterMs sets the retry-after-ms header (milliseconds) when > 0.
	RetryAfterMs int
	// AfterHandler runs the real handler first (the code executes, files
	// change) and discards its answer for Status: a 5xx after the fact.
	AfterHandler bool
	// Delay waits before anything else; it ends early, dropping the request,
	// when the client gives up.
	Delay time.Duration
	// ResetBeforeHandler cuts the connection (TCP RST) without running the
	// handler: the request provably did nothing.
	ResetBeforeHandler bool
	// ResetAfterHandler runs the handler (the code executes!) and then cuts
	// the connection (TCP RST) before any byte of the answer.
	ResetAfterHandler bool
	// ResetMidBody runs the handler, sends the status, headers (with the full
	// Content-Length) and half of the body, then closes the connection.
	ResetMidBody bool
	// ResetMidRequest reads half of the request body (as announced by
	// Content-Length, else 1 byte) and cuts the connection (TCP RST); the
	// handler does not run.
	ResetMidRequest bool
}

type injected struct {
	route string
	fault Fault
	left  int // < 0: forever
}

// InjectFault applies fault to the next n requests matching route (n <= 0:
// every matching request until ClearFaults). route is one of the Route*
// constants (an operation name, the same on every api-version), a route
// template such as "POST executions" or "GET files/{name}/content", a
// template path such as "executions" (any method) or "*" for every request.
// Faults apply in the order they were injected, one per request.
func (s *Server) InjectFault(route string, fault Fault, n int) {
	if n <= 0 {
		n = -1
	}
	s.mu.Lock()
	s.faults = append(s.faults, &injected{route: route, fault: fault, left: n})
	s.mu.Unlock()
}

// ClearFaults removes every injected fault.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	s.faults = nil
	s.mu.Unlock()
}

func (s *Server) takeFaultLocked(op, tpl string) *Fault {
	for i, in := range s.faults {
		if !routeMatches(in.route, op, tpl) {
			continue
		}
		f := in.fault
		if in.left > 0 {
			in.left--
			if in.left == 0 {
				s.faults = append(s.faults[:i:i], s.faults[i+1:]...)
			}
		}
		return &f
	}
	return nil
}

func (s *Server) apply(f *Fault, w http.ResponseWriter, r *http.Request) {
	if f.Delay > 0 {
		// The server notices a client that gives up only once the request
		// body has been read, so read it first.
		if r.Body != nil && r.Body != http.NoBody {
			b, err := io.ReadAll(r.Body)
			if err != nil {
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(b))
		}
		t := time.NewTimer(f.Delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
			return
		case <-s.done:
			return
		}
	}
	switch {
	case f.ResetMidRequest:
		n := r.ContentLength / 2
		if n <= 0 {
			n = 1
		}
		_, _ = io.CopyN(io.Discard, r.Body, n)
		reset(w, true)
		return
	case f.ResetBeforeHandler:
		reset(w, true)
		return
	case f.Status != 0 && !f.AfterHandler:
		writeFault(w, f)
		return
	case !f.AfterHandler && !f.ResetAfterHandler && !f.ResetMidBody:
		s.h.ServeHTTP(w, r)
		return
	}
	rec := httptest.NewRecorder()
	s.h.ServeHTTP(rec, r)
	switch {
	case f.ResetAfterHandler:
		reset(w, true)
	case f.ResetMidBody:
		body := rec.Body.Bytes()
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(rec.Code)
		_, _ = w.Write(body[:len(body)/2])
		_ = http.NewResponseController(w).Flush()
		reset(w, false)
	default:
		writeFault(w, f)
	}
}

func writeFault(w http.ResponseWriter, f *Fault) {
	code := f.Code
	if code == "" {
		code = "InjectedFault"
	}
	if f.RetryAfter != "" {
		w.Header().Set("Retry-After", f.RetryAfter)
	}
	if f.RetryAfterMs > 0 {
		w.Header().Set("retry-after-ms", strconv.Itoa(f.RetryAfterMs))
	}
	w.Header().Set(wire.ErrorCodeHeader, code)
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(f.Status)
	b, _ := json.Marshal(wire.ErrorResponse{Error: wire.ErrorDetail{Code: code, Message: "fault injected by azsessionstest (HTTP " + strconv.Itoa(f.Status) + ")"}})
	_, _ = w.Write(b)
}

// reset takes the connection over and closes it: with a TCP RST when rst is
// set (SO_LINGER 0), else with a normal close.
func reset(w http.ResponseWriter, rst bool) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler) // not hijackable (HTTP/2): abort the stream
	}
	if rst {
		nc := conn
		if tc, ok := nc.(*tls.Conn); ok {
			nc = tc.NetConn()
		}
		if tcp, ok := nc.(*net.TCPConn); ok {
			_ = tcp.SetLinger(0)
		}
	}
	_ = conn.Close()
}

// inProcessURL is the URL of an InProcess server (.invalid: no request to
// it can leave the process by mistake).
const inProcessURL = "http://azsessionstest.invalid"

// inProcessTransport serves requests with the Server's ServeHTTP in the
// calling goroutine (Options.InProcess): no listener, no connection, no
// goroutine of net/http.
type inProcessTransport struct{ s *Server }

// RoundTrip implements http.RoundTripper.
func (t inProcessTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	req := r.Clone(r.Context())
	if req.Body == nil {
		req.Body = http.NoBody
	}
	req.RequestURI = req.URL.RequestURI()
	req.RemoteAddr = "127.0.0.1:1"
	rec := httptest.NewRecorder()
	aborted := t.serve(rec, req)
	if err := r.Context().Err(); err != nil {
		// The caller gave up while the handler ran (an injected Delay, a
		// synchronous execution still running): as over a socket, the
		// caller gets its context's error, not what the handler wrote
		// after it noticed (nothing: an empty 200 otherwise).
		return nil, err
	}
	if aborted {
		// A fault cut the connection: before the status (an error, as a
		// reset connection is), or in the body (a body that fails).
		if !rec.Flushed || rec.Body.Len() == 0 {
			return nil, &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
		}
		resp := rec.Result()
		resp.Body = io.NopCloser(io.MultiReader(bytes.NewReader(rec.Body.Bytes()), errReader{io.ErrUnexpectedEOF}))
		resp.Request = r
		return resp, nil
	}
	resp := rec.Result()
	resp.Request = r
	return resp, nil
}

// serve runs the handler and says whether it aborted the connection (the
// panic of http.ErrAbortHandler, which reset raises where it cannot take
// a connection over).
func (t inProcessTransport) serve(w http.ResponseWriter, r *http.Request) (aborted bool) {
	defer func() {
		if v := recover(); v != nil {
			if v != http.ErrAbortHandler {
				panic(v)
			}
			aborted = true
		}
	}()
	t.s.ServeHTTP(w, r)
	return false
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }
