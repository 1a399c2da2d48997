//go:build linux

package sandbox

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/azsessions/azsessions/internal/testenv"
)

// poolExecutor is an executor of plain processes (mode none: the fastest
// starts) whose pool starts are counted: in flight now and at most.
func poolExecutor(t *testing.T, o Options) (e *Executor, peak *atomic.Int32) {
	t.Helper()
	requireSandbox(t, false)
	var now atomic.Int32
	peak = &atomic.Int32{}
	o.Mode, o.noPreload, o.noIPython, o.noFontCache = ModeNone, true, true, true
	o.startHook = func() func() {
		n := now.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		return func() { now.Add(-1) }
	}
	e, err := newExecutor(o)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, e.Close()) })
	return e, peak
}

// TestPoolBurst: a burst of new kernels is served by starts of at most one
// per CPU at a time (at least 2), every call gets its own kernel, the ready
// list grows with the concurrent demand (up to the ready cap) and
// refills.
func TestPoolBurst(t *testing.T) {
	testenv.SkipLongInQuickLoop(t)
	t.Parallel()
	e, peak := poolExecutor(t, Options{Ready: 1, readyDecay: time.Hour})
	start := time.Now()
	// More calls than start slots, so that starts at once are bounded;
	// few, since every kernel of the burst and of the refill is a start.
	burst := startSlots() + 2
	kernels, errs := newKernelsAtOnce(e, burst, nil)
	t.Logf("burst of %d served in %s", burst, time.Since(start))
	seen := map[string]bool{}
	for i, k := range kernels {
		require.NoError(t, errs[i])
		require.False(t, seen[k.DataDir()], "two calls got the same kernel")
		seen[k.DataDir()] = true
		requireOK(t, k, "1")
	}
	require.LessOrEqual(t, int(peak.Load()), startSlots(), "more starts at once than slots")
	e.mu.Lock()
	target := e.target
	e.mu.Unlock()
	require.Greater(t, target, 1, "the ready list did not grow with the burst")
	require.LessOrEqual(t, target, e.maxReady)
	defer func() {
		e.mu.Lock()
		t.Logf("ready %d, starting %d, target %d, font cache %v", len(e.ready), e.starting, e.target, e.fontCache)
		e.mu.Unlock()
	}()
	// The ready list refills once the kernels are gone (ready kernels and
	// sessions share the pool-wide limits: 11 kernels of 1 GiB on a 24 GiB
	// host).
	for _, k := range kernels {
		require.NoError(t, k.Close())
	}
	require.Eventually(t, func() bool { return e.ReadyKernels() == target }, 2*time.Minute, 20*time.Millisecond, "the ready list did not refill")
}

// TestPoolDecay: once readyDecay passed without concurrent demand, the
// ready target falls by one per readyDecay down to Ready, and the ready
// kernels over it are handed back to be closed.
func TestPoolDecay(t *testing.T) {
	e := &Executor{opts: Options{Ready: 1, readyDecay: time.Minute}}
	now := time.Now()
	e.target, e.lastMiss = 3, now
	e.ready = []*proc{{}, {}, {}}
	require.Empty(t, e.decayLocked(now.Add(30*time.Second)), "too early")
	require.Equal(t, 3, e.target)
	now = now.Add(61 * time.Second)
	require.Len(t, e.decayLocked(now), 1)
	require.Equal(t, 2, e.target)
	require.Len(t, e.ready, 2)
	require.Empty(t, e.decayLocked(now.Add(time.Second)), "one step per readyDecay")
	now = now.Add(61 * time.Second)
	require.Len(t, e.decayLocked(now), 1)
	require.Equal(t, 1, e.target)
	require.Empty(t, e.decayLocked(now.Add(time.Hour)), "never below Ready")
	require.Equal(t, 1, e.target)
}

// TestPoolWaiterCanceled: a NewKernel whose context ends while it waits
// returns the context's error, and the kernel started for it is not lost
// (it goes to the ready list); Close fails the calls still waiting.
func TestPoolWaiterCanceled(t *testing.T) {
	t.Parallel()
	e, _ := poolExecutor(t, Options{Ready: 0})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := e.NewKernel(ctx)
	require.ErrorIs(t, err, context.Canceled)
	require.Eventually(t, func() bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		return len(e.ready)+e.starting <= 1 && len(e.waiters) == 0 && len(e.handed) == 0
	}, time.Minute, 20*time.Millisecond)
	k := newKernel(t, e)
	requireOK(t, k, "1")

	e2, _ := poolExecutor(t, Options{Ready: 0})
	done := make(chan error, 1)
	go func() {
		_, err := e2.NewKernel(context.Background())
		done <- err
	}()
	require.NoError(t, e2.Close())
	select {
	case err := <-done:
		if err != nil {
			require.ErrorIs(t, err, ErrClosed)
		}
	case <-time.After(time.Minute):
		t.Fatal("a waiting NewKernel was not released by Close")
	}
}

// TestPoolRefusesWaitersWithoutRoom: NewKernel calls admitted while the
// pool-wide limits had room, still waiting for a start when the room is
// gone (here the data directories filled the disk budget), fail with
// ErrPoolFull instead of waiting for a start that never comes; those whose
// start was under way get their kernel.
func TestPoolRefusesWaitersWithoutRoom(t *testing.T) {
	t.Parallel()
	requireSandbox(t, false)
	release := make(chan struct{})
	var began atomic.Int32
	o := Options{Mode: ModeNone, noPreload: true, noIPython: true, noFontCache: true, Ready: 0, MaxTotalDiskBytes: 1 << 30}
	o.startHook = func() func() {
		began.Add(1)
		<-release
		return func() {}
	}
	e, err := newExecutor(o)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, e.Close()) })
	const calls = 6
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	errs := make(chan error, calls)
	for range calls {
		go func() {
			k, err := e.NewKernel(ctx)
			if err == nil {
				t.Cleanup(func() { _ = k.Close() })
			}
			errs <- err
		}()
	}
	require.Eventually(t, func() bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		return len(e.waiters) == calls && e.starting == e.slots
	}, time.Minute, 10*time.Millisecond, "the calls were not all admitted")
	// The sessions' files fill the disk budget while the starts run.
	e.mu.Lock()
	e.diskBytes = o.MaxTotalDiskBytes
	e.mu.Unlock()
	close(release)
	full, ok := 0, 0
	for range calls {
		err := <-errs
		if err == nil {
			ok++
			continue
		}
		require.ErrorIs(t, err, ErrPoolFull)
		full++
	}
	t.Logf("%d got a kernel, %d refused (%d starts under way)", ok, full, e.slots)
	require.Equal(t, e.slots, ok, "the starts under way did not reach their calls")
	require.Equal(t, calls-e.slots, full)
	e.mu.Lock()
	e.diskBytes = 0
	e.mu.Unlock()
}

// newKernelsAtOnce makes n NewKernel calls on e at once (within 2 minutes),
// runs whileRunning (if any) meanwhile, and returns their kernels and errors.
func newKernelsAtOnce(e *Executor, n int, whileRunning func()) ([]*Kernel, []error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	kernels, errs := make([]*Kernel, n), make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k, err := e.NewKernel(ctx)
			errs[i] = err
			if err == nil {
				kernels[i] = k.(*Kernel)
			}
		}()
	}
	if whileRunning != nil {
		whileRunning()
	}
	wg.Wait()
	return kernels, errs
}
