package emulator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/stretchr/testify/require"

	"github.com/azsessions/azsessions"
	"github.com/azsessions/azsessions/emulator"
	"github.com/azsessions/azsessions/internal/testenv"
)

// newShellHandler is a Shell pool with a real sandbox (bubblewrap).
func newShellHandler(t *testing.T) *emulator.Handler {
	t.Helper()
	testenv.NeedSandbox(t)
	h, err := emulator.NewHandler(emulator.Options{Executor: sharedExecutor(t, emulator.SandboxBwrap, ""), PoolType: emulator.PoolTypeShell, PoolName: "testSessionPool"})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, h.Close()) })
	return h
}

// TestShellSpecExamples replays the two Shell examples of the
// 2025-10-02-preview swagger through a Shell pool running the commands in
// the sandbox: status, the example's stdout and stderr exactly, the key set
// and types of the body, and the headers it shows. The ExecCommandAndArgs
// example lists a previously uploaded file, which is uploaded first.
func TestShellSpecExamples(t *testing.T) {
	t.Parallel()
	for _, file := range []string{"CodeExecution_Execute_ShellCommand.json", "CodeExecution_Execute_ShellExecCommandAndArgs.json"} {
		t.Run(file, func(t *testing.T) {
			h := newShellHandler(t)
			b, err := os.ReadFile(filepath.Join("..", "testdata", "examples", "spec", "2025-10-02-preview", file))
			require.NoError(t, err)
			var x specExample
			require.NoError(t, json.Unmarshal(b, &x))
			x.File, x.Version = file, "2025-10-02-preview"
			c := &conformanceClient{t: t, h: h, x: x}
			if file == "CodeExecution_Execute_ShellExecCommandAndArgs.json" {
				c.upload("", "previouslyuploadedfile.txt", "x")
			}
			got := c.execute(x.Parameters["codeExecutionRequest"], x.Param("operation-id"))
			want := x.Responses["200"]
			require.Equal(t, http.StatusOK, got.Code, got.Body.String())
			for name := range want.Headers {
				require.NotEmpty(t, got.Header().Get(name), "header %s", name)
			}
			var wantBody, gotBody map[string]any
			require.NoError(t, json.Unmarshal(want.Body, &wantBody))
			require.NoError(t, json.Unmarshal(got.Body.Bytes(), &gotBody), got.Body.String())
			requireSameShape(t, "body", wantBody, gotBody)
			require.Equal(t, wantBody["status"], gotBody["status"])
			wr, gr := wantBody["result"].(map[string]any), gotBody["result"].(map[string]any)
			require.Equal(t, wr["stdout"], gr["stdout"])
			require.Equal(t, wr["stderr"], gr["stderr"])
		})
	}
}

// TestShellPoolRefusesPython: a Shell pool answers code, neither or both of
// the command fields with 400 SessionRequestValidationFailed (no sandbox needed).
func TestShellPoolRefusesPython(t *testing.T) {
	h, err := emulator.NewHandler(emulator.Options{Executor: emulator.ScriptedExecutor(func(context.Context, string) emulator.ExecutionResult {
		t.Error("nothing may run")
		return emulator.ExecutionResult{}
	}), PoolType: emulator.PoolTypeShell})
	require.NoError(t, err)
	defer func() { require.NoError(t, h.Close()) }()
	for _, body := range []string{
		`{"codeInputType":"Inline","executionType":"Synchronous","code":"print(1)","timeoutInSeconds":60}`,
		`{"timeoutInSeconds":60}`,
		`{"shellCommand":"ls","execCommandAndArgs":["ls"],"timeoutInSeconds":60}`,
		`{"execCommandAndArgs":["","-a"],"timeoutInSeconds":60}`,
	} {
		t.Run(body, func(t *testing.T) {
			c := &conformanceClient{t: t, h: h, x: specExample{Version: "2025-10-02-preview", Parameters: map[string]json.RawMessage{"identifier": json.RawMessage(`"shell-session"`)}}}
			got := c.execute(json.RawMessage(body), "")
			require.Equal(t, http.StatusBadRequest, got.Code, got.Body.String())
			require.Equal(t, "SessionRequestValidationFailed", got.Header().Get("x-ms-error-code"))
		})
	}
	_, err = emulator.NewHandler(emulator.Options{Executor: emulator.ScriptedExecutor(nil), PoolType: "Perl"})
	require.ErrorContains(t, err, "unknown pool type")
}

// TestExecuteShellAgainstEmulator: the client's ExecuteShell against a Shell
// pool: exit codes as data, stdin, /mnt/data as the working directory and
// its files shared with the files API, argv without a shell.
func TestExecuteShellAgainstEmulator(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{emulator.SandboxBwrap, emulator.SandboxGvisor} {
		t.Run(mode, func(t *testing.T) {
			if mode == emulator.SandboxGvisor {
				testenv.NeedGvisor(t)
			} else {
				testenv.NeedSandbox(t)
			}
			testExecuteShellAgainstEmulator(t, sharedExecutor(t, mode, ""))
		})
	}
}

func testExecuteShellAgainstEmulator(t *testing.T, exec emulator.Executor) {
	srv, err := emulator.Start("127.0.0.1:0", emulator.Options{Executor: exec, PoolType: emulator.PoolTypeShell})
	require.NoError(t, err)
	defer srv.Close()
	client, err := azsessions.NewClientWithNoCredential(srv.Endpoint, &azsessions.ClientOptions{ClientOptions: azcore.ClientOptions{APIVersion: azsessions.APIVersion20251002Preview}})
	require.NoError(t, err)
	ctx := context.Background()
	s := client.NewSession()
	cases := []struct {
		name         string
		cmd          azsessions.ShellExecution
		exit         int
		stdout, errs string
	}{
		{"stdin", azsessions.ShellExecution{ShellCommand: `read a; echo "got $a"`, Stdin: "hello\n"}, 0, "got hello\n", ""},
		{"exit code", azsessions.ShellExecution{ShellCommand: "echo oops >&2; exit 3"}, 3, "", "oops\n"},
		{"cwd", azsessions.ShellExecution{ShellCommand: "pwd; echo data > made.txt"}, 0, "/mnt/data\n", ""},
		{"argv", azsessions.ShellExecution{ExecCommandAndArgs: []string{"cat", "made.txt"}}, 0, "data\n", ""},
		{"argv no shell", azsessions.ShellExecution{ExecCommandAndArgs: []string{"echo", "$HOME", "a;b"}}, 0, "$HOME a;b\n", ""},
		{"not found", azsessions.ShellExecution{ExecCommandAndArgs: []string{"no-such-program-xyz"}}, 127, "", ""},
		{"killed", azsessions.ShellExecution{ShellCommand: "kill -9 $$"}, 137, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := s.ExecuteShell(ctx, tc.cmd, &azsessions.ExecuteShellOptions{Timeout: 30 * time.Second})
			require.NoError(t, err)
			require.Equal(t, tc.exit, resp.ExitCode, "stderr: %s", resp.Stderr)
			require.Equal(t, strconv.Itoa(tc.exit), resp.Status)
			if tc.name != "not found" {
				require.Equal(t, tc.stdout, resp.Stdout)
				require.Equal(t, tc.errs, resp.Stderr)
			}
		})
	}
	// a command past its timeout is stopped, with all it started: no exit code
	resp, err := s.ExecuteShell(ctx, azsessions.ShellExecution{ShellCommand: "sleep 60 & sleep 60; echo never"}, &azsessions.ExecuteShellOptions{Timeout: time.Second})
	require.NoError(t, err)
	require.Equal(t, -1, resp.ExitCode)
	require.Equal(t, "Failed", resp.Status)
	require.Equal(t, emulator.CodeExecutionTimeout, resp.ErrorCode)
	require.NotContains(t, resp.Stdout, "never")
	// The background sleep, killed, is a zombie until the sandbox's init
	// reaps it, which a loaded machine may not have done by the next
	// request: count the sleeps in any other state, until none is left
	// (one that was not killed would be left for a minute).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		resp, err = s.ExecuteShell(ctx, azsessions.ShellExecution{ShellCommand: "pgrep -x -r D,R,S,T,t sleep | wc -l"}, nil)
		require.NoError(t, err)
		if resp.Stdout == "0\n" || time.Now().After(deadline) {
			break
		}
	}
	if resp.Stdout != "0\n" {
		ps, _ := s.ExecuteShell(ctx, azsessions.ShellExecution{ShellCommand: "ps -eo pid,ppid,pgid,sid,stat,comm"}, nil)
		t.Logf("ps: %s %s", ps.Stdout, ps.Stderr)
	}
	require.Equal(t, "0\n", resp.Stdout, "the timed-out command's background sleep was killed too")

	// the file the command made is the files API's
	var buf []byte
	dl, err := s.DownloadFile(ctx, "made.txt", nil)
	require.NoError(t, err)
	defer dl.Body.Close()
	buf = make([]byte, 16)
	n, _ := dl.Body.Read(buf)
	require.Equal(t, "data\n", string(buf[:n]), fmt.Sprintf("%q", buf[:n]))
}
