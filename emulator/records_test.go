package emulator_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

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

// recUnit is the size of one unit of the pool-wide record tests: a record of
// n units is n*recUnit bytes (its stdout and the fixed 512 bytes).
const recUnit = 10 << 10

// recordUnits runs, in session ident, a synchronous execution named op whose
// record is n units, and returns the pool's account of recorded bytes
// afterwards (checked against the sessions' own counts).
func recordUnits(t *testing.T, e *env, ident, op string, n int) int64 {
	t.Helper()
	r := e.postJSON("executions", qv(wire.V20251002Preview, sid(ident)),
		map[string]any{"code": unitsCode(n), "timeoutInSeconds": 60, "outputStreamsMaxLength": 1 << 20},
		map[string]string{"operation-id": op})
	require.Equal(t, http.StatusOK, r.status, "body: %.200s", r.body)
	return recordedBytes(t, e)
}

// sid is the identifier of the session the pool-wide tests call x
// (identifiers have at least 4 characters).
func sid(x string) string { return "sess-" + x }

// unitsCode prints n units of stdout, less the record's fixed 512 bytes.
func unitsCode(n int) string { return "print:" + strings.Repeat("x", n*recUnit-512-1) }

// recordedBytes is the pool's account of recorded bytes, which must equal
// the sum of its live sessions' own counts.
func recordedBytes(t *testing.T, e *env) int64 {
	t.Helper()
	account, sum := e.h.RecordedBytes()
	require.Equal(t, sum, account, "the pool's account and its sessions' records")
	return account
}

// requireRecords checks which executions GET executions/{id} still answers;
// each name is "session/op".
func requireRecords(t *testing.T, e *env, kept, gone []string) {
	t.Helper()
	for _, names := range []struct {
		list []string
		want int
	}{{kept, http.StatusOK}, {gone, http.StatusNotFound}} {
		for _, name := range names.list {
			ident, op, _ := strings.Cut(name, "/")
			r := e.get("executions/"+op, qv(wire.V20251002Preview, sid(ident)))
			if names.want == http.StatusNotFound {
				requireError(t, r, http.StatusNotFound, emulator.CodeExecutionNotFound)
				continue
			}
			require.Equal(t, http.StatusOK, r.status, "%s: %.200s", name, r.body)
		}
	}
}

// TestExecutionRecordsBoundedPoolWide: when a finished execution brings the
// pool's records over MaxTotalRecordedBytes, the oldest finished records of
// the session recording the most bytes are forgotten (404
// ExecutionNotFound) until the pool is within the bound, never the
// execution that has just finished; the pool then holds at most the bound
// plus that one record.
func TestExecutionRecordsBoundedPoolWide(t *testing.T) {
	// Room for the tombstones of the (at most two) records each case forgets.
	const budget = 5*recUnit + 2*emulator.TombstoneSize
	type step struct {
		ident, op string
		units     int
	}
	tests := []struct {
		name       string
		steps      []step
		kept, gone []string
	}{
		{"within the bound all stay",
			[]step{{"a", "a0", 1}, {"a", "a1", 1}, {"a", "a2", 1}, {"b", "b0", 1}, {"b", "b1", 1}},
			[]string{"a/a0", "a/a1", "a/a2", "b/b0", "b/b1"}, nil},
		{"the largest session's oldest goes first",
			[]step{{"a", "a0", 1}, {"a", "a1", 1}, {"a", "a2", 1}, {"b", "b0", 1}, {"b", "b1", 1}, {"c", "c0", 1}},
			[]string{"a/a1", "a/a2", "b/b0", "b/b1", "c/c0"}, []string{"a/a0"}},
		{"until the pool is within the bound",
			[]step{{"a", "a0", 1}, {"a", "a1", 1}, {"a", "a2", 1}, {"a", "a3", 1}, {"b", "b0", 1}, {"c", "c0", 2}},
			[]string{"a/a2", "a/a3", "b/b0", "c/c0"}, []string{"a/a0", "a/a1"}},
		{"the just-finished session's own oldest when it is the largest",
			[]step{{"a", "a0", 1}, {"b", "b0", 1}, {"b", "b1", 1}, {"b", "b2", 1}, {"b", "b3", 1}, {"b", "b4", 1}},
			[]string{"a/a0", "b/b1", "b/b2", "b/b3", "b/b4"}, []string{"b/b0"}},
		{"another session's most recent record may go",
			[]step{{"a", "a0", 4}, {"b", "b0", 2}},
			[]string{"b/b0"}, []string{"a/a0"}},
		{"a record over the bound alone stays while just finished",
			[]step{{"a", "a0", 1}, {"b", "b0", 10}},
			[]string{"b/b0"}, []string{"a/a0"}},
		{"it goes when the next finishes",
			[]step{{"a", "a0", 1}, {"b", "b0", 10}, {"a", "a1", 1}},
			[]string{"a/a1"}, []string{"a/a0", "b/b0"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, emulator.Options{MaxTotalRecordedBytes: budget})
			for _, st := range tc.steps {
				got := recordUnits(t, e, st.ident, st.op, st.units)
				require.LessOrEqual(t, got, int64(budget+st.units*recUnit), "after %s: the bound plus the record that just finished", st.op)
			}
			requireRecords(t, e, tc.kept, tc.gone)
		})
	}
}

// TestExecutionRecordsPoolWideKeepsRunning: running executions are never
// forgotten by the pool-wide bound; once finished, the record is the
// just-finished one and stays.
func TestExecutionRecordsPoolWideKeepsRunning(t *testing.T) {
	// The bound leaves room for the tombstones of the two records forgotten.
	const budget = 5*recUnit + 2*emulator.TombstoneSize
	e := newEnv(t, emulator.Options{MaxTotalRecordedBytes: budget})
	r := e.postJSON("executions", qv(wire.V20251002Preview, sid("r")),
		map[string]any{"executionType": "Asynchronous", "code": "wait:rec\n" + unitsCode(1), "timeoutInSeconds": 60, "outputStreamsMaxLength": 1 << 20},
		map[string]string{"operation-id": "long"})
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	for i := range 6 { // 6 units: over the bound
		recordUnits(t, e, "a", "a"+strconv.Itoa(i), 1)
	}
	m := e.get("executions/long", qv(wire.V20251002Preview, sid("r"))).json(t)
	require.Equal(t, wire.StatusRunning, m["status"])
	requireRecords(t, e, []string{"a/a1", "a/a5"}, []string{"a/a0"})

	e.script.release("rec")
	require.Eventually(t, func() bool {
		return e.get("executions/long", qv(wire.V20251002Preview, sid("r"))).json(t)["status"] != wire.StatusRunning
	}, 10e9, 10e6)
	requireRecords(t, e, []string{"r/long", "a/a2", "a/a5"}, []string{"a/a0", "a/a1"})
	require.LessOrEqual(t, recordedBytes(t, e), int64(budget))
}

// TestExecutionRecordsPoolWideReleasedAtEnd: a session that ends gives its
// recorded bytes back to the pool, so a later session's records are not
// forgotten for them; a running execution of an ended session does not
// count when it ends.
func TestExecutionRecordsPoolWideReleasedAtEnd(t *testing.T) {
	tests := []struct {
		name string
		end  func(t *testing.T, e *env)
	}{
		{"DELETE session", func(t *testing.T, e *env) {
			require.Equal(t, http.StatusNoContent, e.del("session", qv(wire.V20251002Preview, sid("a"))).status)
		}},
		{"stopSession", func(t *testing.T, e *env) {
			r := e.do(http.MethodPost, e.url(".management/stopSession", qv(wire.V20251002Preview, sid("a"))), nil, nil)
			require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
		}},
		{"expiry", func(t *testing.T, e *env) {
			e.waitIdle()
			e.clock.Advance(emulator.DefaultCooldown + time.Second)
			require.Equal(t, 1, e.h.Sweep())
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, emulator.Options{MaxTotalRecordedBytes: 5 * recUnit})
			for i := range 4 {
				recordUnits(t, e, "a", "a"+strconv.Itoa(i), 1)
			}
			require.EqualValues(t, 4*recUnit, recordedBytes(t, e))
			tc.end(t, e)
			require.Zero(t, recordedBytes(t, e))
			for i := range 4 {
				recordUnits(t, e, "b", "b"+strconv.Itoa(i), 1)
			}
			requireRecords(t, e, []string{"b/b0", "b/b1", "b/b2", "b/b3"}, nil)
			require.EqualValues(t, 4*recUnit, recordedBytes(t, e))
		})
	}
	t.Run("Close, and a running execution of an ended session", func(t *testing.T) {
		e := newEnv(t, emulator.Options{MaxTotalRecordedBytes: 5 * recUnit})
		recordUnits(t, e, "a", "a0", 1)
		r := e.postJSON("executions", qv(wire.V20251002Preview, sid("r")),
			map[string]any{"executionType": "Asynchronous", "code": "wait:never\n" + unitsCode(1), "timeoutInSeconds": 60, "outputStreamsMaxLength": 1 << 20},
			map[string]string{"operation-id": "long"})
		require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
		require.Equal(t, http.StatusNoContent, e.del("session", qv(wire.V20251002Preview, sid("r"))).status)
		require.NoError(t, e.h.Close()) // waits for r's execution, which ends canceled
		account, _ := e.h.RecordedBytes()
		require.Zero(t, account)
	})
}

// TestExecutionRecordsPoolWideConcurrent: sessions finishing executions at
// once keep the pool's account equal to their records and within the bound
// plus one record (run with -race).
func TestExecutionRecordsPoolWideConcurrent(t *testing.T) {
	e := newEnv(t, emulator.Options{MaxTotalRecordedBytes: 5 * recUnit})
	var wg sync.WaitGroup
	errs := make(chan error, 4*6)
	for s := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ident := "s" + strconv.Itoa(s)
			for i := range 6 {
				r := e.postJSON("executions", qv(wire.V20251002Preview, sid(ident)),
					map[string]any{"code": unitsCode(1 + (s+i)%3), "timeoutInSeconds": 60, "outputStreamsMaxLength": 1 << 20},
					map[string]string{"operation-id": "op" + strconv.Itoa(i)})
				if r.status != http.StatusOK {
					errs <- fmt.Errorf("%s op%d: %d %.200s", ident, i, r.status, r.body)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.LessOrEqual(t, recordedBytes(t, e), int64(5*recUnit+3*recUnit))
}

// TestMaxTotalRecordedBytesNegative: as every other limit of Options, a
// negative MaxTotalRecordedBytes is refused (0 takes the default).
func TestMaxTotalRecordedBytesNegative(t *testing.T) {
	_, err := emulator.NewHandler(emulator.Options{Executor: emulator.ScriptedExecutor(bigOutput), MaxTotalRecordedBytes: -1})
	require.ErrorContains(t, err, "negative limit")
}

// forgetWay makes session "a" forget the result of its execution op0 (code
// unitsCode(units)), by the per-session or the pool-wide bound; afterwards
// session a records aUnits units of results besides op0's tombstone, the
// other sessions otherUnits.
type forgetWay struct {
	name               string
	opt                emulator.Options
	units              int
	forget             func(t *testing.T, e *env)
	aUnits, otherUnits int64
}

var forgetWays = []forgetWay{
	{"per-session MaxRecordedBytes", emulator.Options{MaxRecordedBytes: recUnit + recUnit/2}, 1, func(t *testing.T, e *env) {
		recordUnits(t, e, "a", "op0", 1)
		recordUnits(t, e, "a", "op1", 1) // two records pass the bound: op0's result goes
		requireRecords(t, e, []string{"a/op1"}, []string{"a/op0"})
	}, 1, 0},
	{"pool-wide MaxTotalRecordedBytes, another session's most recent", emulator.Options{MaxTotalRecordedBytes: 5 * recUnit}, 4, func(t *testing.T, e *env) {
		recordUnits(t, e, "a", "op0", 4)
		recordUnits(t, e, "b", "b0", 2) // a records the most: its only record's result goes
		requireRecords(t, e, []string{"b/b0"}, []string{"a/op0"})
	}, 0, 2},
}

// TestForgottenExecutionNotRunAgain: once a session has forgotten the
// result of an execution (per-session or pool-wide bound), a retry with its
// operation-id and its code is refused with 409 ExecutionResultForgotten
// and the code does not run again; other code is 409 OperationIdConflict;
// GET executions/{id} is 404 ExecutionNotFound saying the result was
// forgotten.
func TestForgottenExecutionNotRunAgain(t *testing.T) {
	for _, w := range forgetWays {
		t.Run(w.name, func(t *testing.T) {
			e := newEnv(t, w.opt)
			w.forget(t, e)
			runs := e.h.Stats().Executions
			q := qv(wire.V20251002Preview, sid("a"))
			tests := []struct {
				name, code, execType, want string
			}{
				{"retry, same code", unitsCode(w.units), "Synchronous", emulator.CodeExecutionResultForgotten},
				{"retry, same code, asynchronous", unitsCode(w.units), "Asynchronous", emulator.CodeExecutionResultForgotten},
				{"other code", "print:other", "Synchronous", emulator.CodeOperationIDConflict},
			}
			for _, tc := range tests {
				r := e.postJSON("executions", q,
					map[string]any{"code": tc.code, "executionType": tc.execType, "timeoutInSeconds": 60, "outputStreamsMaxLength": 1 << 20},
					map[string]string{"operation-id": "op0"})
				requireError(t, r, http.StatusConflict, tc.want)
				require.Equal(t, runs, e.h.Stats().Executions, "%s: the code ran again", tc.name)
			}
			r := e.get("executions/op0", q)
			requireError(t, r, http.StatusNotFound, emulator.CodeExecutionNotFound)
			require.Contains(t, string(r.body), "forgotten")
			require.Contains(t, string(r.body), wire.StatusSucceeded)
			// Still refused after more executions (the tombstone stays).
			recordUnits(t, e, "a", "op2", 1)
			r = e.postJSON("executions", q, map[string]any{"code": unitsCode(w.units), "timeoutInSeconds": 60, "outputStreamsMaxLength": 1 << 20}, map[string]string{"operation-id": "op0"})
			requireError(t, r, http.StatusConflict, emulator.CodeExecutionResultForgotten)
			require.Equal(t, runs+1, e.h.Stats().Executions)
		})
	}
}

// TestTombstonesCountedAndReleasedAtEnd: a forgotten execution's tombstone
// counts TombstoneSize bytes in the session's and the pool's records until
// the session ends; then it leaves the account, and a new session of the
// same identifier (new kernel, nothing of the old one) does not know the
// operation-id.
func TestTombstonesCountedAndReleasedAtEnd(t *testing.T) {
	for _, w := range forgetWays {
		t.Run(w.name, func(t *testing.T) {
			e := newEnv(t, w.opt)
			w.forget(t, e)
			require.Equal(t, emulator.TombstoneSize+(w.aUnits+w.otherUnits)*recUnit, recordedBytes(t, e))
			require.Equal(t, http.StatusNoContent, e.del("session", qv(wire.V20251002Preview, sid("a"))).status)
			require.Equal(t, w.otherUnits*recUnit, recordedBytes(t, e))
			runs := e.h.Stats().Executions
			recordUnits(t, e, "a", "op0", w.units) // a new session: it runs
			require.Equal(t, runs+1, e.h.Stats().Executions)
		})
	}
}
