//go:build linux

package sandbox

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMovedDirectoryNotCountedTwice (red team): a walk of the running
// sandbox counts a directory twice when it is moved from a parent the walk
// has read to one it has not read yet. Measurements within
// measureFreezeEvery of a frozen one walk the running sandbox, so code
// moving a directory among parents in a loop had its kernel killed as
// over MaxDataDirBytes while under it: 3 MB in a 4 MiB directory measured
// as 6,045,696 bytes, within 0.7 s of cells on bwrap and 2 s on gVisor. An
// unfrozen measurement over the limits is now taken again frozen before
// the kernel is stopped.
func TestMovedDirectoryNotCountedTwice(t *testing.T) {
	forEachBackend(t, func(t *testing.T, opts Options) {
		k := newKernel(t, sharedFor(t, opts))
		p := requireFreezer(t, k)
		const size = 8 << 20 // each of 3 files: 24 MiB of testDataDir's 40 MiB
		require.Less(t, int64(3*size), int64(testDataDir))
		require.Greater(t, int64(6*size), int64(testDataDir))
		requireOK(t, k, `import os, threading
for j in range(3):
    os.makedirs(f'/mnt/data/p{j}')
os.makedirs('/mnt/data/p0/d0')
for i in range(3):
    with open(f'/mnt/data/p0/d0/f{i}', 'wb') as f:
        f.write(b'x' * `+itoa(size)+`)
names = [f'/mnt/data/p{j}/d{i}' for j in range(3) for i in range(4)]
cur = [0]
moves = [0]
stop = threading.Event()
def move():
    while not stop.is_set():
        i = cur[0]
        nxt = (i + 1) % len(names)
        os.rename(names[i], names[nxt])
        cur[0] = nxt
        moves[0] += 1
threading.Thread(target=move, daemon=True).start()`)
		for i := range 300 {
			require.Empty(t, k.overLimit(p), "measurement %d", i)
		}
		res := requireOK(t, k, "stop.set(); print(moves[0])")
		require.NotEqual(t, "0\n", res.Stdout, "the directory moved")
	})
}
