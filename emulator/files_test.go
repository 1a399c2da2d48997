package emulator_test

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/azsessions/azsessions/emulator"
	"github.com/azsessions/azsessions/internal/wire"
)

func TestFilesNew(t *testing.T) {
	for _, v := range newVersions {
		t.Run(v, func(t *testing.T) {
			e := newEnv(t, emulator.Options{})
			feat, _ := wire.Lookup(v)
			id := "sess-files"

			r := e.upload(v, id, "hello.txt", []byte("hello"))
			require.Equal(t, http.StatusOK, r.status, "%s", r.body)
			m := r.json(t)
			// As in SessionResourceFiles_Upload.json of every version: no
			// directory field (only listings carry it).
			require.Equal(t, []string{"contentType", "lastModifiedAt", "name", "sizeInBytes", "type"}, keys(m))
			require.Equal(t, "hello.txt", m["name"])
			require.Equal(t, "File", m["type"])
			require.Equal(t, "text/plain; charset=utf-8", m["contentType"])
			require.Equal(t, float64(5), m["sizeInBytes"])

			// path= as a relative directory and as /mnt/data/...
			require.Equal(t, http.StatusOK, e.upload(v, id, "a.yaml", []byte("a: 1"), "path", "sub/dir").status)
			require.Equal(t, http.StatusOK, e.upload(v, id, "b.bin", []byte("bb"), "path", "/mnt/data/sub").status)

			// List the root.
			r = e.get("files", qv(v, id))
			require.Equal(t, http.StatusOK, r.status)
			lm := r.json(t)
			require.Contains(t, lm, "value")
			require.Contains(t, lm, "nextLink")
			require.Nil(t, lm["nextLink"])
			var names []string
			for _, f := range lm["value"].([]any) {
				fm := f.(map[string]any)
				names = append(names, fm["name"].(string)+":"+fm["type"].(string))
			}
			require.Equal(t, []string{"hello.txt:File", "sub:Directory"}, names)

			// List a directory, recursively on 2025-10.
			r = e.get("files", qv(v, id, "path", "sub", "recursive", "true"))
			require.Equal(t, http.StatusOK, r.status)
			names = nil
			for _, f := range r.json(t)["value"].([]any) {
				fm := f.(map[string]any)
				s := fm["name"].(string)
				if feat.Recursive {
					s = fm["directory"].(string) + "|" + s
				}
				names = append(names, s)
			}
			if feat.Recursive {
				require.Equal(t, []string{"|b.bin", "|dir", "dir|a.yaml"}, names)
			} else {
				require.Equal(t, []string{"b.bin", "dir"}, names)
			}

			// Metadata and content.
			r = e.get("files/a.yaml", qv(v, id, "path", "sub/dir"))
			require.Equal(t, http.StatusOK, r.status, "%s", r.body)
			require.Equal(t, "a.yaml", r.json(t)["name"])
			require.NotContains(t, r.json(t), "directory", "as in SessionResourceFiles_Get.json")
			r = e.get("files/hello.txt/content", qv(v, id))
			require.Equal(t, http.StatusOK, r.status)
			require.Equal(t, "hello", string(r.body))
			require.Equal(t, "text/plain; charset=utf-8", r.header.Get("Content-Type"))
			require.NotEmpty(t, r.header.Get("Last-Modified"))

			// Files written by code are visible.
			e.stdout(v, id, "write:made by code.txt=xyz")
			r = e.get("files/made%20by%20code.txt/content", qv(v, id))
			require.Equal(t, "xyz", string(r.body))

			// Delete.
			r = e.del("files/hello.txt", qv(v, id))
			require.Equal(t, http.StatusNoContent, r.status)
			require.Empty(t, r.body)
			requireError(t, e.get("files/hello.txt", qv(v, id)), http.StatusNotFound, emulator.CodeFileNotFound)
			requireError(t, e.get("files/hello.txt/content", qv(v, id)), http.StatusNotFound, emulator.CodeFileNotFound)
			requireError(t, e.del("files/hello.txt", qv(v, id)), http.StatusNotFound, emulator.CodeFileNotFound)
			requireError(t, e.get("files", qv(v, id, "path", "nope")), http.StatusNotFound, emulator.CodeFileNotFound)
		})
	}
}

func TestFilesLegacy(t *testing.T) {
	for _, v := range legacyVersions {
		t.Run(v, func(t *testing.T) {
			e := newEnv(t, emulator.Options{})
			id := "sess-legacy-files"
			r := e.upload(v, id, "test-file.txt", []byte("0123456789"))
			require.Equal(t, http.StatusOK, r.status, "%s", r.body)
			m := r.json(t)
			require.Equal(t, "1", m["$id"])
			require.Len(t, m["value"], 1)
			ent := m["value"].([]any)[0].(map[string]any)
			require.Equal(t, "2", ent["$id"])
			props := ent["properties"].(map[string]any)
			require.Equal(t, []string{"$id", "filename", "lastModifiedTime", "size"}, keys(props))
			require.Equal(t, "3", props["$id"])
			require.Equal(t, "test-file.txt", props["filename"])
			require.Equal(t, float64(10), props["size"])

			// Filenames with directories.
			require.Equal(t, http.StatusOK, e.upload(v, id, "/mnt/data/abs.txt", []byte("a")).status)
			require.Equal(t, http.StatusOK, e.upload(v, id, "sub/rel.txt", []byte("r")).status)

			r = e.get("files", qv(v, id))
			require.Equal(t, http.StatusOK, r.status)
			m = r.json(t)
			require.Equal(t, "1", m["$id"])
			var got []string
			for i, x := range m["value"].([]any) {
				xm := x.(map[string]any)
				require.Equal(t, fmt.Sprint(2*i+2), xm["$id"])
				p := xm["properties"].(map[string]any)
				require.Equal(t, fmt.Sprint(2*i+3), p["$id"])
				got = append(got, p["filename"].(string))
			}
			require.Equal(t, []string{"abs.txt", "sub/rel.txt", "test-file.txt"}, got)

			r = e.get("files/content/sub/rel.txt", qv(v, id))
			require.Equal(t, http.StatusOK, r.status)
			require.Equal(t, "r", string(r.body))

			r = e.get("files/test-file.txt", qv(v, id))
			require.Equal(t, http.StatusOK, r.status)
			require.Len(t, r.json(t)["value"], 1)
			require.Equal(t, "test-file.txt", r.json(t)["value"].([]any)[0].(map[string]any)["properties"].(map[string]any)["filename"])

			r = e.del("files/test-file.txt", qv(v, id))
			require.Equal(t, http.StatusOK, r.status)
			require.Equal(t, map[string]any{"message": "file deleted successfully"}, r.json(t))
			requireError(t, e.get("files/content/test-file.txt", qv(v, id)), http.StatusNotFound, emulator.CodeFileNotFound)
		})
	}
}

func TestFilesPathSafety(t *testing.T) {
	e := newEnv(t, emulator.Options{})
	outside := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(outside, "secret"), []byte("secret"), 0o644))
	for _, v := range append(append([]string{}, legacyVersions...), newVersions...) {
		t.Run(v, func(t *testing.T) {
			id := "sess-safe"
			e.stdout(v, id, "write:real.txt=ok\nsymlink:out="+filepath.Join(outside, "secret")+"\nsymlink:outdir="+outside+"\nsymlink:in=real.txt")
			legacy := isLegacy(v)
			content := func(name string) result {
				if legacy {
					return e.get("files/content/"+name, qv(v, id))
				}
				return e.get("files/"+name+"/content", qv(v, id))
			}
			// Escapes are refused, in the name and in path=: ".." is invalid,
			// a symlink out of the data directory is not found.
			requireError(t, content("out"), http.StatusNotFound, emulator.CodeFileNotFound)
			requireError(t, content("outdir%2Fsecret"), http.StatusNotFound, emulator.CodeFileNotFound)
			requireError(t, content("..%2F..%2Fetc%2Fpasswd"), http.StatusBadRequest, wire.CodeSessionRequestValidationFailed)
			requireError(t, e.upload(v, id, "../x.txt", []byte("x")), http.StatusBadRequest, wire.CodeSessionRequestValidationFailed)
			requireError(t, e.upload(v, id, "/etc/x.txt", []byte("x")), http.StatusBadRequest, wire.CodeSessionRequestValidationFailed)
			requireError(t, e.upload(v, id, "outdir/x.txt", []byte("x")), http.StatusBadRequest, wire.CodeSessionRequestValidationFailed)
			if !legacy {
				requireError(t, e.get("files/secret/content", qv(v, id, "path", "outdir")), http.StatusNotFound, emulator.CodeFileNotFound)
				requireError(t, e.get("files/x/content", qv(v, id, "path", "../..")), http.StatusBadRequest, wire.CodeSessionRequestValidationFailed)
				requireError(t, e.get("files", qv(v, id, "path", "outdir")), http.StatusNotFound, emulator.CodeFileNotFound)
				requireError(t, e.get("files/out", qv(v, id)), http.StatusNotFound, emulator.CodeFileNotFound)
			}
			_, err := os.Stat(filepath.Join(outside, "x.txt"))
			require.ErrorIs(t, err, os.ErrNotExist)
			// A symlink inside the data directory works.
			r := content("in")
			require.Equal(t, http.StatusOK, r.status)
			require.Equal(t, "ok", string(r.body))
			// Listings leave escaping links out.
			body := string(e.get("files", qv(v, id, "recursive", "true")).body)
			require.NotContains(t, body, `"out`)
			require.NotContains(t, body, "secret")
			require.Contains(t, body, "real.txt")
			// Deleting the link removes the link, not the target.
			if legacy {
				require.Equal(t, http.StatusOK, e.del("files/out", qv(v, id)).status)
			} else {
				require.Equal(t, http.StatusNoContent, e.del("files/outdir", qv(v, id)).status)
			}
			_, err = os.Stat(filepath.Join(outside, "secret"))
			require.NoError(t, err)
		})
	}
}

func TestUploadTooLarge(t *testing.T) {
	t.Parallel() // net/http's close of a connection with an unread body waits (RST avoidance)
	e := newEnv(t, emulator.Options{MaxUploadBytes: 1000})
	for _, v := range []string{wire.V20240202Preview, wire.V20251002Preview} {
		t.Run(v, func(t *testing.T) {
			id := "sess-413"
			// Exactly at the limit is fine.
			require.Equal(t, http.StatusOK, e.upload(v, id, "ok.bin", bytes.Repeat([]byte("a"), 1000)).status)
			// Over the limit, with a Content-Length small enough to read the body.
			requireError(t, e.upload(v, id, "big.bin", bytes.Repeat([]byte("a"), 1001)), http.StatusRequestEntityTooLarge, emulator.CodePayloadTooLarge)
			// Over the limit, streamed without Content-Length and far bigger.
			pr, pw := io.Pipe()
			mw := multipart.NewWriter(pw)
			go func() {
				part, _ := mw.CreatePart(fileHeader("huge.bin"))
				_, _ = part.Write(bytes.Repeat([]byte("b"), 3<<20))
				_ = mw.Close()
				_ = pw.Close()
			}()
			route := "files"
			if isLegacy(v) {
				route = "files/upload"
			}
			req, err := http.NewRequest(http.MethodPost, e.url(route, qv(v, id)), pr)
			require.NoError(t, err)
			req.Header.Set("Content-Type", mw.FormDataContentType())
			resp, err := e.srv.Client().Do(req)
			if err == nil { // the server may cut the connection while the client still sends
				require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
				resp.Body.Close()
			}
			_, _ = io.Copy(io.Discard, pr)
			// No partial or temporary file is left.
			require.Equal(t, "ok.bin\n", e.stdout(v, id, "ls"))
		})
	}
}

func TestUploadStreaming50MB(t *testing.T) {
	if testing.Short() {
		t.Skip("50 MB upload")
	}
	e := newEnv(t, emulator.Options{})
	const size = 50 << 20
	v := wire.V20251002Preview
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	h := sha256.New()
	go func() {
		part, _ := mw.CreatePart(fileHeader("big.bin"))
		chunk := bytes.Repeat([]byte("0123456789abcdef"), 4096)
		w := io.MultiWriter(part, h)
		for written := 0; written < size; written += len(chunk) {
			_, _ = w.Write(chunk)
		}
		_ = mw.Close()
		_ = pw.Close()
	}()
	req, err := http.NewRequest(http.MethodPost, e.url("files", qv(v, "sess-big")), pr)
	require.NoError(t, err)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := e.srv.Client().Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	require.Contains(t, string(body), fmt.Sprintf(`"sizeInBytes":%d`, size))

	resp, err = e.srv.Client().Get(e.url("files/big.bin/content", qv(v, "sess-big")))
	require.NoError(t, err)
	defer resp.Body.Close()
	h2 := sha256.New()
	n, err := io.Copy(h2, resp.Body)
	require.NoError(t, err)
	require.Equal(t, int64(size), n)
	require.Equal(t, h.Sum(nil), h2.Sum(nil))
}

func TestUploadBadRequests(t *testing.T) {
	e := newEnv(t, emulator.Options{})
	v := wire.V20251002Preview
	r := e.do(http.MethodPost, e.url("files", qv(v, "sess-bad")), strings.NewReader("x"), map[string]string{"Content-Type": "text/plain"})
	requireError(t, r, http.StatusBadRequest, wire.CodeSessionRequestValidationFailed)
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	fw, _ := mw.CreateFormField("other")
	_, _ = fw.Write([]byte("x"))
	_ = mw.Close()
	r = e.do(http.MethodPost, e.url("files", qv(v, "sess-bad")), &buf, map[string]string{"Content-Type": mw.FormDataContentType()})
	requireError(t, r, http.StatusBadRequest, wire.CodeSessionRequestValidationFailed)
}
