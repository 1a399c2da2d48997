package emulator_test

import (
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/stretchr/testify/require"

	"github.com/azsessions/azsessions"
	"github.com/azsessions/azsessions/emulator"
	"github.com/azsessions/azsessions/internal/testenv"
)

// newPythonEnv is an env whose executions run real Python in bubblewrap
// (the package's shared executor).
func newPythonEnv(t *testing.T) *env {
	t.Helper()
	testenv.NeedSandbox(t, "IPython")
	return newEnv(t, emulator.Options{Executor: sharedExecutor(t, emulator.SandboxBwrap, "")})
}

// TestSpecResultExamplesWithRealPython sends the request of every spec
// example that runs Python code (2025-10-02-preview CodeExecution_Execute_*:
// print(7*9), None, float('nan'), the string "nan", each with and without
// returnJupyterFormatExecutionResult) to the emulator running real Python,
// and compares executionResult and stdout with the example's response read
// as data (the example's "63/n" typo aside).
func TestSpecResultExamplesWithRealPython(t *testing.T) {
	t.Parallel()
	e := newPythonEnv(t)
	n := 0
	for _, x := range loadSpecExamples(t) {
		if x.Version != "2025-10-02-preview" || x.OperationID != "CodeExecution_Execute" || strings.Contains(x.File, "Shell") || strings.Contains(x.File, "Async") {
			continue
		}
		n++
		t.Run(x.File, func(t *testing.T) {
			var req map[string]any
			require.NoError(t, json.Unmarshal(x.Parameters["codeExecutionRequest"], &req))
			var want struct {
				Result struct {
					Stdout          string          `json:"stdout"`
					ExecutionResult json.RawMessage `json:"executionResult"`
				} `json:"result"`
				Status string `json:"status"`
			}
			for _, r := range x.Responses {
				require.NoError(t, json.Unmarshal(r.Body, &want))
			}
			r := e.postJSON("executions", qv(x.Version, "real-python-examples"), req, nil)
			require.Equal(t, 200, r.status, "body: %s", r.body)
			var got struct {
				Result struct {
					Stdout          string          `json:"stdout"`
					ExecutionResult json.RawMessage `json:"executionResult"`
				} `json:"result"`
				Status string `json:"status"`
			}
			require.NoError(t, json.Unmarshal(r.body, &got))
			require.Equal(t, want.Status, got.Status)
			require.JSONEq(t, string(want.Result.ExecutionResult), string(got.Result.ExecutionResult), "code %v", req["code"])
			require.Equal(t, strings.ReplaceAll(want.Result.Stdout, "/n", "\n"), got.Result.Stdout)
		})
	}
	require.Equal(t, 7, n, "print(7*9) and the six NaN/None/\"nan\" examples")
}

// TestPrettyValuesOverHTTP: a non-primitive value is its text/plain form from
// IPython's display formatter, a long list broken over lines exactly as
// IPython.lib.pretty breaks it, on both contracts.
func TestPrettyValuesOverHTTP(t *testing.T) {
	t.Parallel()
	e := newPythonEnv(t)
	const expr = "['package-%02d' % i for i in range(12)]"
	out, err := exec.Command(testenv.Python, "-c", "import sys\nfrom IPython.lib.pretty import pretty\nsys.stdout.write(pretty(eval(sys.argv[1])))", expr).Output()
	require.NoError(t, err)
	want := string(out)
	require.Contains(t, want, ",\n ", "the reference breaks the list over lines")
	for _, version := range []string{"2024-02-02-preview", "2025-10-02-preview"} {
		t.Run(version, func(t *testing.T) {
			m := e.exec(version, "pretty-values", expr, nil).json(t)
			var res any
			if isLegacy(version) {
				res = m["properties"].(map[string]any)["result"]
			} else {
				res = m["result"].(map[string]any)["executionResult"]
			}
			require.Equal(t, want, res)
		})
	}
	// With returnJupyterFormatExecutionResult too (the same text/plain).
	r := e.postJSON("executions", qv("2025-10-02-preview", "pretty-values"), execBody(expr, "returnJupyterFormatExecutionResult", true), nil)
	require.Equal(t, want, r.json(t)["result"].(map[string]any)["executionResult"])
}

// TestTimeoutOverHTTP: a timed-out execution is Failed with the error code
// Timeout (the emulator's guess, see the package docs), its stderr shows the
// cell's frames and no emulator internals, and the session keeps its state.
// The cell sleeps rather than spins (a CPU-second for nothing): the timeout
// of a busy loop is internal/sandbox's (TestTimeout and others).
func TestTimeoutOverHTTP(t *testing.T) {
	t.Parallel()
	e := newPythonEnv(t)
	const v = "2025-10-02-preview"
	e.exec(v, "timeouts", "kept = 1", nil)
	r := e.postJSON("executions", qv(v, "timeouts"), execBody("import time\ndef spin():\n    while True:\n        time.sleep(60)\nspin()", "timeoutInSeconds", 1), nil)
	require.Equal(t, 200, r.status, "body: %s", r.body)
	m := r.json(t)
	require.Equal(t, "Failed", m["status"])
	require.Equal(t, "Timeout", m["error"].(map[string]any)["error"].(map[string]any)["code"])
	stderr := m["result"].(map[string]any)["stderr"].(string)
	for _, internal := range []string{"driver.py", "_on_alarm", "/opt/azsessions"} {
		require.NotContains(t, stderr, internal)
	}
	require.Contains(t, stderr, "spin()")
	require.Contains(t, stderr, "TimeoutError")
	require.EqualValues(t, 1, e.exec(v, "timeouts", "kept", nil).json(t)["result"].(map[string]any)["executionResult"])

	// The client's Execution tells the caller, on both contracts (the
	// legacy one has no error object: the client goes by the time). One
	// session per contract, timing out beside the other.
	for _, version := range []string{azsessions.APIVersion20240202Preview, azsessions.APIVersion20251002Preview} {
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			client, err := azsessions.NewClientWithNoCredential(e.srv.URL+e.h.PoolPath(), &azsessions.ClientOptions{
				ClientOptions: azcore.ClientOptions{APIVersion: version, Transport: e.srv.Client()},
			})
			require.NoError(t, err)
			resp, err := client.Session("timeouts-client-"+version).Execute(context.Background(), "import time\ntime.sleep(30)", &azsessions.ExecuteOptions{Timeout: time.Second})
			require.NoError(t, err)
			require.Equal(t, azsessions.ExecutionStatusFailed, resp.Status)
			require.True(t, resp.TimedOut(), "stderr %q, code %q", resp.Stderr, resp.ErrorCode)
			require.NotContains(t, resp.Stderr, "driver.py")
		})
	}
}

// TestOutputCapWithRealPython: real Python's multibyte output is cut once,
// at the cap in characters (by the sandbox), on stdout and stderr; the
// handler's former second cut in bytes answered a third of it.
func TestOutputCapWithRealPython(t *testing.T) {
	t.Parallel()
	e := newPythonEnv(t)
	r := e.postJSON("executions", qv("2025-10-02-preview", "real-python-cap"), map[string]any{
		"code":                   "import sys\nprint('€' * 5000)\nprint('é' * 5000, file=sys.stderr)",
		"timeoutInSeconds":       60,
		"outputStreamsMaxLength": 3000,
	}, nil)
	require.Equal(t, 200, r.status, "body: %s", r.body)
	res := r.json(t)["result"].(map[string]any)
	require.Equal(t, strings.Repeat("€", 3000), res["stdout"])
	require.Equal(t, strings.Repeat("é", 3000), res["stderr"])
}
