package main

import (
	"bytes"
	"io"
	"strings"
	"testing"

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
