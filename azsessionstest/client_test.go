package azsessionstest_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/stretchr/testify/require"

	"github.com/azsessions/azsessions"
	"github.com/azsessions/azsessions/azsessionstest"
	"github.com/azsessions/azsessions/emulator"
	"github.com/azsessions/azsessions/internal/wire"
)

func TestClient(t *testing.T) {
	tests := []struct {
		name string
		opts azsessionstest.Options
	}{
		{"http", azsessionstest.Options{}},
		{"https", azsessionstest.Options{TLS: true}},
		{"token required", azsessionstest.Options{Options: emulator.Options{RequireToken: true}}},
		{"https token required", azsessionstest.Options{TLS: true, Options: emulator.Options{RequireToken: true}}},
	}
	for _, tt := range tests {
		for _, version := range wire.Versions {
			t.Run(tt.name+" "+version, func(t *testing.T) {
				opts := tt.opts
				opts.APIVersion = version
				srv := azsessionstest.Start(t, cellsOptions(opts))
				c := srv.Client()
				require.Equal(t, srv.Endpoint(), c.Endpoint())
				require.Equal(t, version, c.APIVersion())
				sess := c.NewSession()
				ctx := context.Background()
				resp, err := sess.Execute(ctx, "x = 6\nprint('hi')\nx * 7", nil)
				require.NoError(t, err)
				require.Equal(t, azsessions.ExecutionStatusSucceeded, resp.Status)
				require.Equal(t, "hi\n", resp.Stdout)
				require.Equal(t, "42", string(resp.Result))
				_, err = sess.UploadFile(ctx, "data.csv", strings.NewReader("a,b\n1,2\n"), nil)
				require.NoError(t, err)
				dl, err := sess.DownloadFile(ctx, "data.csv", nil)
				require.NoError(t, err)
				defer dl.Body.Close()
				require.Equal(t, int64(1), srv.ExecutionsFor(sess.Identifier()))
			})
		}
	}
}

// TestClientExecutesOnce: whatever fault hits an execution, the SDK client
// never runs the code twice on the executions contract: it gets the result,
// or ErrExecutionOutcomeUnknown when the request had left the client whole
// and no answer it can trust came back.
func TestClientExecutesOnce(t *testing.T) {
	faults := []struct {
		name            string
		fault           azsessionstest.Fault
		ambiguousNotRun bool
	}{
		{"429 Retry-After", azsessionstest.Fault{Status: 429, RetryAfter: "0"}, false},
		{"503 before handler", azsessionstest.Fault{Status: 503}, true},
		{"500 after handler", azsessionstest.Fault{Status: 500, AfterHandler: true}, false},
		{"reset before handler", azsessionstest.Fault{ResetBeforeHandler: true}, true},
		{"reset after handler", azsessionstest.Fault{ResetAfterHandler: true}, false},
		{"reset mid body", azsessionstest.Fault{ResetMidBody: true}, false},
		// the small body had left the client whole: as ambiguous as a reset after it
		{"reset mid request", azsessionstest.Fault{ResetMidRequest: true}, true},
	}
	for _, f := range faults {
		for _, version := range []string{wire.V20241002Preview, wire.V20250202Preview, wire.V20251002Preview} {
			t.Run(f.name+" "+version, func(t *testing.T) {
				srv := azsessionstest.Start(t, cellsOptions(azsessionstest.Options{APIVersion: version}))
				srv.InjectFault(azsessionstest.RouteExecute, f.fault, 1)
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				sess := srv.Client().NewSession()
				resp, err := sess.Execute(ctx, "print('once')", nil)
				if f.ambiguousNotRun && err != nil {
					// the request reached the server, which did nothing; the
					// client cannot tell it from a first POST still on its
					// way, so it does not send again (when the reset came
					// before the body was written whole, it is sent again)
					require.ErrorIs(t, err, azsessions.ErrExecutionOutcomeUnknown)
					require.Zero(t, srv.ExecutionsFor(sess.Identifier()))
					require.Equal(t, 1, srv.Requests(azsessionstest.RouteExecute))
					return
				}
				require.NoError(t, err)
				require.Equal(t, "once\n", resp.Stdout)
				require.Equal(t, int64(1), srv.ExecutionsFor(sess.Identifier()))
			})
		}
	}
}

func TestClientSessionExpiry(t *testing.T) {
	srv := azsessionstest.Start(t, cellsOptions(azsessionstest.Options{Options: emulator.Options{Cooldown: 5 * time.Minute}}))
	ctx := context.Background()
	sess := srv.Client().NewSession()
	_, err := sess.Execute(ctx, "x = 1", nil)
	require.NoError(t, err)
	got, err := sess.Get(ctx, nil)
	require.NoError(t, err)
	require.Equal(t, sess.Identifier(), got.Identifier)
	srv.Advance(6 * time.Minute)
	_, err = sess.Get(ctx, nil)
	require.Error(t, err)
	resp, err := sess.Execute(ctx, "x", nil)
	require.NoError(t, err)
	require.Equal(t, azsessions.ExecutionStatusFailed, resp.Status)
	require.Contains(t, resp.Stderr, "NameError")
}

// TestClientOptions (issue 12 item 15): the user's own constructor and
// credential reach the fake in one line, over TLS and plain HTTP, with or
// without a required token; without the options, TLS fails at once (an
// untrusted certificate is not retried).
func TestClientOptions(t *testing.T) {
	tests := []struct {
		name string
		opts azsessionstest.Options
	}{
		{"http", azsessionstest.Options{}},
		{"https", azsessionstest.Options{TLS: true}},
		{"http token required", azsessionstest.Options{Options: emulator.Options{RequireToken: true}}},
		{"https token required", azsessionstest.Options{TLS: true, Options: emulator.Options{RequireToken: true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := tt.opts
			opts.APIVersion = azsessions.APIVersion20250202Preview
			srv := azsessionstest.Start(t, &opts)
			c, err := azsessions.NewClient(srv.Endpoint(), &fake.TokenCredential{}, srv.ClientOptions())
			require.NoError(t, err)
			require.Equal(t, azsessions.APIVersion20250202Preview, c.APIVersion())
			_, err = c.NewSession().UploadFile(context.Background(), "a.txt", strings.NewReader("a"), nil)
			require.NoError(t, err)

			o := srv.ClientOptions()
			o.APIVersion = azsessions.APIVersion20240202Preview
			require.Equal(t, azsessions.APIVersion20250202Preview, srv.ClientOptions().APIVersion, "each call returns a new value")
		})
	}
	t.Run("https without ClientOptions fails at once", func(t *testing.T) {
		srv := azsessionstest.Start(t, &azsessionstest.Options{TLS: true})
		var tries atomic.Int32
		o := &azsessions.ClientOptions{}
		o.Transport = countingTransport{n: &tries, next: &http.Client{}}
		c, err := azsessions.NewClient(srv.Endpoint(), &fake.TokenCredential{}, o)
		require.NoError(t, err)
		_, err = c.NewSession().GetFile(context.Background(), "a.txt", nil)
		require.ErrorContains(t, err, "certificate")
		require.ErrorContains(t, err, "Server.ClientOptions")
		require.Equal(t, int32(1), tries.Load(), "not retried")
	})
}

type countingTransport struct {
	n    *atomic.Int32
	next *http.Client
}

func (c countingTransport) Do(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.next.Do(r)
}
