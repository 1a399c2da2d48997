package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// progress draws a one-line progress bar on a terminal.
type progress struct {
	w     io.Writer
	name  string
	total int64

	mu    sync.Mutex
	n     int64
	last  time.Time
	drawn bool
}

func newProgress(w io.Writer, name string, total int64) *progress {
	p := &progress{w: w, name: name, total: total}
	p.draw(true)
	return p
}

// set records n bytes sent and redraws at most ten times a second.
func (p *progress) set(n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n = n
	p.draw(n >= p.total)
}

func (p *progress) draw(force bool) {
	now := time.Now()
	if !force && now.Sub(p.last) < 100*time.Millisecond {
		return
	}
	p.last = now
	p.drawn = true
	fmt.Fprint(p.w, "\r"+progressLine(p.name, p.n, p.total))
}

// done ends the bar's line.
func (p *progress) done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drawn {
		fmt.Fprint(p.w, "\n")
	}
}

// progressLine renders "name [#####.....]  42%  12.0/28.6 MiB".
func progressLine(name string, n, total int64) string {
	const width = 30
	if total <= 0 {
		total = 1
	}
	n = min(max(n, 0), total)
	filled := int(n * width / total)
	if len(name) > 32 {
		name = "…" + name[len(name)-31:]
	}
	return fmt.Sprintf("%-32s [%s%s] %3d%%  %.1f/%.1f MiB", name,
		strings.Repeat("#", filled), strings.Repeat(".", width-filled),
		n*100/total, float64(n)/(1<<20), float64(total)/(1<<20))
}

// progressReader reports the bytes read from the file; a rewind (the client
// retrying the upload) starts over.
type progressReader struct {
	io.ReadSeeker
	p   *progress
	pos int64
}

func (r *progressReader) Read(b []byte) (int, error) {
	n, err := r.ReadSeeker.Read(b)
	r.pos += int64(n)
	r.p.set(r.pos)
	return n, err
}

func (r *progressReader) Seek(offset int64, whence int) (int64, error) {
	pos, err := r.ReadSeeker.Seek(offset, whence)
	if err == nil {
		r.pos = pos
		r.p.mu.Lock()
		r.p.n = pos // drawn on the next read: the client may seek to the end to learn the size
		r.p.mu.Unlock()
	}
	return pos, err
}
