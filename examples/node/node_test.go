package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/azsessions/azsessions/internal/testenv"
)

// TestNodeExampleAgainstEmulator runs the whole example against the
// embedded NodeLTS emulator (Node.js in bubblewrap) and checks what the
// JavaScript computed against the CSV itself.
func TestNodeExampleAgainstEmulator(t *testing.T) {
	testenv.NeedSandbox(t)
	if _, err := exec.LookPath("node"); err != nil {
		if os.Getenv(testenv.RequireSandboxEnv) == "1" {
			t.Fatalf("Node.js (node) is missing and %s=1", testenv.RequireSandboxEnv)
		}
		t.Skip("skipping: Node.js (node) is missing")
	}
	data := filepath.Join("..", "..", "testdata", "TemperatureData.csv")
	cfg := config{Data: data, Out: filepath.Join(t.TempDir(), "summary.json")}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out, logs bytes.Buffer
	rep, err := run(ctx, cfg, &out, &logs)
	require.NoError(t, err, "output:\n%s\nlogs:\n%s", out.String(), logs.String())

	require.Equal(t, "hello-world\n", rep.Hello)
	require.Equal(t, 72, rep.Answer)

	f, err := os.Open(data)
	require.NoError(t, err)
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	require.NoError(t, err)
	col := slices.Index(rows[0], "Temperature")
	require.GreaterOrEqual(t, col, 0)
	var sum, lo, hi float64
	warmest := ""
	for i, r := range rows[1:] {
		v, err := strconv.ParseFloat(r[col], 64)
		require.NoError(t, err)
		sum += v
		if i == 0 || v < lo {
			lo = v
		}
		if i == 0 || v > hi {
			hi, warmest = v, r[0]
		}
	}
	n := len(rows) - 1
	require.Equal(t, n, rep.Summary.Readings)
	require.Equal(t, lo, rep.Summary.Min)
	require.Equal(t, hi, rep.Summary.Max)
	require.InDelta(t, sum/float64(n), rep.Summary.Mean, 1e-9)
	require.Equal(t, warmest, rep.Summary.Warmest)

	require.Contains(t, rep.Error, "SyntaxError")
	require.Contains(t, out.String(), "All steps succeeded.")
}
