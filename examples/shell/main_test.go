package main

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/azsessions/azsessions/internal/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestShellAgainstEmulator runs the example against the embedded Shell
// pool and checks each step's exit code and output.
func TestShellAgainstEmulator(t *testing.T) {
	testenv.NeedSandbox(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out, logs bytes.Buffer
	rep, err := run(ctx, "", &out, &logs)
	require.NoError(t, err, "output:\n%s\nlogs:\n%s", out.String(), logs.String())
	require.Contains(t, rep.Backend, "local emulator")
	want := map[string]struct {
		exit           int
		stdout, stderr string
	}{
		"1. pipe and variable": {0, "HELLO FROM /MNT/DATA\n", ""},
		"2. the uploaded file": {0, "Cairo\n5\n", ""},
		"3. standard input":    {0, "got: first\ngot: second\n", ""},
		"4. a failing command": {3, "", "no Paris in the file\n"},
		"5. no shell":          {0, "$HOME|a b|*|", ""},
		"6. write a file":      {0, "done\n", ""},
	}
	require.Len(t, rep.Results, len(want))
	for name, w := range want {
		got := rep.Results[name]
		require.Equal(t, w.exit, got.ExitCode, "%s: %+v", name, got)
		require.Equal(t, w.stdout, got.Stdout, name)
		require.Equal(t, w.stderr, got.Stderr, name)
	}
	require.Equal(t, "city,celsius\nCairo,31\nLisbon,19\nQuito,14\nOslo,4\n", rep.Download)
	require.Contains(t, out.String(), "All steps succeeded.")
}
