package emulator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
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
}

func newPool(ctx context.Context, exec Executor, opt Options) *pool {
	return &pool{
		exec: exec, log: opt.Logger, now: opt.Now, cooldown: opt.Cooldown, maxSessions: opt.MaxSessions,
		ctx: ctx, sessions: map[string]*session{},
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
			queue: make(chan struct{}, 1), execs: map[string]*execution{},
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
	if s.inflight == 0 && !s.closed {
		s.closed = true
		gone = append(gone, s)
	}
	return gone
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
