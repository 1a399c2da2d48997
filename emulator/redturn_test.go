package emulator_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/azsessions/azsessions/emulator"
	"github.com/azsessions/azsessions/internal/wire"
)

// TestTurnsSurviveSessionEnd: a session deleted while one execution runs and
// MaxQueuedExecutions wait behind it (turn channels, d89ca29) ends them all
// (none stays running), never runs two at once, and the same identifier then
// gets a new session whose executions run: no turn is left unclosed.
func TestTurnsSurviveSessionEnd(t *testing.T) {
	e := newEnv(t, emulator.Options{MaxQueuedExecutions: 2})
	v, id := wire.V20251002Preview, "sess-turns"
	post := func(op, code string, async bool) result {
		body := map[string]any{"code": code}
		if async {
			body["executionType"] = "Asynchronous"
		}
		return e.postJSON("executions", qv(v, id), body, map[string]string{"operation-id": op})
	}
	ops := []string{"run", "q1", "q2"}
	require.Equal(t, http.StatusOK, post("run", "concurrency\nwait:never", true).status)
	require.Equal(t, http.StatusOK, post("q1", "concurrency\nprint:1", true).status)
	require.Equal(t, http.StatusOK, post("q2", "concurrency\nprint:2", true).status)
	requireError(t, post("q3", "print:3", true), http.StatusTooManyRequests, emulator.CodeTooManyRequests)
	require.Equal(t, http.StatusNoContent, e.del("session", qv(v, id)).status)
	for _, op := range ops {
		require.Eventually(t, func() bool {
			r := e.get("executions/"+op, qv(v, id))
			return r.status != http.StatusOK || !bytesContains(r.body, `"Running"`)
		}, 10*time.Second, 10*time.Millisecond, op)
	}
	for i, code := range []string{"concurrency\nprint:a", "concurrency\nprint:b"} {
		r := post("new"+string(rune('0'+i)), code, false)
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	}
	e.script.mu.Lock()
	defer e.script.mu.Unlock()
	for dir, n := range e.script.maxRun {
		require.LessOrEqual(t, n, 1, "session dir %s", dir) // per session; the old and new sessions may overlap
	}
	require.NotEmpty(t, e.script.maxRun)
}

func bytesContains(b []byte, s string) bool { return len(b) > 0 && contains(string(b), s) }

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}
