package azsessions

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/stretchr/testify/require"
)

// TestServiceErrors answers every operation with an error and checks the
// *azcore.ResponseError (status, error code from the header or the body) and,
// for 401/403, the *AuthError and its hint.
func TestServiceErrors(t *testing.T) {
	cases := []struct {
		name     string
		status   int
		header   string // x-ms-error-code
		body     string
		wantCode string
		auth     bool
		hint     string
	}{
		{"400 header and body", http.StatusBadRequest, "SessionWithIdentifierNotFound", `{"error":{"code":"SessionWithIdentifierNotFound","message":"session not found"}}`, "SessionWithIdentifierNotFound", false, ""},
		{"400 body only", http.StatusBadRequest, "", `{"error":{"code":"SessionRequestValidationFailed","message":"..."}}`, "SessionRequestValidationFailed", false, ""},
		{"404 header only, no body", http.StatusNotFound, "NotFound", "", "NotFound", false, ""},
		{"409 no code at all", http.StatusConflict, "", "", "", false, ""},
		{"413 plain string body", http.StatusRequestEntityTooLarge, "", `"file too large"`, "", false, ""},
		{"400 live body with traceId", http.StatusBadRequest, "", `{"error":{"code":"DynamicApisNotAllowed","message":"Dynamic API calls are not allowed for session pool 'poolname': 'the pool is not dynamic'.","traceId":"abc"}}`, "DynamicApisNotAllowed", false, ""},
		{"401 no body", http.StatusUnauthorized, "", "", "", true, "https://dynamicsessions.io"},
		{"401 with body", http.StatusUnauthorized, "InvalidAuthenticationToken", `{"error":{"code":"InvalidAuthenticationToken","message":"audience is invalid"}}`, "InvalidAuthenticationToken", true, "https://dynamicsessions.io/.default"},
		{"403 no body", http.StatusForbidden, "", "", "", true, `"Azure ContainerApps Session Executor"`},
		{"403 with body", http.StatusForbidden, "", `{"error":{"code":"AuthorizationFailed","message":"no role"}}`, "AuthorizationFailed", true, RoleSessionExecutor},
	}
	// One fake pool (TLS, credential) per api-version answers its cases one
	// after another (a TLS server and handshake per case cost more than the
	// operations).
	for _, version := range []string{APIVersion20240202Preview, APIVersion20251002Preview} {
		t.Run(version, func(t *testing.T) {
			var mu sync.Mutex
			current := cases[0] // the running subtest's case
			p := setup(t, version, withCredential(), withFallback(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				c := current
				mu.Unlock()
				if c.header != "" {
					w.Header().Set("x-ms-error-code", c.header)
				}
				if c.body != "" {
					w.Header().Set("Content-Type", "application/json")
				}
				w.WriteHeader(c.status)
				_, _ = w.Write([]byte(c.body))
			}))
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					c := tc
					mu.Lock()
					current = c
					mu.Unlock()
					for _, op := range allOps(t, version, "x.txt", t.TempDir()) {
						before := p.count()
						err := op.call(context.Background(), p.client.Session(testIdentifier))
						require.Error(t, err, op.name)
						var re *azcore.ResponseError
						require.ErrorAs(t, err, &re, op.name)
						require.Equal(t, c.status, re.StatusCode, op.name)
						require.Equal(t, c.wantCode, re.ErrorCode, op.name)
						require.NotNil(t, re.RawResponse, op.name)
						require.NotErrorIs(t, err, ErrExecutionOutcomeUnknown, op.name)
						var ae *AuthError
						if c.auth {
							require.ErrorAs(t, err, &ae, op.name)
							require.Same(t, re, ae.ResponseError)
							require.Contains(t, err.Error(), c.hint, op.name)
						} else {
							require.False(t, errors.As(err, &ae), op.name)
						}
						want := 1
						if c.status == http.StatusUnauthorized {
							want = 2 // a 401 is sent once more with a freshly fetched token
						}
						require.Equal(t, want, p.count()-before, "%s: a 4xx is not retried (a 401 once)", op.name)
					}
				})
			}
		})
	}
}

// TestAuthErrorMessages pins the hints.
func TestAuthErrorMessages(t *testing.T) {
	mk := func(status int) *AuthError {
		return &AuthError{ResponseError: &azcore.ResponseError{StatusCode: status, ErrorCode: "X"}}
	}
	require.Contains(t, mk(401).Error(), "audience https://dynamicsessions.io")
	require.NotContains(t, mk(401).Error(), RoleSessionExecutor)
	require.Contains(t, mk(403).Error(), `role "Azure ContainerApps Session Executor"`)
	require.Nil(t, wrapAuthError(nil))
	plain := errors.New("x")
	require.Same(t, plain, wrapAuthError(plain))
	re := &azcore.ResponseError{StatusCode: 404}
	require.Same(t, error(re), wrapAuthError(re))
}

type emptyTokenCredential struct{}

func (emptyTokenCredential) GetToken(context.Context, policy.TokenRequestOptions) (azcore.AccessToken, error) {
	return azcore.AccessToken{Token: "", ExpiresOn: time.Now().Add(time.Hour)}, nil
}

// TestCredentialErrorBeforeIO: a failing or empty-token credential stops the
// request before it is sent, and the scope asked for is DefaultScope.
func TestCredentialErrorBeforeIO(t *testing.T) {
	p := setup(t, APIVersion20251002Preview, withCredential())
	opts := &ClientOptions{}
	opts.Transport = p.srv.Client()
	opts.Retry.RetryDelay = time.Millisecond

	c, err := NewClient(p.Endpoint, emptyTokenCredential{}, opts)
	require.NoError(t, err)
	_, err = c.Session(testIdentifier).GetFile(context.Background(), "x", nil)
	require.ErrorContains(t, err, "empty token")

	failing := &fake.TokenCredential{}
	failing.SetError(errors.New("no login"))
	c, err = NewClient(p.Endpoint, failing, opts)
	require.NoError(t, err)
	_, err = c.Session(testIdentifier).Execute(context.Background(), "1", nil)
	require.ErrorContains(t, err, "no login")
	p.requireNoIO(t)

	var scopes []string
	c, err = NewClient(p.Endpoint, scopeRecorder{&scopes}, opts)
	require.NoError(t, err)
	happyRoutes(t, p, nil)
	_, err = c.Session(testIdentifier).GetFile(context.Background(), "x", nil)
	require.NoError(t, err)
	require.Equal(t, []string{DefaultScope}, scopes)
}

type scopeRecorder struct{ scopes *[]string }

func (s scopeRecorder) GetToken(_ context.Context, o policy.TokenRequestOptions) (azcore.AccessToken, error) {
	*s.scopes = append(*s.scopes, o.Scopes...)
	return azcore.AccessToken{Token: fakeToken, ExpiresOn: time.Now().Add(time.Hour)}, nil
}
