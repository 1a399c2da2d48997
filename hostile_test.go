package azsessions

// Issue 12, items 6–11: a hostile or broken server must not take the token,
// the identifier or the memory. Each case failed on the client before the
// guards in client.go (guardTransport, nextPageOptions, responseError,
// retryUnauthorizedPolicy) and files.go (DownloadFileToPath's size check).

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	azlog "github.com/Azure/azure-sdk-for-go/sdk/azcore/log"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/stretchr/testify/require"
)

// hostileIdentifier is an identifier the tests look for in everything the
// client lets out.
const hostileIdentifier = "secret-identifier-4f1d"

// evilServer records what reaches it: the hostile origin of a nextLink or a
// redirect. It uses the same test certificate as the pool's TLS server, so
// the pool's srv.Client() would trust it.
type evilServer struct {
	srv      *httptest.Server
	requests atomic.Int32
	mu       sync.Mutex
	auth     []string
}

func startEvil(t *testing.T, tls bool) *evilServer {
	e := &evilServer{}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.requests.Add(1)
		e.mu.Lock()
		e.auth = append(e.auth, r.Header.Get("Authorization"))
		e.mu.Unlock()
		writeJSON(w, http.StatusOK, []byte(`{"value":[],"sessions":[]}`))
	})
	if tls {
		e.srv = httptest.NewTLSServer(h)
	} else {
		e.srv = httptest.NewServer(h)
	}
	t.Cleanup(e.srv.Close)
	return e
}

// TestNextLinkOnlyToOwnOrigin (item 6): a nextLink to another origin (host,
// port or scheme) is refused with a clear error, for both pagers; the token
// and the identifier never reach it.
func TestNextLinkOnlyToOwnOrigin(t *testing.T) {
	type pagerCase struct {
		name, route string
		body        func(next string) string
		next        func(c *Client) error
	}
	pagers := []pagerCase{
		{"files", "GET /files", func(next string) string { return `{"value":[],"nextLink":"` + next + `"}` }, func(c *Client) error {
			pg := c.Session(hostileIdentifier).NewListFilesPager(nil)
			if _, err := pg.NextPage(context.Background()); err != nil {
				return err
			}
			_, err := pg.NextPage(context.Background())
			return err
		}},
		{"sessions", "GET /listSessions", func(next string) string { return `{"sessions":[],"nextLink":"` + next + `"}` }, func(c *Client) error {
			pg := c.NewListSessionsPager(nil)
			if _, err := pg.NextPage(context.Background()); err != nil {
				return err
			}
			_, err := pg.NextPage(context.Background())
			return err
		}},
	}
	for _, pc := range pagers {
		t.Run(pc.name, func(t *testing.T) {
			evil := startEvil(t, true)
			p := setup(t, APIVersion20251002Preview, withCredential())
			p.handle(pc.route, func(w http.ResponseWriter, r *http.Request) {
				writeJSON(w, http.StatusOK, []byte(pc.body(evil.srv.URL+poolPath+"/files?page=2&identifier="+hostileIdentifier)))
			})
			err := pc.next(p.client)
			require.ErrorContains(t, err, "another origin")
			require.NotContains(t, err.Error(), hostileIdentifier)
			require.Zero(t, evil.requests.Load(), "nothing sent to another origin (it got %v)", evil.auth)
		})
	}
	t.Run("same origin is followed", func(t *testing.T) {
		p := setup(t, APIVersion20251002Preview, withCredential())
		n := 0
		p.handle("GET /files", func(w http.ResponseWriter, r *http.Request) {
			n++
			if n == 1 {
				writeJSON(w, http.StatusOK, []byte(`{"value":[],"nextLink":"`+p.url("/files?page=2")+`"}`))
				return
			}
			writeJSON(w, http.StatusOK, []byte(`{"value":[]}`))
		})
		pg := p.client.Session(testIdentifier).NewListFilesPager(nil)
		for pg.More() {
			_, err := pg.NextPage(context.Background())
			require.NoError(t, err)
		}
		require.Equal(t, 2, n)
	})
}

// TestRedirectsNotFollowed (item 7): the client follows no redirect (the
// service does not redirect): not to another host, not to the same host
// over plain http, and a redirected execution is not sent again. The 3xx
// comes back as an *azcore.ResponseError.
func TestRedirectsNotFollowed(t *testing.T) {
	for _, status := range []int{http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			evilTLS := startEvil(t, true)
			evilHTTP := startEvil(t, false)
			p := setup(t, APIVersion20251002Preview, withCredential())
			p.handle("GET /files", func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, evilTLS.srv.URL+poolPath+"/files?"+r.URL.RawQuery, status)
			})
			var posts atomic.Int32
			p.handle("POST /executions", func(w http.ResponseWriter, r *http.Request) {
				posts.Add(1)
				// same host and path, plain http
				http.Redirect(w, r, strings.Replace(p.url("/executions"), "https://", "http://", 1)+"?"+r.URL.RawQuery, status)
			})
			p.handle("GET /executions/{id}", func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, evilHTTP.srv.URL+"/x?"+r.URL.RawQuery, status)
			})
			sess := p.client.Session(hostileIdentifier)
			_, err := sess.NewListFilesPager(nil).NextPage(context.Background())
			var re *azcore.ResponseError
			require.ErrorAs(t, err, &re)
			require.Equal(t, status, re.StatusCode)
			require.NotContains(t, err.Error(), hostileIdentifier)

			_, err = sess.Execute(context.Background(), "print(1)", nil)
			require.Error(t, err)
			require.NotContains(t, err.Error(), hostileIdentifier)
			require.Equal(t, int32(1), posts.Load(), "the execution was not sent again")
			require.Zero(t, evilTLS.requests.Load()+evilHTTP.requests.Load(), "nothing followed a redirect")
		})
	}
}

// TestResponseSizeCapped (item 8): a JSON answer over MaxResponseSize fails
// with an error naming the limit, with or without Content-Length, without
// reading it all; a download over the cap streams.
func TestResponseSizeCapped(t *testing.T) {
	serveHuge := func(withLength bool, size int64) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			if withLength {
				w.Header().Set("Content-Length", fmt.Sprint(size))
			}
			w.WriteHeader(http.StatusOK)
			_, _ = io.WriteString(w, `{"value":[`)
			if withLength {
				// The client refuses the body by its Content-Length, before
				// reading any of it: the rest is not sent (a client that
				// read it would meet the connection's end, not the cap).
				return
			}
			chunk := strings.Repeat(" ", 1<<16)
			for written := int64(0); written < size-20; written += int64(len(chunk)) {
				if _, err := io.WriteString(w, chunk); err != nil {
					return // the client gave up, as it should
				}
			}
		}
	}
	// With a Content-Length the real 32 MiB cap refuses the body before
	// reading it (only the first bytes are sent). Without one the body is
	// read up to the cap: the same cappedBody at a 1 MiB limit
	// (responseLimit) keeps the test fast.
	for _, tc := range []struct {
		withLength bool
		limit      int64
	}{{true, MaxResponseSize}, {false, 1 << 20}} {
		t.Run(fmt.Sprintf("Content-Length=%v", tc.withLength), func(t *testing.T) {
			responseLimit = tc.limit
			t.Cleanup(func() { responseLimit = MaxResponseSize })
			size := tc.limit + 1<<20
			p := setup(t, APIVersion20251002Preview)
			p.handle("GET /files", serveHuge(tc.withLength, size))
			p.handle("GET /metadata", serveHuge(tc.withLength, size))
			p.handle("POST /executions", func(w http.ResponseWriter, r *http.Request) {
				size := int(tc.limit) + 10
				w.Header().Set("Content-Type", "application/json")
				if tc.withLength {
					w.Header().Set("Content-Length", fmt.Sprint(size))
					size = 100 // refused by its length: the rest is not sent
				}
				w.WriteHeader(http.StatusInternalServerError)
				_, _ = io.WriteString(w, strings.Repeat("x", size))
			})
			p.handle("GET /executions/{id}", serveHuge(tc.withLength, size))
			_, err := p.client.Session(testIdentifier).NewListFilesPager(nil).NextPage(context.Background())
			require.ErrorContains(t, err, "MaxResponseSize")
			require.ErrorContains(t, err, fmt.Sprintf("limit of %d bytes", tc.limit))
			_, err = p.client.GetMetadata(context.Background(), nil)
			require.ErrorContains(t, err, "MaxResponseSize")
			_, err = p.client.Session(testIdentifier).Execute(context.Background(), "x", nil)
			require.ErrorContains(t, err, "MaxResponseSize", "an error body is capped too")
			require.ErrorIs(t, err, ErrExecutionOutcomeUnknown)
			require.Equal(t, 1, p.requestsTo("GET", "/files"), "a body over the cap is not fetched again")
		})
	}
	t.Run("download streams", func(t *testing.T) {
		// over the cap, lowered to 1 MiB (responseLimit): the cap's size
		// does not matter to a body that is not capped
		responseLimit = 1 << 20
		t.Cleanup(func() { responseLimit = MaxResponseSize })
		huge := responseLimit + 1<<20
		p := setup(t, APIVersion20251002Preview)
		p.handle("GET /files/{name}/content", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", fmt.Sprint(huge))
			chunk := make([]byte, 1<<16)
			for written := int64(0); written < huge; written += int64(len(chunk)) {
				_, _ = w.Write(chunk[:min(int64(len(chunk)), huge-written)])
			}
		})
		resp, err := p.client.Session(testIdentifier).DownloadFile(context.Background(), "big.bin", nil)
		require.NoError(t, err)
		defer resp.Body.Close()
		n, err := io.Copy(io.Discard, resp.Body)
		require.NoError(t, err)
		require.Equal(t, huge, n)
	})
}

// TestDownloadCutWithoutLengthDetected (item 9): a download framed by the
// connection's close (no Content-Length) and cut short is not accepted by
// DownloadFileToPath: the size GetFile reports decides; nothing is left.
func TestDownloadCutWithoutLengthDetected(t *testing.T) {
	const full = 100000
	p := setup(t, APIVersion20251002Preview)
	p.handle("GET /files/{name}/content", func(w http.ResponseWriter, r *http.Request) {
		conn, buf, err := http.NewResponseController(w).Hijack()
		require.NoError(t, err)
		defer conn.Close()
		_, _ = buf.WriteString("HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nConnection: close\r\n\r\n")
		_, _ = buf.Write(make([]byte, full/2))
		_ = buf.Flush()
	})
	p.handle("GET /files/{name}", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, []byte(fmt.Sprintf(`{"name":"data.bin","type":"File","sizeInBytes":%d,"lastModifiedAt":"2025-01-01T00:00:00Z"}`, full)))
	})
	dir := t.TempDir()
	_, err := p.client.Session(testIdentifier).DownloadFileToPath(context.Background(), "data.bin", filepath.Join(dir, "data.bin"), nil)
	require.ErrorContains(t, err, "download incomplete")
	entries, rerr := os.ReadDir(dir)
	require.NoError(t, rerr)
	require.Empty(t, entries, "no partial file")
}

// TestIdentifierRedactedEverywhere (item 10): the identifier reaches neither
// an error nor azcore's log: not when the service's error text echoes it,
// not from a malformed nextLink carrying it, not from a redirect to an
// unreachable address carrying it.
func TestIdentifierRedactedEverywhere(t *testing.T) {
	var mu sync.Mutex
	var logs []string
	azlog.SetListener(func(ev azlog.Event, msg string) {
		mu.Lock()
		logs = append(logs, msg)
		mu.Unlock()
	})
	t.Cleanup(func() { azlog.SetListener(nil) })
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	deadAddr := dead.Addr().String()
	require.NoError(t, dead.Close()) // connections to it are refused

	p := setup(t, APIVersion20251002Preview, withOptions(func(o *ClientOptions) { o.Retry.MaxRetries = -1 }))
	p.handle("GET /files/{name}", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusBadRequest, "SessionRequestValidationFailed",
			"identifier '"+r.URL.Query().Get("identifier")+"' is not valid (escaped: "+r.URL.RawQuery+")")
	})
	p.handle("GET /files", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, []byte(`{"value":[],"nextLink":"http://[::1%zz/files?identifier=`+hostileIdentifier+`"}`))
	})
	p.handle("DELETE /files/{name}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://"+deadAddr+"/files?identifier="+hostileIdentifier, http.StatusTemporaryRedirect)
	})
	sess := p.client.Session(hostileIdentifier)
	ctx := context.Background()
	var errs []error
	_, err = sess.GetFile(ctx, "x.txt", nil)
	errs = append(errs, err)
	pg := sess.NewListFilesPager(nil)
	_, err = pg.NextPage(ctx)
	require.NoError(t, err)
	_, err = pg.NextPage(ctx)
	errs = append(errs, err)
	_, err = sess.DeleteFile(ctx, "x.txt", nil)
	errs = append(errs, err)
	for i, err := range errs {
		require.Error(t, err, i)
		require.NotContains(t, err.Error(), hostileIdentifier, "error %d: %v", i, err)
	}
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, logs)
	for _, l := range logs {
		require.NotContains(t, l, hostileIdentifier)
	}
}

// rotatingCredential hands out a new token on every call: "token-1",
// "token-2", ...; each expires in an hour.
type rotatingCredential struct{ n atomic.Int32 }

func (c *rotatingCredential) GetToken(context.Context, policy.TokenRequestOptions) (azcore.AccessToken, error) {
	return azcore.AccessToken{Token: fmt.Sprintf("token-%d", c.n.Add(1)), ExpiresOn: time.Now().Add(time.Hour)}, nil
}

// TestUnauthorizedRetriedOnceWithFreshToken (item 11): a token the service
// no longer accepts (it expired between the cache's check and the service's)
// gives a 401; the client fetches a fresh token and sends once more. The
// code runs once; a second 401 is returned as *AuthError.
func TestUnauthorizedRetriedOnceWithFreshToken(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "Bearer token-1" {
			writeError(w, http.StatusUnauthorized, "InvalidAuthenticationToken", "the token expired")
			return
		}
		if strings.Contains(r.URL.Path, "/always401/") {
			writeError(w, http.StatusUnauthorized, "InvalidAuthenticationToken", "no")
			return
		}
		_, _ = io.Copy(io.Discard, bufio.NewReader(r.Body))
		writeJSON(w, http.StatusOK, newResult("Succeeded", "once\n", "", "1"))
	}))
	defer srv.Close()
	cred := &rotatingCredential{}
	co := &ClientOptions{}
	co.Transport = srv.Client()
	c, err := NewClient(srv.URL+poolPath, cred, co)
	require.NoError(t, err)
	resp, err := c.Session(testIdentifier).Execute(context.Background(), "print('once')", nil)
	require.NoError(t, err)
	require.Equal(t, "once\n", resp.Stdout)
	require.Equal(t, int32(2), cred.n.Load(), "one fresh token")

	c2, err := NewClient(srv.URL+poolPath+"/always401", cred, co)
	require.NoError(t, err)
	_, err = c2.Session(testIdentifier).GetFile(context.Background(), "x", nil)
	var ae *AuthError
	require.ErrorAs(t, err, &ae)
}
