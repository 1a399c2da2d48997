package emulator_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/stretchr/testify/require"

	"github.com/azsessions/azsessions"
	"github.com/azsessions/azsessions/emulator"
	"github.com/azsessions/azsessions/internal/testenv"
)

// sandboxServer is the test's "container image": an HTTP server on the
// standard library that keeps a counter (state lives as long as the session)
// and echoes what it received.
const sandboxServer = `import http.server, json, sys
count = 0
class H(http.server.BaseHTTPRequestHandler):
    def answer(self):
        global count
        count += 1
        n = int(self.headers.get("Content-Length") or 0)
        out = json.dumps({"method": self.command, "path": self.path, "count": count,
                          "body": self.rfile.read(n).decode(), "auth": self.headers.get("Authorization")}).encode()
        self.send_response(201)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)
    do_GET = do_POST = do_PUT = do_DELETE = answer
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer(("0.0.0.0", int(sys.argv[1])), H).serve_forever()
`

// TestCustomContainerSandbox: a CustomContainer pool on each sandbox
// backend, through the client's Session.Do and Session.Stop: the command
// starts per session from ContainerDir (cold start), keeps its state across
// requests, sees the caller's method, path, query and body but not the
// token; stopSession ends it and the next request starts a new container.
// A command that exits at once is answered 502 ContainerStartFailed with its
// stderr (the 504 of one that never listens: TestContainerFailures, and
// internal/sandbox's TestContainer on both backends).
func TestCustomContainerSandbox(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{emulator.SandboxBwrap, emulator.SandboxGvisor} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			if mode == emulator.SandboxGvisor {
				testenv.NeedGvisor(t)
			} else {
				testenv.NeedSandbox(t)
			}
			dir := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(dir, "server.py"), []byte(sandboxServer), 0o644))
			newPool := func(command string) *emulator.Server {
				srv, err := emulator.Start("127.0.0.1:0", emulator.Options{Executor: sharedExecutor(t, mode, ""), PoolType: emulator.PoolTypeCustomContainer,
					ContainerCommand: command, TargetPort: 8080, ContainerDir: dir, ContainerStartTimeout: 2 * time.Minute, // a loaded machine starts python slowly; the timeout itself is TestContainer's
					RequireToken: true, Token: "tok"})
				require.NoError(t, err)
				t.Cleanup(func() { require.NoError(t, srv.Close()) })
				return srv
			}
			srv := newPool("python3 server.py 8080")
			client, err := azsessions.NewClient(srv.Endpoint, staticToken("tok"), &azsessions.ClientOptions{ClientOptions: azcore.ClientOptions{APIVersion: azsessions.APIVersion20250202Preview, InsecureAllowCredentialWithHTTP: true}})
			require.NoError(t, err)
			ctx := context.Background()
			s := client.NewSession()
			call := func(method, path, body string) map[string]any {
				t.Helper()
				req, err := http.NewRequest(method, path, strings.NewReader(body))
				require.NoError(t, err)
				resp, err := s.Do(ctx, req, nil)
				require.NoError(t, err)
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				require.NoError(t, err)
				require.Equal(t, http.StatusCreated, resp.StatusCode, "%s", b)
				var m map[string]any
				require.NoError(t, json.Unmarshal(b, &m))
				return m
			}
			got := call(http.MethodPost, "/api/run?x=1", `{"command":"echo hi"}`)
			require.Equal(t, "POST", got["method"])
			require.Equal(t, "/api/run?x=1&identifier="+s.Identifier(), got["path"])
			require.Equal(t, `{"command":"echo hi"}`, got["body"])
			require.Nil(t, got["auth"], "the token stays with the pool")
			require.EqualValues(t, 1, got["count"])
			require.EqualValues(t, 2, call(http.MethodGet, "/", "")["count"], "the same container serves the session")

			_, err = s.Stop(ctx, nil)
			require.NoError(t, err)
			require.EqualValues(t, 1, call(http.MethodPut, "/again", "")["count"], "a new container after stopSession")

			for _, tc := range []struct {
				command, stderr string
				status          int
			}{
				{"echo no-such-config >&2; exit 2", "no-such-config", http.StatusBadGateway},
			} {
				bad := newPool(tc.command)
				req, err := http.NewRequest(http.MethodGet, bad.Endpoint+"/x?identifier=some-session", nil)
				require.NoError(t, err)
				req.Header.Set("Authorization", "Bearer tok")
				resp, err := http.DefaultClient.Do(req)
				require.NoError(t, err)
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				require.Equal(t, tc.status, resp.StatusCode, "%s", b)
				require.Equal(t, emulator.CodeContainerStartFailed, resp.Header.Get("x-ms-error-code"))
				require.Contains(t, string(b), tc.stderr)
				require.NotContains(t, string(b), "some-session")
			}
		})
	}
}

// staticToken is a credential that always gives the same bearer token.
type staticToken string

func (s staticToken) GetToken(context.Context, policy.TokenRequestOptions) (azcore.AccessToken, error) {
	return azcore.AccessToken{Token: string(s), ExpiresOn: time.Now().Add(time.Hour)}, nil
}
