package main

import (
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestHTTPServerTimeouts: idle keep-alive connections are closed, headers
// are bounded, and nothing cuts long bodies or executions as a whole.
func TestHTTPServerTimeouts(t *testing.T) {
	srv := newHTTPServer(http.NotFoundHandler(), slog.New(slog.DiscardHandler))
	require.Equal(t, 2*time.Minute, srv.IdleTimeout)
	require.Equal(t, 30*time.Second, srv.ReadHeaderTimeout)
	require.Zero(t, srv.ReadTimeout)
	require.Zero(t, srv.WriteTimeout)
}
