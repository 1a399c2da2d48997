package emulator_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/azsessions/azsessions/emulator"
	"github.com/azsessions/azsessions/internal/wire"
)

// bigOutput answers code "N" with N bytes of stdout.
func bigOutput(_ context.Context, code string) emulator.ExecutionResult {
	n, _ := strconv.Atoi(code)
	return emulator.ExecutionResult{Stdout: strings.Repeat("x", n)}
}

// TestExecutionRecordsBoundedByBytes: a session forgets its oldest finished
// executions once their results pass MaxRecordedBytes, always keeping the
// most recently finished one.
func TestExecutionRecordsBoundedByBytes(t *testing.T) {
	t.Parallel()
	// Small records: the bound counts bytes whatever their number (1 MiB
	// and 300 KiB records took most of the package's -race time).
	const bound = 128 << 10
	const chunk = 40 << 10 // three fit under the bound, four do not
	run := func(e *env, ident, op string, n int) {
		t.Helper()
		r := e.postJSON("executions", qv(wire.V20251002Preview, ident),
			map[string]any{"code": strconv.Itoa(n), "timeoutInSeconds": 60, "outputStreamsMaxLength": 1 << 20},
			map[string]string{"operation-id": op})
		require.Equal(t, http.StatusOK, r.status, "body: %.200s", r.body)
	}
	status := func(e *env, ident, op string) int {
		t.Helper()
		return e.get("executions/"+op, qv(wire.V20251002Preview, ident)).status
	}
	tests := []struct {
		name  string
		sizes []int
		kept  []bool
	}{
		{"oldest go first", []int{chunk, chunk, chunk, chunk, chunk}, []bool{false, false, true, true, true}},
		{"under the bound all stay", []int{chunk, chunk, chunk}, []bool{true, true, true}},
		{"a record over the bound alone stays while newest", []int{100, 2 * bound}, []bool{false, true}},
		{"it goes when the next finishes", []int{2 * bound, 100}, []bool{false, true}},
		{"small records after a big one", []int{chunk, 2 * bound, 100, 100}, []bool{false, false, true, true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, emulator.Options{Executor: emulator.ScriptedExecutor(bigOutput), MaxRecordedBytes: bound})
			for i, n := range tc.sizes {
				run(e, "sess-rec", "op"+strconv.Itoa(i), n)
			}
			for i, kept := range tc.kept {
				want := http.StatusNotFound
				if kept {
					want = http.StatusOK
				}
				require.Equal(t, want, status(e, "sess-rec", "op"+strconv.Itoa(i)), "op%d", i)
			}
		})
	}
	t.Run("default bound", func(t *testing.T) {
		// 40 executions of 1 MiB: the default 32 MiB keeps the last ones only.
		e := newEnv(t, emulator.Options{Executor: emulator.ScriptedExecutor(bigOutput)})
		for i := range 40 {
			run(e, "sess-def", "op"+strconv.Itoa(i), 1<<20)
		}
		require.Equal(t, http.StatusNotFound, status(e, "sess-def", "op0"))
		require.Equal(t, http.StatusOK, status(e, "sess-def", "op39"))
		require.Equal(t, http.StatusOK, status(e, "sess-def", "op10"))
	})
	t.Run("running executions are kept", func(t *testing.T) {
		e := newEnv(t, emulator.Options{MaxRecordedBytes: 1})
		r := e.postJSON("executions", qv(wire.V20251002Preview, "sess-run"), map[string]any{"executionType": "Asynchronous", "code": "wait:rec\nprint:ok", "timeoutInSeconds": 60}, map[string]string{"operation-id": "long"})
		require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
		// A queued execution behind it, then the running one is still known.
		r = e.postJSON("executions", qv(wire.V20251002Preview, "sess-run"), map[string]any{"executionType": "Asynchronous", "code": "print:2", "timeoutInSeconds": 60}, map[string]string{"operation-id": "next"})
		require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
		require.Equal(t, http.StatusOK, status(e, "sess-run", "long"))
		require.Equal(t, http.StatusOK, status(e, "sess-run", "next"))
		e.script.release("rec")
		require.Eventually(t, func() bool {
			m := e.get("executions/next", qv(wire.V20251002Preview, "sess-run")).json(t)
			return m["status"] != wire.StatusRunning
		}, 10e9, 10e6)
		require.Equal(t, http.StatusNotFound, status(e, "sess-run", "long"))
		require.Equal(t, http.StatusOK, status(e, "sess-run", "next"))
	})
}
