package azsessions

import (
	"bufio"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/azsessions/azsessions/internal/testpayload"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sha256Of hashes a fresh testpayload.Reader of size bytes.
func sha256Of(t testing.TB, size int64) [32]byte {
	h := sha256.New()
	_, err := io.Copy(h, testpayload.NewReader(size))
	require.NoError(t, err)
	var sum [32]byte
	copy(sum[:], h.Sum(nil))
	return sum
}

// hashUpload hashes the single file part of a multipart upload without storing it.
func hashUpload(t testing.TB, r *http.Request) (filename string, n int64, sum [32]byte, err error) {
	mr, err := r.MultipartReader()
	if err != nil {
		return "", 0, sum, err
	}
	part, err := mr.NextPart()
	if err != nil {
		return "", 0, sum, err
	}
	h := sha256.New()
	n, err = io.Copy(h, part)
	if err != nil {
		return "", n, sum, err
	}
	copy(sum[:], h.Sum(nil))
	if _, err := mr.NextPart(); err != io.EOF {
		return "", n, sum, fmt.Errorf("more than one part (%v)", err)
	}
	return part.FileName(), n, sum, nil
}

// TestUploadStreamsLargeFile uploads 24 MiB from a reader that holds no copy
// of it, to a server that hashes instead of storing, and checks the bytes
// arrive intact and the client's allocations stay far below the file size.
func TestUploadStreamsLargeFile(t *testing.T) {
	// 1.5 x the 16 MiB bound below: a copy of the file in memory exceeds it
	// (with the source read into one exact buffer before the upload, the
	// test fails: see the commit that shrank it from 50 MiB)
	const size = 24 << 20
	want := sha256Of(t, size)
	for _, version := range []string{APIVersion20240202Preview, APIVersion20251002Preview} {
		t.Run(version, func(t *testing.T) {
			p := setup(t, version)
			route := "POST /files"
			if features(t, version).Legacy {
				route = "POST /files/upload"
			}
			p.handle(route, func(w http.ResponseWriter, r *http.Request) {
				assert.Equal(t, int64(-1) != r.ContentLength, true)
				name, n, sum, err := hashUpload(t, r)
				assert.NoError(t, err)
				assert.Equal(t, "big.bin", name)
				assert.Equal(t, int64(size), n)
				assert.Equal(t, want, sum, "content hash")
				writeJSON(w, http.StatusOK, []byte(`{"value":[{"properties":{"filename":"big.bin","size":`+strconv.Itoa(size)+`,"lastModifiedTime":"2024-08-06T14:50:38Z"}}],"name":"big.bin","type":"file","sizeInBytes":`+strconv.Itoa(size)+`,"lastModifiedAt":"2024-08-06T14:50:38Z"}`))
			})
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			resp, err := p.client.Session(testIdentifier).UploadFile(context.Background(), "big.bin", testpayload.NewReader(size), nil)
			runtime.ReadMemStats(&after)
			require.NoError(t, err)
			require.Equal(t, int64(size), resp.SizeInBytes)
			// TotalAlloc counts every allocation of the process (client and
			// server) during the upload: buffering the file once would exceed it.
			grew := after.TotalAlloc - before.TotalAlloc
			t.Logf("allocated %d KiB while uploading %d MiB", grew>>10, size>>20)
			require.Less(t, grew, uint64(16<<20))
		})
	}
}

// hugeReader reports a size over MaxUploadBytes and fails any read.
type hugeReader struct{ off int64 }

func (h *hugeReader) Read([]byte) (int, error) { return 0, errors.New("hugeReader must not be read") }
func (h *hugeReader) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekEnd:
		h.off = MaxUploadBytes + 1 + offset
	case io.SeekCurrent:
		h.off += offset
	default:
		h.off = offset
	}
	return h.off, nil
}

func TestUploadTooLargeBeforeIO(t *testing.T) {
	t.Parallel() // the fake server's close of a connection with an unread body waits (net/http's RST avoidance)
	for _, version := range allVersions {
		p := setup(t, version)
		_, err := p.client.Session(testIdentifier).UploadFile(context.Background(), "x.bin", &hugeReader{}, nil)
		require.ErrorIs(t, err, ErrFileTooLarge)
		p.requireNoIO(t)
	}
	// exactly the limit is fine as far as the client is concerned (the
	// reader starts at an offset so that only MaxUploadBytes bytes remain)
	p := setup(t, APIVersion20251002Preview)
	p.handle("POST /files", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
		writeError(w, http.StatusRequestEntityTooLarge, "PayloadTooLarge", "too large")
	})
	rd := testpayload.NewReader(MaxUploadBytes + 10)
	_, err := rd.Seek(10, io.SeekStart)
	require.NoError(t, err)
	_, err = p.client.Session(testIdentifier).UploadFile(context.Background(), "x.bin", rd, nil)
	require.NotErrorIs(t, err, ErrFileTooLarge)
	require.ErrorContains(t, err, "413")
}

// notSeekable is an io.ReadSeeker whose Seek fails.
type notSeekable struct{ io.Reader }

func (notSeekable) Seek(int64, int) (int64, error) { return 0, errors.New("cannot seek") }

func TestUploadArgumentsBeforeIO(t *testing.T) {
	p := setup(t, APIVersion20251002Preview)
	_, err := p.client.Session(testIdentifier).UploadFile(context.Background(), "x", nil, nil)
	require.Error(t, err)
	_, err = p.client.Session(testIdentifier).UploadFile(context.Background(), "x", notSeekable{}, nil)
	require.ErrorContains(t, err, "not seekable")
	p.requireNoIO(t)
}

// TestUploadRetryRace is the pitfall of go-conventions.md: the fake answers
// 503 to a large upload without reading its body, then accepts the retry and
// compares the hash of what it received with the source. Run under -race;
// a shared body read by two tries at once shows up as a race or a bad hash.
func TestUploadRetryRace(t *testing.T) {
	t.Parallel() // its fake reads the first try's body slowly
	const size = 8 << 20
	want := sha256Of(t, size)
	for i := range 6 {
		version := APIVersion20251002Preview
		if i%2 == 1 {
			version = APIVersion20240802Preview
		}
		t.Run(strconv.Itoa(i)+"/"+version, func(t *testing.T) {
			p := setup(t, version)
			route := "POST /files"
			if features(t, version).Legacy {
				route = "POST /files/upload"
			}
			var tries, good atomic.Int32
			p.handle(route, func(w http.ResponseWriter, r *http.Request) {
				if tries.Add(1) == 1 {
					// Answer at once with the body unread, then keep reading
					// it slowly: the client's transport goes on writing (and
					// reading the source) for this try while the retry starts.
					rc := http.NewResponseController(w)
					_ = rc.EnableFullDuplex()
					body := []byte(`{"error":{"code":"ServiceUnavailable","message":"busy"}}`)
					w.Header().Set("Content-Length", strconv.Itoa(len(body))) // complete once flushed
					writeJSON(w, http.StatusServiceUnavailable, body)
					_ = rc.Flush()
					buf := make([]byte, 64<<10)
					for {
						if _, err := r.Body.Read(buf); err != nil {
							return
						}
						time.Sleep(100 * time.Microsecond)
					}
				}
				name, n, sum, err := hashUpload(t, r)
				if !assert.NoError(t, err) {
					return
				}
				assert.Equal(t, "race.bin", name)
				assert.Equal(t, int64(size), n)
				assert.Equal(t, want, sum, "the retried body is the source, byte for byte")
				good.Add(1)
				writeJSON(w, http.StatusOK, []byte(`{"value":[{"properties":{"filename":"race.bin","size":1,"lastModifiedTime":"2024-08-06T14:50:38Z"}}],"name":"race.bin","type":"file","sizeInBytes":1,"lastModifiedAt":"2024-08-06T14:50:38Z"}`))
			})
			_, err := p.client.Session(testIdentifier).UploadFile(context.Background(), "race.bin", testpayload.NewReader(size), nil)
			require.NoError(t, err)
			require.GreaterOrEqual(t, tries.Load(), int32(2))
			require.Equal(t, int32(1), good.Load())
		})
	}
}

// TestMultipartBodyViews checks the per-try views directly: a view of an
// abandoned try fails, the current one reads the whole body, and Seek works.
func TestMultipartBodyViews(t *testing.T) {
	b, err := newMultipartBody(testpayload.NewReader(100000), "f.bin", "")
	require.NoError(t, err)
	old := b.newView()
	buf := make([]byte, 10)
	_, err = old.Read(buf)
	require.NoError(t, err)
	cur := b.newView()
	_, err = old.Read(buf)
	require.ErrorIs(t, err, errAbandonedTry)
	all, err := io.ReadAll(cur)
	require.NoError(t, err)
	require.Equal(t, b.size(), int64(len(all)))
	n, err := cur.Seek(0, io.SeekStart)
	require.NoError(t, err)
	require.Zero(t, n)
	again, err := io.ReadAll(bufio.NewReaderSize(cur, 7)) // odd read sizes
	require.NoError(t, err)
	require.Equal(t, all, again)
	end, err := cur.Seek(0, io.SeekEnd)
	require.NoError(t, err)
	require.Equal(t, b.size(), end)
	_, err = cur.Seek(-1, io.SeekStart)
	require.Error(t, err)
}

// TestUploadSourceShrinks: a source that yields fewer bytes than its size
// said is an error, not a short upload.
func TestUploadSourceShrinks(t *testing.T) {
	t.Parallel() // the fake server's close of a connection with an unread body waits (net/http's RST avoidance)
	p := setup(t, APIVersion20251002Preview, withOptions(func(o *ClientOptions) { o.Retry.MaxRetries = -1 }))
	p.handle("POST /files", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		writeJSON(w, http.StatusOK, example(t, exBYOC2410, "upload", "response_body"))
	})
	_, err := p.client.Session(testIdentifier).UploadFile(context.Background(), "x.bin", &shrinkingReader{Reader: testpayload.NewReader(1 << 20)}, nil)
	require.Error(t, err)
}

// shrinkingReader says it has size bytes but ends at half of them.
type shrinkingReader struct {
	*testpayload.Reader
	read int64
}

func (s *shrinkingReader) Read(p []byte) (int, error) {
	if s.read >= s.Size/2 {
		return 0, io.EOF
	}
	n, err := s.Reader.Read(p)
	s.read += int64(n)
	return n, err
}

// TestDownloadFileToPathCutBody: a server that closes the connection after
// half of the announced Content-Length makes DownloadFileToPath fail, leave
// no temporary file and keep the previous content of the local file.
func TestDownloadFileToPathCutBody(t *testing.T) {
	for _, version := range []string{APIVersion20240202Preview, APIVersion20251002Preview} {
		for _, cred := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/cred=%v", version, cred), func(t *testing.T) {
				p := setup(t, version, withCred(cred))
				content := make([]byte, 1<<20)
				_, _ = io.ReadFull(testpayload.NewReader(int64(len(content))), content)
				p.handle(downloadRoute(features(t, version).Legacy), func(w http.ResponseWriter, r *http.Request) {
					conn, buf, err := http.NewResponseController(w).Hijack()
					if !assert.NoError(t, err) {
						return
					}
					defer conn.Close()
					fmt.Fprintf(buf, "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n", len(content))
					_, _ = buf.Write(content[:len(content)/2])
					_ = buf.Flush()
				})
				dir := t.TempDir()
				local := filepath.Join(dir, "keep.bin")
				require.NoError(t, os.WriteFile(local, []byte("previous"), 0o644))
				_, err := p.client.Session(testIdentifier).DownloadFileToPath(context.Background(), "data.bin", local, &DownloadFileToPathOptions{Overwrite: true})
				require.Error(t, err)
				require.NotContains(t, err.Error(), testIdentifier)
				got, err := os.ReadFile(local)
				require.NoError(t, err)
				require.Equal(t, "previous", string(got))
				entries, err := os.ReadDir(dir)
				require.NoError(t, err)
				require.Len(t, entries, 1, "no temporary file is left: %v", entries)

				// a new file is not created either
				fresh := filepath.Join(dir, "fresh.bin")
				_, err = p.client.Session(testIdentifier).DownloadFileToPath(context.Background(), "data.bin", fresh, nil)
				require.Error(t, err)
				_, err = os.Stat(fresh)
				require.ErrorIs(t, err, os.ErrNotExist)
				entries, err = os.ReadDir(dir)
				require.NoError(t, err)
				require.Len(t, entries, 1)
			})
		}
	}
}

// TestDownloadFileToPathShortBodyWithoutError: a body shorter than its
// Content-Length is caught even when the transport reports no error (here a
// server whose declared length the client can only check after the copy).
func TestDownloadFileToPathErrors(t *testing.T) {
	p := setup(t, APIVersion20251002Preview)
	p.handle("GET /files/{name}/content", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "FileNotFound", "no such file")
	})
	dir := t.TempDir()
	_, err := p.client.Session(testIdentifier).DownloadFileToPath(context.Background(), "missing.txt", filepath.Join(dir, "x"), nil)
	require.ErrorContains(t, err, "FileNotFound")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries)
	_, err = p.client.Session(testIdentifier).DownloadFileToPath(context.Background(), "missing.txt", "", nil)
	require.Error(t, err)
	_, err = p.client.Session(testIdentifier).DownloadFileToPath(context.Background(), "missing.txt", filepath.Join(dir, "no-such-dir", "x"), nil)
	require.Error(t, err)
}

// lingeringTransport answers the first try with 503 at once while a
// goroutine keeps reading that try's request body, as net/http's write loop
// can after RoundTrip returned; later tries go to the real transport.
type lingeringTransport struct {
	next      policy.Transporter
	tries     atomic.Int32
	wg        sync.WaitGroup
	readBytes atomic.Int64
	readErr   atomic.Pointer[error]
}

func (lt *lingeringTransport) Do(req *http.Request) (*http.Response, error) {
	if lt.tries.Add(1) > 1 {
		return lt.next.Do(req)
	}
	body := req.Body
	lt.wg.Add(1)
	go func() {
		defer lt.wg.Done()
		buf := make([]byte, 16<<10)
		deadline := time.Now().Add(2 * time.Second)
		for time.Now().Before(deadline) {
			n, err := body.Read(buf)
			lt.readBytes.Add(int64(n))
			if err != nil {
				lt.readErr.Store(&err)
				return
			}
			time.Sleep(20 * time.Microsecond)
		}
	}()
	return &http.Response{
		StatusCode: http.StatusServiceUnavailable,
		Status:     "503 Service Unavailable",
		Header:     http.Header{"Content-Type": {"application/json"}},
		Body:       io.NopCloser(strings.NewReader(`{"error":{"code":"ServiceUnavailable","message":"busy"}}`)),
		Request:    req,
	}, nil
}

// TestUploadRetryLingeringReader makes the hazard of TestUploadRetryRace
// deterministic: the abandoned try's reader is still being read while the
// retry streams. The retry must arrive intact and the abandoned reader must
// fail instead of stealing bytes.
func TestUploadRetryLingeringReader(t *testing.T) {
	const size = 8 << 20
	want := sha256Of(t, size)
	for i := range 3 {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			var lt *lingeringTransport
			p := setup(t, APIVersion20251002Preview, withOptions(func(o *ClientOptions) {
				lt = &lingeringTransport{next: o.Transport}
				o.Transport = lt
			}))
			p.handle("POST /files", func(w http.ResponseWriter, r *http.Request) {
				_, n, sum, err := hashUpload(t, r)
				assert.NoError(t, err)
				assert.Equal(t, int64(size), n)
				assert.Equal(t, want, sum, "the retried body is the source, byte for byte")
				writeJSON(w, http.StatusOK, example(t, exBYOC2410, "upload", "response_body"))
			})
			_, err := p.client.Session(testIdentifier).UploadFile(context.Background(), "race.bin", testpayload.NewReader(size), nil)
			lt.wg.Wait()
			require.NoError(t, err)
			require.Equal(t, int32(2), lt.tries.Load())
			require.Equal(t, 1, p.count())
			readErr := lt.readErr.Load()
			require.NotNil(t, readErr, "the abandoned try's reader stopped")
			require.ErrorIs(t, *readErr, errAbandonedTry)
		})
	}
}
