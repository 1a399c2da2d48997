//go:build linux

package sandbox

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/azsessions/azsessions/internal/kernel"
)

// TestStream feeds a stream in chunks of every size: the nonce is found across
// chunk boundaries, output is capped and the rest after the nonce is dropped.
func TestStream(t *testing.T) {
	t.Parallel()
	nonce := []byte("\x1eazs-0123456789\x1e")
	tests := []struct {
		name      string
		input     string
		max       int
		want      string
		truncated bool
	}{
		{"plain", "hello\n" + string(nonce) + "after", 100, "hello\n", false},
		{"empty", string(nonce), 100, "", false},
		{"nonce prefix in output", "a\x1eazs-01b" + string(nonce), 100, "a\x1eazs-01b", false},
		{"cut", strings.Repeat("x", 50) + string(nonce), 10, strings.Repeat("x", 10), true},
		{"cut runes", strings.Repeat("é", 50) + string(nonce), 10, strings.Repeat("é", 10), true},
		{"exactly max", strings.Repeat("y", 10) + string(nonce), 10, strings.Repeat("y", 10), false},
		{"invalid utf8", "a\xffb" + string(nonce), 10, "a\uFFFDb", false},
	}
	for _, tc := range tests {
		for _, chunk := range []int{1, 2, 3, 7, 16, 1000} {
			s := newStream()
			s.write([]byte("before begin is dropped"))
			s.begin(nonce, tc.max)
			in := []byte(tc.input)
			for len(in) > 0 {
				n := min(chunk, len(in))
				s.write(in[:n])
				in = in[n:]
			}
			select {
			case <-s.doneCh():
			default:
				t.Fatalf("%s/%d: nonce not seen", tc.name, chunk)
			}
			got, trunc := s.result(tc.max)
			require.Equal(t, tc.want, got, "%s/%d", tc.name, chunk)
			require.Equal(t, tc.truncated, trunc, "%s/%d", tc.name, chunk)
		}
	}
}

// TestStreamBounded checks that a stream keeps a bounded buffer however much
// is written, and that EOF ends an execution without a nonce.
func TestStreamBounded(t *testing.T) {
	t.Parallel()
	s := newStream()
	s.begin([]byte("\x1enonce\x1e"), 100)
	chunk := bytes.Repeat([]byte("z"), 64*1024)
	for i := 0; i < 200; i++ {
		s.write(chunk)
	}
	require.LessOrEqual(t, cap(s.buf), 4096)
	s.finish()
	<-s.doneCh()
	got, trunc := s.result(100)
	require.Equal(t, strings.Repeat("z", 100), got)
	require.True(t, trunc)
	// After EOF, begin completes at once.
	s.begin([]byte("x"), 10)
	<-s.doneCh()
}

// TestFillKeepsNote: stderr over the output cap is cut, but a note about
// what happened to the kernel (after) is kept whole at its end when it fits.
func TestFillKeepsNote(t *testing.T) {
	nonce := []byte("\x1eazs-fill\x1e")
	tests := []struct {
		name, stderr string
		before       []string
		after        string
		want         string
		truncated    bool
	}{
		{"note kept", strings.Repeat("x", 20), nil, "NOTE", "xxxxxNOTE\n", true},
		{"note longer than the cap", "err", nil, "ABCDEFGHIJKL", "ABCDEFGHIJ", true},
		{"notes before, characters", strings.Repeat("é", 20), []string{"n1"}, "", "n1\nééééééé", true},
		{"fits", "e\n", []string{"n1"}, "NOTE", "n1\ne\nNOTE\n", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := &proc{stdout: newStream(), stderr: newStream()}
			for _, s := range []*stream{p.stdout, p.stderr} {
				s.begin(nonce, 10)
			}
			p.stdout.pump(bytes.NewReader(nonce))
			p.stderr.pump(strings.NewReader(tc.stderr + string(nonce)))
			var res kernel.Result
			(&Kernel{}).fill(&res, p, 10, tc.before, tc.after)
			require.Equal(t, tc.want, res.Stderr)
			require.Equal(t, tc.truncated, res.StderrTruncated)
			require.Equal(t, emptyValue, res.Value)
		})
	}
}
