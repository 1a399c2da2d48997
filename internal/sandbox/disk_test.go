//go:build linux

package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/azsessions/azsessions/internal/testenv"

	"github.com/azsessions/azsessions/internal/kernel"
)

// diskExecutor is an executor with small data directory limits, of the
// test's backend (see contractMode), without preload or ready kernels:
// opts sets only the data directory's limits (MaxDataDirBytes,
// MaxFileSizeBytes, MaxDataDirEntries, maxWalkDepth), maxFigureBytes and
// idleScanEvery. Tests asking for the same ones share one executor (closed
// in TestMain): each start of an executor is a sandbox start (its self
// test), several seconds of CPU under gVisor.
func diskExecutor(t *testing.T, opts Options) *Executor {
	t.Helper()
	rest := opts
	rest.MaxDataDirBytes, rest.MaxFileSizeBytes, rest.MaxDataDirEntries, rest.maxWalkDepth = 0, 0, 0, 0
	rest.maxFigureBytes, rest.idleScanEvery = 0, 0
	require.True(t, reflect.ValueOf(rest).IsZero(), "diskExecutor: opts sets more than the data directory limits")
	opts.Mode = contractMode(t)
	if opts.Mode == ModeGvisor {
		requireGvisor(t)
	} else {
		requireSandbox(t, true)
	}
	opts.noPreload = true
	// Their kernels never import matplotlib, except the figure cap's: no
	// font cache build (Python on the host, ~0.8 s of CPU) for the others.
	opts.noFontCache = opts.maxFigureBytes == 0
	variant := fmt.Sprintf("disk %d %d %d %d %d %s", opts.MaxDataDirBytes, opts.MaxFileSizeBytes,
		opts.MaxDataDirEntries, opts.maxWalkDepth, opts.maxFigureBytes, opts.idleScanEvery)
	return sharedVariant(t, variant, opts)
}

// smallDisk are the data directory limits most disk tests share (one
// diskExecutor per backend): 4 MiB, files of at most 1 MiB, 100 entries,
// trees walked 64 levels deep. The properties do not depend on the sizes;
// small ones keep the bytes each test writes (and each mkdir, a round trip
// to the Gofer under gVisor) few.
func smallDisk() Options {
	return Options{MaxDataDirBytes: 4 << 20, MaxFileSizeBytes: 1 << 20, MaxDataDirEntries: 100, maxWalkDepth: smallWalkDepth}
}

// smallWalkDepth is smallDisk's walk bound: 64 levels instead of 4,096
// (see TestDataDirUnmeasurableFailsClosed), deeper than TestDeepTreeIsMeasured's
// 25.
const smallWalkDepth = 64

// TestFallocateCannotReserveDisk: fallocate(FALLOC_FL_KEEP_SIZE) would
// reserve blocks past RLIMIT_FSIZE with a file size of 0; the sandbox refuses
// fallocate (the seccomp rule; it fails without it), and what was reserved
// anyway would count.
func TestFallocateCannotReserveDisk(t *testing.T) {
	t.Parallel()
	e := diskExecutor(t, smallDisk())
	k := newKernel(t, e)
	res := run(t, k, `import ctypes, ctypes.util, os
libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
fd = os.open("/mnt/data/reserved", os.O_RDWR | os.O_CREAT)
r = libc.fallocate(fd, 1, 0, 64 << 20)  # FALLOC_FL_KEEP_SIZE
print(r, ctypes.get_errno())
os.close(fd)`)
	fi, err := os.Stat(filepath.Join(k.DataDir(), "reserved"))
	require.NoError(t, err)
	u, err := diskUsage(k.DataDir(), 0)
	require.NoError(t, err)
	t.Logf("status %s, stdout %q, stderr %q, %d bytes allocated", res.Status, res.Stdout, res.Stderr, u.bytes)
	require.Zero(t, fi.Size())
	// The refusal itself, not only the watcher that would notice the
	// reservation afterwards (and stop the kernel: the test passed that way
	// without the seccomp rule, 64 MiB reserved past the 4 MiB limit): one
	// call can reserve the whole host disk before the watcher's next look.
	require.Equal(t, kernel.Succeeded, res.Status, "fallocate was not refused: %s", res.Stderr)
	require.Equal(t, "-1 95\n", res.Stdout, "fallocate must fail with EOPNOTSUPP")
	require.Less(t, u.bytes, int64(1<<20))
	// posix_fallocate falls back to writing, which RLIMIT_FSIZE bounds.
	res = run(t, k, "import os\nfd = os.open('/mnt/data/p', os.O_RDWR | os.O_CREAT)\nos.posix_fallocate(fd, 0, 8 << 20)")
	require.Equal(t, kernel.Failed, res.Status)
}

// TestDeepTreeIsMeasured: files at paths longer than PATH_MAX count.
func TestDeepTreeIsMeasured(t *testing.T) {
	t.Parallel()
	e := diskExecutor(t, smallDisk())
	k := newKernel(t, e)
	// 25 levels of 200-byte names: 5,025 bytes of path, past PATH_MAX
	// (4,096); five files of 1 MiB (RLIMIT_FSIZE) past the 4 MiB limit.
	res := run(t, k, `import os
for i in range(25):
    os.mkdir("d" * 200)
    os.chdir("d" * 200)
for i in range(5):
    with open(f"f{i}", "wb") as f:
        f.write(b"x" * (1 << 20))
os.chdir("/mnt/data")`)
	require.Equal(t, kernel.Failed, res.Status, "stdout %q stderr %q", res.Stdout, res.Stderr)
	require.Contains(t, res.Stderr, "over the limit")
}

// TestDataDirEntryLimit: empty directories count, by number and by blocks;
// a cell past MaxDataDirEntries is stopped.
func TestDataDirEntryLimit(t *testing.T) {
	t.Parallel()
	// A small limit (smallDisk's 100): the property does not depend on its
	// size, and every mkdir is a round trip to the Gofer under gVisor.
	e := diskExecutor(t, smallDisk())
	k := newKernel(t, e)
	res := run(t, k, "import os\nfor i in range(150):\n    os.mkdir(f'/mnt/data/d{i}')")
	require.Equal(t, kernel.Failed, res.Status)
	require.Contains(t, res.Stderr, "files and directories, over the limit of 100")
	// Over the limit, no cell runs until files are deleted (files API).
	res = run(t, k, "print('ran')")
	require.Equal(t, kernel.Failed, res.Status)
	require.NotContains(t, res.Stdout, "ran")
	require.Contains(t, res.Stderr, "the code was not run")
	cleanDataDir(t, k)
	// Slowly (3 s at least, ten of the watcher's polls): the watcher stops
	// the kernel.
	res = runT(t, k, "import os, time\nfor i in range(300):\n    os.mkdir(f'/mnt/data/e{i}')\n    time.sleep(0.01)", 60*time.Second)
	require.Equal(t, kernel.Failed, res.Status)
	require.True(t, res.Restarted)
	require.Contains(t, res.Stderr, "over the limit of 100")
	u, err := diskUsage(k.DataDir(), 0)
	require.NoError(t, err)
	require.Less(t, u.entries, int64(300), "the kernel was not stopped")
	// Deleting makes room again.
	cleanDataDir(t, k)
	requireOK(t, k, "open('/mnt/data/small', 'w').write('x')")
}

// TestDataDirUnmeasurableFailsClosed: a directory the emulator cannot read
// counts as over the limit.
func TestDataDirUnmeasurableFailsClosed(t *testing.T) {
	t.Parallel()
	// A walk bound of 64 levels (smallDisk's) instead of 4,096: the same
	// refusal, without building, walking and removing thousands of levels.
	const depth = smallWalkDepth
	e := diskExecutor(t, smallDisk())
	k := newKernel(t, e)
	requireOK(t, k, "import os\nos.makedirs('/mnt/data/a/b')")
	// Make the walk fail the way a hostile tree would (more than 4096 levels
	// of nesting, or an unreadable directory for a non-root emulator).
	require.NoError(t, os.Rename(filepath.Join(k.DataDir(), "a", "b"), filepath.Join(k.DataDir(), "b")))
	require.NoError(t, os.Symlink(".", filepath.Join(k.DataDir(), "a", "b")))
	requireOK(t, k, "1") // symlinks are counted, never followed
	deep := filepath.Join(k.DataDir(), "deep")
	r, err := os.OpenRoot(k.DataDir())
	require.NoError(t, err)
	require.NoError(t, r.Mkdir("deep", 0o755))
	for range depth + 1 {
		next, err := r.OpenRoot("deep")
		require.NoError(t, err)
		r.Close()
		r = next
		require.NoError(t, r.Mkdir("deep", 0o755))
	}
	r.Close()
	res := run(t, k, "1")
	require.Equal(t, kernel.Failed, res.Status)
	require.Contains(t, res.Stderr, fmt.Sprintf("cannot be measured (the directory tree is deeper than %d levels)", depth))
	require.NotContains(t, res.Stderr, k.DataDir(), "no host path in messages")
	require.NoError(t, os.RemoveAll(deep))
	requireOK(t, k, "1")
}

// TestCloseRemovesDataInBackground: Kernel.Close returns before a large data
// directory is deleted (the DELETE of a session must not wait for it); the
// data is out of DataDir at once and Executor.Close waits for the deletion.
func TestCloseRemovesDataInBackground(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	base := testenv.DataDir(t)
	requireSandbox(t, true)
	e, err := newExecutor(Options{DataDir: base, noPreload: true, noFontCache: true, removeHook: func() { <-release }})
	require.NoError(t, err)
	k := newKernel(t, e)
	requireOK(t, k, "import os\nfor i in range(100):\n    os.mkdir(f'/mnt/data/d{i}')")
	dir := k.DataDir()
	done := make(chan error, 1)
	go func() { done <- k.Close() }()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		close(release)
		t.Fatal("Kernel.Close waited for the removal of the data")
	}
	_, err = os.Stat(dir)
	require.ErrorIs(t, err, os.ErrNotExist)
	close(release)
	require.NoError(t, e.Close())
	ents, err := os.ReadDir(base)
	require.NoError(t, err)
	var names []string
	for _, ent := range ents {
		names = append(names, ent.Name())
	}
	require.Empty(t, names, strings.Join(names, ","))
}
