//go:build linux

package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/azsessions/azsessions/internal/kernel"
	"github.com/stretchr/testify/require"
)

// TestPoolOOMKillsLargestSandbox: when the sandboxes together reach the
// pool-wide memory limit, the sandbox that holds the most memory by its
// cgroup dies, not the one with the largest resident set. One session
// keeps a large file in its /tmp (a tmpfs: charged to its cgroup, in no
// process's resident set; under gVisor all of a sandbox's memory is like
// that, its Sentry's memory file), another allocates past the pool's
// budget: the first one's sandbox is killed, the allocation succeeds, and
// a quiet third session keeps its state. Without the pool's OOM policy
// (oom.go) the kernel's OOM killer took the allocating session (bwrap:
// largest resident set) or any of the three (gVisor: dmesg of
// TestEscapePoolMemory/gvisor).
func TestPoolOOMKillsLargestSandbox(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	forEachBackend(t, func(t *testing.T, opts Options) {
		// file: what the tmpfs session writes to /tmp.
		file := int64(240 << 20)
		o := opts
		o.Ready, o.noPreload, o.noFontCache = 0, true, true
		// /tmp holds up to half of MemoryLimitBytes (tmpfsSizes): room for the
		// file, and a budget small enough that the allocation stays below it.
		o.MaxFileSizeBytes, o.MaxDataDirBytes = 1<<30, 1<<30
		o.MemoryLimitBytes, o.MaxTotalMemoryBytes = 2*file+16<<20, 2*file+16<<20
		if opts.Mode == ModeGvisor {
			// A gVisor sandbox's Sentry and Gofer charge ~50-70 MiB each.
			file = 300 << 20
			o.MemoryLimitBytes, o.MaxTotalMemoryBytes = 2*file+16<<20, 2*file+16<<20
		}
		e := poolMemoryExecutor(t, o)
		if !e.oomPolicy {
			t.Skip("no pool OOM policy here (it needs a cgroup v1 memory controller): the kernel's OOM killer decides")
		}
		quiet, tmp, hog := newKernel(t, e), newKernel(t, e), newKernel(t, e)
		requireOK(t, quiet, "q = 41")
		requireOK(t, tmp, fmt.Sprintf("with open('/tmp/big', 'wb') as f:\n    for _ in range(%d):\n        f.write(b'x' * (1 << 20))\nkept = 1", file>>20))
		tmpProc, err := tmp.current()
		require.NoError(t, err)
		// What the other session allocates: 32 MiB past the pool's budget,
		// and less than the file (by 16 MiB), so that the tmpfs session holds the most.
		used := poolMemoryUsage(t, e)
		alloc := o.MaxTotalMemoryBytes - used + 32<<20
		t.Logf("pool uses %d MiB of %d MiB; the cell allocates %d MiB", used>>20, o.MaxTotalMemoryBytes>>20, alloc>>20)
		require.Less(t, alloc, file-(16<<20), "the allocation would make the allocating session the largest: the test's sizes do not fit this host")

		res := runT(t, hog, fmt.Sprintf("x = b'x' * %d\nlen(x)", alloc), 2*time.Minute)
		require.Equal(t, kernel.Succeeded, res.Status, "the allocating session was killed, not the one holding the most (restarted %v): %s", res.Restarted, lastBytes(res.Stderr, 300))
		require.Equal(t, strconv.FormatInt(alloc, 10), string(res.Value))
		require.False(t, res.Restarted)

		res = runT(t, tmp, "kept", time.Minute)
		require.True(t, res.Restarted, "the killed session's kernel was not restarted: %s %q", res.Status, lastBytes(res.Stderr, 200))
		require.Contains(t, res.Stderr, "pool's memory limit", "the killed session is not told why")
		res = requireOK(t, quiet, "q + 1")
		require.Equal(t, "42", string(res.Value), "the quiet session lost its state")
		res = requireOK(t, hog, "len(x)")
		require.False(t, res.Restarted)
		require.True(t, tmpProc.cg.oomKilled.Load(), "the session holding the most memory (its /tmp) was not the pool's OOM victim")
	})
}

// TestPoolOOMPolicyKeepsSandboxLimit: with the pool's OOM policy on, a
// session that grows past its own MemoryLimitBytes is still stopped by the
// kernel at once (the cell fails: its kernel died, or MemoryError). A
// sandbox's memory group inherits oom_kill_disable from the pool's, where
// the policy turned it off: before each sandbox turned it on again, the
// cell's processes waited at the limit until the execution timed out.
func TestPoolOOMPolicyKeepsSandboxLimit(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	forEachBackend(t, func(t *testing.T, opts Options) {
		o := opts
		o.Ready, o.noPreload, o.noFontCache = 0, true, true
		o.MemoryLimitBytes, o.MaxTotalMemoryBytes = 160<<20, 1<<30
		e := poolMemoryExecutor(t, o)
		if !e.oomPolicy {
			t.Skip("no pool OOM policy here (it needs a cgroup v1 memory controller)")
		}
		k := newKernel(t, e)
		p, err := k.current()
		require.NoError(t, err)
		ctl, err := os.ReadFile(filepath.Join(p.cg.memory, "memory.oom_control"))
		require.NoError(t, err)
		require.Contains(t, string(ctl), "oom_kill_disable 0\n", "the sandbox's own limit is not enforced by the kernel's OOM killer")
		res := runT(t, k, "chunks = []\nwhile True:\n    chunks.append(b'x' * (8 << 20))", 30*time.Second)
		require.Equal(t, kernel.Failed, res.Status)
		require.NotContains(t, res.Stderr, "TimeoutError", "the cell waited at the sandbox's memory limit until its timeout")
		t.Logf("growing allocation: %s", lastLine(res.Stderr))
		require.False(t, p.cg.oomKilled.Load(), "the pool's policy killed a sandbox that was only at its own limit")
		requireOK(t, k, "chunks = None")
	})
}
