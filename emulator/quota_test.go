//go:build !windows

// Counts blocks with syscall.Stat_t, which Windows has not.
package emulator_test

import (
	"bytes"
	"context"
	"io"
	"io/fs"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/azsessions/azsessions/emulator"
	"github.com/azsessions/azsessions/internal/wire"
)

// limitedExecutor wraps an Executor so that its kernels report a disk limit
// (kernel.SpaceReporter), counting allocated blocks as du does.
type limitedExecutor struct {
	emulator.Executor
	limit int64
	mu    sync.Mutex
	dirs  []string
}

func (e *limitedExecutor) NewKernel(ctx context.Context) (emulator.Kernel, error) {
	k, err := e.Executor.NewKernel(ctx)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	e.dirs = append(e.dirs, k.DataDir())
	e.mu.Unlock()
	return &limitedKernel{Kernel: k, limit: e.limit}, nil
}

type limitedKernel struct {
	emulator.Kernel
	limit int64
}

func (k *limitedKernel) DataDirSpace() (used, limit int64, err error) {
	err = filepath.WalkDir(k.DataDir(), func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == k.DataDir() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if fi.Mode().IsRegular() {
			used += fi.Sys().(*syscall.Stat_t).Blocks * 512
		}
		return nil
	})
	return used, k.limit, err
}

// TestUploadDataDirLimit: an upload that would pass the kernel's disk limit
// is refused with 413 DataDirFull and leaves nothing; replacing a file counts
// the old one as freed.
func TestUploadDataDirLimit(t *testing.T) {
	const kib = 1 << 10
	type up struct {
		name    string
		size    int
		chunked bool // no Content-Length: the limit is found while streaming
		want    int
	}
	tests := []struct {
		name  string
		ups   []up
		files map[string]int // what stays, by name
	}{
		{"fits", []up{{"a", 40 * kib, false, 200}}, map[string]int{"a": 40 * kib}},
		{"second does not fit", []up{{"a", 40 * kib, false, 200}, {"b", 40 * kib, false, 413}}, map[string]int{"a": 40 * kib}},
		{"second does not fit, streamed", []up{{"a", 40 * kib, false, 200}, {"b", 40 * kib, true, 413}}, map[string]int{"a": 40 * kib}},
		{"over the limit alone", []up{{"a", 100 * kib, false, 413}}, map[string]int{}},
		{"over the limit alone, streamed", []up{{"a", 100 * kib, true, 413}}, map[string]int{}},
		{"replacing frees the old file", []up{{"a", 40 * kib, false, 200}, {"a", 48 * kib, true, 200}}, map[string]int{"a": 48 * kib}},
		{"small files fill up", []up{{"a", 20 * kib, false, 200}, {"b", 20 * kib, true, 200}, {"c", 20 * kib, false, 200}, {"d", 20 * kib, true, 413}}, map[string]int{"a": 20 * kib, "b": 20 * kib, "c": 20 * kib}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ex := &limitedExecutor{Executor: emulator.ScriptedExecutor(newScript().run), limit: 64 * kib}
			e := newEnv(t, emulator.Options{Executor: ex})
			for _, u := range tc.ups {
				var r result
				content := bytes.Repeat([]byte("z"), u.size)
				if u.chunked {
					r = chunkedUpload(t, e, "sess-quota", u.name, content)
				} else {
					r = e.upload(wire.V20251002Preview, "sess-quota", u.name, content)
				}
				if u.want == http.StatusRequestEntityTooLarge {
					requireError(t, r, u.want, emulator.CodeDataDirFull)
				} else {
					require.Equal(t, u.want, r.status, "body: %s", r.body)
				}
			}
			ex.mu.Lock()
			require.Len(t, ex.dirs, 1)
			dir := ex.dirs[0]
			ex.mu.Unlock()
			des, err := os.ReadDir(dir)
			require.NoError(t, err)
			got := map[string]int{}
			for _, de := range des {
				fi, err := de.Info()
				require.NoError(t, err)
				got[de.Name()] = int(fi.Size())
			}
			require.Equal(t, tc.files, got, "no partial or temporary file is left")
		})
	}
}

// chunkedUpload uploads content with no Content-Length.
func chunkedUpload(t *testing.T, e *env, ident, name string, content []byte) result {
	t.Helper()
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	done := make(chan struct{})
	go func() {
		defer close(done)
		part, err := mw.CreatePart(fileHeader(name))
		if err == nil {
			_, err = part.Write(content)
		}
		if err == nil {
			err = mw.Close()
		}
		pw.CloseWithError(err)
	}()
	req, err := http.NewRequest(http.MethodPost, e.url("files", qv(wire.V20251002Preview, ident)), io.NopCloser(pr))
	require.NoError(t, err)
	req.ContentLength = -1
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := e.srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	_ = pr.CloseWithError(io.ErrClosedPipe) // ends the writer if the server stopped reading
	<-done
	return result{resp.StatusCode, resp.Header, b}
}
