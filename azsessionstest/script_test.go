package azsessionstest_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/azsessions/azsessions/azsessionstest"
	"github.com/azsessions/azsessions/emulator"
)

// cellsOptions returns server options whose executor answers the cells
// these tests send, as CPython would. No Python runs: a variable is a file
// in the session's data directory, so it goes when the session expires, as
// a kernel's variables do.
func cellsOptions(opts azsessionstest.Options) *azsessionstest.Options {
	opts.Executor = emulator.ScriptedExecutor(func(ctx context.Context, code string) emulator.ExecutionResult {
		dir := emulator.DataDirFromContext(ctx)
		set := func(name, val string) { _ = os.WriteFile(filepath.Join(dir, ".var-"+name), []byte(val), 0o600) }
		get := func(name string) (string, bool) {
			b, err := os.ReadFile(filepath.Join(dir, ".var-"+name))
			return string(b), err == nil
		}
		nameError := func(name string) emulator.ExecutionResult {
			return emulator.ExecutionResult{Status: emulator.Failed, Stderr: "Traceback (most recent call last):\nNameError: name '" + name + "' is not defined\n"}
		}
		switch code {
		case "x = 1", "x = 42":
			set("x", code[4:])
			return emulator.ExecutionResult{}
		case "print(1)\nx = 1":
			set("x", "1")
			return emulator.ExecutionResult{Stdout: "1\n"}
		case "x = 6\nprint('hi')\nx * 7":
			set("x", "6")
			return emulator.ExecutionResult{Stdout: "hi\n", Value: json.RawMessage("42")}
		case "print('once')":
			return emulator.ExecutionResult{Stdout: "once\n"}
		case "x", "print(x)", "print(y)":
			name := map[string]string{"x": "x", "print(x)": "x", "print(y)": "y"}[code]
			val, ok := get(name)
			switch {
			case !ok:
				return nameError(name)
			case code == "x":
				return emulator.ExecutionResult{Value: json.RawMessage(val)}
			default:
				return emulator.ExecutionResult{Stdout: val + "\n"}
			}
		}
		return emulator.ExecutionResult{Status: emulator.Failed, Stderr: "NotImplementedError: no scripted answer for this cell in script_test.go\n"}
	})
	return &opts
}

// sandboxExecutor returns the sandbox executor (real Python in bubblewrap),
// or skips the test when bwrap or /usr/bin/python3 is missing (fails
// instead when AZSESSIONS_REQUIRE_SANDBOX=1).
func sandboxExecutor(t *testing.T) emulator.Executor {
	t.Helper()
	missing := func(msg string) {
		t.Helper()
		if os.Getenv("AZSESSIONS_REQUIRE_SANDBOX") == "1" {
			t.Fatal(msg + " (AZSESSIONS_REQUIRE_SANDBOX=1)")
		}
		t.Skip(msg + "; set AZSESSIONS_REQUIRE_SANDBOX=1 to make this a failure")
	}
	if _, err := exec.LookPath("bwrap"); err != nil {
		missing("bwrap is missing (apt-get install bubblewrap)")
	}
	if err := exec.Command("/usr/bin/python3", "-c", "import sys").Run(); err != nil {
		missing("/usr/bin/python3 is missing")
	}
	// No modules imported in the background: the cells need none.
	ex, err := emulator.NewSandboxExecutor(emulator.SandboxOptions{Python: "/usr/bin/python3", Preload: []string{}})
	if errors.Is(err, emulator.ErrNoBubblewrap) {
		missing("bubblewrap cannot create a sandbox here")
	}
	require.NoError(t, err)
	return ex
}
