//go:build linux

package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// countStarts sets o.startHook to count the pool's kernel starts (New's
// self-test is not one of them).
func countStarts(o *Options) *atomic.Int32 {
	n := &atomic.Int32{}
	o.startHook = func() func() {
		n.Add(1)
		return func() {}
	}
	return n
}

// waitPoolRest waits until e's ready list holds n kernels that finished
// their preload and nothing starts.
func waitPoolRest(t *testing.T, e *Executor, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		e.mu.Lock()
		starting, waiters := e.starting, len(e.waiters)
		e.mu.Unlock()
		return e.ReadyKernels() == n && starting == 0 && waiters == 0
	}, 3*time.Minute, 10*time.Millisecond, "the ready list did not fill to %d", n)
}

// TestSelfTestKernelKept: with Ready > 0, New keeps its self-test's kernel
// as the first ready kernel, so the pool starts only Ready-1 (plain
// processes; the pool's starts are counted). With Ready 0 it is killed as
// before and its directories removed: the executor's directory holds only
// the ready kernels' (and their proxy directories).
func TestSelfTestKernelKept(t *testing.T) {
	t.Parallel()
	requireSandbox(t, false)
	for _, tt := range []struct{ ready, starts int }{{0, 0}, {1, 0}, {2, 1}} {
		t.Run(fmt.Sprintf("ready=%d", tt.ready), func(t *testing.T) {
			t.Parallel()
			o := Options{Mode: ModeNone, Ready: tt.ready, noPreload: true, noIPython: true, noFontCache: true, readyDecay: time.Hour}
			starts := countStarts(&o)
			e, err := newExecutorSelfTest(o)
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, e.Close()) })
			waitPoolRest(t, e, tt.ready)
			require.Equal(t, tt.starts, int(starts.Load()), "pool starts for Ready %d", tt.ready)

			e.mu.Lock()
			var want []string
			for _, p := range e.ready {
				for _, d := range []string{p.dataDir, proxyDir(p.dataDir), p.dataDir + ".tmp"} { // .tmp: mode none's HOME
					if _, err := os.Stat(d); err == nil {
						want = append(want, filepath.Base(d))
					}
				}
			}
			e.mu.Unlock()
			ents, err := os.ReadDir(e.BaseDir())
			require.NoError(t, err)
			var got []string
			for _, ent := range ents {
				if !strings.HasPrefix(ent.Name(), ".") {
					got = append(got, ent.Name())
				}
			}
			slices.Sort(want)
			require.Equal(t, want, got, "the executor's directory holds other kernels' directories than the ready ones'")
		})
	}
}

// readyTraits describes what a ready kernel was started with, as far as a
// session could tell it apart from another: the role its cgroups are named
// by, its oom_score_adj while ready and once taken, the directory of its
// data directory, what its matplotlib config directory holds (the font
// cache copied at start), whether it preloaded numpy, and its uid.
// readyOOM is p's oom_score_adj read before a session took it.
func readyTraits(t *testing.T, e *Executor, p *proc, readyOOM string, k *Kernel) string {
	t.Helper()
	role := "none"
	if p.cg != nil && len(p.cg.dirs) > 0 {
		role, _, _ = strings.Cut(filepath.Base(p.cg.dirs[0]), "-")
	}
	require.Same(t, p, k.p, "NewKernel did not hand out the ready kernels in order")
	res := requireOK(t, k, `import os, sys
d = os.environ.get("MPLCONFIGDIR", "")
print(sorted(os.listdir(d)) if os.path.isdir(d) else [], "numpy" in sys.modules, os.getuid())`)
	return fmt.Sprintf("role %s, oom_score_adj %s then %s, data in the base %t, %s",
		role, readyOOM, procOOMScoreAdj(t, p), filepath.Dir(p.dataDir) == e.BaseDir(), strings.TrimSpace(res.Stdout))
}

// procOOMScoreAdj is the oom_score_adj of p's process.
func procOOMScoreAdj(t *testing.T, p *proc) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(p.cmd.Process.Pid) + "/oom_score_adj")
	require.NoError(t, err)
	return strings.TrimSpace(string(b))
}

// TestSelfTestKernelLikePool: per backend, with Ready 2 the pool starts one
// kernel (the self-test's is the other), and the two ready kernels are
// alike (readyTraits): the self-test's preloads like the pool's (numpy
// here, the default), copied matplotlib's font cache (when matplotlib is
// installed), has its cgroups named as a ready kernel's and the same
// oom_score_adj before and after a session took it.
func TestSelfTestKernelLikePool(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, opts Options) {
		opts.MaxReady, opts.readyDecay = opts.Ready, time.Hour
		require.Equal(t, 2, opts.Ready)
		starts := countStarts(&opts)
		e, err := newExecutor(opts)
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, e.Close()) })
		waitPoolRest(t, e, 2)
		require.Equal(t, 1, int(starts.Load()), "pool starts beside the self-test's kernel")

		e.mu.Lock()
		ready := slices.Clone(e.ready)
		e.mu.Unlock()
		var ooms, traits []string
		for _, p := range ready {
			ooms = append(ooms, procOOMScoreAdj(t, p))
		}
		for i, p := range ready {
			traits = append(traits, readyTraits(t, e, p, ooms[i], newKernel(t, e)))
		}
		t.Logf("self-test's kernel: %s", traits[0])
		require.Equal(t, traits[1], traits[0], "the self-test's kernel differs from the pool's")
		require.Contains(t, traits[0], "True", "numpy was not preloaded")
		if _, ok := e.info.Packages["matplotlib"]; ok {
			require.Contains(t, traits[0], "fontlist-", "no font cache in the self-test's kernel")
		}
	})
}
