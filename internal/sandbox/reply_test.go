//go:build linux

package sandbox

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReplyLineBounded (red team): while a reply is awaited, readReplies
// holds at most maxReplyBytes of one protocol line; a longer one is a broken
// protocol (fd 4 is treated as ended: the kernel is restarted) and never
// becomes a message. The forged line past the bound is one that
// replyWithinContract accepts (a figure at the cap and a text of 1 Mi
// control characters, 6 bytes each in JSON: ~17 MiB), so the line bound is
// the only defence that stops it; without it session code could make the
// emulator hold a line of any length (a GiB written to fd 4 without a
// newline), and TestNodeForgedReplyBounded and TestPythonForgedReplyBounded
// still pass (the contract check refuses their values). A line at the bound
// is delivered.
func TestReplyLineBounded(t *testing.T) {
	t.Parallel()
	forge := func() []byte {
		line, err := json.Marshal(map[string]any{
			"id": 1, "ok": true, "has_value": true,
			"value": map[string]string{"type": "image", "format": "png",
				"base64_data": strings.Repeat("A", base64.StdEncoding.EncodedLen(maxFigureBytes))},
			"text": strings.Repeat("\x01", maxValueChars),
		})
		require.NoError(t, err)
		return append(line, '\n')
	}
	past := forge()
	require.Greater(t, len(past), maxReplyBytes, "the forged line must be past the bound")
	var rep execReply
	require.NoError(t, json.Unmarshal(past, &rep))
	require.True(t, replyWithinContract(rep), "the forged line must pass the contract check")
	at := append(bytes.Repeat([]byte(" "), maxReplyBytes-len(`{}`)-1), []byte("{}\n")...)
	require.Len(t, at, maxReplyBytes)

	cases := []struct {
		name      string
		line      []byte
		delivered bool
	}{
		{name: "at the bound", line: at, delivered: true},
		{name: "past the bound, within the contract", line: past},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, w, err := os.Pipe()
			require.NoError(t, err)
			p := &proc{resR: r, msgs: make(chan []byte), dead: make(chan struct{}), preloaded: make(chan struct{})}
			done := p.awaitReply()
			defer done()
			readDone := make(chan struct{})
			go func() {
				defer close(readDone)
				defer r.Close()
				p.readReplies()
			}()
			writeErr := make(chan error, 1)
			go func() {
				_, err := w.Write(tc.line)
				w.Close()
				writeErr <- err
			}()
			var got [][]byte
			for m := range p.msgs {
				got = append(got, m)
			}
			<-readDone
			err = <-writeErr
			if !tc.delivered {
				require.Zero(t, len(got), "a line of %d bytes past the %d-byte bound became a reply", len(tc.line), maxReplyBytes)
				require.Error(t, err, "readReplies read the whole line past the bound instead of giving up at it")
				return
			}
			require.NoError(t, err)
			require.Len(t, got, 1)
			require.True(t, bytes.Equal(tc.line, got[0]), "the line at the bound was not delivered as written")
		})
	}
}
