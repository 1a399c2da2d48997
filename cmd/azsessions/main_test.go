package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/azsessions/azsessions"
	"github.com/azsessions/azsessions/azsessionstest"
	"github.com/azsessions/azsessions/emulator"
	"github.com/azsessions/azsessions/internal/testenv"
)

// binary is the azsessions command. Without -race it is this test binary,
// which runs main instead of the tests when runAsCLI is set (runCLI sets
// it): the same main package, without a go build (a link, ~1 CPU-second).
// A race-built one would cost more than that build in every run (the
// race runtime, its 1 s sleep at exit unless GORACE says otherwise), so
// with -race TestMain builds the command without it, once.
var binary string

// runAsCLI is the environment variable that makes the test binary the
// command.
const runAsCLI = "AZSESSIONS_TEST_RUN_AS_CLI"

func TestMain(m *testing.M) {
	if os.Getenv(runAsCLI) == "1" {
		os.Unsetenv(runAsCLI) // the command's environment is the caller's
		main()
		return // main exits
	}
	dir := ""
	if raceBuild {
		var err error
		if dir, err = os.MkdirTemp("", "azsessions-cli-"); err != nil {
			panic(err)
		}
		binary = filepath.Join(dir, "azsessions")
		build := exec.Command("go", "build", "-o", binary, ".")
		build.Stderr = os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "building the command:", err)
			os.Exit(1)
		}
	} else {
		var err error
		if binary, err = os.Executable(); err != nil {
			fmt.Fprintln(os.Stderr, "the test binary:", err)
			os.Exit(1)
		}
	}
	code := m.Run()
	if dir != "" {
		os.RemoveAll(dir)
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// pngBytes stands for an image the code returns.
var pngBytes = []byte("\x89PNG\r\n\x1a\nfake image bytes")

// script answers like a tiny Python.
func script(ctx context.Context, code string) emulator.ExecutionResult {
	switch strings.TrimSpace(code) {
	case "ok":
		return emulator.ExecutionResult{Stdout: "hello\n", Value: json.RawMessage(`42`)}
	case "text":
		return emulator.ExecutionResult{Value: json.RawMessage(`"a string"`)}
	case "none":
		return emulator.ExecutionResult{Stdout: "only stdout"}
	case "fail":
		return emulator.ExecutionResult{Status: emulator.Failed, Stdout: "before\n", Stderr: "Traceback...\nZeroDivisionError: division by zero\n"}
	case "image":
		return emulator.ExecutionResult{Value: json.RawMessage(`{"type":"image","format":"png","base64_data":"` + base64.StdEncoding.EncodeToString(pngBytes) + `"}`)}
	}
	return emulator.ExecutionResult{Stdout: "ran: " + code + "\n"}
}

type result struct {
	stdout, stderr string
	code           int
}

// runCLI runs the command (binary) with env (and nothing else of the test's
// environment but PATH and HOME) and stdin.
func runCLI(t *testing.T, dir string, env []string, stdin string, args ...string) result {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), binary, args...)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}, env...)
	if !raceBuild {
		cmd.Env = append(cmd.Env, runAsCLI+"=1")
	}
	if !raceBuild && testing.CoverMode() != "" {
		// else a -cover binary warns on stderr that it emits no coverage data
		cmd.Env = append(cmd.Env, "GOCOVERDIR="+t.TempDir())
	}
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return result{out.String(), errb.String(), code}
}

// closedEndpoint is an http endpoint where nothing listens.
func closedEndpoint(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return "http://" + addr + "/subscriptions/0/resourceGroups/r/sessionPools/p"
}

// TestExitCodes runs each verb against the fake pool and checks its exit
// status and output.
func TestExitCodes(t *testing.T) {
	srv := azsessionstest.Start(t, &azsessionstest.Options{Options: emulator.Options{Executor: emulator.ScriptedExecutor(script)}})
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "code.py"), []byte("ok"), 0o644))
	const id = "cli-test-1"
	ep := "AZURE_POOL_MANAGEMENT_ENDPOINT=" + srv.Endpoint()
	sess := "AZSESSIONS_SESSION=" + id

	tests := []cliCase{
		{name: "exec argument", env: []string{ep, sess}, args: []string{"exec", "ok"}, code: 0, stdout: "hello\n42\n"},
		{name: "exec string result unquoted", env: []string{ep, sess}, args: []string{"exec", "text"}, stdout: "a string\n"},
		{name: "exec stdout without newline, no result", env: []string{ep, sess}, args: []string{"exec", "none"}, stdout: "only stdout"},
		{name: "exec stdin", env: []string{ep, sess}, stdin: "ok", args: []string{"exec"}, stdout: "hello\n42\n"},
		{name: "exec file", env: []string{ep, sess}, args: []string{"exec", "-f", "code.py"}, stdout: "hello\n42\n"},
		{name: "exec flags after the code", env: []string{sess}, args: []string{"exec", "ok", "--endpoint", srv.Endpoint(), "--timeout", "30s"}, stdout: "hello\n42\n"},
		{name: "exec global flags before the verb", args: []string{"--endpoint", srv.Endpoint(), "--session", id, "exec", "ok"}, stdout: "hello\n42\n"},
		{name: "exec failed code", env: []string{ep, sess}, args: []string{"exec", "fail"}, code: 1, stdout: "before\n", contains: []string{"ZeroDivisionError"}},
		{name: "exec json", env: []string{ep, sess}, args: []string{"exec", "--json", "ok"}, contains: []string{`"status": "Succeeded"`, `"executionResult": 42`}},
		{name: "exec json failed", env: []string{ep, sess}, args: []string{"--json", "exec", "fail"}, code: 1, contains: []string{`"status": "Failed"`}},
		{name: "exec image without --save-images", env: []string{ep, sess}, args: []string{"exec", "image"}, contains: []string{"png image", "--save-images"}},
		{name: "exec fresh session printed", env: []string{ep}, args: []string{"exec", "ok"}, contains: []string{"new session ", "AZSESSIONS_SESSION="}},
		{name: "exec empty code", env: []string{ep, sess}, args: []string{"exec"}, code: 2, contains: []string{"the code is empty"}},
		{name: "exec two arguments", env: []string{ep, sess}, args: []string{"exec", "a", "b"}, code: 2},
		{name: "exec bad timeout", env: []string{ep, sess}, args: []string{"exec", "--timeout", "1.5s", "ok"}, code: 2},
		{name: "exec timeout in seconds", env: []string{ep, sess}, args: []string{"exec", "--timeout", "30", "ok"}, stdout: "hello\n42\n"},
		{name: "exec timeout not a number", env: []string{ep, sess}, args: []string{"exec", "--timeout", "soon", "ok"}, code: 2, contains: []string{"want seconds (30) or a duration (30s, 2m)"}},
		{name: "exec missing file", env: []string{ep, sess}, args: []string{"exec", "-f", "nope.py"}, code: 3},
		{name: "no endpoint", env: []string{sess}, args: []string{"exec", "ok"}, code: 2, contains: []string{"AZURE_POOL_MANAGEMENT_ENDPOINT"}},
		{name: "bad scheme", env: []string{sess}, args: []string{"--endpoint", "ftp://x/y", "exec", "ok"}, code: 2},
		{name: "bad api-version", env: []string{ep, sess}, args: []string{"--api-version", "2020-01-01", "exec", "ok"}, code: 2},
		{name: "invalid identifier", env: []string{ep}, args: []string{"--session", "bad id!", "exec", "ok"}, code: 2, contains: []string{"invalid session identifier"}},
		{name: "unreachable", env: []string{sess}, args: []string{"--endpoint", closedEndpoint(t), "ls"}, code: 3, contains: []string{"could not reach the service", "is the emulator running?"}, absent: []string{id}},
		{name: "ls missing directory", env: []string{ep, sess}, args: []string{"ls", "--path", "no-such-dir"}, code: 3, contains: []string{"no directory /mnt/data/no-such-dir in the session: the service answered 404"}},
		{name: "exec timeout over the cap", env: []string{ep, sess}, args: []string{"exec", "--timeout", "500", "ok"}, code: 2, contains: []string{"--timeout 500s is more than the service's cap, 220s"}},
		{name: "SDK error said once", env: []string{ep}, args: []string{"--session", "ab", "exec", "ok"}, code: 2, absent: []string{"exec: azsessions:"}, contains: []string{"azsessions exec: "}},
		{name: "unknown verb", args: []string{"frobnicate"}, code: 2},
		{name: "no verb", args: nil, code: 2},
		{name: "unknown flag", args: []string{"ls", "--bogus"}, code: 2},
		{name: "help", args: []string{"--help"}, contains: []string{"Exit status"}},
		{name: "help verb", args: []string{"help", "upload"}, contains: []string{"Usage: azsessions upload", "Examples:"}},
		{name: "metadata", env: []string{ep}, args: []string{"metadata"}}, // the scripted executor reports no runtimes; see TestEmulator
		{name: "metadata json", env: []string{ep}, args: []string{"metadata", "--json"}, contains: []string{"{"}},
		{name: "metadata legacy api-version", env: []string{ep}, args: []string{"--api-version", azsessions.APIVersion20240202Preview, "metadata"}, code: 2, contains: []string{"not supported"}},
		{name: "sessions get without identifier", env: []string{ep}, args: []string{"sessions", "get"}, code: 2},
		{name: "sessions unknown action", env: []string{ep}, args: []string{"sessions", "grow"}, code: 2},
		{name: "sessions get", env: []string{ep}, args: []string{"sessions", "get", id}, contains: []string{id + "\tcreated "}},
		{name: "sessions get json", env: []string{ep, sess}, args: []string{"sessions", "get", "--json"}, contains: []string{`"identifier": "` + id + `"`}},
		{name: "sessions list", env: []string{ep}, args: []string{"sessions", "list"}, contains: []string{id}},
		{name: "download missing", env: []string{ep, sess}, args: []string{"download", "missing.csv"}, code: 3, contains: []string{"404"}, absent: []string{id}},
		{name: "download no argument", env: []string{ep, sess}, args: []string{"download"}, code: 2},
		{name: "rm no argument", env: []string{ep, sess}, args: []string{"rm"}, code: 2},
		{name: "upload missing local file", env: []string{ep, sess}, args: []string{"upload", "nope.csv"}, code: 3},
		{name: "upload bad remote name", env: []string{ep, sess}, args: []string{"upload", "--name", "../x", "code.py"}, code: 2},
		{name: "upload --path outside /mnt/data", env: []string{ep, sess}, args: []string{"upload", "--path", "/etc", "code.py"}, code: 2, contains: []string{"--path /etc is outside /mnt/data"}},
		{name: "upload --path absolute inside", env: []string{ep, sess}, args: []string{"upload", "--path", "/mnt/data/in", "code.py"}, stdout: "/mnt/data/in/code.py\t2 bytes\n"},
		{name: "ls --path outside /mnt/data", env: []string{ep, sess}, args: []string{"ls", "--path", "/mnt/database"}, code: 2, contains: []string{"outside /mnt/data"}},
		{name: "upload error names the file once", env: []string{ep, sess}, args: []string{"upload", "--path", "../up", "code.py"}, code: 2, contains: []string{"azsessions upload: code.py: invalid"}, absent: []string{"azsessions: invalid"}},
		{name: "download missing names the file, with a hint", env: []string{ep, sess}, args: []string{"download", "nope.csv"}, code: 3, contains: []string{"nope.csv: the service answered 404", "hint: no such file or directory in the session; if it was there, the session may have ended after its cooldown"}, absent: []string{"hint: sessions end"}},
		{name: "download into a missing directory", env: []string{ep, sess}, args: []string{"download", "-o", "no/such/dir/x.csv", "x.csv"}, code: 2, contains: []string{"the directory no/such/dir of -o no/such/dir/x.csv does not exist"}, absent: []string{".part"}},
		{name: "fresh session not printed when nothing answered", args: []string{"--endpoint", closedEndpoint(t), "exec", "ok"}, code: 3, absent: []string{"new session"}},
		{name: "fresh session not printed when its first request failed", env: []string{ep}, args: []string{"download", "nope.csv"}, code: 3, absent: []string{"new session ", "AZSESSIONS_SESSION=", "hint: "}},
		{name: "version", args: []string{"--version"}, contains: []string{"azsessions v0.2.0"}},
	}
	for _, v := range verbs {
		tests = append(tests, cliCase{name: v.name + " --help", args: []string{v.name, "--help"}, contains: []string{"Usage: azsessions " + v.name, "Examples:"}})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.run(t, dir) })
	}
}

// TestMisleadingMessages covers three messages a fresh user found
// misleading: (g) a fresh session announced although its first request
// failed (an endpoint without the pool path: 404 RouteNotFound); (h) the
// cooldown hint for a file or directory that never existed; (i) no hint when
// exec meets a Shell session pool, unlike sh on a code-interpreter pool;
// (j) in the shell loop, hints, usage lines and the error's prefix named
// 'azsessions ls', 'azsessions rm --help' and "azsessions download:", where
// the verbs are typed %ls, %rm --help and %download.
func TestMisleadingMessages(t *testing.T) {
	python := azsessionstest.Start(t, &azsessionstest.Options{Options: emulator.Options{Executor: emulator.ScriptedExecutor(script)}})
	shell := azsessionstest.Start(t, &azsessionstest.Options{Options: emulator.Options{Executor: echoShell{}, PoolType: emulator.PoolTypeShell}})
	// a pool whose every listing says the session does not exist
	gone := azsessionstest.Start(t, &azsessionstest.Options{Options: emulator.Options{Executor: emulator.ScriptedExecutor(script)}})
	gone.InjectFault(azsessionstest.RouteListFiles, azsessionstest.Fault{Status: 404, Code: azsessions.ErrorCodeSessionNotFound}, 1000)
	// a code-interpreter pool refusing code for another reason
	refusing := azsessionstest.Start(t, &azsessionstest.Options{Options: emulator.Options{Executor: emulator.ScriptedExecutor(script)}})
	refusing.InjectFault(azsessionstest.RouteExecute, azsessionstest.Fault{Status: 400, Code: "BadThings"}, 1000)

	u, err := url.Parse(python.Endpoint())
	require.NoError(t, err)
	noPoolPath := u.Scheme + "://" + u.Host // what a user types for a local emulator
	const id = "misleading-1"
	sess := "AZSESSIONS_SESSION=" + id
	ep := func(s *azsessionstest.Server) string { return "AZURE_POOL_MANAGEMENT_ENDPOINT=" + s.Endpoint() }
	const (
		fileHint     = "hint: no such file or directory in the session; if it was there, the session may have ended after its cooldown"
		cooldownHint = "hint: sessions end after their cooldown"
		execHint     = "hint: this pool runs shell commands (a Shell session pool refuses code): use `azsessions sh`"
	)

	tests := []cliCase{
		// g: a fresh session is announced only once a request for it succeeded
		{name: "g: endpoint without the pool path, fresh session", args: []string{"--endpoint", noPoolPath, "exec", "1"}, code: 3, contains: []string{"404", "RouteNotFound"}, absent: []string{"new session", "AZSESSIONS_SESSION="}},
		{name: "g: first request 404 on a fresh session", env: []string{ep(python)}, args: []string{"ls", "--recursive", "--path", "outputs"}, code: 3, contains: []string{"404"}, absent: []string{"new session", "AZSESSIONS_SESSION="}},
		{name: "g: fresh session announced after a success", env: []string{ep(python)}, args: []string{"exec", "ok"}, contains: []string{"new session ", "AZSESSIONS_SESSION="}},
		{name: "g: fresh session announced after code that failed", env: []string{ep(python)}, args: []string{"exec", "fail"}, code: 1, contains: []string{"new session ", "AZSESSIONS_SESSION="}},
		// h: a missing file or directory says so before the cooldown
		{name: "h: ls of a directory that never existed", env: []string{ep(python), sess}, args: []string{"ls", "--recursive", "--path", "outputs"}, code: 3, contains: []string{"no directory /mnt/data/outputs in the session", "(FileNotFound)", fileHint}, absent: []string{cooldownHint, id}},
		{name: "h: download of a missing file", env: []string{ep(python), sess}, args: []string{"download", "nope.csv"}, code: 3, contains: []string{"(FileNotFound)", fileHint}, absent: []string{cooldownHint, id}},
		{name: "h: rm of a missing file", env: []string{ep(python), sess}, args: []string{"rm", "nope.csv"}, code: 3, contains: []string{"(FileNotFound)", fileHint}, absent: []string{cooldownHint, id}},
		{name: "h: session not found keeps the cooldown hint", env: []string{ep(gone), sess}, args: []string{"ls"}, code: 3, contains: []string{"(SessionWithIdentifierNotFound)", cooldownHint}, absent: []string{"no such file", id}},
		// i: exec on a Shell pool hints at sh, as sh on a code pool hints at exec
		{name: "i: exec on a Shell session pool", env: []string{ep(shell), sess}, args: []string{"exec", "print(1)"}, code: 3, contains: []string{"400", "this is a Shell session pool", "\n" + execHint}, absent: []string{id}},
		{name: "i: another 400 on exec gives no sh hint", env: []string{ep(refusing), sess}, args: []string{"exec", "ok"}, code: 3, contains: []string{"(BadThings)"}, absent: []string{"azsessions sh`", "hint: "}},
		{name: "i: sh on a code-interpreter pool keeps its hint", env: []string{ep(python), sess}, args: []string{"sh", "ls"}, code: 3, contains: []string{"hint: sh needs a Shell session pool"}, absent: []string{execHint, id}},
		// j: in the shell loop, hints and usage name the verbs as typed there (%ls, %rm --help)
		{name: "j: shell loop hint names %ls", env: []string{ep(python), sess}, stdin: "%download nope.csv\n", args: []string{"shell"}, contains: []string{"%download: nope.csv: ", "(FileNotFound)", "then starts a new, empty session: %ls shows what it holds"}, absent: []string{"'azsessions ls'", "azsessions download:", id}},
		{name: "j: shell loop usage names %rm --help", env: []string{ep(python), sess}, stdin: "%rm\n", args: []string{"shell"}, contains: []string{"Run '%rm --help' for usage."}, absent: []string{"'azsessions rm --help'"}},
		{name: "j: shell loop exec hint names %sh", env: []string{ep(shell), sess}, stdin: "%exec 'print(1)'\n", args: []string{"shell"}, contains: []string{"this is a Shell session pool", "refuses code): use %sh"}, absent: []string{"`azsessions sh`", id}},
		{name: "j: shell loop sh hint says to type code", env: []string{ep(python), sess}, stdin: "%sh ls\n", args: []string{"shell"}, contains: []string{"hint: sh needs a Shell session pool", "refuses shell commands: type its code here"}, absent: []string{"run its code with exec", id}},
		// k: an invalid identifier says where it came from (never what it is)
		{name: "k: invalid identifier from the environment", env: []string{ep(python), "AZSESSIONS_SESSION=abc"}, args: []string{"ls"}, code: 2, contains: []string{"invalid session identifier", "hint: the session identifier is the one of $AZSESSIONS_SESSION (unset it for a fresh session)"}, absent: []string{"abc"}},
		{name: "k: invalid identifier from --session", env: []string{ep(python), "AZSESSIONS_SESSION=abc"}, args: []string{"--session", "xyz", "exec", "1"}, code: 2, contains: []string{"invalid session identifier", "hint: the session identifier is the one of --session\n"}, absent: []string{"xyz"}},
		{name: "k: sessions get names no source", env: []string{ep(python), sess}, args: []string{"sessions", "get", "xyz"}, code: 2, contains: []string{"invalid session identifier"}, absent: []string{"hint: the session identifier", "xyz"}},
		{name: "j: outside the loop usage names azsessions rm --help", env: []string{ep(python), sess}, args: []string{"rm"}, code: 2, contains: []string{"Run 'azsessions rm --help' for usage."}},
	}
	dir := t.TempDir()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.run(t, dir) })
	}
}

// cliCase is one run of the command and what it must print and exit with.
type cliCase struct {
	name     string
	env      []string
	stdin    string
	args     []string
	code     int
	stdout   string // exact, unless empty
	contains []string
	absent   []string // in stdout+stderr
}

// run runs the command in dir and checks its exit status and output.
func (tt cliCase) run(t *testing.T, dir string) {
	t.Helper()
	r := runCLI(t, dir, tt.env, tt.stdin, tt.args...)
	require.Equal(t, tt.code, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
	if tt.stdout != "" {
		require.Equal(t, tt.stdout, r.stdout, "stderr: %s", r.stderr)
	}
	for _, s := range tt.contains {
		require.Contains(t, r.stdout+r.stderr, s)
	}
	for _, s := range tt.absent {
		require.NotContains(t, r.stdout+r.stderr, s)
	}
}

// TestSessionsListEmpty checks that sessions list on a pool without sessions
// says so on stderr, so that a human sees the command worked, while stdout
// stays empty for scripts (and --json prints an empty list).
func TestSessionsListEmpty(t *testing.T) {
	t.Parallel()
	empty := azsessionstest.Start(t, &azsessionstest.Options{Options: emulator.Options{Executor: emulator.ScriptedExecutor(script)}})
	busy := azsessionstest.Start(t, &azsessionstest.Options{Options: emulator.Options{Executor: emulator.ScriptedExecutor(script)}})
	const id = "list-empty-1"
	_, err := busy.Client().Session(id).Execute(t.Context(), "ok", nil)
	require.NoError(t, err)
	dir := t.TempDir()
	for _, tt := range []struct {
		name   string
		srv    *azsessionstest.Server
		args   []string
		stdout string // a regular expression
		stderr string // exact
	}{
		{name: "no sessions", srv: empty, args: []string{"sessions", "list"}, stdout: `^$`, stderr: "azsessions: no sessions\n"},
		{name: "no sessions, json", srv: empty, args: []string{"sessions", "list", "--json"}, stdout: `^\[\]\n$`, stderr: ""},
		{name: "one session", srv: busy, args: []string{"sessions", "list"}, stdout: `^` + id + `\tcreated \S+\tlast accessed \S+\texpires \S+\n$`, stderr: ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := runCLI(t, dir, []string{"AZURE_POOL_MANAGEMENT_ENDPOINT=" + tt.srv.Endpoint()}, "", tt.args...)
			require.Equal(t, 0, r.code, r.stderr)
			require.Regexp(t, tt.stdout, r.stdout)
			require.Equal(t, tt.stderr, r.stderr)
		})
	}
}

// TestServiceError checks that a failing service gives exit status 3 with
// the status and error code, and never the session identifier.
func TestServiceError(t *testing.T) {
	srv := azsessionstest.Start(t, &azsessionstest.Options{Options: emulator.Options{Executor: emulator.ScriptedExecutor(script)}})
	const id = "secret-session-7"
	srv.InjectFault(azsessionstest.RouteListFiles, azsessionstest.Fault{Status: 400, Code: "BadThings"}, 1)
	r := runCLI(t, t.TempDir(), []string{"AZURE_POOL_MANAGEMENT_ENDPOINT=" + srv.Endpoint(), "AZSESSIONS_SESSION=" + id}, "", "ls")
	require.Equal(t, 3, r.code, r.stderr)
	require.Contains(t, r.stderr, "the service answered 400 Bad Request (BadThings)")
	require.NotContains(t, r.stderr, id)
}

// TestFiles drives a file round trip: upload a file and a directory, list,
// download (atomic, no clobbering, stdout), remove.
func TestFiles(t *testing.T) {
	srv := azsessionstest.Start(t, &azsessionstest.Options{Options: emulator.Options{Executor: emulator.ScriptedExecutor(script)}})
	dir := t.TempDir()
	env := []string{"AZURE_POOL_MANAGEMENT_ENDPOINT=" + srv.Endpoint(), "AZSESSIONS_SESSION=files-1"}
	data := bytes.Repeat([]byte("0123456789abcdef"), 1<<17) // 2 MiB
	require.NoError(t, os.WriteFile(filepath.Join(dir, "big.bin"), data, 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "set", "sub"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "set", "a.csv"), []byte("a\n1\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "set", "sub", "b.csv"), []byte("b\n2\n"), 0o644))

	cli := func(code int, stdin string, args ...string) result {
		t.Helper()
		r := runCLI(t, dir, env, stdin, args...)
		require.Equal(t, code, r.code, "%v\nstdout: %s\nstderr: %s", args, r.stdout, r.stderr)
		return r
	}
	r := cli(0, "", "upload", "big.bin", "set")
	require.Equal(t, "/mnt/data/big.bin\t2097152 bytes\n/mnt/data/set/a.csv\t4 bytes\n/mnt/data/set/sub/b.csv\t4 bytes\n", r.stdout)
	require.NotContains(t, r.stderr, "[#", "no progress bar when stderr is not a terminal")

	r = cli(0, "", "upload", "--json", "--path", "inputs", "--name", "renamed.csv", "set/a.csv")
	var up []map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &up))
	require.Len(t, up, 1)
	require.Equal(t, "renamed.csv", up[0]["name"])

	r = cli(0, "", "ls")
	require.Contains(t, r.stdout, "     2097152  ")
	require.Contains(t, r.stdout, "/mnt/data/big.bin\n")
	require.Contains(t, r.stdout, "/mnt/data/set/\n")
	require.NotContains(t, r.stdout, "b.csv")
	r = cli(0, "", "ls", "--recursive", "--path", "set")
	require.Contains(t, r.stdout, "/mnt/data/set/sub/b.csv\n")
	r = cli(0, "", "ls", "-r", "--json")
	var files []map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &files))
	require.Len(t, files, 7) // big.bin, set/, set/a.csv, set/sub/, set/sub/b.csv, inputs/, inputs/renamed.csv

	cli(0, "", "download", "-o", "copy.bin", "big.bin")
	got, err := os.ReadFile(filepath.Join(dir, "copy.bin"))
	require.NoError(t, err)
	require.Equal(t, data, got)

	require.NoError(t, os.WriteFile(filepath.Join(dir, "b.csv"), []byte("keep me"), 0o644))
	r = cli(3, "", "download", "set/sub/b.csv")
	require.Contains(t, r.stderr, "--force")
	got, _ = os.ReadFile(filepath.Join(dir, "b.csv"))
	require.Equal(t, "keep me", string(got))
	cli(0, "", "download", "--force", "/mnt/data/set/sub/b.csv")
	got, _ = os.ReadFile(filepath.Join(dir, "b.csv"))
	require.Equal(t, "b\n2\n", string(got))

	r = cli(0, "", "download", "-o", "-", "set/a.csv")
	require.Equal(t, "a\n1\n", r.stdout)

	srv.InjectFault(azsessionstest.RouteDownload, azsessionstest.Fault{ResetMidBody: true}, 10)
	cli(3, "", "download", "-o", "partial.bin", "big.bin")
	_, err = os.Stat(filepath.Join(dir, "partial.bin"))
	require.ErrorIs(t, err, os.ErrNotExist, "a cut download leaves no file")
	srv.ClearFaults()

	// -o an existing directory: the file goes in under its base name
	require.NoError(t, os.Mkdir(filepath.Join(dir, "into"), 0o755))
	r = cli(0, "", "download", "-o", "into", "--force", "set/a.csv")
	require.Equal(t, filepath.Join("into", "a.csv")+"\t4 bytes\n", r.stdout)
	got, _ = os.ReadFile(filepath.Join(dir, "into", "a.csv"))
	require.Equal(t, "a\n1\n", string(got))

	// sessions list --json: the sessions themselves, not pages
	r = cli(0, "", "sessions", "list", "--json")
	var sessions []map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &sessions), r.stdout)
	require.NotEmpty(t, sessions)
	require.Contains(t, sessions[0], "identifier")

	// a directory is removed only with -r
	r = cli(2, "", "rm", "set/sub")
	require.Contains(t, r.stderr, "set/sub is a directory")
	r = cli(0, "", "ls", "-r")
	require.Contains(t, r.stdout, "set/sub/b.csv")
	cli(0, "", "rm", "-r", "set/sub")
	r = cli(0, "", "ls", "-r")
	require.NotContains(t, r.stdout, "set/sub")

	cli(0, "", "rm", "big.bin", "set/a.csv")
	r = cli(0, "", "ls", "-r")
	require.NotContains(t, r.stdout, "big.bin")
	require.NotContains(t, r.stdout, "a.csv")
	cli(3, "", "rm", "big.bin")

	// exec --save-images never overwrites
	cli(0, "", "exec", "--save-images", "plots", "image")
	cli(0, "", "exec", "--save-images", "plots", "image")
	for _, n := range []string{"image-1.png", "image-2.png"} {
		got, err := os.ReadFile(filepath.Join(dir, "plots", n))
		require.NoError(t, err)
		require.Equal(t, pngBytes, got)
	}

	// sessions delete ends the session: its files are gone
	cli(0, "", "sessions", "delete")
	r = cli(0, "", "ls", "-r")
	require.Empty(t, r.stdout)
}

// TestEmulator runs the command with the embedded sandboxed emulator: real
// Python, an image result, and a shell whose state persists.
func TestEmulator(t *testing.T) {
	t.Parallel() // it mostly waits for the embedded emulator's sandboxes
	testenv.NeedSandbox(t, "matplotlib")
	// Each run starts an emulator of its own: they run at once.
	t.Run("exec with an image", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		r := runCLI(t, dir, nil, "", "--emulator", "--python", testenv.Python, "exec", "--save-images", "out",
			"import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nprint('plotted')\nplt.gcf()")
		require.Equal(t, 0, r.code, r.stderr)
		require.Equal(t, "plotted\n", r.stdout)
		png, err := os.ReadFile(filepath.Join(dir, "out", "image-1.png"))
		require.NoError(t, err)
		require.True(t, bytes.HasPrefix(png, []byte("\x89PNG")))
	})
	t.Run("metadata", func(t *testing.T) {
		t.Parallel()
		r := runCLI(t, t.TempDir(), nil, "", "--emulator", "--python", testenv.Python, "metadata")
		require.Equal(t, 0, r.code, r.stderr)
		require.Contains(t, r.stdout, "runtime\tpython 3.")
		require.Contains(t, r.stdout, "package\tmatplotlib ")
		require.Contains(t, r.stderr, "--emulator lasts for this command only", "a verb whose state ends with the command says so")
	})
	t.Run("exec twice", func(t *testing.T) {
		t.Parallel()
		// each --emulator exec is a fresh emulator: the second one does not
		// know the first one's x, and each says so on stderr, not stdout
		const note = "azsessions: note: --emulator lasts for this command only; its variables and files end with it (to keep them, use 'azsessions --emulator shell', or run azsessions-emulator and set AZURE_POOL_MANAGEMENT_ENDPOINT)\n"
		dir := t.TempDir()
		r := runCLI(t, dir, nil, "", "--emulator", "--python", testenv.Python, "exec", "x = 6 * 7\nprint(x)")
		require.Equal(t, 0, r.code, r.stderr)
		require.Equal(t, "42\n", r.stdout)
		require.Equal(t, note, r.stderr)
		r = runCLI(t, dir, nil, "", "--emulator", "--python", testenv.Python, "exec", "x")
		require.Equal(t, 1, r.code, r.stderr)
		require.Empty(t, r.stdout)
		require.True(t, strings.HasPrefix(r.stderr, note), r.stderr)
		require.Contains(t, r.stderr, "NameError")
	})
	t.Run("download after an earlier --emulator upload", func(t *testing.T) {
		t.Parallel()
		// the file cannot be there: the hint says why, not that a cooldown
		// may have ended the session, nor to run 'azsessions ls'
		r := runCLI(t, t.TempDir(), nil, "", "--emulator", "--python", testenv.Python, "download", "TemperatureData.csv")
		require.Equal(t, 3, r.code, r.stderr)
		require.Contains(t, r.stderr, "(FileNotFound)")
		require.Contains(t, r.stderr, "hint: no such file or directory in the session; each --emulator command starts an empty emulator, so files of an earlier one are gone: upload and use them in one 'azsessions --emulator shell', or run azsessions-emulator and set AZURE_POOL_MANAGEMENT_ENDPOINT\n")
		require.NotContains(t, r.stderr, "cooldown")
		require.NotContains(t, r.stderr, "'azsessions ls'")
	})
	t.Run("exec fails", func(t *testing.T) {
		t.Parallel()
		r := runCLI(t, t.TempDir(), nil, "", "--emulator", "--python", testenv.Python, "exec", "1/0")
		require.Equal(t, 1, r.code)
		require.Contains(t, r.stderr, "ZeroDivisionError")
	})
	t.Run("shell %sh", func(t *testing.T) {
		t.Parallel()
		// the loop's emulator is a code-interpreter pool: the hint says how to get a Shell one
		r := runCLI(t, t.TempDir(), nil, "%sh ls\n", "--emulator", "--python", testenv.Python, "shell")
		require.Equal(t, 0, r.code, r.stderr)
		require.Contains(t, r.stderr, "'azsessions --emulator shell' starts a code-interpreter pool")
		require.Contains(t, r.stderr, "use 'azsessions --emulator sh'")
		require.NotContains(t, r.stderr, "run its code with exec")
	})
	t.Run("shell", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		script := "x = 6 * 7\nfor i in range(2):\n    print('loop', i)\n\n" +
			"open('/mnt/data/out.txt', 'w').write(str(x))\n" +
			"%ls\n%download out.txt\n%exec 'x + 1'\n1/0\nprint('still here')\n"
		r := runCLI(t, dir, nil, script, "--emulator", "--python", testenv.Python, "shell")
		require.Equal(t, 0, r.code, r.stderr)
		require.Equal(t, "loop 0\nloop 1\n2\n           2  ", r.stdout[:len("loop 0\nloop 1\n2\n           2  ")])
		require.Contains(t, r.stdout, "/mnt/data/out.txt\n")
		require.Contains(t, r.stdout, "out.txt\t2 bytes\n43\nstill here\n")
		require.Contains(t, r.stderr, "ZeroDivisionError")
		require.NotContains(t, r.stderr, "lasts for this command only", "the shell's emulator, %exec's too, lasts for the loop")
		got, err := os.ReadFile(filepath.Join(dir, "out.txt"))
		require.NoError(t, err)
		require.Equal(t, "42", string(got))
	})
}
