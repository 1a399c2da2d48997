package emulator_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/azsessions/azsessions/emulator"
	"github.com/azsessions/azsessions/internal/wire"
)

// TestCheckListenAddr: only loopback is served without a shared token; an
// unspecified address (every interface) counts as reachable.
func TestCheckListenAddr(t *testing.T) {
	withToken := emulator.Options{RequireToken: true, Token: "s3cret"}
	tests := []struct {
		addr string
		opts emulator.Options
		ok   bool
	}{
		{"127.0.0.1:8080", emulator.Options{}, true},
		{"127.3.4.5:8080", emulator.Options{}, true},
		{"[::1]:8080", emulator.Options{}, true},
		{"0.0.0.0:8080", emulator.Options{}, false},
		{"[::]:8080", emulator.Options{}, false},
		{"10.1.2.3:8080", emulator.Options{}, false},
		{"192.168.1.10:8080", emulator.Options{RequireToken: true}, false}, // any token passes: no protection
		{"0.0.0.0:8080", withToken, true},
		{"[::]:8080", withToken, true},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/token=%v", tt.addr, tt.opts.Token != ""), func(t *testing.T) {
			a, err := net.ResolveTCPAddr("tcp", tt.addr)
			require.NoError(t, err)
			err = emulator.CheckListenAddr(a, tt.opts)
			if tt.ok {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, emulator.ErrNotLoopback)
			require.ErrorContains(t, err, "-require-token")
			require.ErrorContains(t, err, "AZSESSIONS_EMULATOR_TOKEN")
			if a.IP.IsUnspecified() { // Go shows 0.0.0.0 as [::]: say what it means
				require.ErrorContains(t, err, "(every interface)")
			}
		})
	}
}

// TestStartRefusesNonLoopback: Start never serves beyond loopback without a
// shared token, and closes the executor it was given.
func TestStartRefusesNonLoopback(t *testing.T) {
	_, err := emulator.Start("0.0.0.0:0", emulator.Options{Executor: emulator.ScriptedExecutor(nil)})
	require.ErrorIs(t, err, emulator.ErrNotLoopback)
	srv, err := emulator.Start("127.0.0.1:0", emulator.Options{Executor: emulator.ScriptedExecutor(nil)})
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(srv.Endpoint, "http://127.0.0.1:"), srv.Endpoint)
	require.NoError(t, srv.Close())
}

// TestSharedToken: with Token set only that bearer token passes.
func TestSharedToken(t *testing.T) {
	e := newEnv(t, emulator.Options{RequireToken: true, Token: "s3cret-tok"})
	q := qv(wire.V20251002Preview, "sess-token")
	// The message tells a missing token from a wrong one (a fresh user
	// read "a bearer token is required" for a wrong one), naming neither.
	const missing, wrong = "a bearer token is required", "not the one this emulator accepts"
	for _, tt := range []struct {
		auth string
		want int
		msg  string
	}{
		{"", http.StatusUnauthorized, missing},
		{"Bearer other", http.StatusUnauthorized, wrong},
		{"Bearer s3cret-to", http.StatusUnauthorized, wrong},
		{"Basic s3cret-tok", http.StatusUnauthorized, missing},
		{"Bearer ", http.StatusUnauthorized, missing},
		{"Bearer s3cret-tok", http.StatusOK, ""},
		{"bearer s3cret-tok", http.StatusOK, ""},
		{"BEARER   s3cret-tok  ", http.StatusOK, ""},
		{"Bearer " + strings.Repeat("s3cret-tok", 5000), http.StatusUnauthorized, wrong}, // 50 KB, the right one as its prefix
		{"Bearer other s3cret-tok", http.StatusUnauthorized, wrong},
	} {
		hdr := map[string]string{}
		if tt.auth != "" {
			hdr["Authorization"] = tt.auth
		}
		r := e.postJSON("executions", q, map[string]any{"code": "print:x"}, hdr)
		require.Equal(t, tt.want, r.status, "%q: %s", tt.auth, r.body)
		if tt.msg != "" {
			require.Contains(t, string(r.body), tt.msg, "%q", tt.auth)
			require.NotContains(t, string(r.body), "s3cret")
			require.NotContains(t, string(r.body), "other")
		}
	}
	require.NotContains(t, e.logs.String(), "s3cret")
	_, err := emulator.NewHandler(emulator.Options{Executor: emulator.ScriptedExecutor(nil), Token: "x"})
	require.ErrorContains(t, err, "RequireToken")
}

// TestExecutionBodyBudget: execution bodies held in memory are bounded
// across the pool. A request whose body does not fit is answered 429 with
// Retry-After before its body is read; when the room is given back,
// requests pass again.
func TestExecutionBodyBudget(t *testing.T) {
	e := newEnv(t, emulator.Options{MaxBodyMemoryBytes: 16 << 20})
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { e.script.release("budget") }) }
	t.Cleanup(release) // a failing test does not wait out the execution timeout
	v := wire.V20251002Preview
	// A chunked body (length unknown) reserves the largest body allowed:
	// the whole budget, for as long as its (synchronous) execution runs.
	pr, pw := io.Pipe()
	req, err := http.NewRequest(http.MethodPost, e.url("executions", qv(v, "sess-budget-1")), pr)
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	held := make(chan result, 1)
	go func() {
		resp, err := e.srv.Client().Do(req)
		if err != nil {
			held <- result{status: -1, body: []byte(err.Error())}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		held <- result{status: resp.StatusCode, body: b}
	}()
	_, err = io.WriteString(pw, `{"code":"wait:budget\nprint:held"}`)
	require.NoError(t, err)
	require.NoError(t, pw.Close())
	require.Eventually(t, func() bool { return e.h.Stats().Executions == 1 }, 10*time.Second, 5*time.Millisecond)

	r := e.postJSON("executions", qv(v, "sess-budget-2"), map[string]any{"code": "print:small"}, nil)
	requireError(t, r, http.StatusTooManyRequests, emulator.CodeTooManyRequests)
	require.Equal(t, "1", r.header.Get("Retry-After"))
	require.EqualValues(t, 1, e.h.Stats().Executions, "the refused request ran")

	release()
	first := <-held
	require.Equal(t, http.StatusOK, first.status, "%s", first.body)
	r = e.postJSON("executions", qv(v, "sess-budget-2"), map[string]any{"code": "print:small"}, nil)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	_, err = emulator.NewHandler(emulator.Options{Executor: emulator.ScriptedExecutor(nil), MaxBodyMemoryBytes: 1 << 20})
	require.ErrorContains(t, err, "MaxBodyMemoryBytes")
}

// TestTrickledBodyFails: a client that keeps sending a byte just often
// enough to beat BodyReadTimeout is cut off once it falls below
// MinBodyRate on average, instead of holding its connection, handler and
// session for ever.
func TestTrickledBodyFails(t *testing.T) {
	t.Parallel() // it mostly waits on real time
	e := newEnv(t, emulator.Options{BodyReadTimeout: 300 * time.Millisecond, MinBodyRate: 100})
	for _, route := range []string{"files", "executions"} {
		t.Run(route, func(t *testing.T) {
			u := e.url(route, qv(wire.V20251002Preview, "sess-trickle-"+route))
			conn, err := net.Dial("tcp", strings.TrimPrefix(e.srv.URL, "http://"))
			require.NoError(t, err)
			defer conn.Close()
			ctype, first := "application/json", `{"code":"print:`
			if route == "files" {
				ctype = "multipart/form-data; boundary=b"
				first = "--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"x\"\r\n\r\n"
			}
			_, err = fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: %s\r\nContent-Length: 100000\r\n\r\n%s", strings.TrimPrefix(u, e.srv.URL), ctype, first)
			require.NoError(t, err)
			// The trickle: one byte every 100 ms (well within the 300 ms idle
			// timeout, far below 100 B/s). Bounded: 20 s at most.
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			trickled := make(chan struct{})
			var sent atomic.Int64
			go func() {
				defer close(trickled)
				tick := time.NewTicker(100 * time.Millisecond)
				defer tick.Stop()
				for range 200 {
					select {
					case <-ctx.Done():
						return
					case <-tick.C:
					}
					if _, err := conn.Write([]byte("a")); err != nil {
						return
					}
					sent.Add(1)
				}
			}()
			require.NoError(t, conn.SetReadDeadline(time.Now().Add(30*time.Second)))
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			require.NoError(t, err, "no answer to a trickled body")
			resp.Body.Close()
			require.Equal(t, http.StatusBadRequest, resp.StatusCode)
			require.Less(t, sent.Load(), int64(150), "answered only when the trickle stopped by itself")
			cancel()
			<-trickled
		})
	}
}

// TestHTTPServerTimeouts: idle keep-alive connections are closed, headers
// are bounded, and nothing cuts long bodies or executions as a whole.
func TestHTTPServerTimeouts(t *testing.T) {
	srv := emulator.NewHTTPServer(http.NotFoundHandler(), nil)
	require.Equal(t, 2*time.Minute, srv.IdleTimeout)
	require.Equal(t, 30*time.Second, srv.ReadHeaderTimeout)
	require.Zero(t, srv.ReadTimeout)
	require.Zero(t, srv.WriteTimeout)
}
