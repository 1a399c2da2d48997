package emulator_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/azsessions/azsessions/emulator"
	"github.com/azsessions/azsessions/internal/wire"
)

func TestExecuteLegacyShape(t *testing.T) {
	e := newEnv(t, emulator.Options{})
	for _, v := range legacyVersions {
		for _, route := range []string{"code/execute", "code/execute/"} {
			t.Run(v+" "+route, func(t *testing.T) {
				body := map[string]any{"properties": map[string]any{"codeInputType": "inline", "executionType": "synchronous", "code": "print:hello\nvalue:42", "timeoutInSeconds": 100, "identifier": "sess-legacy"}}
				r := e.postJSON(route, qv(v, "sess-legacy"), body, nil)
				require.Equal(t, http.StatusOK, r.status, "%s", r.body)
				require.NotEmpty(t, r.header.Get("operation-id"))
				m := r.json(t)
				require.Equal(t, []string{"$id", "properties"}, keys(m))
				require.Equal(t, "1", m["$id"])
				p := m["properties"].(map[string]any)
				require.Equal(t, []string{"$id", "executionTimeInMilliseconds", "result", "status", "stderr", "stdout"}, keys(p))
				require.Equal(t, "2", p["$id"])
				require.Equal(t, wire.LegacySuccess, p["status"])
				require.Equal(t, "hello\n", p["stdout"])
				require.Equal(t, float64(42), p["result"])

				r = e.postJSON(route, qv(v, "sess-legacy"), map[string]any{"properties": map[string]any{"code": "fail\nstderr:boom"}}, nil)
				p = r.json(t)["properties"].(map[string]any)
				require.Equal(t, wire.LegacyFailure, p["status"])
				require.Equal(t, "boom", p["stderr"])
				require.Nil(t, p["result"], "a failure's result is null, as in the walkthrough")

				// A None value is "" on the legacy contract (the walkthrough's
				// print(...) and to_csv(...) cells), as on the new one
				// (CodeExecution_Execute_Result_None.json).
				r = e.postJSON(route, qv(v, "sess-legacy"), map[string]any{"properties": map[string]any{"code": "value:null"}}, nil)
				p = r.json(t)["properties"].(map[string]any)
				require.Equal(t, wire.LegacySuccess, p["status"])
				require.Equal(t, "", p["result"])
			})
		}
		t.Run(v+" flat body is rejected", func(t *testing.T) {
			r := e.postJSON("code/execute", qv(v, "sess-legacy"), map[string]any{"code": "print:x"}, nil)
			requireError(t, r, http.StatusBadRequest, wire.CodeSessionPropertiesMissing)
		})
	}
}

func TestExecuteNewShape(t *testing.T) {
	e := newEnv(t, emulator.Options{})
	for _, v := range newVersions {
		t.Run(v, func(t *testing.T) {
			feat, _ := wire.Lookup(v)
			r := e.postJSON("executions", qv(v, "sess-new"), map[string]any{"codeInputType": "inline", "executionType": "synchronous", "code": "print:63", "timeoutInSeconds": 60}, map[string]string{"operation-id": "op-" + v})
			require.Equal(t, feat.ExecuteStatus, r.status, "%s", r.body)
			require.Equal(t, "op-"+v, r.header.Get("operation-id"))
			loc, err := url.Parse(r.header.Get("Operation-Location"))
			require.NoError(t, err)
			require.Equal(t, e.h.PoolPath()+"/executions/op-"+v, loc.Path)
			require.Equal(t, v, loc.Query().Get("api-version"))
			require.Equal(t, "sess-new", loc.Query().Get("identifier"))
			m := r.json(t)
			require.Equal(t, []string{"executionType", "id", "identifier", "result", "status"}, keys(m))
			require.Equal(t, "op-"+v, m["id"])
			require.Equal(t, "sess-new", m["identifier"])
			require.Equal(t, wire.ExecutionSynchronous, m["executionType"])
			require.Equal(t, wire.StatusSucceeded, m["status"])
			res := m["result"].(map[string]any)
			require.Equal(t, []string{"executionResult", "executionTimeInMilliseconds", "stderr", "stdout"}, keys(res))
			require.Equal(t, "63\n", res["stdout"])
			require.Equal(t, "", res["executionResult"])

			// The recorded execution is found by its Operation-Location.
			g := e.do(http.MethodGet, r.header.Get("Operation-Location"), nil, nil)
			require.Equal(t, http.StatusOK, g.status)
			require.Equal(t, m, g.json(t))

			// None (null from the kernel) is "", Failed status.
			r = e.postJSON("executions", qv(v, "sess-new"), execBody("value:null\nfail"), nil)
			m = r.json(t)
			require.Equal(t, wire.StatusFailed, m["status"])
			require.Equal(t, "", m["result"].(map[string]any)["executionResult"])

			// base64 input.
			r = e.postJSON("executions", qv(v, "sess-new"), execBody(base64.StdEncoding.EncodeToString([]byte("print:b64")), "codeInputType", "InlineBase64"), nil)
			require.Equal(t, "b64\n", r.json(t)["result"].(map[string]any)["stdout"])

			// Invalid enums.
			r = e.postJSON("executions", qv(v, "sess-new"), execBody("x", "executionType", "later"), nil)
			requireError(t, r, http.StatusBadRequest, wire.CodeSessionRequestValidationFailed)
			r = e.postJSON("executions", qv(v, "sess-new"), execBody("x", "codeInputType", "file"), nil)
			requireError(t, r, http.StatusBadRequest, wire.CodeSessionRequestValidationFailed)
			r = e.do(http.MethodPost, e.url("executions", qv(v, "sess-new")), strings.NewReader("{not json"), nil)
			requireError(t, r, http.StatusBadRequest, wire.CodeSessionRequestValidationFailed)
		})
	}
}

func TestExecutePropertiesWrapper(t *testing.T) {
	e := newEnv(t, emulator.Options{})
	body := map[string]any{"properties": map[string]any{"codeInputType": "inline", "executionType": "synchronous", "code": "print:wrapped", "timeoutInSeconds": 100, "identifier": "sess-wrap"}}
	for _, v := range newVersions {
		t.Run(v, func(t *testing.T) {
			r := e.postJSON("executions", qv(v, "sess-wrap"), body, nil)
			if v == wire.V20251002Preview {
				requireError(t, r, http.StatusBadRequest, wire.CodeSessionPropertiesMissing)
				return
			}
			feat, _ := wire.Lookup(v)
			require.Equal(t, feat.ExecuteStatus, r.status, "%s", r.body)
			require.Equal(t, "wrapped\n", r.json(t)["result"].(map[string]any)["stdout"])
		})
	}
}

func TestExecuteTimeout(t *testing.T) {
	t.Parallel() // it mostly waits on real time
	tests := []struct {
		name    string
		max     time.Duration
		timeout int
		wantMax time.Duration
	}{
		{"MaxExecutionTime caps", 300 * time.Millisecond, 60, 3 * time.Second},
		{"timeoutInSeconds wins", time.Hour, 1, 4 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, emulator.Options{MaxExecutionTime: tt.max})
			start := time.Now()
			r := e.postJSON("executions", qv(wire.V20251002Preview, "sess-timeout"), map[string]any{"code": "sleep:30s", "timeoutInSeconds": tt.timeout}, nil)
			require.Less(t, time.Since(start), tt.wantMax)
			require.Equal(t, http.StatusOK, r.status)
			m := r.json(t)
			require.Equal(t, wire.StatusFailed, m["status"])
			require.Equal(t, emulator.CodeExecutionTimeout, m["error"].(map[string]any)["error"].(map[string]any)["code"])
			// The session still works.
			require.Equal(t, "ok\n", e.stdout(wire.V20251002Preview, "sess-timeout", "print:ok"))
		})
	}
}

// TestExecuteOutputTruncation: the output cap counts characters, and
// multibyte output is cut once, by the kernel (here ScriptedExecutor's): a
// second cut in bytes by the handler, as before issue 15, would answer "éé"
// (5 bytes) instead of five "é" (10 bytes).
func TestExecuteOutputTruncation(t *testing.T) {
	e := newEnv(t, emulator.Options{OutputStreamsMaxLength: 5})
	long := "ééééééééé" // 9 characters, 18 bytes
	for _, v := range append(append([]string{}, legacyVersions...), newVersions...) {
		t.Run(v, func(t *testing.T) {
			require.Equal(t, "ééééé", e.stdout(v, "sess-trunc", "print:"+long))
		})
	}
	t.Run("outputStreamsMaxLength on 2025-10", func(t *testing.T) {
		r := e.postJSON("executions", qv(wire.V20251002Preview, "sess-trunc"), map[string]any{"code": "print:ab" + long + "\nstderr:a" + long, "timeoutInSeconds": 60, "outputStreamsMaxLength": 4}, nil)
		res := r.json(t)["result"].(map[string]any)
		require.Equal(t, "abéé", res["stdout"])
		require.Equal(t, "aééé", res["stderr"], "never half a character")
	})
	t.Run("outputStreamsMaxLength ignored before 2025-10", func(t *testing.T) {
		r := e.postJSON("executions", qv(wire.V20250202Preview, "sess-trunc"), execBody("print:"+long, "outputStreamsMaxLength", 3), nil)
		require.Equal(t, "ééééé", r.json(t)["result"].(map[string]any)["stdout"])
	})
	t.Run("at the default cap, 3-byte characters", func(t *testing.T) {
		e := newEnv(t, emulator.Options{})
		atCap := strings.Repeat("€", emulator.DefaultOutputStreamsMaxLength-1) // and print's "\n"
		require.Equal(t, atCap+"\n", e.stdout(wire.V20251002Preview, "sess-trunc", "print:"+atCap), "a kernel's output at the cap is answered whole")
	})
}

func TestExecuteAsync(t *testing.T) {
	for _, v := range newVersions {
		t.Run(v, func(t *testing.T) {
			e := newEnv(t, emulator.Options{})
			r := e.postJSON("executions", qv(v, "sess-async"), map[string]any{"codeInputType": "Inline", "executionType": "asynchronous", "code": "wait:go\nprint:done", "timeoutInSeconds": 60}, map[string]string{"operation-id": "async-1"})
			require.Equal(t, http.StatusOK, r.status, "%s", r.body)
			require.Equal(t, "async-1", r.header.Get("operation-id"))
			m := r.json(t)
			require.Equal(t, map[string]any{"id": "async-1", "identifier": "sess-async", "executionType": "Asynchronous", "status": "Running"}, m)

			require.Equal(t, "1", r.header.Get("Retry-After"), "a running execution tells the poller when to look again")

			g := e.get("executions/async-1", qv(v, "sess-async"))
			require.Equal(t, http.StatusOK, g.status)
			require.Equal(t, "Running", g.json(t)["status"])
			require.Equal(t, "1", g.header.Get("Retry-After"))

			e.script.release("go")
			require.Eventually(t, func() bool {
				return e.get("executions/async-1", qv(v, "sess-async")).json(t)["status"] == wire.StatusSucceeded
			}, 5*time.Second, 10*time.Millisecond)
			done := e.get("executions/async-1", qv(v, "sess-async"))
			require.Empty(t, done.header.Get("Retry-After"), "a finished execution has nothing to wait for")
			m = done.json(t)
			require.Equal(t, "done\n", m["result"].(map[string]any)["stdout"])
			require.Equal(t, "Asynchronous", m["executionType"])
		})
	}
}

func TestGetExecutionNotFound(t *testing.T) {
	e := newEnv(t, emulator.Options{})
	for _, v := range newVersions {
		t.Run(v, func(t *testing.T) {
			requireError(t, e.get("executions/nope", qv(v, "sess-unknown")), http.StatusNotFound, emulator.CodeExecutionNotFound)
			e.stdout(v, "sess-known", "print:x")
			requireError(t, e.get("executions/nope", qv(v, "sess-known")), http.StatusNotFound, emulator.CodeExecutionNotFound)
		})
	}
	require.Equal(t, 1, e.h.Stats().Sessions, "GET executions must not create a session")
}

func TestExecuteIdempotentOperationID(t *testing.T) {
	e := newEnv(t, emulator.Options{})
	for _, v := range append(append([]string{}, legacyVersions...), newVersions...) {
		t.Run(v, func(t *testing.T) {
			ident := "sess-idem-" + strings.ReplaceAll(v, "-", "")
			hdr := map[string]string{"operation-id": "fixed-op"}
			first := e.exec(v, ident, "set:n=1\nprint:ran", hdr)
			second := e.exec(v, ident, "set:n=1\nprint:ran", hdr)
			require.Equal(t, first.status, second.status)
			require.Equal(t, first.json(t), second.json(t))
			require.Equal(t, int64(1), e.h.Stats().ByIdentifier[ident])
			// The same operation-id with other code is a conflict, not the record.
			requireError(t, e.exec(v, ident, "print:ran again", hdr), http.StatusConflict, emulator.CodeOperationIDConflict)
			require.Equal(t, int64(1), e.h.Stats().ByIdentifier[ident])
			// The record still answers the original code.
			require.Equal(t, first.json(t), e.exec(v, ident, "set:n=1\nprint:ran", hdr).json(t))
			// Another session with the same operation-id runs its own.
			e.exec(v, ident+"-2", "print:x", hdr)
			require.Equal(t, int64(1), e.h.Stats().ByIdentifier[ident+"-2"])
		})
	}
	t.Run("concurrent duplicates run once", func(t *testing.T) {
		var wg sync.WaitGroup
		for range 5 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				e.exec(wire.V20251002Preview, "sess-dup", "sleep:50ms", map[string]string{"operation-id": "dup"})
			}()
		}
		wg.Wait()
		require.Equal(t, int64(1), e.h.Stats().ByIdentifier["sess-dup"])
	})
}

func TestExecuteQueuePerSession(t *testing.T) {
	e := newEnv(t, emulator.Options{})
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.exec(wire.V20251002Preview, fmt.Sprintf("sess-q%d", i%2), "concurrency", nil)
		}()
	}
	wg.Wait()
	e.script.mu.Lock()
	maxRun := e.script.maxRun
	e.script.mu.Unlock()
	for dir, n := range maxRun {
		require.Equal(t, 1, n, "executions on one session overlapped (%s)", dir)
	}
	require.Len(t, maxRun, 2)
	require.Equal(t, int64(6), e.h.Stats().Executions)

	// Different sessions run in parallel: both are running at once.
	done := make(chan struct{}, 2)
	go func() { e.exec(wire.V20251002Preview, "sess-par-a", "wait:a", nil); done <- struct{}{} }()
	go func() { e.exec(wire.V20251002Preview, "sess-par-b", "wait:b", nil); done <- struct{}{} }()
	require.Eventually(t, func() bool {
		return e.h.Stats().ByIdentifier["sess-par-b"] == 1 && e.h.Stats().ByIdentifier["sess-par-a"] == 1
	}, 5*time.Second, 5*time.Millisecond)
	e.script.release("a")
	e.script.release("b")
	<-done
	<-done
}

// TestExecutionsRunInAcceptedOrder: an asynchronous execution accepted
// before a synchronous one on the same session runs first even when its
// goroutine reaches the session after the second one's (the run hook holds
// it until then). Before, executions took the session's kernel in the order
// their goroutines got to it: the second could run first, and
// TestFaultForgottenAsyncResultUnknown (root package), which counts on the
// order, failed 1 run in a few at -parallel 4.
func TestExecutionsRunInAcceptedOrder(t *testing.T) {
	t.Parallel()
	var (
		mu    sync.Mutex
		order []string
	)
	e := newEnv(t, emulator.Options{Executor: emulator.ScriptedExecutor(func(_ context.Context, code string) emulator.ExecutionResult {
		mu.Lock()
		order = append(order, code)
		mu.Unlock()
		return emulator.ExecutionResult{Stdout: code}
	})})
	secondIn := make(chan struct{})
	letFirstGo := sync.OnceFunc(func() { close(secondIn) })
	t.Cleanup(letFirstGo) // registered after newEnv's: runs before the handler's Close
	e.h.SetRunHook(func(id string) {
		switch id {
		case "first":
			<-secondIn // the second execution's goroutine is on its way to the kernel
		case "second":
			letFirstGo()
		}
	})
	const v = "2025-10-02-preview"
	r := e.postJSON("executions", qv(v, "fifo"), execBody("first", "executionType", "Asynchronous"), map[string]string{"operation-id": "first"})
	require.Equal(t, http.StatusOK, r.status, r.body)
	r = e.postJSON("executions", qv(v, "fifo"), execBody("second"), map[string]string{"operation-id": "second"})
	require.Equal(t, http.StatusOK, r.status, r.body)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{"first", "second"}, order)
}
