package azsessions_test

import (
	"context"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	azlog "github.com/Azure/azure-sdk-for-go/sdk/azcore/log"
	"github.com/stretchr/testify/require"

	"github.com/azsessions/azsessions"
	"github.com/azsessions/azsessions/azsessionstest"
)

// TestFakeSessionLogsHoldNoSecrets runs a whole session against the fake
// over TLS with a credential (azcore/fake.TokenCredential, token
// "fake_token") on every api-version, including retried faults and an
// ambiguous execution, while capturing all of azcore's log output; neither
// the session identifier nor the token appears in it or in any error.
func TestFakeSessionLogsHoldNoSecrets(t *testing.T) {
	const secret = "SeCrEtFakeIdent4711"
	const token = "fake_token"
	var mu sync.Mutex
	var logged strings.Builder
	azlog.SetListener(func(ev azlog.Event, msg string) {
		mu.Lock()
		defer mu.Unlock()
		logged.WriteString(string(ev) + ": " + msg + "\n")
	})
	t.Cleanup(func() { azlog.SetListener(nil) })
	noSecret := func(s, what string) {
		t.Helper()
		for _, x := range []string{secret, url.QueryEscape(secret), strings.ToLower(secret), token} {
			if i := strings.Index(s, x); i >= 0 {
				t.Fatalf("%s contains %q: ...%s...", what, x, s[max(0, i-200):min(len(s), i+100)])
			}
		}
	}

	for _, version := range relEveryVersion {
		srv := azsessionstest.Start(t, withCells(&azsessionstest.Options{APIVersion: version, TLS: true}))
		// retries as azcore logs them, after waits of a few ms (the fault
		// that resets every listing below costs four tries)
		co := &azsessions.ClientOptions{}
		co.Retry.RetryDelay = time.Millisecond
		co.Retry.MaxRetryDelay = 5 * time.Millisecond
		c, err := srv.NewClient(co)
		require.NoError(t, err)
		sess := c.Session(secret)
		ctx := context.Background()
		must := func(what string, err error) {
			t.Helper()
			require.NoError(t, err, "%s %s", version, what)
		}
		legacy := relIsLegacy(version)
		manage := version == azsessions.APIVersion20250202Preview || version == azsessions.APIVersion20251002Preview

		_, err = sess.Execute(ctx, "x = 1\nprint(x)", nil)
		must("Execute", err)
		srv.InjectFault(azsessionstest.RouteExecute, azsessionstest.Fault{Status: http.StatusBadGateway, AfterHandler: true}, 1)
		_, err = sess.Execute(ctx, "x + 1", nil)
		if legacy {
			require.ErrorIs(t, err, azsessions.ErrExecutionOutcomeUnknown)
			noSecret(err.Error(), "ambiguous Execute error")
		} else {
			must("Execute after a 502", err)
			poller, err := sess.BeginExecute(ctx, "print(2)", nil)
			must("BeginExecute", err)
			_, err = poller.PollUntilDone(ctx, fastPoll)
			must("PollUntilDone", err)
		}
		srv.InjectFault(azsessionstest.RouteUpload, azsessionstest.Fault{Status: http.StatusServiceUnavailable}, 1)
		_, err = sess.UploadFile(ctx, "data.csv", strings.NewReader("a,b\n1,2\n"), nil)
		must("UploadFile after a 503", err)
		_, err = sess.NewListFilesPager(nil).NextPage(ctx)
		must("ListFiles", err)
		_, err = sess.GetFile(ctx, "data.csv", nil)
		must("GetFile", err)
		_, err = sess.DownloadFileToPath(ctx, "data.csv", filepath.Join(t.TempDir(), "data.csv"), nil)
		must("DownloadFileToPath", err)
		_, err = sess.DeleteFile(ctx, "data.csv", nil)
		must("DeleteFile", err)
		_, err = sess.GetFile(ctx, "data.csv", nil)
		require.Error(t, err, "a 404")
		noSecret(err.Error(), "404 error")
		if manage {
			_, err = sess.Get(ctx, nil)
			must("Get", err)
			_, err = c.NewListSessionsPager(nil).NextPage(ctx)
			must("ListSessions", err)
			_, err = c.GetMetadata(ctx, nil)
			must("GetMetadata", err)
			_, err = sess.Delete(ctx, nil)
			must("Delete", err)
			_, err = sess.Get(ctx, nil)
			require.Error(t, err, "gone")
			noSecret(err.Error(), "Get after Delete error")
			if version == azsessions.APIVersion20251002Preview {
				_, err = sess.Execute(ctx, "1", nil)
				must("Execute in a fresh session", err)
				_, err = sess.Stop(ctx, nil)
				must("Stop", err)
			}
		}
		// a reset connection: the transport error names the URL
		srv.InjectFault(azsessionstest.RouteListFiles, azsessionstest.Fault{ResetBeforeHandler: true}, 0)
		_, err = sess.NewListFilesPager(nil).NextPage(ctx)
		require.Error(t, err)
		noSecret(err.Error(), "reset error")
		srv.ClearFaults()
	}

	mu.Lock()
	out := logged.String()
	mu.Unlock()
	require.Contains(t, out, "identifier=REDACTED", "requests were logged, identifier redacted")
	require.Contains(t, out, "Authorization: REDACTED")
	require.Contains(t, out, "Try=2", "retries were logged")
	noSecret(out, "azcore log")
}
