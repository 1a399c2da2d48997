package main

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestOpensBlock(t *testing.T) {
	for line, want := range map[string]bool{
		"x = 1":                   false,
		"for i in range(3):":      true,
		"def f(x):  # comment":    true,
		"y = (1 +":                true,
		"d = {'a': 1,":            true,
		"s = 'unclosed ( in str'": false,
		"print('a:')":             false,
		"x = 1 \\":                true,
		"z = [1, 2]  # and (":     false,
	} {
		require.Equal(t, want, opensBlock(line), line)
	}
}

func TestSplitWords(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want []string
		err  bool
	}{
		{in: "ls -r", want: []string{"ls", "-r"}},
		{in: `exec 'print("a b")'`, want: []string{"exec", `print("a b")`}},
		{in: `download "my file.csv" -o x\ y`, want: []string{"download", "my file.csv", "-o", "x y"}},
		{in: `exec ''`, want: []string{"exec", ""}},
		{in: `exec 'open`, err: true},
	} {
		got, err := splitWords(tt.in)
		if tt.err {
			require.Error(t, err, tt.in)
			continue
		}
		require.NoError(t, err)
		require.Equal(t, tt.want, got, tt.in)
	}
}

// TestProgressRewind: a retried upload rewinds the body and the bar starts
// over instead of passing 100%.
func TestProgressRewind(t *testing.T) {
	var out bytes.Buffer
	p := newProgress(&out, "f", 10)
	r := &progressReader{ReadSeeker: strings.NewReader("0123456789"), p: p}
	buf := make([]byte, 6)
	_, err := r.Read(buf)
	require.NoError(t, err)
	_, err = r.Seek(0, io.SeekStart)
	require.NoError(t, err)
	require.Equal(t, int64(0), p.n)
	_, err = io.ReadAll(r)
	require.NoError(t, err)
	p.done()
	require.Equal(t, int64(10), p.n)
	require.Contains(t, out.String(), "100%")
	require.True(t, strings.HasSuffix(out.String(), "\n"))
	require.Equal(t, "f                                [###############...............]  50%  0.0/0.0 MiB", progressLine("f", 5, 10))
}

func TestSecondsFlag(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want time.Duration
		err  bool
	}{
		{in: "30", want: 30 * time.Second},
		{in: "0", want: 0},
		{in: "30s", want: 30 * time.Second},
		{in: "2m", want: 2 * time.Minute},
		{in: "1.5s", want: 1500 * time.Millisecond}, // parsed; exec refuses fractions
		{in: "soon", err: true},
		{in: "", err: true},
		{in: "99999999999", err: true}, // beyond int32 seconds, not a duration either
	} {
		var f secondsFlag
		err := f.Set(tt.in)
		if tt.err {
			require.Error(t, err, tt.in)
			continue
		}
		require.NoError(t, err, tt.in)
		require.Equal(t, tt.want, time.Duration(f), tt.in)
	}
}
