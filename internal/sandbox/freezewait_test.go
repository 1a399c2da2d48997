//go:build linux

package sandbox

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestFreezeWaitsForUninterruptibleSleep (red team): a task in an
// uninterruptible sleep (sync or fsync waiting for the disk, a page fault
// waiting for memory) stops for the freezer only when its system call
// returns. measure's freeze made 20 attempts of 100 ms, thawing the
// sandbox between them, and then killed the kernel as "/mnt/data cannot
// be measured": a session whose os.sync() took over 2 s because other
// sessions were writing to the disk was killed so (within 3.6 s here),
// though it held nothing. On bwrap, whose tasks cannot trace one another
// (the reason for the short tries, see freezeTries), the freeze now makes
// attempts twice as long each time (see freezePatientTries). The sleep
// here is a page fault waiting for memory in the sandbox's memory group
// (oom_kill_disable, as in the pool's group), released by the test once
// the freeze has waited longer than the 20 attempts; without the fix the
// measurement fails before that.
func TestFreezeWaitsForUninterruptibleSleep(t *testing.T) {
	t.Parallel()
	requireSandbox(t, true)
	k := newKernel(t, sharedFor(t, testOptions(ModeBwrap)))
	p := requireFreezer(t, k)
	missing := ""
	if p.cg.memory == "" {
		missing = "memory"
	}
	requireCgroupController(t, missing)
	if p.cg.v2 {
		t.Skip("needs cgroup v1's oom_kill_disable to hold a task in an uninterruptible sleep")
	}
	requireOK(t, k, `import os, threading, time
def alloc():
    while not os.path.exists('/mnt/data/go'):
        time.sleep(0.01)
    global data
    data = b'\x01' * (64 << 20)  # faults in 64 MiB, past the lowered limit
    open('/mnt/data/done', 'w').close()
threading.Thread(target=alloc, daemon=True).start()`)

	mem := func(name string) string { return filepath.Join(p.cg.memory, name) }
	orig, err := os.ReadFile(mem("memory.limit_in_bytes"))
	require.NoError(t, err)
	usage, err := os.ReadFile(mem("memory.usage_in_bytes"))
	require.NoError(t, err)
	used, err := strconv.ParseInt(strings.TrimSpace(string(usage)), 10, 64)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(mem("memory.oom_control"), []byte("1"), 0o644))
	require.NoError(t, os.WriteFile(mem("memory.limit_in_bytes"), []byte(strconv.FormatInt(used+16<<20, 10)), 0o644))
	released := false
	release := func() {
		if !released {
			released = true
			require.NoError(t, os.WriteFile(mem("memory.limit_in_bytes"), orig, 0o644))
		}
	}
	t.Cleanup(release)
	require.NoError(t, os.WriteFile(filepath.Join(k.DataDir(), "go"), nil, 0o644))
	require.Eventually(t, func() bool {
		data, err := os.ReadFile(mem("memory.oom_control"))
		return err == nil && strings.Contains(string(data), "under_oom 1")
	}, 30*time.Second, 5*time.Millisecond, "the allocating thread waits for memory")

	k.freezeEvery.Store(int64(time.Nanosecond))
	errc := make(chan error, 1)
	go func() {
		_, err := k.measure(p, 0)
		errc <- err
	}()
	select {
	case err := <-errc:
		t.Fatalf("the measurement ended while a task slept uninterruptibly: %v", err)
	case <-time.After(freezeTries*freezeWait + time.Second):
		// The old budget is spent: the freeze still waits.
	}
	release()
	select {
	case err := <-errc:
		require.NoError(t, err, "the freeze completed once the task's page fault did")
	case <-time.After(time.Minute):
		t.Fatal("the measurement did not end")
	}
	require.Eventually(t, func() bool {
		_, err := os.Stat(filepath.Join(k.DataDir(), "done"))
		return err == nil
	}, 30*time.Second, 10*time.Millisecond, "the sandbox runs again")
	requireOK(t, k, "1")
}
