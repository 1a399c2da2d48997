package emulator

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/azsessions/azsessions/internal/uuid"
	"github.com/azsessions/azsessions/internal/wire"
)

// session is one identifier's container: a kernel, its files and its
// executions.
type session struct {
	id        string
	etag      string
	createdAt time.Time

	// Guarded by Handler.mu.
	lastAccess time.Time
	inflight   int  // requests and background executions holding the session
	gone       bool // removed from the map
	closed     bool // kernel close scheduled

	ready  chan struct{} // closed once kernel/err are set
	kernel Kernel
	err    error

	ctx    context.Context // canceled when the session ends
	cancel context.CancelFunc
	queue  chan struct{} // one execution at a time

	execMu       sync.Mutex
	execs        map[string]*execution
	execOrder    []string   // ids oldest first, to forget the oldest beyond the bounds
	recBytes     int64      // bytes of the results of the recorded finished executions
	lastFinished *execution // the most recently finished execution, never forgotten
	pending      int        // executions queued or running (their code is held until they end)

	upMu       sync.Mutex
	upReserved int64 // bytes written by uploads in progress (see uploadQuota)
}

// maxRecordedExecutions bounds the executions a session remembers for GET
// executions/{id} and operation-id idempotency; the oldest finished ones go
// first. A record holds the result and a hash of the code, never the code.
const maxRecordedExecutions = 1000

// recordLocked remembers e, a new (running) execution, and forgets old ones
// beyond the bounds (see trimLocked). session.execMu must be held.
func (s *session) recordLocked(e *execution, maxBytes int64) {
	s.execs[e.id] = e
	s.execOrder = append(s.execOrder, e.id)
	s.trimLocked(maxBytes)
}

// finishedLocked accounts the stored size of e, which has just finished
// (its result is set), and forgets old records beyond the bounds.
// session.execMu must be held.
func (s *session) finishedLocked(e *execution, size, maxBytes int64) {
	e.finished, e.size = true, size
	s.lastFinished = e
	if s.execs[e.id] == e {
		s.recBytes += size
	}
	s.trimLocked(maxBytes)
}

// trimLocked forgets the oldest finished executions while the session
// records more than maxRecordedExecutions executions or more than maxBytes
// bytes of results. Running executions (whose results are not in yet) and
// the most recently finished one are always kept, so a record over the bound
// alone still answers until the next execution finishes. session.execMu
// must be held.
func (s *session) trimLocked(maxBytes int64) {
	over := func() bool { return len(s.execs) > maxRecordedExecutions || s.recBytes > maxBytes }
	if !over() {
		return
	}
	kept := s.execOrder[:0]
	for i, id := range s.execOrder {
		e := s.execs[id]
		if over() && e.finished && e != s.lastFinished {
			delete(s.execs, id)
			s.recBytes -= e.size
			continue
		}
		if !over() {
			kept = append(kept, s.execOrder[i:]...)
			break
		}
		kept = append(kept, id)
	}
	clear(s.execOrder[len(kept):])
	s.execOrder = kept
}

func (s *session) expireAt(cooldown time.Duration) time.Time { return s.lastAccess.Add(cooldown) }

// idleExpired reports whether s has outlived its cooldown. Sessions with a
// request or execution in flight never expire. Handler.mu must be held.
func (h *Handler) idleExpiredLocked(s *session, now time.Time) bool {
	return s.inflight == 0 && now.After(s.expireAt(h.opt.Cooldown))
}

// acquire returns the live session of id, holding it until release. When
// create is set a missing (or expired) session is created; otherwise the
// answer is 400 SessionWithIdentifierNotFound.
func (h *Handler) acquire(id string, create bool) (*session, *apiError) {
	now := h.opt.Now()
	var gone []*session
	h.mu.Lock()
	s := h.sessions[id]
	if s != nil && h.idleExpiredLocked(s, now) {
		gone = h.removeLocked(s, gone)
		s = nil
	}
	creator := false
	if s == nil {
		if !create {
			h.mu.Unlock()
			closeKernels(gone)
			return nil, errorf(http.StatusBadRequest, wire.CodeSessionWithIdentifierNotFound, "no session with this identifier exists in the pool (it may have expired)")
		}
		if len(h.sessions) >= h.opt.MaxSessions {
			gone = h.sweepLocked(now, gone)
		}
		if len(h.sessions) >= h.opt.MaxSessions {
			h.mu.Unlock()
			closeKernels(gone)
			return nil, errorf(http.StatusNotFound, CodePoolFull, "the session pool is full: no more sessions are being allocated (max %d)", h.opt.MaxSessions)
		}
		ctx, cancel := context.WithCancel(h.ctx)
		s = &session{
			id: id, etag: uuid.New(), createdAt: now.UTC(), lastAccess: now.UTC(),
			ready: make(chan struct{}), ctx: ctx, cancel: cancel,
			queue: make(chan struct{}, 1), execs: map[string]*execution{},
		}
		h.sessions[id] = s
		creator = true
	}
	s.inflight++
	s.lastAccess = now.UTC()
	h.mu.Unlock()
	closeKernels(gone)

	if creator {
		k, err := h.exec.NewKernel(s.ctx)
		s.kernel, s.err = k, err
		close(s.ready)
		if err != nil {
			h.log.Error("starting a kernel failed", "err", err)
			h.mu.Lock()
			if h.sessions[id] == s {
				h.removeLocked(s, nil)
			}
			h.mu.Unlock()
		}
	} else {
		<-s.ready // creation is bounded by the executor and h.ctx
	}
	if s.err != nil {
		h.release(s, false)
		return nil, internal("starting the session's interpreter failed")
	}
	return s, nil
}

// hold takes one more reference to a session already held (for a
// background execution).
func (h *Handler) hold(s *session) {
	h.mu.Lock()
	s.inflight++
	h.mu.Unlock()
}

// release drops a reference; the last release of an ended session closes
// its kernel. With touch it also slides lastAccessedAt (an execution ends:
// the session is idle only from then on).
func (h *Handler) release(s *session, touch bool) {
	now := h.opt.Now().UTC()
	h.mu.Lock()
	s.inflight--
	if touch && now.After(s.lastAccess) {
		s.lastAccess = now
	}
	closeNow := s.gone && s.inflight == 0 && !s.closed
	if closeNow {
		s.closed = true
	}
	h.mu.Unlock()
	if closeNow {
		closeKernels([]*session{s})
	}
}

// removeLocked ends a session: it leaves the map, its executions are
// canceled, and its kernel is closed now (appended to gone) or by the last
// release. Handler.mu must be held.
func (h *Handler) removeLocked(s *session, gone []*session) []*session {
	if h.sessions[s.id] == s {
		delete(h.sessions, s.id)
	}
	if s.gone {
		return gone
	}
	s.gone = true
	s.cancel()
	if s.inflight == 0 && !s.closed {
		s.closed = true
		gone = append(gone, s)
	}
	return gone
}

// sweepLocked removes every idle expired session. Handler.mu must be held.
func (h *Handler) sweepLocked(now time.Time, gone []*session) []*session {
	for _, s := range h.sessions {
		if h.idleExpiredLocked(s, now) {
			gone = h.removeLocked(s, gone)
		}
	}
	return gone
}

// closeKernels closes the kernels of ended sessions (their files go with them).
func closeKernels(ss []*session) error {
	var errs []error
	for _, s := range ss {
		<-s.ready
		if s.kernel != nil {
			errs = append(errs, s.kernel.Close())
		}
	}
	return errors.Join(errs...)
}

// Sweep ends every session idle for longer than Cooldown by the Now clock,
// removing its kernel, variables and files, and returns how many ended. The
// janitor calls it every SweepInterval; tests that move a fake clock may call
// it directly.
func (h *Handler) Sweep() int {
	h.mu.Lock()
	gone := h.sweepLocked(h.opt.Now(), nil)
	h.mu.Unlock()
	if err := closeKernels(gone); err != nil {
		h.log.Error("closing an expired kernel failed", "err", err)
	}
	return len(gone)
}

func (h *Handler) janitor() {
	defer h.wg.Done()
	t := time.NewTicker(h.opt.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-h.closed:
			return
		case <-t.C:
			h.Sweep()
		}
	}
}

// sessionView is the Session resource of a live session. Handler.mu must be held.
func (h *Handler) sessionViewLocked(s *session) wire.Session {
	created, last, exp := s.createdAt, s.lastAccess, s.expireAt(h.opt.Cooldown).UTC()
	return wire.Session{Identifier: s.id, CreatedAt: &created, LastAccessedAt: &last, ExpireAt: &exp, ETag: s.etag}
}
