//go:build linux

package sandbox

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/azsessions/azsessions/internal/kernel"
)

// TestUnlinkedFilesOfZombieLeaderCounted (red team): the watcher counts the
// files that the sandbox's processes hold open after unlinking them by
// reading /proc/<pid>/fd and /proc/<pid>/maps of every process of the
// sandbox's cgroup (cgroup.procs lists thread-group ids). Those are the
// thread-group leader's: once the leader thread ends (the exit system
// call, not exit_group; Python through ctypes) while another thread goes
// on, both are empty, and the files that thread holds open were
// invisible: on bwrap, 12 files of 200 MiB held so took 2.4 GB of the
// host's disk past a 1 GiB MaxDataDirBytes, measured as 8 KiB, for as
// long as the process lived (gVisor held: the Sentry holds the host
// descriptors). The measurement now reads every thread whose descriptor
// table or address space is not its leader's.
func TestUnlinkedFilesOfZombieLeaderCounted(t *testing.T) {
	forEachBackend(t, func(t *testing.T, opts Options) {
		k := newKernel(t, sharedFor(t, opts))
		const files, size = 8, testFileSize - 1<<20 // 56 MiB in all, over testDataDir
		require.Greater(t, int64(files*size), int64(testDataDir))
		res := run(t, k, `import subprocess, sys, os, time
code = r'''
import ctypes, os, threading
def hold():
    leader_gone.wait()
    fds = []
    buf = b'x' * `+strconv.Itoa(size)+`
    for i in range(`+strconv.Itoa(files)+`):
        fd = os.open(f'/mnt/data/held{i}', os.O_RDWR | os.O_CREAT)
        os.write(fd, buf)
        os.unlink(f'/mnt/data/held{i}')
        fds.append(fd)
    open('/mnt/data/ready', 'w').close()
    threading.Event().wait()
leader_gone = threading.Event()
threading.Thread(target=hold).start()
leader_gone.set()
ctypes.CDLL(None).syscall(60, 0)  # exit: this thread only (the leader)
'''
subprocess.Popen([sys.executable, '-c', code], start_new_session=True)
while not os.path.exists('/mnt/data/ready'):
    time.sleep(0.05)`)
		// The end-of-cell measurement (or one during the cell) finds the
		// held files and stops the kernel.
		require.Equal(t, kernel.Failed, res.Status, "stdout: %s\nstderr: %s", res.Stdout, res.Stderr)
		require.True(t, res.Restarted)
		require.Contains(t, res.Stderr, "over the limit")
	})
}
