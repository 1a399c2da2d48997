//go:build linux

package sandbox

import (
	"bytes"
	"io"
	"sync"
	"unicode/utf8"

	"github.com/azsessions/azsessions/internal/kernel"
)

// MaxOutputStreamsMaxLength caps a Request's output cap (the emulator
// refuses larger values), so that a stream buffers at most about 4 MiB. It is
// emulator.MaxOutputStreamsMaxLength: emulator/sandbox_linux.go fails to
// compile if the two differ.
const MaxOutputStreamsMaxLength = 1 << 20

// stream collects one of a kernel's output streams (stdout or stderr) for the
// execution in progress. The driver ends each execution's output with the
// execution's nonce; everything before it belongs to the execution, at most
// capBytes of it is kept and the rest is counted and dropped, so printing
// gigabytes costs no memory. Output that arrives between executions is dropped.
type stream struct {
	mu       sync.Mutex
	nonce    []byte
	armed    bool
	buf      []byte
	pending  []byte // tail that may be the start of the nonce
	scratch  []byte
	capBytes int
	dropped  int64
	done     chan struct{} // closed when the nonce was seen or the pipe ended
	eof      bool
}

func newStream() *stream {
	s := &stream{done: make(chan struct{})}
	close(s.done)
	return s
}

// begin arms the stream for a new execution ending with nonce, keeping at most
// maxChars characters.
func (s *stream) begin(nonce []byte, maxChars int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nonce = nonce
	s.armed = true
	s.buf = s.buf[:0]
	s.pending = s.pending[:0]
	// A character takes at most 4 bytes of UTF-8.
	s.capBytes = maxChars*utf8.UTFMax + utf8.UTFMax
	s.dropped = 0
	s.done = make(chan struct{})
	if s.eof {
		s.armed = false
		close(s.done)
	}
}

// doneCh returns the channel closed when the current execution's output ended.
func (s *stream) doneCh() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done
}

// result returns the collected text cut at maxChars characters and whether it
// was cut. It may be called before the nonce arrived (killed kernels).
func (s *stream) result(maxChars int) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	data := s.buf
	if s.armed {
		// The nonce never came: the pending tail is output too.
		data = append(data, s.pending...)
	}
	truncated := s.dropped > 0
	out := string(bytes.ToValidUTF8(data, []byte("\uFFFD")))
	out, cut := kernel.TruncateOutput(out, maxChars)
	return out, truncated || cut
}

// keep appends p to the buffer up to capBytes; the caller holds mu.
func (s *stream) keep(p []byte) {
	room := s.capBytes - len(s.buf)
	if room < 0 {
		room = 0
	}
	if len(p) > room {
		s.dropped += int64(len(p) - room)
		p = p[:room]
	}
	s.buf = append(s.buf, p...)
}

// write consumes one chunk read from the pipe without copying it more than
// needed: only the last len(nonce)-1 bytes are held back, as they may be the
// start of the nonce.
func (s *stream) write(p []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.armed {
		return
	}
	n := len(s.nonce)
	if n == 0 {
		s.keep(p)
		return
	}
	if len(s.pending) > 0 {
		// A nonce that starts in pending ends in the first n-1 bytes of p.
		tmp := append(s.scratch[:0], s.pending...)
		tmp = append(tmp, p[:min(len(p), n-1)]...)
		s.scratch = tmp
		if i := bytes.Index(tmp, s.nonce); i >= 0 && i < len(s.pending) {
			s.keep(tmp[:i])
			s.end()
			return
		}
	}
	if i := bytes.Index(p, s.nonce); i >= 0 {
		s.keep(s.pending)
		s.keep(p[:i])
		s.end()
		return
	}
	total := len(s.pending) + len(p)
	out := total - (n - 1) // bytes that cannot be part of a nonce
	switch {
	case out <= 0:
		s.pending = append(s.pending, p...)
	case out <= len(s.pending):
		s.keep(s.pending[:out])
		rest := copy(s.pending, s.pending[out:])
		s.pending = append(s.pending[:rest], p...)
	default:
		s.keep(s.pending)
		s.keep(p[:out-len(s.pending)])
		s.pending = append(s.pending[:0], p[out-len(s.pending):]...)
	}
}

// end marks the current execution's output complete; the caller holds mu.
func (s *stream) end() {
	s.pending = s.pending[:0]
	s.armed = false
	close(s.done)
}

// finish marks the pipe closed.
func (s *stream) finish() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.eof = true
	if s.armed {
		s.armed = false
		s.buf = append(s.buf, s.pending...)
		s.pending = s.pending[:0]
		close(s.done)
	}
}

// pump reads r into s until r fails.
func (s *stream) pump(r io.Reader) {
	buf := make([]byte, 64*1024)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			s.write(buf[:n])
		}
		if err != nil {
			s.finish()
			return
		}
	}
}
