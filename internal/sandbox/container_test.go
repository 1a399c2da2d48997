//go:build linux

package sandbox

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/azsessions/azsessions/internal/kernel"
)

// containerServer is a tiny HTTP server (stdlib only) that answers
// "<method> <path> <body>" and reports whether it can reach the host's
// network.
const containerServer = `import http.server, socket, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self): self.answer()
    def do_POST(self): self.answer()
    def answer(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n).decode()
        if self.path == "/exit":
            import os; os._exit(0)
        if self.path == "/net":
            try:
                socket.create_connection(("1.1.1.1", 53), timeout=2).close(); body = "reached"
            except OSError as e:
                body = "isolated"
        out = ("%s %s %s" % (self.command, self.path, body)).encode()
        self.send_response(200); self.send_header("Content-Length", str(len(out))); self.end_headers()
        self.wfile.write(out)
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
`

// TestContainer: a kernel runs a command (its file copied into /mnt/data)
// and relays HTTP to its port inside the sandbox, which still has no
// network; the command's exit ends it (DialContainer: ErrContainerExited).
// A command that exits before listening, or never listens, gives the
// matching error with its stderr.
func TestContainer(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, opts Options) {
		e := sharedFor(t, opts)
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, "server.py"), []byte(containerServer), 0o644))
		require.NoError(t, os.Mkdir(filepath.Join(dir, "sub"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "sub", "x.txt"), []byte("x"), 0o644))
		ctx := context.Background()

		t.Run("serves", func(t *testing.T) {
			k := newKernel(t, e)
			require.NoError(t, k.StartContainer(ctx, kernel.ContainerSpec{Command: "python3 server.py 8080", Port: 8080, Dir: dir, StartTimeout: time.Minute}))
			b, err := os.ReadFile(filepath.Join(k.DataDir(), "sub", "x.txt"))
			require.NoError(t, err)
			require.Equal(t, "x", string(b))
			client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return k.DialContainer(ctx) }}}
			defer client.CloseIdleConnections()
			for _, tc := range []struct{ method, path, body, want string }{
				{http.MethodGet, "/a?b=c", "", "GET /a?b=c "},
				{http.MethodPost, "/p", "hello", "POST /p hello"},
				{http.MethodGet, "/net", "", "GET /net isolated"},
			} {
				req, err := http.NewRequest(tc.method, "http://container"+tc.path, strings.NewReader(tc.body))
				require.NoError(t, err)
				resp, err := client.Do(req)
				require.NoError(t, err)
				got, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				require.NoError(t, err)
				require.Equal(t, tc.want, string(got))
			}
			// Many at once: more than the forwarder keeps offered.
			errs := make(chan error, 8)
			for i := 0; i < 8; i++ {
				go func() {
					resp, err := client.Post("http://container/c", "text/plain", strings.NewReader("x"))
					if err == nil {
						_, err = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
					}
					errs <- err
				}()
			}
			for i := 0; i < 8; i++ {
				require.NoError(t, <-errs)
			}
			// A raw connection, half-closed by the client.
			c, err := k.DialContainer(ctx)
			require.NoError(t, err)
			_, err = io.WriteString(c, "GET /raw HTTP/1.0\r\n\r\n")
			require.NoError(t, err)
			status, err := bufio.NewReader(c).ReadString('\n')
			require.NoError(t, err)
			require.Contains(t, status, "200")
			c.Close()

			// The command exits: so does the sandbox, and dialing fails.
			_, _ = client.Get("http://container/exit")
			require.Eventually(t, func() bool {
				dctx, cancel := context.WithTimeout(ctx, time.Second)
				defer cancel()
				c, err := k.DialContainer(dctx)
				if err == nil {
					c.Close()
				}
				return err != nil && errors.Is(err, kernel.ErrContainerExited)
			}, time.Minute, 50*time.Millisecond)
		})

		t.Run("exits", func(t *testing.T) {
			k := newKernel(t, e)
			err := k.StartContainer(ctx, kernel.ContainerSpec{Command: "echo broken-config >&2; exit 3", Port: 8080, StartTimeout: time.Minute})
			require.ErrorIs(t, err, kernel.ErrContainerExited)
			require.ErrorContains(t, err, "status 3")
			require.ErrorContains(t, err, "broken-config")
		})

		t.Run("never listens", func(t *testing.T) {
			k := newKernel(t, e)
			err := k.StartContainer(ctx, kernel.ContainerSpec{Command: "echo waiting >&2; sleep 600", Port: 8080, StartTimeout: 2 * time.Second})
			require.ErrorIs(t, err, kernel.ErrContainerStartTimeout)
			require.ErrorContains(t, err, "waiting")
		})
	})
}
