package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/azsessions/azsessions"
	"github.com/azsessions/azsessions/azsessionstest"
	"github.com/azsessions/azsessions/emulator"
	"github.com/azsessions/azsessions/internal/testenv"
)

// echoShell is an Executor for a Shell pool that runs nothing: each
// command answers, on stdout, the JSON of what reached the kernel (command,
// argv, stdin), so that a test sees what the CLI sent. Some command lines
// act: "exit N" exits N (with "exiting N" on stderr), "hang" passes its
// timeout, "big" prints past the output cap.
type echoShell struct{}

func (echoShell) NewKernel(context.Context) (emulator.Kernel, error) {
	dir, err := os.MkdirTemp("", "azsessions-echoshell-")
	if err != nil {
		return nil, err
	}
	return echoKernel{dir: dir}, nil
}
func (echoShell) Info() emulator.Info { return emulator.Info{Sandbox: "scripted"} }
func (echoShell) Close() error        { return nil }

type echoKernel struct{ dir string }

func (k echoKernel) DataDir() string { return k.dir }
func (k echoKernel) Close() error    { return os.RemoveAll(k.dir) }

func (k echoKernel) Execute(_ context.Context, req emulator.ExecutionRequest) (emulator.ExecutionResult, error) {
	cmd := req.Shell
	if cmd == nil {
		return emulator.ExecutionResult{Status: emulator.Failed, Stderr: "not a Shell execution\n"}, nil
	}
	exit := func(n int) *int { return &n }
	switch {
	case strings.HasPrefix(cmd.Command, "exit "):
		n, err := strconv.Atoi(strings.TrimPrefix(cmd.Command, "exit "))
		if err != nil {
			return emulator.ExecutionResult{}, err
		}
		return emulator.ExecutionResult{Status: emulator.Failed, Stderr: "exiting " + strconv.Itoa(n) + "\n", ExitCode: exit(n)}, nil
	case cmd.Command == "hang":
		return emulator.ExecutionResult{Status: emulator.Failed, Stderr: "TimeoutError: the execution timed out\n", TimedOut: true}, nil
	case cmd.Command == "big":
		return emulator.ExecutionResult{Stdout: strings.Repeat("x", azsessions.DefaultOutputStreamsMaxLength), StdoutTruncated: true, ExitCode: exit(0)}, nil
	}
	b, err := json.Marshal(cmd)
	if err != nil {
		return emulator.ExecutionResult{}, err
	}
	return emulator.ExecutionResult{Stdout: string(b) + "\n", ExitCode: exit(0)}, nil
}

// TestSh runs the sh verb against a Shell pool of the fake: the two forms,
// stdin, exit codes, --json and the usage errors (found before any request:
// they also run against an endpoint where nothing listens).
func TestSh(t *testing.T) {
	srv := azsessionstest.Start(t, &azsessionstest.Options{Options: emulator.Options{Executor: echoShell{}, PoolType: emulator.PoolTypeShell}})
	python := azsessionstest.Start(t, &azsessionstest.Options{Options: emulator.Options{Executor: emulator.ScriptedExecutor(script)}})
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "in.txt"), []byte("from a file\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "bin.dat"), []byte{0xff, 0xfe, 0}, 0o644))
	const id = "sh-test-1"
	ep := "AZURE_POOL_MANAGEMENT_ENDPOINT=" + srv.Endpoint()
	sess := "AZSESSIONS_SESSION=" + id
	closed := "AZURE_POOL_MANAGEMENT_ENDPOINT=" + closedEndpoint(t)
	usage := "Run 'azsessions sh --help' for usage."

	tests := []cliCase{
		{name: "command line", env: []string{ep, sess}, args: []string{"sh", "ls -a | wc -l"}, stdout: `{"command":"ls -a | wc -l","stdin":""}` + "\n"},
		{name: "argv after --", env: []string{ep, sess}, args: []string{"sh", "--", "ls", "-a"}, stdout: `{"argv":["ls","-a"],"stdin":""}` + "\n"},
		{name: "argv keeps flags and words", env: []string{ep, sess}, args: []string{"sh", "--timeout", "30", "--", "grep", "--json", "a b", "$HOME", "--"}, stdout: `{"argv":["grep","--json","a b","$HOME","--"],"stdin":""}` + "\n"},
		{name: "flags after the command line", env: []string{sess}, args: []string{"sh", "echo hi", "--endpoint", srv.Endpoint(), "--timeout", "2m"}, stdout: `{"command":"echo hi","stdin":""}` + "\n"},
		{name: "stdin from ours", env: []string{ep, sess}, stdin: "hi\n", args: []string{"sh", "--stdin", "-", "read L; echo got:$L"}, stdout: `{"command":"read L; echo got:$L","stdin":"hi\n"}` + "\n"},
		{name: "stdin from a file", env: []string{ep, sess}, args: []string{"sh", "--stdin", "in.txt", "--", "cat"}, stdout: `{"argv":["cat"],"stdin":"from a file\n"}` + "\n"},
		{name: "our stdin not sent without --stdin", env: []string{ep, sess}, stdin: "secret input\n", args: []string{"sh", "cat"}, stdout: `{"command":"cat","stdin":""}` + "\n"},
		{name: "exit code passed on", env: []string{ep, sess}, args: []string{"sh", "exit 3"}, code: 3, contains: []string{"exiting 3\n"}, absent: []string{"azsessions sh:", usage}},
		{name: "exit code 2 is not a usage error", env: []string{ep, sess}, args: []string{"sh", "exit 2"}, code: 2, absent: []string{"azsessions sh:", usage}},
		{name: "exit code 255", env: []string{ep, sess}, args: []string{"sh", "exit 255"}, code: 255},
		{name: "exit code out of range", env: []string{ep, sess}, args: []string{"sh", "exit 300"}, code: 1, contains: []string{`ended with status "300", not an exit code 0-255`}},
		{name: "timed out: no exit code", env: []string{ep, sess}, args: []string{"sh", "hang"}, code: 1, contains: []string{"TimeoutError", `status "Failed"`, "(error code Timeout); did its --timeout pass?"}},
		{name: "output cut", env: []string{ep, sess}, args: []string{"sh", "big"}, contains: []string{"reached the service's cap (4096 characters)"}},
		{name: "json", env: []string{ep, sess}, args: []string{"sh", "--json", "echo hi"}, contains: []string{`"status": "0"`, `"stdout": "{\"command\":\"echo hi\"`}},
		{name: "json keeps the exit code", env: []string{ep, sess}, args: []string{"--json", "sh", "exit 4"}, code: 4, contains: []string{`"status": "4"`}, absent: []string{"azsessions sh:"}},
		{name: "json without an exit code", env: []string{ep, sess}, args: []string{"sh", "--json", "hang"}, code: 1, contains: []string{`"status": "Failed"`, `"code": "Timeout"`}, absent: []string{"did its --timeout pass?"}},
		{name: "fresh session printed after an exit code", env: []string{ep}, args: []string{"sh", "exit 5"}, code: 5, contains: []string{"new session ", "AZSESSIONS_SESSION="}},
		{name: "in the shell loop", env: []string{ep, sess}, stdin: "%sh 'echo hi'\n%sh --stdin - cat\n%sh -- ls -a\n%sh 'exit 3'\n%sh --json 'exit 4'\n", args: []string{"shell"},
			contains: []string{`{"command":"echo hi","stdin":""}`, "--stdin - would read the shell's own input", `{"argv":["ls","-a"],"stdin":""}`, "exiting 3\n", `"status": "4"`}},
		{name: "a code-interpreter pool refuses", env: []string{"AZURE_POOL_MANAGEMENT_ENDPOINT=" + python.Endpoint(), sess}, args: []string{"sh", "ls"}, code: 3, contains: []string{"400", "hint: sh needs a Shell session pool"}, absent: []string{id}},

		// usage errors, before any request (nothing listens on closed)
		{name: "no command", env: []string{closed, sess}, args: []string{"sh"}, code: 2, contains: []string{"no command", usage}},
		{name: "empty command line", env: []string{closed, sess}, args: []string{"sh", "  "}, code: 2, contains: []string{"the command line is empty"}},
		{name: "two arguments", env: []string{closed, sess}, args: []string{"sh", "ls", "/tmp"}, code: 2, contains: []string{"quote it"}},
		{name: "both forms", env: []string{closed, sess}, args: []string{"sh", "ls", "--", "ls"}, code: 2, contains: []string{"not both"}},
		{name: "nothing after --", env: []string{closed, sess}, args: []string{"sh", "--"}, code: 2, contains: []string{"nothing after --"}},
		{name: "empty program", env: []string{closed, sess}, args: []string{"sh", "--", "", "-a"}, code: 2, contains: []string{"the program, the first argument after --, is empty"}},
		{name: "unquoted flags", env: []string{closed, sess}, args: []string{"sh", "ls", "-a"}, code: 2, contains: []string{"hint: quote the command line"}},
		{name: "negative timeout", env: []string{closed, sess}, args: []string{"sh", "--timeout", "-5", "ls"}, code: 2, contains: []string{"--timeout must be a positive whole number"}},
		{name: "fractional timeout", env: []string{closed, sess}, args: []string{"sh", "--timeout", "1500ms", "ls"}, code: 2, contains: []string{"--timeout must be a positive whole number"}},
		{name: "timeout beyond int32 seconds", env: []string{closed, sess}, args: []string{"sh", "--timeout", "600000h", "ls"}, code: 2, contains: []string{"more than timeoutInSeconds carries"}},
		{name: "stdin not UTF-8", env: []string{closed, sess}, args: []string{"sh", "--stdin", "bin.dat", "cat"}, code: 2, contains: []string{"not UTF-8 text"}},
		{name: "api-version without Shell", env: []string{closed, sess}, args: []string{"--api-version", azsessions.APIVersion20250202Preview, "sh", "ls"}, code: 2, contains: []string{"needs api-version 2025-10-02-preview"}},
		{name: "invalid identifier", env: []string{closed}, args: []string{"--session", "bad id!", "sh", "ls"}, code: 2, contains: []string{"invalid session identifier"}},
		{name: "missing stdin file", env: []string{closed, sess}, args: []string{"sh", "--stdin", "nope.txt", "cat"}, code: 3, contains: []string{"nope.txt"}, absent: []string{"could not reach"}},
		{name: "help", args: []string{"help", "sh"}, contains: []string{"Usage: azsessions sh", "execCommandAndArgs", "Exit status: the command's exit code"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.run(t, dir) })
	}
}

// TestShellExecutionForms checks the argument forms in process (no service).
func TestShellExecutionForms(t *testing.T) {
	for _, tt := range []struct {
		args []string
		dash int
		want azsessions.ShellExecution
		err  string
	}{
		{args: []string{"ls -a | wc -l"}, dash: -1, want: azsessions.ShellExecution{ShellCommand: "ls -a | wc -l"}},
		{args: []string{"ls", "-a"}, dash: 0, want: azsessions.ShellExecution{ExecCommandAndArgs: []string{"ls", "-a"}}},
		{args: []string{"x"}, dash: 0, want: azsessions.ShellExecution{ExecCommandAndArgs: []string{"x"}}},
		{args: []string{"a", "b"}, dash: 1, err: "not both"},
		{args: nil, dash: 0, err: "nothing after --"},
		{args: nil, dash: -1, err: "no command"},
		{args: []string{"", "x"}, dash: 0, err: "is empty"},
	} {
		c := &cli{args: tt.args, dash: tt.dash}
		got, err := c.shellExecution()
		if tt.err != "" {
			require.ErrorContains(t, err, tt.err, "%q dash %d", tt.args, tt.dash)
			require.Equal(t, exitUsage, exitCode(err))
			continue
		}
		require.NoError(t, err)
		require.Equal(t, tt.want, got)
	}
}

// TestShEmulator runs sh with the embedded emulator as a Shell pool: real
// bash in the sandbox, exit codes, stdin and argv without a shell.
func TestShEmulator(t *testing.T) {
	t.Parallel() // it mostly waits for the embedded emulator's sandboxes
	testenv.NeedSandbox(t)
	dir := t.TempDir()
	for _, tt := range []struct {
		name           string
		stdin          string
		args           []string
		code           int
		stdout, stderr string
	}{
		{name: "command line and exit code", args: []string{"sh", "echo out; echo err >&2; ls -a | wc -l; exit 4"}, code: 4, stdout: "out\n2\n", stderr: "err\n"},
		{name: "stdin", stdin: "hi\n", args: []string{"sh", "--stdin", "-", "read L; echo got:$L"}, stdout: "got:hi\n"},
		{name: "argv without a shell", args: []string{"sh", "--", "printf", "%s|", "$HOME", "a b", "*"}, stdout: "$HOME|a b|*|"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			args := append([]string{"--emulator", "--python", testenv.Python}, tt.args...)
			r := runCLI(t, dir, nil, tt.stdin, args...)
			require.Equal(t, tt.code, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
			require.Equal(t, tt.stdout, r.stdout, "stderr: %s", r.stderr)
			require.Equal(t, tt.stderr, r.stderr, "no notes: sh's stderr is the command's own")
		})
	}
}
