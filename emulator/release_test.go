package emulator

import (
	"bytes"
	"context"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/azsessions/azsessions/internal/wire"
)

// answerRecorder records how many holds the session had when the first byte
// of the answer was written.
type answerRecorder struct {
	*httptest.ResponseRecorder
	inflight func() int
	atAnswer int // -1 until the answer starts
}

func (a *answerRecorder) start() {
	if a.atAnswer < 0 {
		a.atAnswer = a.inflight()
	}
}

func (a *answerRecorder) WriteHeader(code int) { a.start(); a.ResponseRecorder.WriteHeader(code) }
func (a *answerRecorder) Write(b []byte) (int, error) {
	a.start()
	return a.ResponseRecorder.Write(b)
}

// TestSessionReleasedBeforeAnswer: the handler releases the request's hold
// on its session explicitly before it writes the answer, success or error,
// so that a client that has its answer sees the session idle (it can
// expire; a deleted session's kernel is closed), and it releases it once.
func TestSessionReleasedBeforeAnswer(t *testing.T) {
	h, err := NewHandler(Options{Executor: ScriptedExecutor(func(context.Context, string) ExecutionResult {
		return ExecutionResult{Stdout: "hi\n"}
	})})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, h.Close()) })
	v := wire.V20251002Preview
	q := "?" + url.Values{"api-version": {v}, "identifier": {"sess-1"}}.Encode()

	var upload bytes.Buffer
	mw := multipart.NewWriter(&upload)
	fw, err := mw.CreateFormFile("file", "a.txt")
	require.NoError(t, err)
	_, _ = fw.Write([]byte("content"))
	require.NoError(t, mw.Close())

	serve := func(method, path, ctype string, body []byte) (*answerRecorder, *session) {
		s := func() *session {
			h.pool.mu.Lock()
			defer h.pool.mu.Unlock()
			return h.pool.sessions["sess-1"]
		}()
		r := httptest.NewRequest(method, h.PoolPath()+"/"+path+q, bytes.NewReader(body))
		if ctype != "" {
			r.Header.Set("Content-Type", ctype)
		}
		w := &answerRecorder{ResponseRecorder: httptest.NewRecorder(), atAnswer: -1, inflight: func() int {
			cur := s
			h.pool.mu.Lock()
			defer h.pool.mu.Unlock()
			if cur == nil {
				cur = h.pool.sessions["sess-1"]
			}
			if cur == nil {
				return -2 // no session: an answer before acquire
			}
			return cur.inflight
		}}
		h.ServeHTTP(w, r)
		if s == nil {
			h.pool.mu.Lock()
			s = h.pool.sessions["sess-1"]
			h.pool.mu.Unlock()
		}
		return w, s
	}
	steps := []struct {
		name, method, path, ctype, body string
		status                          int
	}{
		{"execute", http.MethodPost, "executions", "application/json", `{"codeInputType":"inline","executionType":"synchronous","code":"x","timeoutInSeconds":60}`, http.StatusOK},
		{"upload", http.MethodPost, "files", mw.FormDataContentType(), upload.String(), http.StatusOK},
		{"list files", http.MethodGet, "files", "", "", http.StatusOK},
		{"get file", http.MethodGet, "files/a.txt", "", "", http.StatusOK},
		{"download", http.MethodGet, "files/a.txt/content", "", "", http.StatusOK},
		{"missing file (error answer)", http.MethodGet, "files/nope.txt", "", "", http.StatusNotFound},
		{"get session", http.MethodGet, "session", "", "", http.StatusOK},
		{"delete file", http.MethodDelete, "files/a.txt", "", "", http.StatusNoContent},
		{"delete session", http.MethodDelete, "session", "", "", http.StatusNoContent},
	}
	for _, st := range steps {
		w, s := serve(st.method, st.path, st.ctype, []byte(st.body))
		require.Equal(t, st.status, w.Code, "%s: %s", st.name, strings.TrimSpace(w.Body.String()))
		require.Equal(t, 0, w.atAnswer, "%s: the session was still held when the answer started", st.name)
		h.pool.mu.Lock()
		n := s.inflight
		h.pool.mu.Unlock()
		require.Equal(t, 0, n, "%s: released exactly once", st.name)
	}
}
