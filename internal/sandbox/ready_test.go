//go:build linux

package sandbox

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/azsessions/azsessions/internal/testenv"
)

// TestReadyCap: the most ready kernels demand may raise the target to is
// MaxReady (DefaultMaxReady when 0), at most a quarter of the pool-wide
// memory budget at readyMem per kernel and at most Capacity, never below
// Ready, and 0 with Ready 0.
func TestReadyCap(t *testing.T) {
	const gib = int64(1) << 30
	tests := []struct {
		name     string
		opts     Options
		capacity int
		want     int
	}{
		{"default", Options{Ready: 2, MaxTotalMemoryBytes: 12 * gib}, -1, DefaultMaxReady},
		{"no memory budget", Options{Ready: 2, MaxTotalMemoryBytes: -1}, -1, DefaultMaxReady},
		{"explicit", Options{Ready: 2, MaxReady: 10, MaxTotalMemoryBytes: 12 * gib}, -1, 10},
		{"explicit above the default", Options{Ready: 2, MaxReady: 100, MaxTotalMemoryBytes: 64 * gib}, -1, 100},
		{"a quarter of the memory budget", Options{Ready: 2, MaxTotalMemoryBytes: 2 * gib}, -1, 8},             // 512 MiB / 64 MiB
		{"gVisor kernels hold more", Options{Ready: 2, Mode: ModeGvisor, MaxTotalMemoryBytes: 2 * gib}, -1, 4}, // 512 MiB / 128 MiB
		{"explicit above the memory share", Options{Ready: 2, MaxReady: 100, MaxTotalMemoryBytes: 2 * gib}, -1, 8},
		{"capacity", Options{Ready: 2, MaxTotalMemoryBytes: 12 * gib}, 5, 5},
		{"never below Ready", Options{Ready: 6, MaxReady: 3, MaxTotalMemoryBytes: 12 * gib}, -1, 6},
		{"never below Ready (memory)", Options{Ready: 12, MaxTotalMemoryBytes: 2 * gib}, -1, 12},
		{"Ready 0: no ready kernels", Options{Ready: 0, MaxReady: 10, MaxTotalMemoryBytes: 12 * gib}, -1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := &Executor{opts: tt.opts, capacity: tt.capacity}
			require.Equal(t, tt.want, e.readyCap())
		})
	}
}

// TestReadyTargetFollowsBursts drives the pool's bookkeeping as NewKernel
// does (a ready kernel taken, else a call waiting for a start), burst after
// burst, each followed by the refill to the target: after a burst of N that
// the ready list could not serve, the target is N (up to the cap), so that
// the next burst of N waits for no start; a burst the ready list serves
// changes nothing; with Ready 0 there is no ready list to grow.
func TestReadyTargetFollowsBursts(t *testing.T) {
	tests := []struct {
		name       string
		ready, cap int
		bursts     []int
		targets    []int // the target after each burst
		waited     []int // calls of each burst that waited for a start
	}{
		{"a burst of 20, then another", 2, 32, []int{20, 20}, []int{20, 20}, []int{18, 0}},
		{"capped", 2, 8, []int{20, 20}, []int{8, 8}, []int{18, 12}},
		{"within Ready", 2, 32, []int{2, 1, 2}, []int{2, 2, 2}, []int{0, 0, 0}},
		{"a larger burst", 2, 32, []int{5, 12, 12}, []int{5, 12, 12}, []int{3, 7, 0}},
		{"a smaller burst keeps the target", 2, 32, []int{12, 5, 12}, []int{12, 12, 12}, []int{10, 0, 0}},
		{"one call more than Ready", 1, 32, []int{2, 2}, []int{2, 2}, []int{1, 0}},
		{"Ready 0", 0, 0, []int{5, 5}, []int{0, 0}, []int{5, 5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := &Executor{opts: Options{Ready: tt.ready, readyDecay: time.Minute}, target: tt.ready, maxReady: tt.cap}
			refill := func() {
				e.waiters = nil // every waiting call got its kernel
				for len(e.ready) < e.target {
					e.ready = append(e.ready, &proc{})
				}
				e.restLocked()
				require.Zero(t, e.demand, "the pool is at rest")
			}
			refill()
			for i, n := range tt.bursts {
				waited := 0
				for range n {
					if len(e.ready) > 0 {
						e.ready = e.ready[1:]
						e.hitLocked()
						continue
					}
					e.waiters = append(e.waiters, make(chan startResult, 1))
					e.missLocked()
					waited++
				}
				e.restLocked()
				require.Equal(t, n, e.demand, "burst %d: the burst is under way until the refill", i)
				require.Equal(t, tt.targets[i], e.target, "burst %d: target", i)
				require.LessOrEqual(t, e.target, max(tt.cap, tt.ready), "burst %d: over the cap", i)
				require.Equal(t, tt.waited[i], waited, "burst %d: calls that waited", i)
				refill()
			}
		})
	}
}

// TestReadyTargetHoldsWhileUsed: the raised target decays only after
// readyDecay without a burst needing more than Ready kernels; a burst served
// from the ready list beyond Ready's kernels counts as such demand, one
// within Ready does not.
func TestReadyTargetHoldsWhileUsed(t *testing.T) {
	for _, tt := range []struct {
		name  string
		burst int
		decay bool
	}{
		{"beyond Ready", 3, false},
		{"within Ready", 2, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := &Executor{opts: Options{Ready: 2, readyDecay: time.Minute}, target: 6, maxReady: 32}
			e.ready = make([]*proc, 6)
			e.lastMiss = time.Now().Add(-2 * time.Minute) // the raise is old
			for range tt.burst {
				e.ready = e.ready[1:]
				e.hitLocked()
			}
			surplus := e.decayLocked(time.Now())
			if tt.decay {
				require.Equal(t, 5, e.target)
				require.Len(t, surplus, 0, "the ready list is below the new target: nothing to close")
			} else {
				require.Equal(t, 6, e.target)
				require.Empty(t, surplus)
			}
		})
	}
}

// TestReadyNoDecayWhileRefilling: a raised target does not decay while the
// ready list is still being refilled (the kernels being started could not
// be used yet), however long ago the burst was; it decays readyDecay after
// the refill ended.
func TestReadyNoDecayWhileRefilling(t *testing.T) {
	e := &Executor{opts: Options{Ready: 2, readyDecay: time.Minute}, target: 20, maxReady: 32}
	now := time.Now()
	e.lastMiss = now.Add(-time.Hour)
	e.ready, e.starting = make([]*proc, 7), 2
	for _, d := range []time.Duration{0, 2 * time.Minute, 4 * time.Minute} {
		require.Empty(t, e.decayLocked(now.Add(d)), "decayed while refilling")
		require.Equal(t, 20, e.target)
	}
	refilled := now.Add(4 * time.Minute)
	e.ready, e.starting = make([]*proc, 20), 0
	require.Empty(t, e.decayLocked(refilled.Add(30*time.Second)), "too early after the refill")
	require.Equal(t, 20, e.target)
	require.Len(t, e.decayLocked(refilled.Add(61*time.Second)), 1)
	require.Equal(t, 19, e.target)
}

// gatedPool is an executor of plain processes (mode none) whose pool starts
// can be held: while the gate is closed, every start waits before it begins,
// so a test knows which NewKernel calls were served from the ready list.
type gatedPool struct {
	*Executor
	mu   sync.Mutex
	gate chan struct{} // nil: open
}

func newGatedPool(t *testing.T, o Options, check func(e *Executor)) *gatedPool {
	t.Helper()
	requireSandbox(t, false)
	g := &gatedPool{gate: make(chan struct{})} // held until g.Executor is set
	o.Mode, o.noPreload, o.noIPython, o.readyDecay = ModeNone, true, true, time.Hour
	o.startHook = func() func() {
		g.mu.Lock()
		gate := g.gate
		g.mu.Unlock()
		if gate != nil {
			<-gate
		}
		if check != nil {
			g.mu.Lock()
			e := g.Executor
			g.mu.Unlock()
			check(e)
		}
		return func() {}
	}
	e, err := newExecutor(o)
	if err != nil {
		g.open()
	}
	require.NoError(t, err)
	g.mu.Lock()
	g.Executor = e
	g.mu.Unlock()
	t.Cleanup(func() { require.NoError(t, e.Close()) })
	t.Cleanup(g.open) // before Close, which waits for the starts
	g.open()
	return g
}

func (g *gatedPool) hold() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gate == nil {
		g.gate = make(chan struct{})
	}
}

func (g *gatedPool) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gate != nil {
		close(g.gate)
		g.gate = nil
	}
}

// state is the pool's bookkeeping under its lock.
func (g *gatedPool) state() (ready, starting, waiters, target int) {
	g.Executor.mu.Lock()
	defer g.Executor.mu.Unlock()
	return len(g.ready), g.starting, len(g.waiters), g.target
}

// waitRest waits until the ready list holds n kernels and nothing starts.
func (g *gatedPool) waitRest(t *testing.T, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		ready, starting, waiters, _ := g.state()
		return ready == n && starting == 0 && waiters == 0
	}, 2*time.Minute, 10*time.Millisecond, "the ready list did not refill to %d", n)
}

// burst makes n NewKernel calls at once and returns their kernels and errors.
func (g *gatedPool) burst(t *testing.T, n int, whileRunning func()) ([]*Kernel, []error) {
	t.Helper()
	return newKernelsAtOnce(g.Executor, n, whileRunning)
}

func closeAll(t *testing.T, kernels []*Kernel) {
	t.Helper()
	for _, k := range kernels {
		if k != nil {
			require.NoError(t, k.Close())
		}
	}
}

// TestReadyAdaptsToBursts: with real starts (plain processes), a burst of 5
// new kernels on a pool of Ready 2 raises the target to 5; the ready list
// refills to 5, and the next burst of 5 is served from it entirely (every
// call returns while the pool's starts are held); a burst of 9 raises the
// target only to the cap (MaxReady 6), and the ready list refills to 6.
func TestReadyAdaptsToBursts(t *testing.T) {
	testenv.SkipLongInQuickLoop(t)
	t.Parallel()
	g := newGatedPool(t, Options{Ready: 2, MaxReady: 6}, nil)
	require.Equal(t, 6, g.ReadyCap())
	g.waitRest(t, 2)

	// A cold burst: the starts are held until every call is in (2 took the
	// ready kernels, 3 wait), so the burst is one whatever the scheduling.
	g.hold()
	kernels, errs := g.burst(t, 5, func() {
		require.Eventually(t, func() bool { _, _, waiters, _ := g.state(); return waiters == 3 }, time.Minute, 5*time.Millisecond)
		g.open()
	})
	for _, err := range errs {
		require.NoError(t, err)
	}
	_, _, _, target := g.state()
	require.Equal(t, 5, target, "the target is not the burst's size")
	closeAll(t, kernels)
	g.waitRest(t, 5)

	// The same burst again: served from the ready list while no start can
	// end.
	g.hold()
	kernels, errs = g.burst(t, 5, nil)
	g.open()
	for _, err := range errs {
		require.NoError(t, err)
	}
	_, _, _, target = g.state()
	require.Equal(t, 5, target)
	closeAll(t, kernels)
	g.waitRest(t, 5)

	// A burst beyond the cap.
	g.hold()
	kernels, errs = g.burst(t, 9, func() {
		require.Eventually(t, func() bool { _, _, waiters, _ := g.state(); return waiters == 4 }, time.Minute, 5*time.Millisecond)
		g.open()
	})
	for _, err := range errs {
		require.NoError(t, err)
	}
	_, _, _, target = g.state()
	require.Equal(t, 6, target, "the target passed the cap")
	closeAll(t, kernels)
	g.waitRest(t, 6)
}

// TestReadyWithinCapacity: where every kernel counts its memory limit (no
// cgroups: Capacity 4), the cap is Capacity, and the ready list that a burst
// raised never holds a session's room: at every start the ready, running,
// starting and handed-over kernels fit in Capacity, and once the ready list
// has refilled to the cap, Capacity sessions still get a kernel (from it),
// one more gets ErrPoolFull.
func TestReadyWithinCapacity(t *testing.T) {
	testenv.SkipLongInQuickLoop(t)
	t.Parallel()
	var (
		mu   sync.Mutex
		over []string
	)
	check := func(e *Executor) {
		e.mu.Lock()
		n := len(e.ready) + len(e.kernels) + e.starting + len(e.handed)
		e.mu.Unlock()
		if n > e.capacity {
			mu.Lock()
			over = append(over, "a start beyond Capacity")
			mu.Unlock()
		}
	}
	g := newGatedPool(t, Options{Ready: 1, noCgroup: true, MemoryLimitBytes: 512 << 20, MaxTotalMemoryBytes: 2 << 30}, check)
	require.Equal(t, 4, g.Capacity())
	require.Equal(t, 4, g.ReadyCap(), "the cap is not Capacity")
	g.waitRest(t, 1)

	g.hold()
	kernels, errs := g.burst(t, 6, func() {
		require.Eventually(t, func() bool { _, _, waiters, _ := g.state(); return waiters == 3 }, time.Minute, 5*time.Millisecond)
		g.open()
	})
	full := 0
	for _, err := range errs {
		if err != nil {
			require.ErrorIs(t, err, ErrPoolFull)
			full++
		}
	}
	require.Equal(t, 2, full, "Capacity 4: the 5th and 6th calls are refused")
	_, _, _, target := g.state()
	require.Equal(t, 4, target)
	closeAll(t, kernels)
	g.waitRest(t, 4)

	kernels, errs = g.burst(t, 5, nil)
	full = 0
	for _, err := range errs {
		if err != nil {
			require.ErrorIs(t, err, ErrPoolFull)
			full++
		}
	}
	require.Equal(t, 1, full, "4 sessions fit beside the ready list")
	closeAll(t, kernels)
	mu.Lock()
	defer mu.Unlock()
	require.Empty(t, over)
}
