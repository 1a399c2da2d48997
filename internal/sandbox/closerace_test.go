//go:build linux

package sandbox

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/azsessions/azsessions/internal/testenv"
	"github.com/stretchr/testify/require"
)

// TestCloseWaitsForKernelClose: a Kernel.Close that runs while
// Executor.Close runs (a session deleted or expired as the emulator shuts
// down) is still killing its sandbox when Executor.Close, whose own
// Kernel.Close of that kernel returns at once, removes the executor's
// cgroups and directories. Executor.Close must not return before that
// kernel's sandbox is gone, and the executor's cgroups must not be left
// behind (rmdir of a parent fails while a kernel's group still exists).
func TestCloseWaitsForKernelClose(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, opts Options) {
		base := testenv.DataDir(t)
		e, cgDirs := closeTestExecutor(t, opts.Mode, base, 0)
		k := newKernel(t, e)
		// processes for the kernel's close to kill
		requireOK(t, k, "import subprocess\nps = [subprocess.Popen(['sleep', '1000']) for _ in range(50)]")
		execDir := e.BaseDir()
		require.NotEmpty(t, findProcs(t, execDir))
		kclosed := make(chan error, 1)
		go func() { kclosed <- k.Close() }()
		require.Eventually(t, func() bool {
			k.pmu.Lock()
			defer k.pmu.Unlock()
			return k.closed
		}, time.Minute, time.Millisecond)
		require.NoError(t, e.Close())
		require.Empty(t, findProcs(t, execDir), "Executor.Close returned while a kernel's sandbox still ran")
		require.NoError(t, <-kclosed)
		for _, d := range cgDirs {
			_, err := os.Stat(d)
			require.ErrorIs(t, err, os.ErrNotExist, "the executor's cgroup %s was left behind", d)
		}
		ents, err := os.ReadDir(filepath.Join(base, "data"))
		require.NoError(t, err)
		require.Empty(t, ents)
	})
}

// TestCloseKillsKernelHandedToWaiter: the pool hands a started kernel to a
// waiting NewKernel (handLocked: off the waiters, not yet one of the
// executor's kernels) and Executor.Close runs before that call took it (its
// goroutine not yet scheduled). Close must kill that sandbox too: it is on
// no list Close walks, and the call kills it only when it next runs, after
// Close removed the executor's cgroups (left behind) and directories.
func TestCloseKillsKernelHandedToWaiter(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, opts Options) {
		base := testenv.DataDir(t)
		e, cgDirs := closeTestExecutor(t, opts.Mode, base, 0)
		execDir := e.BaseDir()
		// what NewKernel does before it waits, for a call that is then slow
		// to take what it was handed
		w := make(chan startResult, 1)
		t.Cleanup(func() {
			_ = e.Close()
			// the call runs at last: it finds the executor closed
			if r := <-w; r.p != nil {
				e.mu.Lock()
				delete(e.handed, r.p)
				e.mu.Unlock()
				r.p.kill()
				_ = removeKernelDirs(r.p.dataDir)
			}
			for _, d := range cgDirs {
				_ = os.Remove(d) // when the test failed
			}
		})
		e.mu.Lock()
		e.waiters = append(e.waiters, w)
		e.missLocked()
		e.mu.Unlock()
		e.wake()
		require.Eventually(t, func() bool { return len(w) == 1 }, 2*time.Minute, 5*time.Millisecond, "no kernel was handed over")
		require.NotEmpty(t, findProcs(t, execDir))
		require.NoError(t, e.Close())
		require.Empty(t, findProcs(t, execDir), "Executor.Close returned while the handed kernel's sandbox still ran")
		for _, d := range cgDirs {
			_, err := os.Stat(d)
			require.ErrorIs(t, err, os.ErrNotExist, "the executor's cgroup %s was left behind", d)
		}
	})
}

// closeTestExecutor is an executor for the Close tests (no preload, no font
// cache, Ready kernels as given, its data directories under base/data) and
// its cgroup bases (nil without cgroups), which must be gone after Close.
func closeTestExecutor(t *testing.T, mode, base string, ready int) (*Executor, []string) {
	t.Helper()
	e, err := newExecutor(Options{Mode: mode, DataDir: filepath.Join(base, "data"), Ready: ready, noPreload: true, noFontCache: true})
	require.NoError(t, err)
	var cgDirs []string
	if e.cg != nil {
		cgDirs = e.cg.bases
	}
	return e, cgDirs
}
