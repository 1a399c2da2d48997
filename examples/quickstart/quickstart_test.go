package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/azsessions/azsessions/internal/testenv"
)

// readCSV returns the header and rows of a CSV file.
func readCSV(t *testing.T, path string) ([]string, [][]string) {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	require.NoError(t, err)
	require.NotEmpty(t, rows)
	return rows[0], rows[1:]
}

func temperature(t *testing.T, header, row []string) float64 {
	t.Helper()
	i := slices.Index(header, "Temperature")
	require.GreaterOrEqual(t, i, 0)
	v, err := strconv.ParseFloat(row[i], 64)
	require.NoError(t, err)
	return v
}

// TestQuickstartAgainstEmulator runs the whole quickstart against the embedded,
// sandboxed emulator and checks its answers against the CSV itself.
func TestQuickstartAgainstEmulator(t *testing.T) {
	testenv.NeedSandbox(t, "IPython", "pandas", "matplotlib", "pytz")
	data := filepath.Join("..", "..", "testdata", "TemperatureData.csv")
	dir := t.TempDir()
	cfg := config{Data: data, Out: filepath.Join(dir, "sorted.csv"), Plot: filepath.Join(dir, "curve.png")}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out, logs bytes.Buffer
	rep, err := run(ctx, cfg, &out, &logs)
	require.NoError(t, err, "output:\n%s\nlogs:\n%s", out.String(), logs.String())

	header, rows := readCSV(t, data)
	want := temperature(t, header, rows[0])
	for _, r := range rows {
		want = max(want, temperature(t, header, r))
	}
	require.Equal(t, want, rep.Highest)
	require.Contains(t, out.String(), "the highest temperature in the file is "+strconv.FormatFloat(want, 'g', -1, 64))

	require.Contains(t, rep.Backend, "local emulator")
	require.Regexp(t, `^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d P[SD]T-0[78]00$`, rep.SeattleTime)
	require.Contains(t, rep.SyntaxError, "SyntaxError")

	var names []string
	for _, f := range rep.Files {
		names = append(names, f.Name)
		if f.Name == "TemperatureData.csv" {
			require.Equal(t, "/mnt/data/TemperatureData.csv", f.FullPath())
			st, err := os.Stat(data)
			require.NoError(t, err)
			require.Equal(t, st.Size(), f.SizeInBytes)
		}
	}
	require.Contains(t, names, "TemperatureData.csv")

	// The downloaded file holds the same rows, sorted by Temperature, descending.
	gotHeader, got := readCSV(t, cfg.Out)
	require.Equal(t, header, gotHeader)
	require.True(t, sort.SliceIsSorted(got, func(i, j int) bool {
		return temperature(t, header, got[i]) > temperature(t, header, got[j])
	}), "not sorted descending: %v", got)
	key := func(rs [][]string) []string {
		var ks []string
		for _, r := range rs {
			ks = append(ks, strings.Join(r, ","))
		}
		sort.Strings(ks)
		return ks
	}
	require.Equal(t, key(rows), key(got))

	// Task 4: the image result is a PNG.
	require.Equal(t, cfg.Plot, rep.PlotPath)
	png, err := os.ReadFile(cfg.Plot)
	require.NoError(t, err)
	require.True(t, bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")))
	// No temporary files are left beside the outputs.
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 2)
}
