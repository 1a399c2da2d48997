// Package testpayload makes large, deterministic test and benchmark data without
// holding it in memory.
package testpayload

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
)

// block is the repeated content: xorshift bytes of a prime length, so that
// pages never line up with I/O buffers.
var block = func() []byte {
	b := make([]byte, 65521)
	x := uint32(2463534242)
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}()

// Reader is an io.ReadSeeker of Size bytes whose byte i is block[i%len(block)].
// It holds no buffer of its size.
type Reader struct {
	Size int64
	off  int64
}

// NewReader returns a Reader of size bytes.
func NewReader(size int64) *Reader { return &Reader{Size: size} }

// Read implements io.Reader.
func (r *Reader) Read(p []byte) (int, error) {
	if r.off >= r.Size {
		return 0, io.EOF
	}
	if rem := r.Size - r.off; int64(len(p)) > rem {
		p = p[:rem]
	}
	n := 0
	for n < len(p) {
		n += copy(p[n:], block[(r.off+int64(n))%int64(len(block)):])
	}
	r.off += int64(n)
	return n, nil
}

// Seek implements io.Seeker.
func (r *Reader) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += r.off
	case io.SeekEnd:
		offset += r.Size
	default:
		return 0, errors.New("pattern: bad whence")
	}
	if offset < 0 {
		return 0, errors.New("pattern: negative offset")
	}
	r.off = offset
	return offset, nil
}

// WriteFile writes size bytes of the pattern to path.
func WriteFile(path string, size int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, NewReader(size))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// RawUpload is the hand-written baseline the benchmarks compare the SDK
// with: it POSTs size bytes of the pattern as a streamed multipart/form-data
// body with one part named "file" to u with plain net/http, and expects 200.
func RawUpload(ctx context.Context, hc *http.Client, u, name string, size int64) error {
	var head bytes.Buffer
	mw := multipart.NewWriter(&head)
	if _, err := mw.CreateFormFile("file", name); err != nil {
		return err
	}
	headLen := head.Len()
	if err := mw.Close(); err != nil {
		return err
	}
	tail := append([]byte(nil), head.Bytes()[headLen:]...)
	head.Truncate(headLen)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, io.MultiReader(&head, NewReader(size), bytes.NewReader(tail)))
	if err != nil {
		return err
	}
	req.ContentLength = int64(headLen) + size + int64(len(tail))
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("upload: HTTP %d", resp.StatusCode)
	}
	return nil
}
