package emulator_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
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
	"go.uber.org/goleak"

	"github.com/azsessions/azsessions/emulator"
	"github.com/azsessions/azsessions/internal/testenv"
	"github.com/azsessions/azsessions/internal/wire"
)

// TestMain runs 4 tests at once unless -parallel is given: the parallel
// ones are those with a real sandbox, which mostly wait for it, those
// that wait on real time (timeouts of bodies and executions),
// TestExecutionRecordsBoundedByBytes (tens of MiB of results over HTTP) and
// TestTrimRecords (CPU only). It closes the shared sandbox executors
// (sharedExecutor) before looking for leaked goroutines.
func TestMain(m *testing.M) {
	testenv.RaiseParallel(4)
	code := m.Run()
	if err := closeSharedExecutors(); err != nil {
		fmt.Fprintln(os.Stderr, "closing the shared sandbox executors:", err)
		code = 1
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

var (
	legacyVersions = []string{wire.V20240202Preview, wire.V20240802Preview}
	newVersions    = []string{wire.V20241002Preview, wire.V20250202Preview, wire.V20251002Preview}
)

// fakeClock is a settable clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// script is the tiny language of the test executor, one command per line:
//
//	print:TEXT       append TEXT+"\n" to stdout
//	stderr:TEXT      append TEXT to stderr
//	value:JSON       the result value
//	fail             status Failed
//	sleep:DURATION   sleep (honoring the context)
//	set:K=V / get:K  kernel variables (get prints the value)
//	write:NAME=TEXT  write a file in the data directory
//	symlink:NAME=TARGET
//	ls               print the data directory's entries (one per line)
//	wait:NAME        block until release(NAME)
//	concurrency      record concurrency per kernel
type script struct {
	mu      sync.Mutex
	vars    map[string]map[string]string // by data dir
	waits   map[string]chan struct{}
	running map[string]int
	maxRun  map[string]int
	allRun  int
	maxAll  int
}

func newScript() *script {
	return &script{vars: map[string]map[string]string{}, waits: map[string]chan struct{}{}, running: map[string]int{}, maxRun: map[string]int{}}
}

func (s *script) waitCh(name string) chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch, ok := s.waits[name]
	if !ok {
		ch = make(chan struct{})
		s.waits[name] = ch
	}
	return ch
}

func (s *script) release(name string) { close(s.waitCh(name)) }

func (s *script) run(ctx context.Context, code string) emulator.ExecutionResult {
	dir := emulator.DataDirFromContext(ctx)
	var res emulator.ExecutionResult
	var out, errb strings.Builder
	for _, line := range strings.Split(code, "\n") {
		cmd, arg, _ := strings.Cut(line, ":")
		k, v, _ := strings.Cut(arg, "=")
		switch cmd {
		case "print":
			out.WriteString(arg + "\n")
		case "stderr":
			errb.WriteString(arg)
		case "value":
			res.Value = json.RawMessage(arg)
		case "fail":
			res.Status = emulator.Failed
		case "sleep":
			d, _ := time.ParseDuration(arg)
			select {
			case <-time.After(d):
			case <-ctx.Done():
			}
		case "set":
			s.mu.Lock()
			if s.vars[dir] == nil {
				s.vars[dir] = map[string]string{}
			}
			s.vars[dir][k] = v
			s.mu.Unlock()
		case "get":
			s.mu.Lock()
			out.WriteString(s.vars[dir][arg])
			s.mu.Unlock()
		case "write":
			_ = os.MkdirAll(filepath.Dir(filepath.Join(dir, k)), 0o755)
			_ = os.WriteFile(filepath.Join(dir, k), []byte(v), 0o644)
		case "symlink":
			_ = os.Symlink(v, filepath.Join(dir, k))
		case "ls":
			_ = filepath.Walk(dir, func(p string, _ os.FileInfo, _ error) error {
				if p != dir {
					rel, _ := filepath.Rel(dir, p)
					out.WriteString(rel + "\n")
				}
				return nil
			})
		case "wait":
			select {
			case <-s.waitCh(arg):
			case <-ctx.Done():
			}
		case "concurrency":
			s.mu.Lock()
			s.running[dir]++
			s.allRun++
			s.maxRun[dir] = max(s.maxRun[dir], s.running[dir])
			s.maxAll = max(s.maxAll, s.allRun)
			s.mu.Unlock()
			time.Sleep(30 * time.Millisecond)
			s.mu.Lock()
			s.running[dir]--
			s.allRun--
			s.mu.Unlock()
		}
	}
	res.Stdout, res.Stderr = out.String(), errb.String()
	return res
}

// env is a handler behind an httptest server.
type env struct {
	t      *testing.T
	h      *emulator.Handler
	srv    *httptest.Server
	clock  *fakeClock
	script *script
	logs   *testenv.SyncBuffer
	// serving counts the requests inside the handler (see waitIdle).
	serving atomic.Int64
}

// waitIdle waits until no request is inside the handler: a client may have
// its whole answer before the handler returns and releases its session
// (a proxied request touches its session at that release).
func (e *env) waitIdle() {
	e.t.Helper()
	require.Eventually(e.t, func() bool { return e.serving.Load() == 0 }, time.Minute, time.Millisecond)
}

func newEnv(t *testing.T, opt emulator.Options) *env {
	t.Helper()
	e := &env{t: t, clock: &fakeClock{t: time.Date(2026, 1, 30, 6, 16, 17, 0, time.UTC)}, script: newScript(), logs: &testenv.SyncBuffer{}}
	if opt.Executor == nil {
		opt.Executor = emulator.ScriptedExecutor(e.script.run)
	}
	if opt.Now == nil {
		opt.Now = e.clock.Now
	}
	opt.Logger = slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h, err := emulator.NewHandler(opt)
	require.NoError(t, err)
	e.h = h
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.serving.Add(1)
		defer e.serving.Add(-1)
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		e.srv.Close()
		require.NoError(t, h.Close())
	})
	return e
}

// url builds the URL of a route; q may be nil.
func (e *env) url(route string, q url.Values) string {
	u := e.srv.URL + e.h.PoolPath() + "/" + route
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	return u
}

func qv(version, ident string, kv ...string) url.Values {
	q := url.Values{"api-version": {version}}
	if ident != "" {
		q.Set("identifier", ident)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		q.Set(kv[i], kv[i+1])
	}
	return q
}

type result struct {
	status int
	header http.Header
	body   []byte
}

func (r result) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(r.body, &m), "body: %s", r.body)
	return m
}

func (e *env) do(method, u string, body io.Reader, hdr map[string]string) result {
	e.t.Helper()
	req, err := http.NewRequest(method, u, body)
	require.NoError(e.t, err)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := e.srv.Client().Do(req)
	require.NoError(e.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(e.t, err)
	return result{resp.StatusCode, resp.Header, b}
}

func (e *env) get(route string, q url.Values) result {
	e.t.Helper()
	return e.do(http.MethodGet, e.url(route, q), nil, nil)
}

func (e *env) del(route string, q url.Values) result {
	e.t.Helper()
	return e.do(http.MethodDelete, e.url(route, q), nil, nil)
}

func (e *env) postJSON(route string, q url.Values, body any, hdr map[string]string) result {
	e.t.Helper()
	b, err := json.Marshal(body)
	require.NoError(e.t, err)
	if hdr == nil {
		hdr = map[string]string{}
	}
	hdr["Content-Type"] = "application/json"
	return e.do(http.MethodPost, e.url(route, q), bytes.NewReader(b), hdr)
}

// exec runs code with the contract of version and returns the raw result.
func (e *env) exec(version, ident, code string, hdr map[string]string) result {
	e.t.Helper()
	if isLegacy(version) {
		return e.postJSON("code/execute", qv(version, ident), map[string]any{"properties": map[string]any{"codeInputType": "inline", "executionType": "synchronous", "code": code}}, hdr)
	}
	return e.postJSON("executions", qv(version, ident), execBody(code), hdr)
}

// execBody is a complete body of POST executions (every field
// 2024-10-02-preview and 2025-02-02-preview require) for code, with extra
// key, value pairs replacing or adding fields.
func execBody(code string, kv ...any) map[string]any {
	b := map[string]any{"codeInputType": "Inline", "executionType": "Synchronous", "code": code, "timeoutInSeconds": 60}
	for i := 0; i+1 < len(kv); i += 2 {
		b[kv[i].(string)] = kv[i+1]
	}
	return b
}

// stdout runs code and returns its stdout (either contract).
func (e *env) stdout(version, ident, code string) string {
	e.t.Helper()
	r := e.exec(version, ident, code, nil)
	require.Less(e.t, r.status, 300, "body: %s", r.body)
	m := r.json(e.t)
	if isLegacy(version) {
		return m["properties"].(map[string]any)["stdout"].(string)
	}
	return m["result"].(map[string]any)["stdout"].(string)
}

func isLegacy(v string) bool { f, _ := wire.Lookup(v); return f.Legacy }

// upload posts a multipart body with one part "file" named filename.
func (e *env) upload(version, ident, filename string, content []byte, extra ...string) result {
	e.t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	pw, err := mw.CreatePart(fileHeader(filename))
	require.NoError(e.t, err)
	_, _ = pw.Write(content)
	require.NoError(e.t, mw.Close())
	route := "files"
	if isLegacy(version) {
		route = "files/upload"
	}
	return e.do(http.MethodPost, e.url(route, qv(version, ident, extra...)), &buf, map[string]string{"Content-Type": mw.FormDataContentType()})
}

func fileHeader(filename string) map[string][]string {
	return map[string][]string{
		"Content-Disposition": {fmt.Sprintf(`form-data; name="file"; filename=%q`, filename)},
		"Content-Type":        {"application/octet-stream"},
	}
}

// requireError checks the error shape, code and x-ms-error-code header.
func requireError(t *testing.T, r result, status int, code string) {
	t.Helper()
	require.Equal(t, status, r.status, "body: %s", r.body)
	require.Equal(t, code, r.header.Get("x-ms-error-code"))
	require.Contains(t, r.header.Get("Content-Type"), "application/json")
	var er struct {
		Error map[string]any `json:"error"`
	}
	require.NoError(t, json.Unmarshal(r.body, &er), "body: %s", r.body)
	require.Equal(t, code, er.Error["code"])
	require.NotEmpty(t, er.Error["message"])
}

// keys returns the sorted keys of a JSON object.
func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func newServer(h http.Handler) *httptest.Server { return httptest.NewServer(h) }

// bodyWithoutTraceID is an error body without its random traceId (a UUID can
// hold any short identifier, such as "abc").
func bodyWithoutTraceID(t *testing.T, r result) string {
	t.Helper()
	m := r.json(t)
	if e, ok := m["error"].(map[string]any); ok {
		delete(e, "traceId")
	}
	b, err := json.Marshal(m)
	require.NoError(t, err)
	return string(b)
}
