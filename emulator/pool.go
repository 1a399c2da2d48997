package emulator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/azsessions/azsessions/internal/uuid"
	"github.com/azsessions/azsessions/internal/wire"
)

// Errors of pool.acquire; the Handler turns them into the service's answers.
var (
	// errSessionNotFound: no live session has the identifier and the
	// operation does not create one.
	errSessionNotFound = errors.New("emulator: no session with this identifier exists in the pool")
	// errPoolFull: MaxSessions sessions are live (after expiring idle ones),
	// or the executor has no room for another kernel (ErrPoolFull).
	errPoolFull = errors.New("emulator: the session pool is full")
	// errKernelStart wraps the Executor's error when a new session's kernel
	// did not start.
	errKernelStart = errors.New("emulator: starting the session's kernel failed")
)

// pool is the emulator's session pool, apart from HTTP (the Handler keeps
// routing, validation and answers): the live sessions by identifier, each
// created with its kernel on first use, held while requests and executions
// use it, and ended when idle for longer than the cooldown (lazily, by the
// janitor, or when the pool is full), when deleted or stopped, and when the
// pool closes. A session's kernel is closed by whoever drops the last hold
// on an ended session, never while a request or execution still uses it.
type pool struct {
	exec        Executor
	log         *slog.Logger
	now         func() time.Time
	cooldown    time.Duration
	maxSessions int
	ctx         context.Context // parent of every session's context
	// start, when set, runs on every new kernel before the session is
	// ready (custom containers: the cold start); its error ends the
	// session like a kernel that did not start.
	start func(ctx context.Context, k Kernel) error

	mu       sync.Mutex
	sessions map[string]*session

	records recordBudget
}

// recordBudget is the pool-wide account of the execution records of its
// live sessions (Options.MaxTotalRecordedBytes): each session's recBytes
// counts in total while it lives (session.addRecBytesLocked) and leaves it
// when the session ends (pool.removeLocked).
type recordBudget struct {
	max int64
	// mu serializes the finished executions with their forgetting (see
	// pool.finished): bytes enter total only under it, so that one pass
	// of forgetting sees every byte. Lock order: records.mu, pool.mu,
	// session.execMu.
	mu    sync.Mutex
	total atomic.Int64 // decreases anywhere (per-session trims, session ends)
}

func newPool(ctx context.Context, exec Executor, opt Options) *pool {
	return &pool{
		exec: exec, log: opt.Logger, now: opt.Now, cooldown: opt.Cooldown, maxSessions: opt.MaxSessions,
		ctx: ctx, sessions: map[string]*session{},
		records: recordBudget{max: opt.MaxTotalRecordedBytes},
	}
}

// idleExpiredLocked reports whether s has outlived its cooldown. Sessions
// held by a request or execution never expire. p.mu must be held.
func (p *pool) idleExpiredLocked(s *session, now time.Time) bool {
	return s.inflight == 0 && now.After(s.expireAt(p.cooldown))
}

// acquire returns the live session of id, held until release. With create
// a missing (or expired) session is created and its kernel started (bounded
// by the executor and the pool's context); otherwise the error is
// errSessionNotFound. A full pool is errPoolFull; a kernel that did not
// start is errKernelStart wrapping the executor's error.
func (p *pool) acquire(id string, create bool) (*session, error) {
	now := p.now()
	var gone []*session
	p.mu.Lock()
	s := p.sessions[id]
	if s != nil && p.idleExpiredLocked(s, now) {
		gone = p.removeLocked(s, gone)
		s = nil
	}
	creator := false
	if s == nil {
		if !create {
			p.mu.Unlock()
			closeKernels(gone)
			return nil, errSessionNotFound
		}
		if len(p.sessions) >= p.maxSessions {
			gone = p.sweepLocked(now, gone)
		}
		if len(p.sessions) >= p.maxSessions {
			p.mu.Unlock()
			closeKernels(gone)
			return nil, errPoolFull
		}
		ctx, cancel := context.WithCancel(p.ctx)
		s = &session{
			id: id, etag: uuid.New(), createdAt: now.UTC(), lastAccess: now.UTC(),
			ready: make(chan struct{}), ctx: ctx, cancel: cancel,
			turn: closedTurn(), execs: map[string]*execution{},
			budget: &p.records,
		}
		p.sessions[id] = s
		creator = true
	}
	s.inflight++
	s.lastAccess = now.UTC()
	p.mu.Unlock()
	closeKernels(gone)

	if creator {
		k, err := p.exec.NewKernel(s.ctx)
		if errors.Is(err, ErrPoolFull) {
			// The executor's pool-wide budget is spent; expired sessions
			// not yet swept may hold it: end them and try once more.
			p.mu.Lock()
			gone := p.sweepLocked(p.now(), nil)
			p.mu.Unlock()
			if len(gone) > 0 {
				closeKernels(gone)
				k, err = p.exec.NewKernel(s.ctx)
			}
		}
		if err == nil && p.start != nil {
			if err = p.start(s.ctx, k); err != nil {
				_ = k.Close()
				k = nil
			}
		}
		s.kernel, s.err = k, err
		close(s.ready)
		if err != nil {
			p.log.Error("starting a kernel failed", "err", err)
			p.mu.Lock()
			if p.sessions[id] == s {
				p.removeLocked(s, nil)
			}
			p.mu.Unlock()
		}
	} else {
		<-s.ready
	}
	if s.err != nil {
		p.release(s, false)
		if errors.Is(s.err, ErrPoolFull) {
			return nil, fmt.Errorf("%w: %w", errPoolFull, s.err) // the same answer as at MaxSessions
		}
		return nil, fmt.Errorf("%w: %w", errKernelStart, s.err)
	}
	return s, nil
}

// hold takes one more reference to a session already held (for a
// background execution).
func (p *pool) hold(s *session) {
	p.mu.Lock()
	s.inflight++
	p.mu.Unlock()
}

// release drops a reference; the last release of an ended session closes
// its kernel. With touch it also slides lastAccessedAt (an execution ends:
// the session is idle only from then on).
func (p *pool) release(s *session, touch bool) {
	now := p.now().UTC()
	p.mu.Lock()
	s.inflight--
	if touch && now.After(s.lastAccess) {
		s.lastAccess = now
	}
	closeNow := s.gone && s.inflight == 0 && !s.closed
	if closeNow {
		s.closed = true
	}
	p.mu.Unlock()
	if closeNow {
		closeKernels([]*session{s})
	}
}

// end ends s (DELETE session, stopSession): it leaves the pool at once, its
// executions are canceled, and its kernel and files go when the last hold
// is released.
func (p *pool) end(s *session) {
	p.mu.Lock()
	gone := p.removeLocked(s, nil)
	p.mu.Unlock()
	closeKernels(gone)
}

// removeLocked ends a session: it leaves the map, its executions are
// canceled, and its kernel is closed now (appended to gone) or by the last
// release. p.mu must be held.
func (p *pool) removeLocked(s *session, gone []*session) []*session {
	if p.sessions[s.id] == s {
		delete(p.sessions, s.id)
	}
	if s.gone {
		return gone
	}
	s.gone = true
	s.cancel()
	s.execMu.Lock()
	s.releaseRecordsLocked()
	s.execMu.Unlock()
	if s.inflight == 0 && !s.closed {
		s.closed = true
		gone = append(gone, s)
	}
	return gone
}

// finished accounts the result of e, which has just finished in s (its
// result is set), to s's records (forgetting the session's own beyond
// maxSession bytes, see session.trimLocked) and then, when the pool's live
// sessions record more than Options.MaxTotalRecordedBytes together, forgets
// finished records pool-wide (see forgetRecords).
func (p *pool) finished(s *session, e *execution, size, maxSession int64) {
	b := &p.records
	b.mu.Lock()
	defer b.mu.Unlock()
	now := p.now().UTC()
	s.execMu.Lock()
	s.finishedLocked(e, size, maxSession, now)
	s.execMu.Unlock()
	if b.total.Load() > b.max {
		p.forgetRecords(e, now)
	}
}

// forgetRecords forgets finished records until the pool's live sessions
// record at most MaxTotalRecordedBytes together: each time the oldest
// finished record of the session that records the most bytes (ties: any of
// them), never a running execution nor keep, the execution that has just
// finished. The pool then records at most the bound, or keep alone when it
// is over the bound by itself (it goes when the next execution finishes).
// p.records.mu must be held (not p.mu nor any session.execMu).
func (p *pool) forgetRecords(keep *execution, now time.Time) {
	b := &p.records
	p.mu.Lock()
	ss := make([]*session, 0, len(p.sessions))
	for _, s := range p.sessions {
		ss = append(ss, s)
	}
	p.mu.Unlock()
	// Sessions created since have recorded nothing: bytes enter the
	// account only under b.mu. Sessions that end since leave it.
	sizes := make([]int64, len(ss))
	for i, s := range ss {
		s.execMu.Lock()
		sizes[i] = s.recBytes
		s.execMu.Unlock()
	}
	for b.total.Load() > b.max && len(ss) > 0 {
		top, second := 0, int64(0) // the largest and the size of the next
		for i := 1; i < len(ss); i++ {
			if sizes[i] > sizes[top] {
				top, second = i, sizes[top]
			} else {
				second = max(second, sizes[i])
			}
		}
		s := ss[top]
		s.execMu.Lock()
		// Forget from s while it is still the largest (or as large as
		// the next), then look again.
		stuck := !s.recGone && s.forgetLocked(func() bool { return b.total.Load() > b.max && s.recBytes >= second }, keep, now, true)
		size, done := s.recBytes, s.recGone || stuck
		s.execMu.Unlock()
		if done { // ended, or nothing left to forget: running executions, keep
			last := len(ss) - 1
			ss[top], sizes[top] = ss[last], sizes[last]
			ss, sizes = ss[:last], sizes[:last]
			continue
		}
		sizes[top] = size
	}
}

// sweepLocked removes every idle expired session. p.mu must be held.
func (p *pool) sweepLocked(now time.Time, gone []*session) []*session {
	for _, s := range p.sessions {
		if p.idleExpiredLocked(s, now) {
			gone = p.removeLocked(s, gone)
		}
	}
	return gone
}

// sweep ends every session idle for longer than the cooldown and returns
// how many ended.
func (p *pool) sweep() int {
	p.mu.Lock()
	gone := p.sweepLocked(p.now(), nil)
	p.mu.Unlock()
	if err := closeKernels(gone); err != nil {
		p.log.Error("closing an expired kernel failed", "err", err)
	}
	return len(gone)
}

// closeAll ends every session; their kernels close now or, for sessions
// still held, on their last release.
func (p *pool) closeAll() error {
	p.mu.Lock()
	var gone []*session
	for _, s := range p.sessions {
		gone = p.removeLocked(s, gone)
	}
	p.mu.Unlock()
	return closeKernels(gone)
}

// len is the number of live sessions.
func (p *pool) len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.sessions)
}

// view is the Session resource of s.
func (p *pool) view(s *session) wire.Session {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.viewLocked(s)
}

func (p *pool) viewLocked(s *session) wire.Session {
	created, last, exp := s.createdAt, s.lastAccess, s.expireAt(p.cooldown).UTC()
	return wire.Session{Identifier: s.id, CreatedAt: &created, LastAccessedAt: &last, ExpireAt: &exp, ETag: s.etag}
}

// list expires idle sessions, then returns the Session resources of the
// live ones, oldest first (ties by identifier).
func (p *pool) list() []wire.Session {
	p.mu.Lock()
	gone := p.sweepLocked(p.now(), nil)
	all := make([]wire.Session, 0, len(p.sessions))
	for _, s := range p.sessions {
		all = append(all, p.viewLocked(s))
	}
	p.mu.Unlock()
	closeKernels(gone)
	sort.Slice(all, func(i, j int) bool {
		if !all[i].CreatedAt.Equal(*all[j].CreatedAt) {
			return all[i].CreatedAt.Before(*all[j].CreatedAt)
		}
		return all[i].Identifier < all[j].Identifier
	})
	return all
}

// closeKernels closes the kernels of ended sessions (their files go with them).
func closeKernels(ss []*session) error {
	var errs []error
	for _, s := range ss {
		<-s.ready
		s.closeTransport()
		if s.kernel != nil {
			errs = append(errs, s.kernel.Close())
		}
	}
	return errors.Join(errs...)
}
