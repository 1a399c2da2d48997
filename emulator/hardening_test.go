//go:build !windows

// Uses FIFOs (syscall.Mkfifo, Mknod), which Windows has not.
package emulator_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/azsessions/azsessions"
	"github.com/azsessions/azsessions/azsessionstest"
	"github.com/azsessions/azsessions/emulator"
	"github.com/azsessions/azsessions/internal/wire"
)

// dirEnv is an env whose executor reports the session's data directory, so
// that tests can put there what code in a session could.
func dirEnv(t *testing.T, opt emulator.Options) (*env, func(ident string) string) {
	t.Helper()
	var mu sync.Mutex
	dirs := map[string]string{}
	opt.Executor = emulator.ScriptedExecutor(func(ctx context.Context, code string) emulator.ExecutionResult {
		mu.Lock()
		dirs[code] = emulator.DataDirFromContext(ctx)
		mu.Unlock()
		return emulator.ExecutionResult{}
	})
	e := newEnv(t, opt)
	return e, func(ident string) string {
		t.Helper()
		r := e.exec(wire.V20251002Preview, ident, "dir:"+ident, nil)
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
		mu.Lock()
		defer mu.Unlock()
		require.NotEmpty(t, dirs["dir:"+ident])
		return dirs["dir:"+ident]
	}
}

// timedGet does a GET that must be answered within 5 s.
func timedGet(t *testing.T, e *env, u string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	require.NoError(t, err)
	resp, err := e.srv.Client().Do(req)
	require.NoError(t, err, "the handler blocked")
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// unblockFIFO opens fifo for writing, which releases a reader blocked in
// open(2) (so that a failing test does not hang the server's Close).
func unblockFIFO(path string) {
	if f, err := os.OpenFile(path, os.O_RDWR|syscall.O_NONBLOCK, 0); err == nil {
		time.Sleep(50 * time.Millisecond)
		f.Close()
	}
}

// TestFIFONeverBlocks: a FIFO in the data directory, as a file or in place
// of a directory, and swapped in between the stat and the open of a
// download, gives 404 at once instead of blocking the handler forever.
func TestFIFONeverBlocks(t *testing.T) {
	e, dataDir := dirEnv(t, emulator.Options{})
	v, id := wire.V20251002Preview, "sess-fifo"
	dir := dataDir(id)
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	t.Cleanup(func() { unblockFIFO(fifo) })

	for _, u := range []string{
		e.url("files/fifo/content", qv(v, id)),
		e.url("files", qv(v, id, "path", "fifo")),
		e.url("files/x/content", qv(v, id, "path", "fifo")),
	} {
		status, body := timedGet(t, e, u)
		require.Equal(t, http.StatusNotFound, status, body)
	}
	status, _ := timedGet(t, e, e.url("files/fifo", qv(v, id)))
	require.Equal(t, http.StatusNotFound, status)

	// Swap a regular file and a FIFO under one name while downloading it.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "regular"), []byte("data"), 0o644))
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o644))
	target := filepath.Join(dir, "swapped")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			// rename(2) is atomic: the name is always a file or a FIFO.
			_ = os.Link(filepath.Join(dir, "regular"), target+".tmp")
			_ = os.Rename(target+".tmp", target)
			_ = syscall.Mknod(target+".tmp", syscall.S_IFIFO|0o644, 0)
			_ = os.Rename(target+".tmp", target)
		}
	}()
	t.Cleanup(func() { unblockFIFO(target) })
	defer func() { close(stop); wg.Wait() }()
	seen := map[int]int{}
	for range 200 {
		status, body := timedGet(t, e, e.url("files/swapped/content", qv(v, id)))
		seen[status]++
		if status == http.StatusOK {
			require.Equal(t, "data", body)
		} else {
			require.Equal(t, http.StatusNotFound, status, body)
		}
	}
	t.Logf("answers: %v", seen)
}

// TestSymlinkOutAnswersLikeMissing: a symlink to an existing host file and
// one to a missing host path get the same answer, so that code in a session
// cannot probe the host.
func TestSymlinkOutAnswersLikeMissing(t *testing.T) {
	e, dataDir := dirEnv(t, emulator.Options{})
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret")
	require.NoError(t, os.WriteFile(secret, []byte("secret"), 0o644))
	for _, v := range append(append([]string{}, legacyVersions...), newVersions...) {
		t.Run(v, func(t *testing.T) {
			id := "sess-probe-" + v
			dir := dataDir(id)
			require.NoError(t, os.Symlink(secret, filepath.Join(dir, "exists")))
			require.NoError(t, os.Symlink(filepath.Join(outside, "missing"), filepath.Join(dir, "missing")))
			require.NoError(t, os.Symlink(outside, filepath.Join(dir, "existsdir")))
			require.NoError(t, os.Symlink(filepath.Join(outside, "nodir"), filepath.Join(dir, "missingdir")))
			answer := func(route string, q ...string) string {
				r := e.get(route, qv(v, id, q...))
				var er wire.ErrorResponse
				require.NoError(t, json.Unmarshal(r.body, &er), "%s", r.body)
				return fmt.Sprintf("%d %s %s", r.status, er.Error.Code, er.Error.Message)
			}
			legacy := isLegacy(v)
			for _, pair := range [][2]string{{"exists", "missing"}, {"existsdir%2Fsecret", "missingdir%2Fsecret"}} {
				if legacy {
					require.Equal(t, answer("files/content/"+pair[1]), answer("files/content/"+pair[0]))
				} else {
					require.Equal(t, answer("files/"+pair[1]+"/content"), answer("files/"+pair[0]+"/content"))
				}
				require.Equal(t, answer("files/"+pair[1]), answer("files/"+pair[0]))
			}
			require.Equal(t, "404 FileNotFound file not found", answer("files/exists"))
			if !legacy {
				require.Equal(t, answer("files", "path", "missingdir"), answer("files", "path", "existsdir"))
				require.Equal(t, answer("files/secret", "path", "missingdir"), answer("files/secret", "path", "existsdir"))
			}
		})
	}
}

// TestDirectoryRelativeToPath: the directory of an uploaded or fetched file
// is relative to the request's path, as in listings, so the SDK's FullPath
// is right for all three.
func TestDirectoryRelativeToPath(t *testing.T) {
	srv := azsessionstest.Start(t, nil)
	s := srv.Client().NewSession()
	ctx := t.Context()
	const want = "/mnt/data/sub/dir/x.txt"
	up, err := s.UploadFile(ctx, "sub/dir/x.txt", strings.NewReader("x"), nil)
	require.NoError(t, err)
	require.Equal(t, want, up.FullPath())
	got, err := s.GetFile(ctx, "sub/dir/x.txt", nil)
	require.NoError(t, err)
	require.Equal(t, want, got.FullPath())
	for _, opts := range []*azsessions.ListFilesOptions{{Path: "sub/dir"}, {Path: "sub", Recursive: true}, {Recursive: true}} {
		pager := s.NewListFilesPager(opts)
		var paths []string
		for pager.More() {
			page, err := pager.NextPage(ctx)
			require.NoError(t, err)
			for _, f := range page.Files {
				paths = append(paths, f.FullPath())
			}
		}
		require.Contains(t, paths, want, "list %+v", opts)
	}

	// On the wire (listings only): "" for a file directly in path.
	e := newEnv(t, emulator.Options{})
	v := wire.V20251002Preview
	r := e.upload(v, "sess-dir", "x.txt", []byte("x"), "path", "sub/dir")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	r = e.upload(v, "sess-dir", "deeper/y.txt", []byte("y"), "path", "sub")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	dirs := func(q ...string) map[string]string {
		out := map[string]string{}
		for _, f := range e.get("files", qv(v, "sess-dir", q...)).json(t)["value"].([]any) {
			m := f.(map[string]any)
			out[m["name"].(string)] = m["directory"].(string)
		}
		return out
	}
	require.Equal(t, map[string]string{"x.txt": ""}, dirs("path", "sub/dir"))
	require.Equal(t, map[string]string{"deeper": "", "dir": "", "x.txt": "dir", "y.txt": "deeper"}, dirs("path", "sub", "recursive", "true"))
}

// TestExecutionQueueBounded: past MaxQueuedExecutions waiting executions a
// session answers 429 with Retry-After, and accepts again once they ran.
func TestExecutionQueueBounded(t *testing.T) {
	e := newEnv(t, emulator.Options{MaxQueuedExecutions: 2})
	v, id := wire.V20251002Preview, "sess-queue"
	post := func(code string) result {
		return e.postJSON("executions", qv(v, id), map[string]any{"code": code, "executionType": "Asynchronous"}, nil)
	}
	require.Equal(t, http.StatusOK, post("wait:q").status) // runs
	require.Equal(t, http.StatusOK, post("print:1").status)
	require.Equal(t, http.StatusOK, post("print:2").status)
	r := post("print:3")
	requireError(t, r, http.StatusTooManyRequests, emulator.CodeTooManyRequests)
	require.Equal(t, "1", r.header.Get("Retry-After"))
	e.script.release("q")
	require.Eventually(t, func() bool { return post("print:4").status == http.StatusOK }, 5*time.Second, 10*time.Millisecond)
}

// TestOutputStreamsMaxLengthBounded: outputStreamsMaxLength above
// MaxOutputStreamsMaxLength is refused (it would make the emulator buffer gigabytes);
// the maximum itself is accepted. Out-of-range numbers name their field.
func TestOutputStreamsMaxLengthBounded(t *testing.T) {
	e := newEnv(t, emulator.Options{})
	v, id := wire.V20251002Preview, "sess-outmax"
	r := e.postJSON("executions", qv(v, id), map[string]any{"code": "print:x", "outputStreamsMaxLength": 2147483647}, nil)
	requireError(t, r, http.StatusBadRequest, wire.CodeSessionRequestValidationFailed)
	require.Contains(t, string(r.body), "outputStreamsMaxLength must be at most 1048576")
	r = e.postJSON("executions", qv(v, id), map[string]any{"code": "print:x", "outputStreamsMaxLength": emulator.MaxOutputStreamsMaxLength}, nil)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	_, err := emulator.NewHandler(emulator.Options{Executor: emulator.ScriptedExecutor(nil), OutputStreamsMaxLength: emulator.MaxOutputStreamsMaxLength + 1})
	require.Error(t, err)

	r = e.postJSON("executions", qv(v, id), map[string]any{"code": "print:x", "timeoutInSeconds": int64(1) << 40}, nil)
	requireError(t, r, http.StatusBadRequest, wire.CodeSessionRequestValidationFailed)
	require.Contains(t, string(r.body), "timeoutInSeconds is out of range")
	r = e.postJSON("code/execute", qv(wire.V20240202Preview, id), map[string]any{"properties": map[string]any{"code": "x", "timeoutInSeconds": int64(1) << 40}}, nil)
	requireError(t, r, http.StatusBadRequest, wire.CodeSessionRequestValidationFailed)
	require.Contains(t, string(r.body), "timeoutInSeconds is out of range")
}

// TestStalledBodyReleasesSession: a client that stops sending its upload (or
// execution) body gets an answer after BodyReadTimeout instead of holding the
// session (and its handler) forever.
func TestStalledBodyReleasesSession(t *testing.T) {
	t.Parallel() // it mostly waits on real time
	e := newEnv(t, emulator.Options{BodyReadTimeout: 300 * time.Millisecond, MinBodyRate: 100})
	v := wire.V20251002Preview
	for _, route := range []string{"files", "executions"} {
		t.Run(route, func(t *testing.T) {
			u := e.url(route, qv(v, "sess-stall-"+route))
			conn, err := net.Dial("tcp", strings.TrimPrefix(e.srv.URL, "http://"))
			require.NoError(t, err)
			defer conn.Close()
			ctype := "application/json"
			first := `{"code":"print:`
			if route == "files" {
				ctype = "multipart/form-data; boundary=b"
				first = "--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"x\"\r\n\r\npartial"
			}
			path := strings.TrimPrefix(u, e.srv.URL)
			_, err = fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: %s\r\nContent-Length: 100000\r\n\r\n%s", path, ctype, first)
			require.NoError(t, err)
			require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			require.NoError(t, err, "no answer to a stalled body")
			resp.Body.Close()
			require.Equal(t, http.StatusBadRequest, resp.StatusCode)
		})
	}
	// Steady uploads longer than the timeout pass: each byte moves the
	// deadline. On an emulator of its own with a 1 s timeout, the writes
	// come every 10 ms (10 KB/s, far above MinBodyRate) for 2.5 timeouts:
	// a loaded machine may stretch a gap, but not by the 990 ms that make
	// it a stall (100 ms gaps against a 300 ms timeout failed once in CI).
	const steadyTimeout = time.Second
	steady := newEnv(t, emulator.Options{BodyReadTimeout: steadyTimeout, MinBodyRate: 100})
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		part, _ := mw.CreatePart(fileHeader("slow.bin"))
		for start := time.Now(); time.Since(start) < 5*steadyTimeout/2; {
			_, _ = part.Write(bytes.Repeat([]byte("s"), 100))
			time.Sleep(10 * time.Millisecond)
		}
		_ = mw.Close()
		_ = pw.Close()
	}()
	req, err := http.NewRequest(http.MethodPost, steady.url("files", qv(v, "sess-slow")), pr)
	require.NoError(t, err)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := steady.srv.Client().Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	// A long synchronous execution is not canceled by the cleared deadline.
	r := e.postJSON("executions", qv(v, "sess-slow"), map[string]any{"code": "sleep:700ms\nprint:done"}, nil)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.Contains(t, string(r.body), "done")
}

// TestFileNames: uploads refuse control characters; listings leave out names
// that JSON cannot carry faithfully (not UTF-8) and names with control
// characters, on every contract.
func TestFileNames(t *testing.T) {
	e, dataDir := dirEnv(t, emulator.Options{})
	for _, v := range []string{wire.V20240202Preview, wire.V20251002Preview} {
		t.Run(v, func(t *testing.T) {
			id := "sess-names-" + v
			dir := dataDir(id)
			for _, name := range []string{"a\x01b.txt", "tab\there.txt", "line\nbreak.txt", "c1\u0085.txt"} {
				var buf bytes.Buffer
				mw := multipart.NewWriter(&buf)
				h := textproto.MIMEHeader{}
				h.Set("Content-Disposition", `form-data; name="file"; filename*=UTF-8''`+strings.ReplaceAll(urlEscape(name), "+", "%20"))
				pw, err := mw.CreatePart(h)
				require.NoError(t, err)
				_, _ = pw.Write([]byte("x"))
				require.NoError(t, mw.Close())
				route := "files"
				if isLegacy(v) {
					route = "files/upload"
				}
				r := e.do(http.MethodPost, e.url(route, qv(v, id)), &buf, map[string]string{"Content-Type": mw.FormDataContentType()})
				requireError(t, r, http.StatusBadRequest, wire.CodeSessionRequestValidationFailed)
				require.Contains(t, string(r.body), "control characters")
			}
			if !isLegacy(v) {
				requireError(t, e.upload(v, id, "ok.txt", []byte("x"), "path", "a\x7fb"), http.StatusBadRequest, wire.CodeSessionRequestValidationFailed)
			}
			require.NoError(t, os.WriteFile(filepath.Join(dir, "bad\xff.txt"), []byte("x"), 0o644))
			require.NoError(t, os.WriteFile(filepath.Join(dir, "ctl\x01.txt"), []byte("x"), 0o644))
			require.NoError(t, os.WriteFile(filepath.Join(dir, "good.txt"), []byte("x"), 0o644))
			body := string(e.get("files", qv(v, id)).body)
			require.Contains(t, body, "good.txt")
			require.NotContains(t, body, "bad")
			require.NotContains(t, body, "ctl")
		})
	}
}

func urlEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// TestListingWhileDirectoriesVanish (red team): a recursive listing of a data
// directory in which session code makes and removes directories (a build, an
// unpacked archive, shutil.rmtree) meets a directory removed after it was
// read from its parent; reading or opening it fails with ENOENT, which
// answered the whole listing 404 FileNotFound. A directory gone since it was
// read is left out, as the walk's other races are.
func TestListingWhileDirectoriesVanish(t *testing.T) {
	e, dataDir := dirEnv(t, emulator.Options{})
	const id = "sess-churn"
	dir := dataDir(id)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kept.txt"), []byte("x"), 0o644))
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			select {
			case <-stop:
				return
			default:
			}
			_ = os.MkdirAll(filepath.Join(dir, "d", "sub", "subsub"), 0o755)
			_ = os.RemoveAll(filepath.Join(dir, "d"))
		}
	}()
	defer func() { close(stop); <-stopped }()
	for _, q := range []url.Values{qv(wire.V20240202Preview, id), qv(wire.V20251002Preview, id, "recursive", "true")} {
		for i := 0; i < 500; i++ {
			r := e.get("files", q)
			require.Equal(t, http.StatusOK, r.status, "listing %d (%s): %s", i, q.Get("api-version"), r.body)
			require.Contains(t, string(r.body), "kept.txt")
		}
	}
}
