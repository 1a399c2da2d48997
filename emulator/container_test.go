package emulator_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/azsessions/azsessions/emulator"
	"github.com/azsessions/azsessions/internal/kernel"
)

// pipeContainers is an Executor whose kernels run their "container" in the
// test process: handler, served over net.Pipe connections that
// DialContainer hands out. It counts cold starts and can make them fail.
type pipeContainers struct {
	emulator.Executor
	handler  http.Handler
	starts   atomic.Int32
	startErr error // returned by every StartContainer when set

	mu      sync.Mutex
	kernels []*pipeKernel
}

func newPipeContainers(h http.Handler) *pipeContainers {
	return &pipeContainers{Executor: emulator.ScriptedExecutor(func(context.Context, string) emulator.ExecutionResult {
		panic("a custom-container pool runs no code")
	}), handler: h}
}

func (p *pipeContainers) NewKernel(ctx context.Context) (emulator.Kernel, error) {
	k, err := p.Executor.NewKernel(ctx)
	if err != nil {
		return nil, err
	}
	pk := &pipeKernel{Kernel: k, p: p, ln: &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}}
	p.mu.Lock()
	p.kernels = append(p.kernels, pk)
	p.mu.Unlock()
	return pk, nil
}

// exit makes every container "exit": its connections close and
// DialContainer fails from now on.
func (p *pipeContainers) exit() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, k := range p.kernels {
		k.exited.Store(true)
		k.stop()
	}
}

type pipeKernel struct {
	emulator.Kernel
	p      *pipeContainers
	srv    *http.Server
	ln     *pipeListener
	once   sync.Once
	exited atomic.Bool
	served sync.WaitGroup
}

// pipeListener is the container's net.Listener: the conns DialContainer made.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error   { l.once.Do(func() { close(l.done) }); return nil }
func (l *pipeListener) Addr() net.Addr { return &net.UnixAddr{Name: "pipe", Net: "unix"} }

func (k *pipeKernel) StartContainer(ctx context.Context, spec kernel.ContainerSpec) error {
	k.p.starts.Add(1)
	if k.p.startErr != nil {
		return k.p.startErr
	}
	if spec.Command == "" || spec.Port == 0 {
		return errors.New("no command or port")
	}
	k.srv = &http.Server{Handler: k.p.handler}
	k.served.Add(1)
	go func() { defer k.served.Done(); _ = k.srv.Serve(k.ln) }()
	return nil
}

func (k *pipeKernel) DialContainer(ctx context.Context) (net.Conn, error) {
	if k.exited.Load() {
		return nil, fmt.Errorf("test: %w", kernel.ErrContainerExited)
	}
	a, b := net.Pipe()
	select {
	case k.ln.conns <- b:
		return a, nil
	case <-k.ln.done:
		_, _ = a.Close(), b.Close()
		return nil, kernel.ErrContainerExited
	case <-ctx.Done():
		_, _ = a.Close(), b.Close()
		return nil, ctx.Err()
	}
}

// stop ends the container: its server, listener and connections.
func (k *pipeKernel) stop() {
	k.once.Do(func() {
		_ = k.ln.Close()
		if k.srv != nil {
			_ = k.srv.Close()
		}
		k.served.Wait()
	})
}

func (k *pipeKernel) Close() error {
	k.stop()
	return k.Kernel.Close()
}

// echoHandler answers what it received: method, path (escaped), query,
// headers and body, as JSON.
func echoHandler(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Container", "yes")
	w.WriteHeader(http.StatusTeapot)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"method": r.Method, "path": r.URL.EscapedPath(), "query": r.URL.RawQuery,
		"header": r.Header, "body": string(b), "host": r.Host,
	})
}

// newContainerEnv is a CustomContainer pool whose containers are handler.
func newContainerEnv(t *testing.T, handler http.Handler, opt emulator.Options) (*env, *pipeContainers) {
	t.Helper()
	pc := newPipeContainers(handler)
	opt.Executor = pc
	opt.PoolType = emulator.PoolTypeCustomContainer
	if opt.ContainerCommand == "" {
		opt.ContainerCommand = "python3 server.py"
	}
	if opt.TargetPort == 0 {
		opt.TargetPort = 8080
	}
	return newEnv(t, opt), pc
}

// TestContainerProxy: every request outside .management/ reaches the
// session's container with its method, escaped path, query (identifier
// included), headers (less Authorization) and body; the container's status,
// headers and body come back as they are.
func TestContainerProxy(t *testing.T) {
	e, pc := newContainerEnv(t, http.HandlerFunc(echoHandler), emulator.Options{})
	cases := []struct {
		method, path, query, body string
	}{
		{http.MethodGet, "api/items", "limit=5", ""},
		{http.MethodPost, "api/uploadfile", "a=1&b=x%26y", `{"command":"echo 'Hello, world!'"}`},
		{http.MethodPut, "a%2Fb/c%20d", "", "put body"},
		{http.MethodPatch, "", "", "patch"},
		{http.MethodDelete, "session", "api-version=2025-02-02-preview", ""},
		{"PROPFIND", "dav/x/", "", ""},
		{http.MethodGet, "listSessions", "api-version=2025-10-02-preview", ""},
		{http.MethodGet, "metadata", "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			q := "identifier=user-123"
			if tc.query != "" {
				q = tc.query + "&" + q
			}
			u := e.srv.URL + e.h.PoolPath() + "/" + tc.path + "?" + q
			r := e.do(tc.method, u, strings.NewReader(tc.body), map[string]string{"Authorization": "Bearer secret-token", "X-Custom": "v1", "Content-Type": "text/plain"})
			require.Equal(t, http.StatusTeapot, r.status, "%s", r.body)
			require.Equal(t, "yes", r.header.Get("X-Container"))
			var got struct {
				Method, Path, Query, Body, Host string
				Header                          http.Header
			}
			require.NoError(t, json.Unmarshal(r.body, &got))
			require.Equal(t, tc.method, got.Method)
			require.Equal(t, "/"+tc.path, got.Path)
			require.Equal(t, q, got.Query)
			require.Equal(t, tc.body, got.Body)
			require.Equal(t, "v1", got.Header.Get("X-Custom"))
			require.Equal(t, "text/plain", got.Header.Get("Content-Type"))
			require.Empty(t, got.Header.Get("Authorization"), "the pool's token must not reach the container")
			require.Equal(t, "127.0.0.1:8080", got.Host)
		})
	}
	require.Equal(t, int32(1), pc.starts.Load(), "one session, one cold start")
	op, tpl, ok := e.h.Route(httptestRequest(t, http.MethodPost, e.srv.URL+e.h.PoolPath()+"/x/y?identifier=user-123"))
	require.True(t, ok)
	require.Equal(t, emulator.OpProxy, op)
	require.NotContains(t, tpl, "x/y", "the route template does not repeat the path")
}

func httptestRequest(t *testing.T, method, u string) *http.Request {
	r, err := http.NewRequest(method, u, nil)
	require.NoError(t, err)
	return r
}

// TestContainerProxyStreams: both bodies stream, in full duplex: the
// container answers the first line of the request before the client has
// sent the second, and the client reads each answer line before it sends
// the next request line.
func TestContainerProxyStreams(t *testing.T) {
	e, _ := newContainerEnv(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).EnableFullDuplex()
		w.WriteHeader(http.StatusOK)
		sc := bufio.NewScanner(r.Body)
		for sc.Scan() {
			_, _ = fmt.Fprintf(w, "echo %s\n", sc.Text())
			_ = http.NewResponseController(w).Flush()
		}
	}), emulator.Options{})
	pr, pw := io.Pipe()
	// Without streaming both ways the reads below would wait for ever.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.srv.URL+e.h.PoolPath()+"/stream?identifier=stream-1", pr)
	require.NoError(t, err)
	type answer struct {
		resp *http.Response
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		resp, err := e.srv.Client().Do(req)
		got <- answer{resp, err}
	}()
	_, err = io.WriteString(pw, "one\n")
	require.NoError(t, err)
	a := <-got // the headers came while the request body is still open
	require.NoError(t, a.err)
	defer a.resp.Body.Close()
	require.Equal(t, http.StatusOK, a.resp.StatusCode)
	br := bufio.NewReader(a.resp.Body)
	line, err := br.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "echo one\n", line)
	_, err = io.WriteString(pw, "two\n")
	require.NoError(t, err)
	line, err = br.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "echo two\n", line)
	require.NoError(t, pw.Close())
	rest, err := io.ReadAll(br)
	require.NoError(t, err)
	require.Empty(t, rest)
}

// TestContainerColdStartAndStop: the first request of an identifier starts
// its container; stopSession (the Learn example's exact answer) ends it, a
// second stop finds no session, and the next request cold-starts a new one;
// so does the next request after the session expired (cooldown).
func TestContainerColdStartAndStop(t *testing.T) {
	e, pc := newContainerEnv(t, http.HandlerFunc(echoHandler), emulator.Options{PoolName: "testSessionPool"})
	proxied := func(ident string) result {
		return e.do(http.MethodGet, e.srv.URL+e.h.PoolPath()+"/hello?identifier="+ident, nil, nil)
	}
	require.Equal(t, http.StatusTeapot, proxied("testSessionIdentifier").status)
	require.Equal(t, http.StatusTeapot, proxied("testSessionIdentifier").status)
	require.Equal(t, int32(1), pc.starts.Load())

	stop := e.do(http.MethodPost, e.url(".management/stopSession", qv("2025-02-02-preview", "testSessionIdentifier")), nil, nil)
	require.Equal(t, http.StatusOK, stop.status, "%s", stop.body)
	require.Equal(t, "text/plain; charset=utf-8", stop.header.Get("Content-Type"))
	require.Equal(t, "Session testSessionIdentifier in session pool testSessionPool stopped.", string(stop.body))
	require.Equal(t, 0, e.h.Stats().Sessions)

	again := e.do(http.MethodPost, e.url(".management/stopSession", qv("2025-02-02-preview", "testSessionIdentifier")), nil, nil)
	requireError(t, again, http.StatusBadRequest, "SessionWithIdentifierNotFound")

	require.Equal(t, http.StatusTeapot, proxied("testSessionIdentifier").status)
	require.Equal(t, int32(2), pc.starts.Load(), "a stopped session's identifier gets a new container")

	// Idle past the cooldown: the janitor ends it (its container with it),
	// and the identifier's next request cold-starts again. The session is
	// idle from the end of its last proxied request, which may come just
	// after the client has the answer.
	e.waitIdle()
	e.clock.Advance(emulator.DefaultCooldown - time.Second)
	require.Zero(t, e.h.Sweep(), "not idle for the whole cooldown yet")
	e.clock.Advance(2 * time.Second)
	require.Equal(t, 1, e.h.Sweep())
	require.Equal(t, 0, e.h.Stats().Sessions)
	require.Equal(t, http.StatusTeapot, proxied("testSessionIdentifier").status)
	require.Equal(t, int32(3), pc.starts.Load(), "an expired session's identifier gets a new container")
}

// TestContainerManagementSessions: POST .management/getSession and
// listSessions answer the shapes of Learn's examples (read as data):
// expiresAt (not expireAt), value/count/nextLink with nextLink null on the
// last page; an unknown session is 400 SessionWithIdentifierNotFound.
func TestContainerManagementSessions(t *testing.T) {
	e, _ := newContainerEnv(t, http.HandlerFunc(echoHandler), emulator.Options{ListSessionsPageSize: 2})
	ex := readManagementExamples(t)
	for _, id := range []string{"user-123", "user-456", "user-789"} {
		require.Equal(t, http.StatusTeapot, e.do(http.MethodGet, e.srv.URL+e.h.PoolPath()+"/?identifier="+id, nil, nil).status)
		e.clock.Advance(1)
	}

	get := e.do(http.MethodPost, e.url(".management/getSession", qv("2025-02-02-preview", "user-123")), nil, nil)
	require.Equal(t, http.StatusOK, get.status, "%s", get.body)
	var want map[string]any
	require.NoError(t, json.Unmarshal(ex["custom_container_getSession_doc"]["response200"], &want))
	gotSession := get.json(t)
	require.Equal(t, sortedKeys(want), sortedKeys(gotSession))
	require.Equal(t, "user-123", gotSession["identifier"])

	list := e.do(http.MethodPost, e.url(".management/listSessions", qv("2025-02-02-preview", "", "skip", "0")), nil, nil)
	require.Equal(t, http.StatusOK, list.status, "%s", list.body)
	var wantList map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(ex["custom_container_listSessions_doc"]["response200"], &wantList))
	page := list.json(t)
	require.Equal(t, sortedKeys(wantList), sortedKeys(page))
	require.EqualValues(t, 2, page["count"])
	values := page["value"].([]any)
	require.Len(t, values, 2)
	require.Equal(t, sortedKeys(want), sortedKeys(values[0].(map[string]any)))
	next, err := url.Parse(page["nextLink"].(string))
	require.NoError(t, err)
	require.Equal(t, e.h.PoolPath()+"/.management/listSessions", next.Path)

	last := e.do(http.MethodPost, e.srv.URL+next.RequestURI(), nil, nil)
	require.Equal(t, http.StatusOK, last.status, "%s", last.body)
	lp := last.json(t)
	require.EqualValues(t, 1, lp["count"])
	require.Contains(t, lp, "nextLink")
	require.Nil(t, lp["nextLink"])
	require.Equal(t, "user-789", lp["value"].([]any)[0].(map[string]any)["identifier"])

	missing := e.do(http.MethodPost, e.url(".management/getSession", qv("2025-02-02-preview", "nobody-here")), nil, nil)
	requireError(t, missing, http.StatusBadRequest, "SessionWithIdentifierNotFound")
}

func readManagementExamples(t *testing.T) map[string]map[string]json.RawMessage {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", "examples", "management_endpoints_examples.json"))
	require.NoError(t, err)
	var ex map[string]map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(b, &ex))
	return ex
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestContainerRequestErrors: what a custom-container pool refuses before
// anything reaches a container.
func TestContainerRequestErrors(t *testing.T) {
	e, pc := newContainerEnv(t, http.HandlerFunc(echoHandler), emulator.Options{})
	cases := []struct {
		name, method, path string
		status             int
		code               string
	}{
		{"no identifier", http.MethodGet, "/api", http.StatusBadRequest, "SessionRequestValidationFailed"},
		{"bad identifier", http.MethodGet, "/api?identifier=ab", http.StatusBadRequest, "SessionRequestValidationFailed"},
		{"management without api-version", http.MethodPost, "/.management/stopSession?identifier=user-123", http.StatusBadRequest, "InvalidApiVersion"},
		{"unknown management route", http.MethodPost, "/.management/deleteSession?identifier=user-123&api-version=2025-02-02-preview", http.StatusNotFound, "RouteNotFound"},
		{"management GET", http.MethodGet, "/.management/getSession?identifier=user-123&api-version=2025-02-02-preview", http.StatusNotFound, "RouteNotFound"},
		{"management on an old api-version", http.MethodPost, "/.management/getSession?identifier=user-123&api-version=2024-10-02-preview", http.StatusNotFound, "RouteNotFound"},
		{"outside the pool", http.MethodGet, "/../other?identifier=user-123", http.StatusNotFound, "RouteNotFound"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u := e.srv.URL + e.h.PoolPath() + tc.path
			if tc.name == "outside the pool" {
				u = e.srv.URL + "/elsewhere?identifier=user-123"
			}
			requireError(t, e.do(tc.method, u, nil, nil), tc.status, tc.code)
		})
	}
	require.Zero(t, pc.starts.Load(), "no container was started")

	tok, _ := newContainerEnv(t, http.HandlerFunc(echoHandler), emulator.Options{RequireToken: true, Token: "the-token"})
	u := tok.srv.URL + tok.h.PoolPath() + "/api?identifier=user-123"
	requireError(t, tok.do(http.MethodGet, u, nil, nil), http.StatusUnauthorized, "Unauthorized")
	require.Equal(t, http.StatusTeapot, tok.do(http.MethodGet, u, nil, map[string]string{"Authorization": "Bearer the-token"}).status)

	for _, bad := range []emulator.Options{
		{PoolType: emulator.PoolTypeCustomContainer, TargetPort: 8080},
		{PoolType: emulator.PoolTypeCustomContainer, ContainerCommand: "x"},
		{PoolType: emulator.PoolTypeCustomContainer, ContainerCommand: "x", TargetPort: 70000},
		{ContainerCommand: "x", TargetPort: 8080},
	} {
		bad.Executor = emulator.ScriptedExecutor(nil)
		_, err := emulator.NewHandler(bad)
		require.Error(t, err, "%+v", bad)
	}
}

// TestContainerFailures: a container that does not start (its command
// exited: 502; it did not listen in time: 504) answers
// ContainerStartFailed and leaves no session; one whose command exited
// later answers 502 ContainerUnreachable, which ends the session, and the
// next request starts a new one.
func TestContainerFailures(t *testing.T) {
	for _, tc := range []struct {
		err    error
		status int
	}{
		{fmt.Errorf("sandbox: %w (exit status 1) before listening on port 8080; stderr: boom", kernel.ErrContainerExited), http.StatusBadGateway},
		{fmt.Errorf("sandbox: %w (2s)", kernel.ErrContainerStartTimeout), http.StatusGatewayTimeout},
	} {
		e, pc := newContainerEnv(t, http.HandlerFunc(echoHandler), emulator.Options{})
		pc.startErr = tc.err
		r := e.do(http.MethodGet, e.srv.URL+e.h.PoolPath()+"/x?identifier=user-123", nil, nil)
		requireError(t, r, tc.status, emulator.CodeContainerStartFailed)
		require.NotContains(t, string(r.body), "user-123")
		require.Equal(t, 0, e.h.Stats().Sessions)
	}

	e, pc := newContainerEnv(t, http.HandlerFunc(echoHandler), emulator.Options{})
	u := e.srv.URL + e.h.PoolPath() + "/x?identifier=user-123"
	require.Equal(t, http.StatusTeapot, e.do(http.MethodGet, u, nil, nil).status)
	pc.exit()
	r := e.do(http.MethodGet, e.srv.URL+e.h.PoolPath()+"/y?identifier=user-123", nil, nil)
	requireError(t, r, http.StatusBadGateway, emulator.CodeContainerUnreachable)
	require.NotContains(t, string(r.body), "user-123")
	require.NotContains(t, e.logs.String(), "user-123")
	require.Equal(t, 0, e.h.Stats().Sessions)
	require.Equal(t, http.StatusTeapot, e.do(http.MethodGet, u, nil, nil).status)
	require.Equal(t, int32(2), pc.starts.Load())
}

// TestContainerProxyUpgrade: a protocol upgrade (WebSocket's handshake)
// passes through: after the container's 101 the connection carries raw
// bytes both ways.
func TestContainerProxyUpgrade(t *testing.T) {
	e, _ := newContainerEnv(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "echo" {
			http.Error(w, "want an upgrade", http.StatusBadRequest)
			return
		}
		conn, brw, ok := acceptEchoUpgrade(w)
		if !ok {
			return
		}
		defer conn.Close()
		_, _ = io.Copy(conn, brw)
	}), emulator.Options{})
	c := rawGet(t, e, "/ws?identifier=upgrade-1", true)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
	for _, msg := range []string{"ping\n", "pong\n"} {
		_, err = io.WriteString(c, msg)
		require.NoError(t, err)
		got, err := br.ReadString('\n')
		require.NoError(t, err)
		require.Equal(t, msg, got)
	}
}

// acceptEchoUpgrade answers, as the container, 101 Switching Protocols to
// the "echo" protocol and takes over the connection (ok false if it
// cannot).
func acceptEchoUpgrade(w http.ResponseWriter) (net.Conn, *bufio.ReadWriter, bool) {
	w.Header().Set("Upgrade", "echo")
	w.Header().Set("Connection", "Upgrade")
	w.WriteHeader(http.StatusSwitchingProtocols)
	conn, brw, err := http.NewResponseController(w).Hijack()
	return conn, brw, err == nil
}

// rawGet sends GET {pool}{pathQuery} on a new connection, asking for the
// "echo" protocol upgrade when upgrade is set, and returns the connection
// (closed at the end of the test) for the caller to read the answer.
func rawGet(t *testing.T, e *env, pathQuery string, upgrade bool) net.Conn {
	t.Helper()
	u, err := url.Parse(e.srv.URL)
	require.NoError(t, err)
	c, err := net.Dial("tcp", u.Host)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	hdr := ""
	if upgrade {
		hdr = "Connection: Upgrade\r\nUpgrade: echo\r\n"
	}
	_, err = fmt.Fprintf(c, "GET %s%s HTTP/1.1\r\nHost: %s\r\n%s\r\n", e.h.PoolPath(), pathQuery, u.Host, hdr)
	require.NoError(t, err)
	return c
}

// TestContainerStopEndsProxiedRequests: stopSession ends the session's
// requests still in flight (an answer that never comes, an upgraded
// connection held open), so that its container stops at once instead of
// running, unlisted, for as long as a caller keeps a connection open.
func TestContainerStopEndsProxiedRequests(t *testing.T) {
	cases := []struct {
		name    string
		upgrade bool
	}{
		{name: "never answers"},
		{name: "upgraded connection", upgrade: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			entered, ended := make(chan struct{}, 1), make(chan struct{}, 1)
			e, _ := newContainerEnv(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				defer func() { ended <- struct{}{} }()
				if !tc.upgrade {
					entered <- struct{}{}
					<-r.Context().Done() // the emulator closed the connection
					return
				}
				conn, brw, ok := acceptEchoUpgrade(w)
				if !ok {
					return
				}
				defer conn.Close()
				entered <- struct{}{}
				_, _ = io.Copy(io.Discard, brw) // until the emulator closes it
			}), emulator.Options{})
			c := rawGet(t, e, "/held?identifier=held-1", tc.upgrade)
			<-entered
			require.NoError(t, c.SetReadDeadline(time.Now().Add(time.Minute)))
			br := bufio.NewReader(c)
			if tc.upgrade {
				// The container's 101 reaches the caller before the stop:
				// otherwise the stop could come while the emulator still
				// waits for it, and the caller would rightly get a 502.
				resp, err := http.ReadResponse(br, nil)
				require.NoError(t, err)
				require.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
			}

			stop := e.do(http.MethodPost, e.url(".management/stopSession", qv("2025-02-02-preview", "held-1")), nil, nil)
			require.Equal(t, http.StatusOK, stop.status, "%s", stop.body)
			select {
			case <-ended:
			case <-time.After(time.Minute):
				t.Fatal("the stopped session's container still serves the request in flight")
			}
			// The caller gets an error answer, or the end of its upgraded
			// connection.
			if tc.upgrade {
				_, err := io.ReadAll(br)
				require.NoError(t, err)
				return
			}
			resp, err := http.ReadResponse(br, nil)
			require.NoError(t, err)
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			require.Equal(t, http.StatusBadGateway, resp.StatusCode, "%s", body)
			require.Contains(t, string(body), emulator.CodeContainerUnreachable)
		})
	}
}

// TestContainerHugeAnswerHeaders: a container's answer headers are bounded
// (1 MiB, as the emulator's request headers): larger ones are 502
// ContainerUnreachable instead of up to 10 MiB held per request.
func TestContainerHugeAnswerHeaders(t *testing.T) {
	cases := []struct {
		name   string
		bytes  int
		status int
	}{
		{name: "small", bytes: 64 << 10, status: http.StatusOK},
		{name: "over 1 MiB", bytes: 2 << 20, status: http.StatusBadGateway},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, _ := newContainerEnv(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				v := strings.Repeat("a", 1000)
				for i := range tc.bytes / 1000 {
					w.Header().Set(fmt.Sprintf("X-H%d", i), v)
				}
				w.WriteHeader(http.StatusOK)
			}), emulator.Options{})
			r := e.do(http.MethodGet, e.srv.URL+e.h.PoolPath()+"/h?identifier=headers-1", nil, nil)
			require.Equal(t, tc.status, r.status, "%.200s", r.body)
			if tc.status == http.StatusBadGateway {
				requireError(t, r, http.StatusBadGateway, emulator.CodeContainerUnreachable)
			}
		})
	}
}

// TestContainerGarbageAnswerNotLogged: a container that answers garbage
// (here the identifier it was sent, as a status line) is 502
// ContainerUnreachable, and neither the answer nor the emulator's log
// repeats what it wrote: the transport's error quotes the container's bytes.
func TestContainerGarbageAnswerNotLogged(t *testing.T) {
	cases := []struct {
		name   string
		answer string
	}{
		{name: "status line", answer: "%s\r\n\r\n"},
		{name: "status code", answer: "HTTP/1.1 %s OK\r\n\r\n"},
		{name: "header", answer: "HTTP/1.1 200 OK\r\n%s\r\n\r\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, _ := newContainerEnv(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				conn, _, err := http.NewResponseController(w).Hijack()
				if err != nil {
					return
				}
				defer conn.Close()
				_, _ = fmt.Fprintf(conn, tc.answer, r.URL.Query().Get("identifier"))
			}), emulator.Options{})
			r := e.do(http.MethodGet, e.srv.URL+e.h.PoolPath()+"/g?identifier=secret-ident-42", nil, nil)
			requireError(t, r, http.StatusBadGateway, emulator.CodeContainerUnreachable)
			require.NotContains(t, string(r.body), "secret-ident-42")
			require.NotContains(t, e.logs.String(), "secret-ident-42")
		})
	}
}
