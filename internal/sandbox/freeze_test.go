//go:build linux

package sandbox

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/azsessions/azsessions/internal/testenv"
)

// requireFreezer fails (AZSESSIONS_REQUIRE_SANDBOX=1) or skips when k's
// sandbox has no freezer cgroup (the emulator is not root).
func requireFreezer(t *testing.T, k *Kernel) *proc {
	t.Helper()
	p, err := k.current()
	require.NoError(t, err)
	missing := ""
	if p.cg == nil || p.cg.freezer == "" {
		missing = "freezer"
	}
	requireCgroupController(t, missing)
	return p
}

// TestMeasureFreezesSandbox (review of the red team's mid-walk fixes): a
// walk of /mnt/data is not atomic, and it skips a directory that is gone
// from under its name by the time it opens it (what code that makes and
// removes directories needs). Session code that keeps renaming a
// directory among several names then made measurements miss it, a way
// past MaxDataDirBytes. The sandbox is frozen while it is measured (here
// every time; by default at least every measureFreezeEvery), so every
// measurement below counts the file; without the freeze one of the 500
// missed it within the first 100 (bwrap and gVisor), and measure's
// freeze was due as often as measureFreezeEvery let it.
func TestMeasureFreezesSandbox(t *testing.T) {
	testenv.SkipLongInQuickLoop(t)
	forEachBackend(t, func(t *testing.T, opts Options) {
		k := newKernel(t, sharedFor(t, opts))
		p := requireFreezer(t, k)
		// A measurement freezes when the last freeze is freezeEvery old.
		k.freezeEvery.Store(int64(time.Hour))
		k.frozenAt.Store(0)
		_, err := k.measure(p, 0)
		require.NoError(t, err)
		frozenAt := k.frozenAt.Load()
		require.NotZero(t, frozenAt, "the first measurement froze")
		_, err = k.measure(p, 0)
		require.NoError(t, err)
		require.Equal(t, frozenAt, k.frozenAt.Load(), "the next one, within freezeEvery, did not")

		k.freezeEvery.Store(int64(time.Nanosecond)) // every measurement freezes
		const size = 256 << 10
		requireOK(t, k, `import os, threading
os.makedirs('/mnt/data/d0')
with open('/mnt/data/d0/big', 'wb') as f:
    f.write(os.urandom(`+strconv.Itoa(size)+`))
renames = [0]
stop = threading.Event()
def rotate():
    while not stop.is_set():
        i = renames[0]
        os.rename(f'/mnt/data/d{i % 16}', f'/mnt/data/d{(i + 1) % 16}')
        renames[0] = i + 1
threading.Thread(target=rotate, daemon=True).start()`)
		for i := range 500 {
			before := k.frozenAt.Load()
			u, err := k.measure(p, 0)
			require.NoError(t, err, "measurement %d", i)
			require.NotEqual(t, before, k.frozenAt.Load(), "measurement %d froze", i)
			require.GreaterOrEqual(t, u.bytes, int64(size), "measurement %d missed the renamed directory", i)
		}
		// The rotation ran between the measurements (else the test could
		// not fail), and the sandbox runs again after them.
		res := requireOK(t, k, "stop.set(); print(renames[0])")
		n, err := strconv.Atoi(strings.TrimSpace(res.Stdout))
		require.NoError(t, err)
		require.Greater(t, n, 200, "the directory was renamed")
		p.cg.freezeMu.Lock()
		defer p.cg.freezeMu.Unlock()
		require.Zero(t, p.cg.frozen, "every freeze was thawed")
	})
}

// TestKillFrozenSandbox: a kernel whose sandbox is frozen (a measurement
// holds it, or a killed emulator left it so) is still killed and its
// groups removed: a SIGKILLed task of a cgroup v1 freezer group dies only
// once thawed, so without killAll's thaw Close left it frozen and its
// groups in place.
func TestKillFrozenSandbox(t *testing.T) {
	forEachBackend(t, func(t *testing.T, opts Options) {
		k := newKernel(t, sharedFor(t, opts))
		p := requireFreezer(t, k)
		requireOK(t, k, "1")
		require.NoError(t, p.cg.freeze(false))
		frozen, err := p.cg.isFrozen()
		require.NoError(t, err)
		require.True(t, frozen)
		dirs := append([]string(nil), p.cg.dirs...)
		require.NoError(t, k.Close())
		for _, d := range dirs {
			_, err := os.Stat(d)
			require.ErrorIs(t, err, os.ErrNotExist, "the sandbox's group %s was removed", d)
		}
	})
}
