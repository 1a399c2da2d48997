package azsessions

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	azlog "github.com/Azure/azure-sdk-for-go/sdk/azcore/log"
	"github.com/stretchr/testify/require"
)

// secretIdentifier is distinctive so that any copy of it in a log line or
// error message is found (it is valid under every api-version's rule).
const secretIdentifier = "SeCrEtSessionId4711"

// captureLog records azcore's log output until the test ends.
func captureLog(t *testing.T) func() string {
	var mu sync.Mutex
	var b strings.Builder
	azlog.SetListener(func(ev azlog.Event, msg string) {
		mu.Lock()
		defer mu.Unlock()
		b.WriteString(string(ev) + ": " + msg + "\n")
	})
	t.Cleanup(func() { azlog.SetListener(nil) })
	return func() string {
		mu.Lock()
		defer mu.Unlock()
		return b.String()
	}
}

// requireNoSecret checks s for the identifier (raw and escaped) and the token.
func requireNoSecret(t *testing.T, s, what string) {
	t.Helper()
	for _, secret := range []string{secretIdentifier, url.QueryEscape(secretIdentifier), fakeToken} {
		if i := strings.Index(s, secret); i >= 0 {
			t.Fatalf("%s contains %q: ...%s...", what, secret, s[max(0, i-300):min(len(s), i+100)])
		}
	}
}

// TestLogsHoldNoSecrets runs every operation of every api-version with a
// credentialed client while capturing azcore's log, and checks that the
// identifier and the token never appear (azcore redacts query values and
// headers that are not allow-listed; Operation-Location, which repeats the
// identifier, must not be allow-listed).
func TestLogsHoldNoSecrets(t *testing.T) {
	logged := captureLog(t)
	for _, version := range allVersions {
		p := setup(t, version, withCredential())
		happyRoutes(t, p, nil)
		name := "dir/x.txt"
		if features(t, version).Legacy {
			name = "x.txt"
		}
		for _, op := range allOps(t, version, name, t.TempDir()) {
			require.NoError(t, op.call(context.Background(), p.client.Session(secretIdentifier)), "%s %s", version, op.name)
		}
	}
	// error answers and retries are logged too
	p := setup(t, APIVersion20251002Preview, withCredential(), withFallback(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Operation-Location", "/executions/x?identifier="+secretIdentifier)
		writeError(w, http.StatusServiceUnavailable, "ServiceUnavailable", "busy")
	}))
	_, err := p.client.Session(secretIdentifier).GetFile(context.Background(), "x.txt", nil)
	require.Error(t, err)
	requireNoSecret(t, err.Error(), "error")
	_, err = p.client.Session(secretIdentifier).Execute(context.Background(), "1", nil)
	require.Error(t, err)
	requireNoSecret(t, err.Error(), "error")

	out := logged()
	require.Contains(t, out, "identifier=REDACTED", "the log shows the identifier parameter, redacted")
	require.Contains(t, out, "Authorization: REDACTED")
	require.Contains(t, out, "Operation-Location: REDACTED")
	require.Contains(t, out, "Try=2", "retries were logged")
	requireNoSecret(t, out, "azcore log")
}

// TestErrorsHoldNoIdentifier provokes errors of every kind (service errors,
// transport failures, cut bodies, cancelled contexts, bad input) and checks
// that no error string contains the identifier.
func TestErrorsHoldNoIdentifier(t *testing.T) {
	hangUp := func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
	}
	slow := func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // so that the server notices the client leaving
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}
	serviceError := func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusBadRequest, "SessionWithIdentifierNotFound", "session not found")
	}
	for _, version := range []string{APIVersion20240202Preview, APIVersion20251002Preview} {
		for name, h := range map[string]http.HandlerFunc{"hang up": hangUp, "slow": slow, "service error": serviceError} {
			t.Run(version+"/"+name, func(t *testing.T) {
				t.Parallel()
				p := setup(t, version, withCredential(), withFallback(h), withOptions(func(o *ClientOptions) { o.Retry.MaxRetries = 1 }))
				// the operations at once, each with its own deadline (the
				// slow handler's deadlines pass together)
				ops := allOps(t, version, "x.txt", t.TempDir())
				errs := make([]error, len(ops))
				var wg sync.WaitGroup
				for i, op := range ops {
					wg.Go(func() {
						ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
						defer cancel()
						errs[i] = op.call(ctx, p.client.Session(secretIdentifier))
					})
				}
				wg.Wait()
				for i, op := range ops {
					require.Error(t, errs[i], op.name)
					requireNoSecret(t, errs[i].Error(), op.name)
				}
			})
		}
	}
	// a connection that cannot be made at all
	p := setup(t, APIVersion20251002Preview)
	p.srv.Close()
	for _, op := range allOps(t, APIVersion20251002Preview, "x.txt", t.TempDir()) {
		err := op.call(context.Background(), p.client.Session(secretIdentifier))
		require.Error(t, err, op.name)
		requireNoSecret(t, err.Error(), op.name)
	}
}

func TestRedactIdentifier(t *testing.T) {
	for in, want := range map[string]string{
		"https://h/p/files?api-version=v&identifier=" + secretIdentifier: "https://h/p/files?api-version=v&identifier=REDACTED",
		"https://h/p/files?identifier=a%2Fb%3F&path=x":                   "https://h/p/files?identifier=REDACTED&path=x",
		"https://h/p/metadata?api-version=v":                             "https://h/p/metadata?api-version=v",
		"https://h/p/files?identifier=" + secretIdentifier + "&x=%zz":    "https://h/p/files",
		"://bad?identifier=" + secretIdentifier:                          "://bad",
		"https://h/p/files":                                              "https://h/p/files",
	} {
		require.Equal(t, want, redactIdentifier(in), in)
	}
}
