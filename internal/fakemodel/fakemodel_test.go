package fakemodel

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestServer(t *testing.T) {
	s := New(func(path string, req map[string]any) any {
		if path != "/v1/x" {
			return nil
		}
		return map[string]any{"echo": req["q"]}
	})
	defer s.Close()
	for _, tt := range []struct {
		name, method, path, body string
		status                   int
		answer                   string
	}{
		{name: "answered", method: http.MethodPost, path: "/v1/x", body: `{"q":"hi"}`, status: 200, answer: `{"echo":"hi"}`},
		{name: "unknown path", method: http.MethodPost, path: "/v1/y", body: `{"q":"no"}`, status: 404},
		{name: "not JSON", method: http.MethodPost, path: "/v1/x", body: `{`, status: 400, answer: badRequest},
		{name: "not an object", method: http.MethodPost, path: "/v1/x", body: `null`, status: 400, answer: badRequest},
		{name: "GET", method: http.MethodGet, path: "/v1/x", status: 400, answer: badRequest},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, s.URL+tt.path, strings.NewReader(tt.body))
			require.NoError(t, err)
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.NoError(t, err)
			require.Equal(t, tt.status, resp.StatusCode)
			if tt.answer != "" {
				require.JSONEq(t, tt.answer, string(b))
			}
		})
	}
	got := s.Received()
	require.Len(t, got, 2, "the two decoded POSTs are recorded, the refused ones not")
	require.Equal(t, "hi", got[0]["q"])
	require.Equal(t, "no", got[1]["q"])
}
