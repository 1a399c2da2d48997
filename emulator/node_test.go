package emulator_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/stretchr/testify/require"

	"github.com/azsessions/azsessions"
	"github.com/azsessions/azsessions/emulator"
	"github.com/azsessions/azsessions/internal/testenv"
)

// needNode skips the test when Node.js is missing, or fails it under
// AZSESSIONS_REQUIRE_SANDBOX=1.
func needNode(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("node"); err == nil {
		return
	}
	if os.Getenv(testenv.RequireSandboxEnv) == "1" {
		t.Fatalf("Node.js (node) is missing and %s=1", testenv.RequireSandboxEnv)
	}
	t.Skipf("skipping: Node.js (node) is missing (set %s=1 to fail instead)", testenv.RequireSandboxEnv)
}

// newNodeExecutor is the package's shared sandbox executor running Node.js
// in mode (sharedExecutor).
func newNodeExecutor(t *testing.T, mode string) emulator.Executor {
	t.Helper()
	if mode == emulator.SandboxGvisor {
		testenv.NeedGvisor(t)
	} else {
		testenv.NeedSandbox(t)
	}
	needNode(t)
	return sharedExecutor(t, mode, emulator.SandboxRuntimeNode)
}

// TestNodeLTSTutorialExample replays Learn's JavaScript tutorial (a legacy
// POST code/execute of console.log on a NodeLTS pool) through a NodeLTS
// pool running Node.js in bubblewrap: the answer has the tutorial's fields
// and values (the execution time aside).
func TestNodeLTSTutorialExample(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join("..", "testdata", "examples", "2024-02-02-preview_nodejs_tutorial.json"))
	require.NoError(t, err)
	var x struct {
		Request struct {
			Body json.RawMessage `json:"body"`
		} `json:"request"`
		Response struct {
			Properties map[string]any `json:"properties"`
		} `json:"response_200_body"`
	}
	require.NoError(t, json.Unmarshal(b, &x))
	e := newEnv(t, emulator.Options{Executor: newNodeExecutor(t, emulator.SandboxBwrap), PoolType: emulator.PoolTypeNodeLTS})
	r := e.do(http.MethodPost, e.url("code/execute", qv("2024-02-02-preview", "test")), bytes.NewReader(x.Request.Body), map[string]string{"Content-Type": "application/json"})
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	got := r.json(t)
	require.Equal(t, []string{"properties"}, keys(got))
	props := got["properties"].(map[string]any)
	require.Equal(t, keys(x.Response.Properties), keys(props))
	for k, want := range x.Response.Properties {
		if k != "executionTimeInMilliseconds" {
			require.Equal(t, want, props[k], k)
		}
	}
	require.IsType(t, float64(0), props["executionTimeInMilliseconds"])
}

// TestNodeLTSRoutes: a NodeLTS pool route by route (2025-10-02-preview) on
// one session: state across executions, the value as executionResult (and
// its util.inspect form with returnJupyterFormatExecutionResult), an error,
// a timeout, files shared between the files API and node's fs, metadata.
func TestNodeLTSRoutes(t *testing.T) {
	t.Parallel()
	ex := newNodeExecutor(t, emulator.SandboxBwrap)
	nodeVersion := ex.Info().NodeVersion
	e := newEnv(t, emulator.Options{Executor: ex, PoolType: emulator.PoolTypeNodeLTS})
	const v, id = "2025-10-02-preview", "node-session"
	run := func(t *testing.T, body map[string]any) map[string]any {
		t.Helper()
		r := e.postJSON("executions", qv(v, id), body, nil)
		require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
		return r.json(t)
	}
	result := func(m map[string]any) map[string]any { return m["result"].(map[string]any) }

	t.Run("state and values", func(t *testing.T) {
		m := run(t, execBody("let x = 41; console.log('set')"))
		require.Equal(t, "Succeeded", m["status"])
		require.Equal(t, "set\n", result(m)["stdout"])
		require.Equal(t, "", result(m)["executionResult"])
		m = run(t, execBody("x + 1"))
		require.Equal(t, 42.0, result(m)["executionResult"])
		m = run(t, execBody("'nan'"))
		require.Equal(t, "nan", result(m)["executionResult"])
		m = run(t, execBody("'nan'", "returnJupyterFormatExecutionResult", true))
		require.Equal(t, "'nan'", result(m)["executionResult"])
		m = run(t, execBody("({ list: [1, 2], ok: true })"))
		require.Equal(t, "{ list: [ 1, 2 ], ok: true }", result(m)["executionResult"])
		m = run(t, execBody("null"))
		require.Equal(t, "", result(m)["executionResult"])
		m = run(t, execBody("null", "returnJupyterFormatExecutionResult", true))
		require.Nil(t, result(m)["executionResult"])
	})

	t.Run("error", func(t *testing.T) {
		m := run(t, execBody("undefinedFunction()"))
		require.Equal(t, "Failed", m["status"])
		require.Contains(t, result(m)["stderr"], "ReferenceError: undefinedFunction is not defined")
		require.NotContains(t, m, "error", "a JavaScript error is the code's, not the pool's")
	})

	t.Run("timeout", func(t *testing.T) {
		// A promise that never settles rather than a busy loop (a
		// CPU-second for nothing): both end the same way in the driver,
		// internal/sandbox's TestNodeKernel checks both.
		m := run(t, execBody("await new Promise(() => {})", "timeoutInSeconds", 1))
		require.Equal(t, "Failed", m["status"])
		require.Equal(t, "Timeout", m["error"].(map[string]any)["error"].(map[string]any)["code"])
		require.Contains(t, result(m)["stderr"], "TimeoutError: the execution timed out after 1 seconds")
		m = run(t, execBody("x"))
		require.Equal(t, 41.0, result(m)["executionResult"], "the variables outlive a timeout")
	})

	t.Run("files", func(t *testing.T) {
		r := e.upload(v, id, "input.csv", []byte("a,b\n1,2\n"))
		require.Less(t, r.status, 300, "body: %s", r.body)
		m := run(t, execBody(`const fs = require('fs');
const rows = fs.readFileSync('/mnt/data/input.csv', 'utf8').trim().split('\n');
fs.writeFileSync('rows.txt', String(rows.length));
rows.length`))
		require.Equal(t, 2.0, result(m)["executionResult"])
		r = e.get("files/rows.txt/content", qv(v, id))
		require.Equal(t, http.StatusOK, r.status)
		require.Equal(t, "2", string(r.body))
	})

	t.Run("metadata", func(t *testing.T) {
		r := e.get("metadata", qv(v, ""))
		require.Equal(t, http.StatusOK, r.status)
		m := r.json(t)
		require.Equal(t, []any{map[string]any{"name": "node", "version": nodeVersion}}, m["runtimes"])
		require.NotContains(t, m, "jupyterKernel", "the emulator runs no Jupyter kernel for JavaScript")
	})
}

// TestNodeLTSExecutorMismatch: a NodeLTS pool refuses an executor that runs
// Python, and the other pool types one that runs Node.js (no sandbox needed).
func TestNodeLTSExecutorMismatch(t *testing.T) {
	python := infoExecutor{emulator.ScriptedExecutor(nil), emulator.Info{PythonVersion: "3.11.2"}}
	node := infoExecutor{emulator.ScriptedExecutor(nil), emulator.Info{NodeVersion: "20.20.2"}}
	for _, tc := range []struct {
		pool string
		exec emulator.Executor
		want string
	}{
		{emulator.PoolTypeNodeLTS, python, "needs an executor that runs Node.js"},
		{emulator.PoolTypePythonLTS, node, "serves NodeLTS pools only"},
		{emulator.PoolTypeShell, node, "serves NodeLTS pools only"},
		{emulator.PoolTypeNodeLTS, node, ""},
		{emulator.PoolTypeNodeLTS, emulator.ScriptedExecutor(nil), ""},
	} {
		h, err := emulator.NewHandler(emulator.Options{Executor: tc.exec, PoolType: tc.pool})
		if tc.want != "" {
			require.ErrorContains(t, err, tc.want, tc.pool)
			continue
		}
		require.NoError(t, err, tc.pool)
		require.NoError(t, h.Close())
	}
}

// TestExecuteJavaScriptAgainstEmulator: the client's Execute with
// JavaScript on a NodeLTS pool, on both sandboxes: values, state, output,
// a failure as data, files uploaded with the client and read by node.
func TestExecuteJavaScriptAgainstEmulator(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{emulator.SandboxBwrap, emulator.SandboxGvisor} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			srv, err := emulator.Start("127.0.0.1:0", emulator.Options{Executor: newNodeExecutor(t, mode), PoolType: emulator.PoolTypeNodeLTS})
			require.NoError(t, err)
			defer srv.Close()
			client, err := azsessions.NewClientWithNoCredential(srv.Endpoint, &azsessions.ClientOptions{ClientOptions: azcore.ClientOptions{APIVersion: azsessions.APIVersion20251002Preview}})
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			s := client.NewSession()
			defer func() { _, _ = s.Delete(context.WithoutCancel(ctx), nil) }()

			res, err := s.Execute(ctx, "const greet = (n) => `hello, ${n}`;\nconsole.log(greet('node'));\n6 * 7", nil)
			require.NoError(t, err)
			require.Equal(t, azsessions.ExecutionStatusSucceeded, res.Status)
			require.Equal(t, "hello, node\n", res.Stdout)
			var n int
			require.NoError(t, json.Unmarshal(res.Result, &n))
			require.Equal(t, 42, n)

			res, err = s.Execute(ctx, "greet('again')", nil)
			require.NoError(t, err)
			var str string
			require.NoError(t, json.Unmarshal(res.Result, &str))
			require.Equal(t, "hello, again", str, "state across executions")

			res, err = s.Execute(ctx, "JSON.parse('{')", nil)
			require.NoError(t, err, "a JavaScript error is data")
			require.Equal(t, azsessions.ExecutionStatusFailed, res.Status)
			require.True(t, strings.Contains(res.Stderr, "SyntaxError"), res.Stderr)

			_, err = s.UploadFile(ctx, "notes.txt", strings.NewReader("from the client"), nil)
			require.NoError(t, err)
			res, err = s.Execute(ctx, "require('fs').readFileSync('/mnt/data/notes.txt', 'utf8')", nil)
			require.NoError(t, err)
			require.NoError(t, json.Unmarshal(res.Result, &str))
			require.Equal(t, "from the client", str)
		})
	}
}
