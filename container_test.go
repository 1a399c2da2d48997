package azsessions

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/streaming"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// containerPool is a fake custom-container pool: TLS, a credential, and a
// handler standing for the session's container.
type containerPool struct {
	srv    *httptest.Server
	client *Client
	hits   atomic.Int32
}

func newContainerPool(t *testing.T, h http.HandlerFunc) *containerPool {
	t.Helper()
	p := &containerPool{}
	p.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.hits.Add(1)
		h(w, r)
	}))
	t.Cleanup(p.srv.Close)
	co := &ClientOptions{}
	co.Transport = p.srv.Client()
	co.Retry.RetryDelay = time.Millisecond
	c, err := NewClient(p.srv.URL, &fake.TokenCredential{}, co)
	require.NoError(t, err)
	p.client = c
	return p
}

// TestDoPassThrough: method, path, query, headers and body reach the
// container as the caller wrote them, with identifier and the token added
// and no api-version.
func TestDoPassThrough(t *testing.T) {
	cases := []struct {
		method, target, body string
	}{
		{http.MethodGet, "/api/items?limit=5&tag=a%20b", ""},
		{http.MethodPost, "/api/items", `{"name":"x"}`},
		{http.MethodPut, "/api/items/7", `{"name":"y"}`},
		{http.MethodPatch, "/api/items/7", `{"name":"z"}`},
		{http.MethodDelete, "/api/items/7?force=true", ""},
		{http.MethodGet, "/", ""},
	}
	for _, tc := range cases {
		t.Run(tc.method+" "+tc.target, func(t *testing.T) {
			p := newContainerPool(t, func(w http.ResponseWriter, r *http.Request) {
				assert.Equal(t, tc.method, r.Method)
				want, _ := http.NewRequest(tc.method, tc.target, nil)
				assert.Equal(t, want.URL.EscapedPath(), r.URL.EscapedPath())
				q := r.URL.Query()
				assert.Equal(t, testIdentifier, q.Get("identifier"))
				assert.False(t, q.Has("api-version"))
				for k, vs := range want.URL.Query() {
					assert.Equal(t, vs, q[k], "query %s", k)
				}
				assert.Equal(t, "Bearer "+fakeToken, r.Header.Get("Authorization"))
				assert.Equal(t, "v1", r.Header.Get("X-Custom"))
				assert.Contains(t, r.Header.Get("User-Agent"), userAgentPrefix)
				b, _ := io.ReadAll(r.Body)
				assert.Equal(t, tc.body, string(b))
				w.Header().Set("X-From-Container", "yes")
				w.WriteHeader(http.StatusTeapot)
				_, _ = io.WriteString(w, "from the container")
			})
			var body io.Reader
			if tc.body != "" {
				body = strings.NewReader(tc.body)
			}
			req, err := http.NewRequest(tc.method, tc.target, body)
			require.NoError(t, err)
			req.Header.Set("X-Custom", "v1")
			resp, err := p.client.Session(testIdentifier).Do(context.Background(), req, nil)
			require.NoError(t, err, "a non-2xx status is the container's answer, not an error")
			defer resp.Body.Close()
			require.Equal(t, http.StatusTeapot, resp.StatusCode)
			require.Equal(t, "yes", resp.Header.Get("X-From-Container"))
			b, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			require.Equal(t, "from the container", string(b))
			require.Equal(t, int32(1), p.hits.Load())
		})
	}
}

// TestDoStreamsBothWays: the request body is sent while the caller is still
// writing it, and the response body arrives while the container is still
// writing it (a buffering client would deadlock here until ctx ends).
func TestDoStreamsBothWays(t *testing.T) {
	gotFirst := make(chan struct{})
	sendSecond := make(chan struct{})
	p := newContainerPool(t, func(w http.ResponseWriter, r *http.Request) {
		assert.NoError(t, http.NewResponseController(w).EnableFullDuplex())
		br := bufio.NewReader(r.Body)
		line, err := br.ReadString('\n')
		assert.NoError(t, err)
		assert.Equal(t, "first\n", line)
		close(gotFirst)
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, "ack first\n")
		http.NewResponseController(w).Flush()
		rest, _ := io.ReadAll(br)
		assert.Equal(t, "second\n", string(rest))
		<-sendSecond
		_, _ = io.WriteString(w, "ack second\n")
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pr, pw := io.Pipe()
	req, err := http.NewRequest(http.MethodPost, "/stream", pr)
	require.NoError(t, err)
	go func() {
		_, _ = io.WriteString(pw, "first\n")
		select {
		case <-gotFirst:
			_, _ = io.WriteString(pw, "second\n")
			pw.Close()
		case <-ctx.Done():
			pw.CloseWithError(ctx.Err())
		}
	}()
	resp, err := p.client.Session(testIdentifier).Do(ctx, req, nil)
	require.NoError(t, err)
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "ack first\n", line)
	close(sendSecond)
	rest, err := io.ReadAll(br)
	require.NoError(t, err)
	require.Equal(t, "ack second\n", string(rest))
}

// TestDoRetries: only idempotent requests with a rewindable (or no) body are
// sent again, unless the caller opts in; an unrewindable body never is.
func TestDoRetries(t *testing.T) {
	cases := []struct {
		name   string
		method string
		body   func() io.Reader
		opt    bool
		status int
		want   int32
	}{
		{"GET 503", http.MethodGet, nil, false, http.StatusServiceUnavailable, 2},
		{"PUT seekable 503", http.MethodPut, func() io.Reader { return streaming.NopCloser(bytes.NewReader([]byte("v"))) }, false, http.StatusServiceUnavailable, 2},
		{"PUT stream 503", http.MethodPut, func() io.Reader { return strings.NewReader("v") }, false, http.StatusServiceUnavailable, 1},
		{"POST 503", http.MethodPost, func() io.Reader { return streaming.NopCloser(bytes.NewReader([]byte("v"))) }, false, http.StatusServiceUnavailable, 1},
		{"POST 401", http.MethodPost, func() io.Reader { return streaming.NopCloser(bytes.NewReader([]byte("v"))) }, false, http.StatusUnauthorized, 1},
		{"POST 429", http.MethodPost, nil, false, http.StatusTooManyRequests, 1},
		{"POST 503 opted in", http.MethodPost, func() io.Reader { return streaming.NopCloser(bytes.NewReader([]byte("v"))) }, true, http.StatusServiceUnavailable, 2},
		{"POST 401 opted in", http.MethodPost, func() io.Reader { return streaming.NopCloser(bytes.NewReader([]byte("v"))) }, true, http.StatusUnauthorized, 2},
		{"POST stream 503 opted in", http.MethodPost, func() io.Reader { return strings.NewReader("v") }, true, http.StatusServiceUnavailable, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var n atomic.Int32
			p := newContainerPool(t, func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				if tc.body != nil {
					assert.Equal(t, "v", string(b), "every try carries the whole body")
				}
				if n.Add(1) == 1 {
					w.WriteHeader(tc.status)
					return
				}
				w.WriteHeader(http.StatusOK)
			})
			var body io.Reader
			if tc.body != nil {
				body = tc.body()
			}
			req, err := http.NewRequest(tc.method, "/op", body)
			require.NoError(t, err)
			if rsc, ok := body.(io.ReadSeekCloser); ok {
				req.Body = rsc // http.NewRequest wraps unknown readers in a NopCloser
			}
			resp, err := p.client.Session(testIdentifier).Do(context.Background(), req, &DoOptions{RetryNonIdempotent: tc.opt})
			require.NoError(t, err)
			resp.Body.Close()
			require.Equal(t, tc.want, p.hits.Load())
		})
	}
}

// TestDoNeverFollowsRedirects: a redirect to another host is returned, and
// neither the token nor the identifier reaches that host.
func TestDoNeverFollowsRedirects(t *testing.T) {
	var elsewhere atomic.Int32
	other := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { elsewhere.Add(1) }))
	defer other.Close()
	for _, status := range []int{http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			p := newContainerPool(t, func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, other.URL+"/steal?identifier="+testIdentifier, status)
			})
			req, err := http.NewRequest(http.MethodGet, "/go", nil)
			require.NoError(t, err)
			resp, err := p.client.Session(testIdentifier).Do(context.Background(), req, nil)
			require.NoError(t, err)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.Equal(t, status, resp.StatusCode)
			require.Empty(t, resp.Header.Get("Location"))
			require.NotContains(t, string(b), testIdentifier)
			require.Zero(t, elsewhere.Load())
		})
	}
}

// TestDoRedactsIdentifier: transport errors never carry the identifier.
func TestDoRedactsIdentifier(t *testing.T) {
	var once sync.Once
	p := newContainerPool(t, func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() {})
		conn, _, err := http.NewResponseController(w).Hijack()
		if assert.NoError(t, err) {
			conn.Close()
		}
	})
	req, err := http.NewRequest(http.MethodPost, "/api?x=1", strings.NewReader("body"))
	require.NoError(t, err)
	_, err = p.client.Session(testIdentifier).Do(context.Background(), req, nil)
	require.Error(t, err)
	require.NotContains(t, err.Error(), testIdentifier)
	require.Equal(t, int32(1), p.hits.Load(), "a POST is not sent again")
}

// TestDoValidation: bad requests fail before any I/O.
func TestDoValidation(t *testing.T) {
	mk := func(target string) *http.Request {
		r, err := http.NewRequest(http.MethodGet, target, nil)
		require.NoError(t, err)
		return r
	}
	cases := []struct {
		name string
		id   string
		req  *http.Request
		msg  string
	}{
		{"nil", testIdentifier, nil, "nil"},
		{"absolute", testIdentifier, mk("https://evil.example/api"), "relative"},
		{"identifier in query", testIdentifier, mk("/api?identifier=other"), "already has an identifier"},
		{"bad identifier", "no", mk("/api"), "invalid session identifier"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newContainerPool(t, func(w http.ResponseWriter, r *http.Request) {})
			_, err := p.client.Session(tc.id).Do(context.Background(), tc.req, nil)
			require.ErrorContains(t, err, tc.msg)
			require.NotContains(t, err.Error(), "evil.example")
			require.Zero(t, p.hits.Load())
		})
	}
}

// TestContainerManagementRoutes: GetContainerSession and
// NewListContainerSessionsPager send Learn's requests (POST
// .management/getSession?identifier=&api-version=, POST
// .management/listSessions?skip=&api-version=, nextLink followed with POST)
// and read Learn's answers (examples read as data): expiresAt, value,
// count, nextLink (null on the last page). An unknown session is
// IsSessionNotFound.
func TestContainerManagementRoutes(t *testing.T) {
	const version = APIVersion20250202Preview
	p := setup(t, version)
	ctx := context.Background()
	p.handle("POST /.management/getSession", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("identifier") == "nobody-here" {
			writeJSON(w, http.StatusBadRequest, []byte(`{"error":{"code":"SessionWithIdentifierNotFound","message":"no session"}}`), "x-ms-error-code", "SessionWithIdentifierNotFound")
			return
		}
		wantQuery(t, r, map[string]string{"api-version": version, "identifier": "user-123"})
		writeJSON(w, http.StatusOK, example(t, exManagement, "custom_container_getSession_doc", "response200"))
	})
	p.handle("POST /.management/listSessions", func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Query().Get("skip") {
		case "0":
			wantQuery(t, r, map[string]string{"api-version": version, "skip": "0"})
			// Learn's nextLink has no api-version: the client adds its own.
			writeJSON(w, http.StatusOK, exampleWith(t, map[string]any{"nextLink": p.url("/.management/listSessions?skip=300")}, exManagement, "custom_container_listSessions_doc", "response200"))
		case "300":
			wantQuery(t, r, map[string]string{"api-version": version, "skip": "300"})
			writeJSON(w, http.StatusOK, exampleWith(t, map[string]any{"nextLink": nil, "value": []any{}, "count": 0}, exManagement, "custom_container_listSessions_doc", "response200"))
		default:
			t.Errorf("unexpected query %q", r.URL.RawQuery)
		}
	})

	got, err := p.client.Session("user-123").GetContainerSession(ctx, nil)
	require.NoError(t, err)
	require.Equal(t, SessionProperties{
		Identifier:     "user-123",
		ETag:           "a1b2c3d4",
		ExpiresAt:      mustTime(t, "2026-04-30T14:30:00Z"),
		CreatedAt:      mustTime(t, "2026-04-30T13:30:00Z"),
		LastAccessedAt: mustTime(t, "2026-04-30T14:29:00Z"),
	}, got.SessionProperties)
	_, err = p.client.Session("nobody-here").GetContainerSession(ctx, nil)
	require.True(t, IsSessionNotFound(err), "%v", err)

	pager := p.client.NewListContainerSessionsPager(nil)
	var ids []string
	pages := 0
	for pager.More() {
		page, err := pager.NextPage(ctx)
		require.NoError(t, err)
		pages++
		for _, s := range page.Sessions {
			ids = append(ids, s.Identifier)
			require.Equal(t, mustTime(t, "2026-04-30T14:30:00Z"), s.ExpiresAt)
		}
	}
	require.Equal(t, 2, pages)
	require.Equal(t, []string{"user-123", "user-456"}, ids)

	_, err = p.client.Session("ab").GetContainerSession(ctx, nil)
	require.ErrorIs(t, err, ErrInvalidIdentifier)
}
