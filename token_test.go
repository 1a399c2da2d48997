package azsessions_test

// Credentials against the fake: failures before any request, token refresh
// between calls, one token fetch for many concurrent callers, and 401/403
// answers turned into *AuthError.

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/stretchr/testify/require"

	"github.com/azsessions/azsessions"
	"github.com/azsessions/azsessions/azsessionstest"
	"github.com/azsessions/azsessions/emulator"
)

// authSpy serves the fake (which requires a bearer token) through a wrapper
// that records the Authorization header of every request it sees.
type authSpy struct {
	srv  *azsessionstest.Server
	http *httptest.Server
	mu   sync.Mutex
	seen []string
}

func startAuthSpy(t *testing.T, version string) *authSpy {
	t.Helper()
	s := &authSpy{srv: azsessionstest.Start(t, withCells(&azsessionstest.Options{APIVersion: version, Options: emulator.Options{RequireToken: true}}))}
	s.http = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.seen = append(s.seen, r.Header.Get("Authorization"))
		s.mu.Unlock()
		s.srv.ServeHTTP(w, r)
	}))
	t.Cleanup(s.http.Close)
	return s
}

// inProcessAuthSpy is an authSpy served in the client's goroutine (no
// network: an emulator handler behind azsessions.InProcessTransport), for
// tests inside a testing/synctest bubble.
type inProcessAuthSpy struct {
	h    *emulator.Handler
	mu   sync.Mutex
	seen []string
}

func startInProcessAuthSpy(t *testing.T) *inProcessAuthSpy {
	t.Helper()
	h, err := emulator.NewHandler(emulator.Options{RequireToken: true, Executor: withCells(nil).Executor})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, h.Close()) })
	return &inProcessAuthSpy{h: h}
}

func (s *inProcessAuthSpy) client(t *testing.T, version string, cred azcore.TokenCredential) *azsessions.Client {
	t.Helper()
	o := &azsessions.ClientOptions{}
	o.APIVersion = version
	o.Transport = azsessions.InProcessTransport(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.seen = append(s.seen, r.Header.Get("Authorization"))
		s.mu.Unlock()
		s.h.ServeHTTP(w, r)
	}))
	o.InsecureAllowCredentialWithHTTP = true
	o.Retry.RetryDelay = 10 * time.Millisecond
	c, err := azsessions.NewClient("http://fake.invalid"+s.h.PoolPath(), cred, o)
	require.NoError(t, err)
	return c
}

func (s *inProcessAuthSpy) headers() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.seen...)
}

// client returns a client of the spy authenticating with cred.
func (s *authSpy) client(t *testing.T, cred azcore.TokenCredential) *azsessions.Client {
	t.Helper()
	o := &azsessions.ClientOptions{}
	o.Transport = s.http.Client()
	o.InsecureAllowCredentialWithHTTP = true
	o.Retry.RetryDelay = 10 * time.Millisecond
	c, err := azsessions.NewClient(s.http.URL+s.srv.Handler().PoolPath(), cred, o)
	require.NoError(t, err)
	return c
}

func (s *authSpy) headers() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.seen...)
}

// countingCredential hands out "tok-1", "tok-2", ... each valid for ttl,
// after an optional delay (to let concurrent callers pile up), or fails.
type countingCredential struct {
	ttl   time.Duration
	delay time.Duration
	empty bool
	err   error
	calls atomic.Int32
}

func (c *countingCredential) GetToken(ctx context.Context, o policy.TokenRequestOptions) (azcore.AccessToken, error) {
	n := c.calls.Add(1)
	if c.delay > 0 {
		select {
		case <-time.After(c.delay):
		case <-ctx.Done():
			return azcore.AccessToken{}, ctx.Err()
		}
	}
	if c.err != nil {
		return azcore.AccessToken{}, c.err
	}
	if len(o.Scopes) != 1 || o.Scopes[0] != azsessions.DefaultScope {
		return azcore.AccessToken{}, errors.New("unexpected scopes " + strings.Join(o.Scopes, ","))
	}
	tok := "tok-" + strconv.Itoa(int(n))
	if c.empty {
		tok = ""
	}
	return azcore.AccessToken{Token: tok, ExpiresOn: time.Now().Add(c.ttl)}, nil
}

// TestCredentialFailsBeforeAnyRequest: a credential that fails, or returns
// an empty token, stops every operation before a single request reaches the
// fake, with a clear error (and is not retried in a loop).
func TestCredentialFailsBeforeAnyRequest(t *testing.T) {
	cases := []struct {
		name string
		cred func() *countingCredential
		want string
	}{
		{"error", func() *countingCredential {
			return &countingCredential{ttl: time.Hour, err: errors.New("no az login session")}
		}, "no az login session"},
		{"empty token", func() *countingCredential { return &countingCredential{ttl: time.Hour, empty: true} }, "the credential returned an empty token"},
	}
	for _, version := range relOneOfEach {
		for _, tc := range cases {
			t.Run(version+"/"+tc.name, func(t *testing.T) {
				spy := startAuthSpy(t, version)
				cred := tc.cred()
				c := spy.client(t, cred)
				sess := c.NewSession()
				ctx := context.Background()
				ops := map[string]func() error{
					"Execute": func() error { _, err := sess.Execute(ctx, "1", nil); return err },
					"UploadFile": func() error {
						_, err := sess.UploadFile(ctx, "x.txt", strings.NewReader("x"), nil)
						return err
					},
					"ListFiles":    func() error { _, err := sess.NewListFilesPager(nil).NextPage(ctx); return err },
					"DownloadFile": func() error { _, err := sess.DownloadFile(ctx, "x.txt", nil); return err },
				}
				for name, op := range ops {
					err := op()
					require.ErrorContains(t, err, tc.want, name)
					require.NotErrorIs(t, err, azsessions.ErrExecutionOutcomeUnknown, name)
				}
				require.Empty(t, spy.headers(), "no request was sent")
				require.Zero(t, spy.srv.Requests(azsessionstest.RouteAny))
				require.LessOrEqual(t, int(cred.calls.Load()), len(ops), "the credential is asked once per operation, not retried")
			})
		}
	}
}

// TestTokenRefreshedBetweenCalls: the first token expires between two
// calls; the second call fetches a new one and the fake sees it. Fake clock
// (synctest): the minute the token lives passes at once.
func TestTokenRefreshedBetweenCalls(t *testing.T) {
	for _, version := range relOneOfEach {
		t.Run(version, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				spy := startInProcessAuthSpy(t)
				const ttl = time.Minute // under the session's 300 s cooldown
				cred := &countingCredential{ttl: ttl}
				sess := spy.client(t, version, cred).NewSession()
				ctx := context.Background()
				_, err := sess.Execute(ctx, "x = 1", nil)
				require.NoError(t, err)
				_, err = sess.UploadFile(ctx, "a.txt", strings.NewReader("a"), nil)
				require.NoError(t, err)
				require.Equal(t, []string{"Bearer tok-1", "Bearer tok-1"}, spy.headers(), "the token is cached while valid")

				time.Sleep(ttl + time.Second) // tok-1 expires (fake clock)

				resp, err := sess.Execute(ctx, "x + 1", nil)
				require.NoError(t, err)
				require.JSONEq(t, "2", string(resp.Result), "same session")
				seen := spy.headers()
				require.Len(t, seen, 3)
				require.Equal(t, "Bearer tok-2", seen[2], "the refreshed token is used")
				require.Equal(t, int32(2), cred.calls.Load())
			})
		})
	}
}

// TestTokenFetchedOnceForConcurrentCallers: 50 goroutines start at once on
// a fresh client; the credential is asked once and every request carries
// that token.
func TestTokenFetchedOnceForConcurrentCallers(t *testing.T) {
	const n = 50
	spy := startAuthSpy(t, azsessions.APIVersion20251002Preview)
	cred := &countingCredential{ttl: time.Hour, delay: 50 * time.Millisecond}
	c := spy.client(t, cred)
	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			<-start
			sess := c.NewSession()
			if i%2 == 0 {
				_, errs[i] = sess.Execute(context.Background(), "1", nil)
			} else {
				_, errs[i] = sess.UploadFile(context.Background(), "x.txt", strings.NewReader("x"), nil)
			}
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, i)
	}
	require.Equal(t, int32(1), cred.calls.Load(), "one token fetch for all callers")
	seen := spy.headers()
	require.Len(t, seen, n)
	for _, h := range seen {
		require.Equal(t, "Bearer tok-1", h)
	}
}

// TestAuthErrorsThroughFake: 401 and 403 answers, with the service's error
// codes, from the fake; every operation returns an *AuthError whose message
// points at the audience (401) or the Session Executor role (403), wrapping
// the *azcore.ResponseError; no retry, no look-up, and for Execute no
// "outcome unknown" (an auth failure proves nothing ran).
func TestAuthErrorsThroughFake(t *testing.T) {
	cases := []struct {
		name   string
		fault  *azsessionstest.Fault // nil: the emulator's own 401 for a missing token
		status int
		code   string
		hint   []string
	}{
		{"401 no token (emulator)", nil, http.StatusUnauthorized, emulator.CodeUnauthorized, []string{"audience https://dynamicsessions.io", azsessions.DefaultScope}},
		{"401 wrong audience", &azsessionstest.Fault{Status: http.StatusUnauthorized, Code: "InvalidAuthenticationTokenAudience"}, http.StatusUnauthorized, "InvalidAuthenticationTokenAudience", []string{"audience https://dynamicsessions.io"}},
		{"403 no role", &azsessionstest.Fault{Status: http.StatusForbidden, Code: "AuthorizationFailed"}, http.StatusForbidden, "AuthorizationFailed", []string{`"Azure ContainerApps Session Executor"`, "can take minutes"}},
	}
	for _, version := range relEveryVersion {
		for _, tc := range cases {
			t.Run(version+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				var c *azsessions.Client
				var srv *azsessionstest.Server
				if tc.fault == nil {
					srv = azsessionstest.Start(t, withCells(&azsessionstest.Options{APIVersion: version, Options: emulator.Options{RequireToken: true}}))
					var err error
					c, err = azsessions.NewClientWithNoCredential(srv.Endpoint(), &azsessions.ClientOptions{ClientOptions: azcore.ClientOptions{Transport: srv.HTTPClient()}})
					require.NoError(t, err)
				} else {
					srv = azsessionstest.Start(t, withCells(&azsessionstest.Options{APIVersion: version, TLS: true}))
					srv.InjectFault(azsessionstest.RouteAny, *tc.fault, 0)
					c = srv.Client()
				}
				sess := c.NewSession()
				ctx := context.Background()
				ops := map[string]func() error{
					"Execute": func() error { _, err := sess.Execute(ctx, "1", nil); return err },
					"UploadFile": func() error {
						_, err := sess.UploadFile(ctx, "x.txt", strings.NewReader("x"), nil)
						return err
					},
					"ListFiles":    func() error { _, err := sess.NewListFilesPager(nil).NextPage(ctx); return err },
					"GetFile":      func() error { _, err := sess.GetFile(ctx, "x.txt", nil); return err },
					"DownloadFile": func() error { _, err := sess.DownloadFile(ctx, "x.txt", nil); return err },
					"DeleteFile":   func() error { _, err := sess.DeleteFile(ctx, "x.txt", nil); return err },
				}
				if !relIsLegacy(version) {
					ops["BeginExecute"] = func() error { _, err := sess.BeginExecute(ctx, "1", nil); return err }
				}
				for name, op := range ops {
					before := srv.Requests(azsessionstest.RouteAny)
					err := op()
					var ae *azsessions.AuthError
					require.ErrorAs(t, err, &ae, name)
					var re *azcore.ResponseError
					require.ErrorAs(t, err, &re, name)
					require.Equal(t, tc.status, re.StatusCode, name)
					require.Equal(t, tc.code, re.ErrorCode, name)
					for _, h := range tc.hint {
						require.Contains(t, err.Error(), h, name)
					}
					if tc.status == http.StatusUnauthorized {
						require.NotContains(t, err.Error(), azsessions.RoleSessionExecutor, name)
					}
					require.NotErrorIs(t, err, azsessions.ErrExecutionOutcomeUnknown, name)
					want := 1
					if tc.status == http.StatusUnauthorized && tc.fault != nil {
						want = 2 // a credentialed client sends a 401'd request once more with a fresh token
					}
					require.Equal(t, want, srv.Requests(azsessionstest.RouteAny)-before, "%s: not retried (a 401 once), no look-up", name)
				}
				require.Zero(t, srv.Executions())
			})
		}
	}
}
