//go:build linux

package sandbox

import (
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/azsessions/azsessions/internal/kernel"
	"github.com/azsessions/azsessions/internal/testenv"
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
	testenv.SkipLongInQuickLoop(t)
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
		// What the other session allocates: 16 MiB past the pool's budget,
		// and less than the file (by 16 MiB), so that the tmpfs session
		// holds the most. That needs the three sandboxes' own memory to be
		// over 48 MiB together: ~60 MiB on bwrap since the lighter driver
		// start (32 MiB past the budget needed 64 MiB, and failed there).
		used := poolMemoryUsage(t, e)
		alloc := o.MaxTotalMemoryBytes - used + 16<<20
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
	testenv.SkipLongInQuickLoop(t)
	t.Parallel()
	requireRoot(t)
	forEachBackend(t, func(t *testing.T, opts Options) {
		e := ownLimitExecutor(t, opts)
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

// ownLimitExecutor is an executor of opts's backend whose sandboxes reach
// their own 160 MiB limit long before the pool's 1 GiB, with the pool's OOM
// policy on (the test is skipped without it: cgroup v1 memory controller).
func ownLimitExecutor(t *testing.T, opts Options) *Executor {
	t.Helper()
	o := opts
	o.Ready, o.noPreload, o.noFontCache = 0, true, true
	o.MemoryLimitBytes, o.MaxTotalMemoryBytes = 160<<20, 1<<30
	e := poolMemoryExecutor(t, o)
	if !e.oomPolicy {
		t.Skip("no pool OOM policy here (it needs a cgroup v1 memory controller)")
	}
	return e
}

// TestPoolOOMKernelCharges: a pool filled by writes (to a tmpfs: charges
// made outside a page fault) is still the policy's to resolve. With the
// kernel's OOM killer off in the pool's group, such a charge fails with
// ENOMEM at once and makes no process wait, so the OOM notification never
// comes: one session filled its /tmp, another wrote the pool up to its
// limit, and a third's write(2) from memory it already had came back short;
// no sandbox was killed, and the third's writes, pipes and forks (ENFILE)
// kept failing until some process faulted (bwrap; under gVisor a write to
// /tmp is the Sentry's page fault). The pool's critical memory pressure
// (oom.go) now has the largest one killed, and the third's next write
// finds room. Under gVisor the short write can also come while the pool
// still holds page cache that reclaim then frees: no kill is needed, and
// the next write must find room all the same.
func TestPoolOOMKernelCharges(t *testing.T) {
	testenv.SkipLongInQuickLoop(t)
	t.Parallel()
	requireRoot(t)
	forEachBackend(t, poolOOMKernelCharges)
}

// poolOOMKernelCharges is TestPoolOOMKernelCharges on one backend.
func poolOOMKernelCharges(t *testing.T, opts Options) {
	o := opts
	o.Ready, o.noPreload, o.noFontCache = 0, true, true
	o.MemoryLimitBytes, o.MaxTotalMemoryBytes = 256<<20, 256<<20
	if opts.Mode == ModeGvisor {
		o.MemoryLimitBytes, o.MaxTotalMemoryBytes = 512<<20, 512<<20
	}
	o.MaxDataDirBytes, o.MaxFileSizeBytes = 1<<30, 1<<30
	e := poolMemoryExecutor(t, o)
	if !e.oomPolicy {
		t.Skip("no pool OOM policy here (it needs a cgroup v1 memory controller)")
	}
	big, filler, writer := newKernel(t, e), newKernel(t, e), newKernel(t, e)
	// The writer's buffer is faulted in before the pool is full.
	requireOK(t, writer, "import os\nbuf = b'y' * (16 << 20)\nfd = os.open('/tmp/y', os.O_WRONLY | os.O_CREAT)")
	// big fills its /tmp (a tmpfs of half its limit), filler the pool up
	// to a few MiB below its limit, all with write(2) from one buffer.
	res := requireOK(t, big, "import os\nbuf = b'x' * (1 << 20)\nfd = os.open('/tmp/f', os.O_WRONLY | os.O_CREAT)\nn = 0\ntry:\n    while True:\n        os.write(fd, buf); n += 1\nexcept OSError:\n    pass\nos.close(fd)\nn")
	t.Logf("big's /tmp: %s MiB", res.Value)
	bigProc, err := big.current()
	require.NoError(t, err)
	used, err := e.cg.poolMemory()
	require.NoError(t, err)
	room := (o.MaxTotalMemoryBytes - used) >> 20
	require.Greater(t, room, int64(8), "the pool is already full")
	requireOK(t, filler, fmt.Sprintf("import os\nbuf = b'x' * (1 << 20)\nfd = os.open('/tmp/f', os.O_WRONLY | os.O_CREAT)\nfor _ in range(%d):\n    os.write(fd, buf)\nos.close(fd)", room-6))
	// 16 MiB into a pool with ~6 MiB left: short (or ENOMEM).
	res = runT(t, writer, "try:\n    n = os.write(fd, buf)\nexcept OSError as err:\n    n = str(err)\nn", 30*time.Second)
	t.Logf("the write into the full pool: %s %s", res.Status, res.Value)
	// Until the policy kills a sandbox; which one, and the pool's OOM
	// state when last looked at, go into the failure messages (gVisor
	// once failed here, at load, with the pool at 511 of 512 MiB).
	procs := map[string]*proc{"big": bigProc}
	for name, k := range map[string]*Kernel{"filler": filler, "writer": writer} {
		p, err := k.current()
		require.NoError(t, err)
		procs[name] = p
	}
	killed := func() (names []string) {
		for name, p := range procs {
			if p.cg.oomKilled.Load() {
				names = append(names, name)
			}
		}
		return names
	}
	var last string
	if opts.Mode == ModeGvisor && !waitFor(10*time.Second, func() bool { return len(killed()) > 0 }) {
		// Under gVisor the short write may be the Sentry's: its memory
		// file's charge failed while the pool still held page cache that
		// reclaim then freed (once, at load: the pool at 500 of 512 MiB,
		// 17 MiB of file pages, no kill needed and none made, an 8 MiB page
		// fault right after went through). The pool has room: the write
		// must now go through whole, with or without a kill.
		used, _ := e.cg.poolMemory()
		file, _ := fileBytes(e.cg.memory)
		t.Logf("no kill: the pool holds %d MiB (working set), %d MiB of file pages", used>>20, file>>20)
		res = requireOK(t, writer, "os.lseek(fd, 0, 0)\nos.write(fd, buf)")
		require.Equal(t, strconv.Itoa(16<<20), string(res.Value), "the pool stayed full and no sandbox was killed")
		requireOK(t, big, "1")
		requireOK(t, filler, "1")
		return
	}
	require.Eventually(t, func() bool {
		if len(killed()) > 0 {
			return true
		}
		ctl, _ := os.ReadFile(filepath.Join(e.cg.memory, "memory.oom_control"))
		usage, _ := os.ReadFile(filepath.Join(e.cg.memory, "memory.usage_in_bytes"))
		file, err := fileBytes(e.cg.memory)
		failcnt, _ := os.ReadFile(filepath.Join(e.cg.memory, "memory.failcnt"))
		last = fmt.Sprintf("usage %s, failcnt %s, file pages %d (%v), %q", strings.TrimSpace(string(usage)), strings.TrimSpace(string(failcnt)), file, err, ctl)
		return false
	}, time.Minute, 20*time.Millisecond, "the pool stayed full and no sandbox was killed; last seen: %s", lazyString(func() string { return last }))
	require.True(t, bigProc.cg.oomKilled.Load(), "the policy killed %v, not the sandbox holding the most", killed())
	// The flag is set as the kill begins; big's /tmp is freed once its
	// processes and mount namespace are gone (the write right after the
	// flag came back short in 1 of 3 loaded runs): wait for the room.
	require.Eventually(t, func() bool {
		used, err := e.cg.poolMemory()
		return err == nil && used < o.MaxTotalMemoryBytes-(32<<20)
	}, time.Minute, 20*time.Millisecond, "the victim's memory was not freed (pool usage %d MiB)", poolMemoryUsage(t, e)>>20)
	res = requireOK(t, writer, "os.lseek(fd, 0, 0)\nos.write(fd, buf)")
	require.Equal(t, strconv.Itoa(16<<20), string(res.Value), "the write after the kill found no room")
	res = runT(t, big, "1", 30*time.Second)
	require.True(t, res.Restarted, "the session holding the most was not the one killed")
	requireOK(t, filler, "1")
}

// TestPoolOOMWarnsDataDirInMemory: with the data directory on a tmpfs (as
// /tmp is on some systems), files in /mnt/data are pool memory that no kill
// frees. Red team (bwrap and gVisor, 256 and 512 MiB pools, pool-wide disk
// limit 1 GiB): one session wrote 202 MiB of files; the policy killed it,
// which freed nothing, then the other session's sandbox on each of its 3
// executions, and NewKernel found the pool full; the writer's own restart
// failed on gVisor (ENOMEM). Only the disk limit bounds such files, so New
// warns when it leaves the sandboxes less than half of the pool's memory.
func TestPoolOOMWarnsDataDirInMemory(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	requireSandbox(t, true)
	dir := testenv.DataDir(t)
	require.NoError(t, exec.Command("mount", "-t", "tmpfs", "-o", "size=512m,mode=711", "azsessions-test", dir).Run())
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	tests := []struct {
		name string
		disk int64
		warn bool
	}{
		{"disk limit past half the memory", 1 << 30, true},
		{"disk limit within half the memory", 64 << 20, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var log testenv.SyncBuffer
			o := testOptions(ModeBwrap)
			o.Ready, o.noPreload, o.noFontCache = 0, true, true
			o.DataDir, o.Logger = dir, slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelWarn}))
			o.MemoryLimitBytes, o.MaxTotalMemoryBytes = 128<<20, 256<<20
			o.MaxDataDirBytes, o.MaxTotalDiskBytes = 64<<20, tc.disk
			poolMemoryExecutor(t, o)
			if tc.warn {
				require.Contains(t, log.String(), "the data directory is in memory")
			} else {
				require.NotContains(t, log.String(), "the data directory is in memory")
			}
		})
	}
}

// TestPoolOOMCountsPinnedPageCache: a session cannot hide what it holds
// from the pool's OOM policy in page cache that reclaim cannot free. Pages
// of a /mnt/data file spliced into pipes stay on the inactive file list,
// which a working set does not count, but the pipes' references keep
// reclaim from freeing them. Red team (bwrap, 256 MiB pool): one session
// pinned its file's cache so until the pool was full (its cgroup held 135
// MiB, its working set 41 MiB), and the policy killed the other session
// (132 MiB) instead. The policy now measures what each sandbox's cgroup
// holds: once the kernel's reclaim has failed, what is left is not
// reclaimable, and a kill frees it. gVisor keeps a sandbox's file cache in
// its Sentry's memory file (counted either way).
func TestPoolOOMCountsPinnedPageCache(t *testing.T) {
	testenv.SkipLongInQuickLoop(t)
	t.Parallel()
	requireRoot(t)
	forEachBackend(t, func(t *testing.T, opts Options) {
		o := opts
		o.Ready, o.noPreload, o.noFontCache = 0, true, true
		o.MemoryLimitBytes, o.MaxTotalMemoryBytes = 256<<20, 256<<20
		held, pinned := 80, 200 // MiB: the other session's, what the pinner tries to pin
		if opts.Mode == ModeGvisor {
			o.MemoryLimitBytes, o.MaxTotalMemoryBytes = 512<<20, 512<<20
			held, pinned = 160, 400
		}
		o.MaxDataDirBytes, o.MaxFileSizeBytes = 1<<30, 1<<30
		e := poolMemoryExecutor(t, o)
		if !e.oomPolicy {
			t.Skip("no pool OOM policy here (it needs a cgroup v1 memory controller)")
		}
		other, pinner := newKernel(t, e), newKernel(t, e)
		requireOK(t, other, fmt.Sprintf("q = 41\nx = bytearray(%d << 20)", held))
		pinProc, err := pinner.current()
		require.NoError(t, err)
		// Write the file, then splice its pages into as many pipes as it
		// takes (1 MiB each where the pipe size allows).
		res := runT(t, pinner, fmt.Sprintf(`import os, fcntl, resource
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
N = %d << 20
with open('/mnt/data/pin', 'wb') as f:
    for _ in range(N >> 20):
        f.write(b'p' * (1 << 20))
fd = os.open('/mnt/data/pin', os.O_RDONLY)
pipes, off = [], 0
while off < N:
    r, w = os.pipe()
    try:
        fcntl.fcntl(w, 1031, 1 << 20)  # F_SETPIPE_SZ
    except OSError:
        pass
    pipes.append((r, w))
    while off < N:
        try:
            n = os.splice(fd, w, N - off, offset_src=off, flags=os.SPLICE_F_NONBLOCK)
        except BlockingIOError:
            break
        off += n
off >> 20`, pinned), 2*time.Minute)
		t.Logf("pinner: %s %s restarted %v %q", res.Status, res.Value, res.Restarted, lastBytes(res.Stderr, 200))
		res = runT(t, other, "q + 1", time.Minute)
		require.Equal(t, "42", string(res.Value), "the session that held less was killed (restarted %v): %q", res.Restarted, lastBytes(res.Stderr, 200))
		require.True(t, pinProc.cg.oomKilled.Load(), "the pinning session was not the pool's OOM victim")
	})
}

// TestMemoryLimitDeathSaysWhy: a kernel killed by the kernel's OOM killer
// for its sandbox's own memory limit is told so, in the execution that
// died and, when it died between executions (a background thread), in the
// next one's restart note: before, the session read only "exit status 137"
// or "had stopped", with nothing about memory (fresh-user report), and a
// model could not tell that it should use less.
func TestMemoryLimitDeathSaysWhy(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	forEachBackend(t, func(t *testing.T, opts Options) {
		e := ownLimitExecutor(t, opts)
		k := newKernel(t, e)
		grow := "chunks = []\nwhile True:\n    chunks.append(bytearray(1 << 20))"
		res := runT(t, k, grow, time.Minute)
		require.Equal(t, kernel.Failed, res.Status)
		if strings.Contains(res.Stderr, "MemoryError") {
			t.Skip("the allocation failed with MemoryError before the OOM killer acted: nothing died")
		}
		require.Contains(t, res.Stderr, "ran out of memory (the sandbox's memory limit is 160 MiB", "the dying execution does not say why: %q", lastBytes(res.Stderr, 300))

		// Between executions: a thread grows after the cell returned.
		requireOK(t, k, "import threading\ndef grow():\n    c = []\n    while True:\n        c.append(bytearray(1 << 20))\nthreading.Thread(target=grow, daemon=True).start()")
		p, err := k.current()
		require.NoError(t, err)
		require.Eventually(t, func() bool { return !p.alive() }, time.Minute, 20*time.Millisecond, "the growing thread's kernel did not die")
		res = requireOK(t, k, "6 * 7")
		require.True(t, res.Restarted)
		require.Contains(t, res.Stderr, "ran out of memory (the sandbox's memory limit is 160 MiB", "the restart note does not say why: %q", lastBytes(res.Stderr, 300))
		require.Equal(t, "42", string(res.Value))
	})
}

// TestOOMVictimNotReused: a sandbox the pool's OOM policy picked runs no
// more cells, although its processes may outlive the flag by a moment
// (the kill is under way): the session's next cell restarts the kernel,
// with the note saying why, instead of being sent to the dying one and
// failing with it (TestPoolOOMKillsLargestSandbox/gvisor, 1 run in 3:
// "The kernel died (killed: ...)" on the victim's next cell). The kill is
// left out here: only the flag is set, as it is when the kill begins.
func TestOOMVictimNotReused(t *testing.T) {
	testenv.SkipLongInQuickLoop(t)
	t.Parallel()
	requireRoot(t)
	k := newKernel(t, shared(t))
	requireOK(t, k, "kept = 1")
	p, err := k.current()
	require.NoError(t, err)
	if p.cg == nil {
		t.Skip("no cgroups here: no pool OOM policy")
	}
	p.cg.oomKilled.Store(true)
	require.True(t, p.alive())
	res := requireOK(t, k, "'kept' in dir()")
	require.True(t, res.Restarted, "the cell ran in the OOM victim")
	require.Equal(t, "false", string(res.Value))
	require.Contains(t, res.Stderr, "pool's memory limit")
	require.False(t, p.alive(), "the victim was not killed")
}

// lazyString is a failure message argument read when the message is
// formatted, not when the assertion is called.
type lazyString func() string

func (f lazyString) String() string { return f() }

// waitFor polls cond every 20 ms until it holds or d passes, and says
// whether it held.
func waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}
