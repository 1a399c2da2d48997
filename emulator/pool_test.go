package emulator

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// countingExecutor starts fake kernels and counts them; fail makes NewKernel
// fail.
type countingExecutor struct {
	mu      sync.Mutex
	started int
	closed  map[*countingKernel]bool
	fail    error
}

type countingKernel struct{ e *countingExecutor }

func (k *countingKernel) DataDir() string { return "" }
func (k *countingKernel) Execute(context.Context, ExecutionRequest) (ExecutionResult, error) {
	return ExecutionResult{}, nil
}
func (k *countingKernel) Close() error {
	k.e.mu.Lock()
	defer k.e.mu.Unlock()
	k.e.closed[k] = true
	return nil
}

func (e *countingExecutor) NewKernel(context.Context) (Kernel, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.fail != nil {
		return nil, e.fail
	}
	e.started++
	return &countingKernel{e: e}, nil
}
func (e *countingExecutor) Info() Info   { return Info{} }
func (e *countingExecutor) Close() error { return nil }

func (e *countingExecutor) isClosed(k Kernel) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.closed[k.(*countingKernel)]
}

// testPool is a pool of at most maxSessions sessions with a 5 min cooldown
// and a settable clock.
func testPool(t *testing.T, maxSessions int) (*pool, *countingExecutor, *time.Time) {
	t.Helper()
	ex := &countingExecutor{closed: map[*countingKernel]bool{}}
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	p := newPool(context.Background(), ex, Options{
		Logger: slog.New(slog.DiscardHandler), Now: func() time.Time { return now },
		Cooldown: 5 * time.Minute, MaxSessions: maxSessions,
	})
	t.Cleanup(func() { require.NoError(t, p.closeAll()) })
	return p, ex, &now
}

func TestPoolAcquire(t *testing.T) {
	p, ex, _ := testPool(t, 10)
	_, err := p.acquire("a", false)
	require.ErrorIs(t, err, errSessionNotFound, "an operation that does not create finds nothing")
	s1, err := p.acquire("a", true)
	require.NoError(t, err)
	p.release(s1, false)
	s2, err := p.acquire("a", false)
	require.NoError(t, err)
	require.Same(t, s1, s2, "the same identifier is the same session")
	p.release(s2, false)
	require.Equal(t, 1, ex.started)
	require.Equal(t, 1, p.len())
}

// TestPoolConcurrentCreate: many first requests for one identifier start
// one kernel and share the session.
func TestPoolConcurrentCreate(t *testing.T) {
	p, ex, _ := testPool(t, 10)
	var wg sync.WaitGroup
	got := make([]*session, 16)
	for i := range got {
		wg.Go(func() {
			s, err := p.acquire("same", true)
			if err == nil {
				got[i] = s
				p.release(s, false)
			}
		})
	}
	wg.Wait()
	for _, s := range got {
		require.Same(t, got[0], s)
	}
	require.Equal(t, 1, ex.started)
}

// TestPoolExpiry: a session idle past the cooldown ends (kernel closed) and
// a new one takes its identifier; a held session never expires.
func TestPoolExpiry(t *testing.T) {
	p, ex, now := testPool(t, 10)
	idle, err := p.acquire("idle", true)
	require.NoError(t, err)
	p.release(idle, false)
	held, err := p.acquire("held", true)
	require.NoError(t, err)

	*now = now.Add(5*time.Minute + time.Second)
	require.Equal(t, 1, p.sweep(), "only the idle session ends")
	require.True(t, ex.isClosed(idle.kernel))
	require.False(t, ex.isClosed(held.kernel), "a held session outlives its cooldown")
	_, err = p.acquire("idle", false)
	require.ErrorIs(t, err, errSessionNotFound)

	p.release(held, true) // an execution ends: idle from now on
	*now = now.Add(4 * time.Minute)
	require.Zero(t, p.sweep())
	again, err := p.acquire("held", false)
	require.NoError(t, err)
	require.Same(t, held, again)
	p.release(again, false)
}

// TestPoolHold: a hold (a background execution) keeps a session from
// expiring after the request that started it released its reference, and
// the session is idle, and may expire, only once every hold is released.
func TestPoolHold(t *testing.T) {
	p, ex, now := testPool(t, 10)
	s, err := p.acquire("bg", true)
	require.NoError(t, err)
	p.hold(s)
	p.hold(s)
	p.release(s, false) // the request's answer was sent
	*now = now.Add(time.Hour)
	require.Zero(t, p.sweep(), "a held session expired")
	p.release(s, true) // one execution ends
	*now = now.Add(time.Hour)
	require.Zero(t, p.sweep(), "a session expired under its last hold")
	require.False(t, ex.isClosed(s.kernel))
	p.release(s, true) // the last one ends: idle from now
	*now = now.Add(5 * time.Minute)
	require.Zero(t, p.sweep(), "the cooldown counts from the last release")
	*now = now.Add(time.Second)
	require.Equal(t, 1, p.sweep())
	require.True(t, ex.isClosed(s.kernel))
}

// TestPoolFull: past MaxSessions new identifiers get errPoolFull, existing
// sessions keep working, and idle expired sessions make room.
func TestPoolFull(t *testing.T) {
	p, _, now := testPool(t, 2)
	for _, id := range []string{"a", "b"} {
		s, err := p.acquire(id, true)
		require.NoError(t, err)
		p.release(s, false)
	}
	_, err := p.acquire("c", true)
	require.ErrorIs(t, err, errPoolFull)
	s, err := p.acquire("a", true)
	require.NoError(t, err, "an existing session works in a full pool")
	p.release(s, true)
	*now = now.Add(5*time.Minute + time.Second)
	s, err = p.acquire("c", true)
	require.NoError(t, err, "expired sessions make room")
	p.release(s, false)
	require.Equal(t, 1, p.len())
}

// TestPoolEndWhileHeld: an ended session leaves the pool at once, but its
// kernel closes only with the last hold.
func TestPoolEndWhileHeld(t *testing.T) {
	p, ex, _ := testPool(t, 10)
	s, err := p.acquire("x", true)
	require.NoError(t, err)
	p.hold(s) // a background execution
	p.end(s)
	require.Zero(t, p.len())
	require.Error(t, s.ctx.Err(), "its executions are canceled")
	p.release(s, false)
	require.False(t, ex.isClosed(s.kernel), "closed under a running execution")
	p.release(s, true)
	require.True(t, ex.isClosed(s.kernel))
	fresh, err := p.acquire("x", true)
	require.NoError(t, err)
	require.NotSame(t, s, fresh)
	p.release(fresh, false)
}

// TestPoolKernelStartFails: the executor's error is kept (wrapped) and the
// identifier is not left taken.
func TestPoolKernelStartFails(t *testing.T) {
	p, ex, _ := testPool(t, 10)
	boom := errors.New("boom")
	ex.fail = boom
	_, err := p.acquire("x", true)
	require.ErrorIs(t, err, errKernelStart)
	require.ErrorIs(t, err, boom)
	require.Zero(t, p.len())
	ex.fail = nil
	s, err := p.acquire("x", true)
	require.NoError(t, err)
	p.release(s, false)
}

// TestPoolList: listing expires idle sessions first and is ordered by
// creation time, then identifier.
func TestPoolList(t *testing.T) {
	p, _, now := testPool(t, 10)
	for _, id := range []string{"b", "a"} {
		s, err := p.acquire(id, true)
		require.NoError(t, err)
		p.release(s, false)
	}
	*now = now.Add(time.Minute)
	s, err := p.acquire("c", true)
	require.NoError(t, err)
	p.release(s, false)
	var ids []string
	for _, v := range p.list() {
		ids = append(ids, v.Identifier)
	}
	require.Equal(t, []string{"a", "b", "c"}, ids)
	*now = now.Add(4*time.Minute + time.Second)
	require.Len(t, p.list(), 1, "a and b expired")
}
