package azsessions

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azsessions/azsessions/internal/wire"
)

// poolPath is the path part of the fake pool management endpoint. A
// non-empty base path (go-github style) catches URLs built against the host
// root instead of the endpoint.
const poolPath = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg/sessionPools/pool"

// fakeToken is the token azcore/fake.TokenCredential hands out.
const fakeToken = "fake_token"

// userAgentPrefix must be part of every request's User-Agent.
const userAgentPrefix = "azsdk-go-azsessions/v0.2.0"

var allVersions = []string{
	APIVersion20240202Preview,
	APIVersion20240802Preview,
	APIVersion20241002Preview,
	APIVersion20250202Preview,
	APIVersion20251002Preview,
}

type featuresT = wire.Features

func jsonDecode(r io.Reader, v any) error { return json.NewDecoder(r).Decode(v) }

func features(t testing.TB, version string) wire.Features {
	f, ok := wire.Lookup(version)
	require.True(t, ok, version)
	return f
}

var uuidV4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// fakePool is an httptest fake of one session pool's management endpoint.
// Tests register one handler per route on mux (paths relative to the
// endpoint, e.g. "POST /executions"); every request is counted, must stay
// under poolPath and must carry api-version, the User-Agent and (only on a
// credentialed client) the bearer token. Any route without a handler fails
// the test.
type fakePool struct {
	t       testing.TB
	version string
	cred    bool
	mux     *http.ServeMux
	srv     *httptest.Server
	client  *Client
	// Endpoint is the endpoint the client was made with.
	Endpoint string

	requests atomic.Int64
	mu       sync.Mutex
	seen     []string // "METHOD /escaped/path?rawquery", relative to poolPath
}

type setupConfig struct {
	cred       bool
	inProcess  bool
	modifyOpts func(*ClientOptions)
	fallback   http.HandlerFunc
}

// inProcess serves the client's requests in its own goroutine instead of
// over an httptest server (see inProcessTransport): for tests inside a
// testing/synctest bubble. Not with withCredential (which needs TLS).
func inProcess() setupOpt { return func(c *setupConfig) { c.inProcess = true } }

// inProcessTransport serves each request with h in the caller's goroutine
// and returns what h wrote: no network, no goroutine, so that a client can
// run inside a testing/synctest bubble (a goroutine waiting on a socket
// would keep the fake clock from moving).
func inProcessTransport(h http.Handler) funcTransport {
	return func(r *http.Request) (*http.Response, error) {
		req := r.Clone(r.Context())
		if req.Body == nil {
			req.Body = http.NoBody
		}
		req.RequestURI = req.URL.RequestURI()
		req.RemoteAddr = "192.0.2.1:1234"
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		resp := rec.Result()
		resp.Request = r
		return resp, nil
	}
}

type setupOpt func(*setupConfig)

// withCredential makes the client authenticate with azcore/fake.TokenCredential
// over TLS (httptest.NewTLSServer, Transport srv.Client()).
func withCredential() setupOpt { return func(c *setupConfig) { c.cred = true } }

// withOptions edits the ClientOptions before the client is made.
func withOptions(f func(*ClientOptions)) setupOpt {
	return func(c *setupConfig) { c.modifyOpts = f }
}

// withFallback answers requests no route matches (instead of failing the test).
func withFallback(h http.HandlerFunc) setupOpt { return func(c *setupConfig) { c.fallback = h } }

// withCred is withCredential when cred is true.
func withCred(cred bool) setupOpt {
	return func(c *setupConfig) { c.cred = cred }
}

// setup starts a fake pool for version and returns it with a client for it.
// Without options the client has no credential and talks plain HTTP.
func setup(t testing.TB, version string, opts ...setupOpt) *fakePool {
	t.Helper()
	var cfg setupConfig
	for _, o := range opts {
		o(&cfg)
	}
	p := &fakePool{t: t, version: version, cred: cfg.cred, mux: http.NewServeMux()}
	fallback := cfg.fallback
	if fallback == nil {
		fallback = func(w http.ResponseWriter, r *http.Request) {
			t.Errorf("unexpected request %s %s", r.Method, r.URL.String())
			http.Error(w, `{"error":{"code":"NoRoute","message":"no such route"}}`, http.StatusNotFound)
		}
	}
	p.mux.HandleFunc("/", fallback)
	root := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.requests.Add(1)
		p.mu.Lock()
		p.seen = append(p.seen, r.Method+" "+strings.TrimPrefix(r.URL.EscapedPath(), poolPath)+"?"+r.URL.RawQuery)
		p.mu.Unlock()
		if !strings.HasPrefix(r.URL.Path, poolPath+"/") {
			t.Errorf("request outside the endpoint: %s %s", r.Method, r.URL.String())
			http.NotFound(w, r)
			return
		}
		assert.Equal(t, version, r.URL.Query().Get("api-version"), "api-version of %s %s", r.Method, r.URL.Path)
		assert.Contains(t, r.Header.Get("User-Agent"), userAgentPrefix)
		if p.cred {
			assert.Equal(t, "Bearer "+fakeToken, r.Header.Get("Authorization"))
		} else {
			assert.Empty(t, r.Header.Get("Authorization"))
		}
		if id := r.Header.Get("operation-id"); r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/executions") && id != "" {
			// Like the service, answer with the execution's id = the
			// operation-id sent, whatever id a canned body holds.
			w = &echoIDWriter{ResponseWriter: w, id: id}
		}
		http.StripPrefix(poolPath, p.mux).ServeHTTP(w, r)
	})
	co := &ClientOptions{}
	switch {
	case cfg.inProcess:
		require.False(t, cfg.cred, "inProcess serves plain HTTP")
		p.Endpoint = "http://fake.invalid" + poolPath
		co.Transport = inProcessTransport(root)
	case cfg.cred:
		p.srv = httptest.NewUnstartedServer(root)
		p.srv.TLS = &tls.Config{Certificates: []tls.Certificate{testCert()}}
		p.srv.StartTLS() // srv.Client() trusts testCert
	default:
		p.srv = httptest.NewServer(root)
	}
	if p.srv != nil {
		t.Cleanup(p.srv.Close) // also closes the idle connections of srv.Client()
		p.Endpoint = p.srv.URL + poolPath
		co.Transport = p.srv.Client()
	}
	co.APIVersion = version
	co.Retry.RetryDelay = time.Millisecond
	if cfg.modifyOpts != nil {
		cfg.modifyOpts(co)
	}
	var err error
	if cfg.cred {
		p.client, err = NewClient(p.Endpoint, &fake.TokenCredential{}, co)
	} else {
		p.client, err = NewClientWithNoCredential(p.Endpoint, co)
	}
	require.NoError(t, err)
	return p
}

// testCert is the fake pools' TLS certificate: ECDSA P-256 for 127.0.0.1,
// made once. httptest's own is RSA-2048, whose signature in every TLS
// handshake cost a tenth of the package's CPU.
var testCert = sync.OnceValue(func() tls.Certificate {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		panic(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
})

// handle registers a handler for a route relative to the endpoint.
func (p *fakePool) handle(pattern string, h http.HandlerFunc) { p.mux.HandleFunc(pattern, h) }

// count returns how many requests reached the server.
func (p *fakePool) count() int { return int(p.requests.Load()) }

// requestsTo returns how many requests went to method+path (path relative to
// the endpoint, escaped, without the query).
func (p *fakePool) requestsTo(method, path string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, s := range p.seen {
		if strings.HasPrefix(s, method+" "+path+"?") {
			n++
		}
	}
	return n
}

// url returns the absolute URL of a route relative to the endpoint.
func (p *fakePool) url(rel string) string { return p.Endpoint + rel }

// requireNoIO checks that no request reached the server.
func (p *fakePool) requireNoIO(t testing.TB) {
	t.Helper()
	require.Zero(t, p.count(), "requests: %v", p.seen)
}

// ---- request assertions (run in the server's goroutines, so they use assert) ----

// wantQuery asserts that the request's query holds exactly want (one value each, decoded).
func wantQuery(t testing.TB, r *http.Request, want map[string]string) {
	t.Helper()
	q, err := url.ParseQuery(r.URL.RawQuery)
	assert.NoError(t, err, "query %q", r.URL.RawQuery)
	got := map[string]string{}
	for k, vs := range q {
		assert.Len(t, vs, 1, "query parameter %q", k)
		got[k] = vs[0]
	}
	assert.Equal(t, want, got, "query of %s %s", r.Method, r.URL.Path)
}

// stdQuery is the query of a session-scoped request.
func stdQuery(version, identifier string, extra ...string) map[string]string {
	m := map[string]string{"api-version": version}
	if identifier != "" {
		m["identifier"] = identifier
	}
	for i := 0; i+1 < len(extra); i += 2 {
		m[extra[i]] = extra[i+1]
	}
	return m
}

// wantJSONBody asserts the request body is JSON equal to want.
func wantJSONBody(t testing.TB, r *http.Request, want string) {
	t.Helper()
	assert.Equal(t, "application/json", r.Header.Get("Content-Type"))
	b, err := io.ReadAll(r.Body)
	assert.NoError(t, err)
	assert.JSONEq(t, want, string(b))
}

// writeJSON answers with status and body.
func writeJSON(w http.ResponseWriter, status int, body []byte, headers ...string) {
	for i := 0; i+1 < len(headers); i += 2 {
		w.Header().Set(headers[i], headers[i+1])
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// writeError answers with the Azure Core error shape and x-ms-error-code.
func writeError(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set(wire.ErrorCodeHeader, code)
	writeJSON(w, status, fmt.Appendf(nil, `{"error":{"code":%q,"message":%q}}`, code, message))
}

// ---- examples (copied from the reference into testdata/examples) ----

var exampleCache sync.Map

// example returns the JSON value at keys inside testdata/examples/file.
func example(t testing.TB, file string, keys ...string) []byte {
	t.Helper()
	v, ok := exampleCache.Load(file)
	if !ok {
		b, err := os.ReadFile(filepath.Join("testdata", "examples", file))
		require.NoError(t, err)
		var m any
		require.NoError(t, json.Unmarshal(b, &m))
		exampleCache.Store(file, m)
		v = m
	}
	cur := v
	for _, k := range keys {
		obj, ok := cur.(map[string]any)
		require.True(t, ok, "%s: %v is not an object at %q", file, keys, k)
		cur, ok = obj[k]
		require.True(t, ok, "%s: no key %q (keys %v)", file, k, sortedKeys(obj))
	}
	b, err := json.Marshal(cur)
	require.NoError(t, err)
	return b
}

// exampleWith returns the example object at keys with fields set or replaced.
func exampleWith(t testing.TB, set map[string]any, file string, keys ...string) []byte {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(example(t, file, keys...), &m))
	for k, v := range set {
		m[k] = v
	}
	b, err := json.Marshal(m)
	require.NoError(t, err)
	return b
}

func sortedKeys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func mustTime(t testing.TB, s string) time.Time {
	t.Helper()
	tm, err := time.Parse(time.RFC3339Nano, s)
	require.NoError(t, err)
	return tm
}

// The example files used by the tests.
const (
	exLegacyExecute   = "2024-02-02-preview_execute_and_image.json"
	exLegacyBYOC      = "byoc_local_captures_2024-08-02-preview.json"
	exLegacyFilesList = "docs_2024-02-02-preview_files_list.json"
	exLegacySK        = "sk_dotnet_testdata_2024-02-02-preview_era.json"
	exSK2410          = "sk_dotnet_testdata_2024-10-02-preview.json"
	exBYOC2410        = "byoc_local_captures_2024-10-02-preview.json"
	exSync2510        = "2025-10-02-preview_CodeExecution_Execute_Sync.json"
	exNaNNone         = "2025-10-02-preview_CodeExecution_Execute_Result_NaN_and_None.json"
	exRecursive       = "2025-10-02-preview_SessionResourceFiles_List_Recursive.json"
	exShell           = "2025-10-02-preview_shell_and_jupyter_examples.json"
	exAsyncRunning    = "2025-02-02-preview_CodeExecution_Execute_Async_Running.json"
	exManagement      = "management_endpoints_examples.json"
)

// syntaxErrorStderr is the stderr of a real legacy execution that failed
// with a SyntaxError (the seed observation of the issue).
const syntaxErrorStderr = "illegal target for annotation (3407605186.py, line 6)  Cell In[2363], line 6\n    'filename': 'TemperatureData.csv'\n    ^\nSyntaxError: illegal target for annotation\n\n"

// echoIDWriter rewrites the top-level "id" of a JSON answer to POST
// executions to the request's operation-id, as the service echoes it (every
// spec example), so that canned bodies ("testExecutionId") answer the
// execution the client asked for. Bodies that are not one whole JSON object
// (cut or malformed on purpose) pass unchanged.
type echoIDWriter struct {
	http.ResponseWriter
	id string
}

func (e *echoIDWriter) Write(b []byte) (int, error) {
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) == nil {
		if _, ok := m["id"]; ok {
			m["id"], _ = json.Marshal(e.id)
			if nb, err := json.Marshal(m); err == nil {
				if _, err := e.ResponseWriter.Write(nb); err != nil {
					return 0, err
				}
				return len(b), nil
			}
		}
	}
	return e.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (Hijack).
func (e *echoIDWriter) Unwrap() http.ResponseWriter { return e.ResponseWriter }
