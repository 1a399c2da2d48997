//go:build linux

package sandbox

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDiskUsageCountsReservedBlocks: fallocate(FALLOC_FL_KEEP_SIZE) reserves
// blocks of a file whose size stays 0; they count.
func TestDiskUsageCountsReservedBlocks(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "reserved"))
	require.NoError(t, err)
	defer f.Close()
	const keepSize = 1 // FALLOC_FL_KEEP_SIZE
	if err := syscall.Fallocate(int(f.Fd()), keepSize, 0, 8<<20); err != nil {
		t.Skipf("fallocate not supported here: %v", err)
	}
	fi, err := f.Stat()
	require.NoError(t, err)
	require.Zero(t, fi.Size())
	u, err := diskUsage(dir, 0)
	require.NoError(t, err)
	require.GreaterOrEqual(t, u.bytes, int64(8<<20))
	require.Equal(t, int64(1), u.entries)
}

// TestDiskUsageDeeperThanPathMax: a file at a path longer than PATH_MAX is
// measured (a path-based walk fails with ENAMETOOLONG there).
func TestDiskUsageDeeperThanPathMax(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r, err := os.OpenRoot(dir)
	require.NoError(t, err)
	// 201 bytes per level: 5,025 bytes of path, past PATH_MAX (4,096).
	const depth = 25
	name := strings.Repeat("d", 200)
	for range depth {
		require.NoError(t, r.Mkdir(name, 0o755))
		next, err := r.OpenRoot(name)
		require.NoError(t, err)
		r.Close()
		r = next
	}
	f, err := r.Create("deep.bin")
	require.NoError(t, err)
	_, err = f.Write(make([]byte, 1<<20))
	require.NoError(t, err)
	require.NoError(t, f.Close())
	r.Close()
	u, err := diskUsage(dir, 0)
	require.NoError(t, err)
	require.GreaterOrEqual(t, u.bytes, int64(1<<20))
	require.Equal(t, int64(depth+1), u.entries)
}

// TestDiskUsageCountsDirectories: empty directories take blocks and inodes,
// and the walk stops past maxEntries.
func TestDiskUsageCountsDirectories(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for i := range 300 {
		require.NoError(t, os.Mkdir(filepath.Join(dir, "d"+strconv.Itoa(i)), 0o755))
	}
	u, err := diskUsage(dir, 0)
	require.NoError(t, err)
	require.Equal(t, int64(300), u.entries)
	require.Positive(t, u.bytes, "directories take blocks")
	_, err = diskUsage(dir, 299)
	require.ErrorIs(t, err, errTooManyEntries)
	u, err = diskUsage(dir, 300)
	require.NoError(t, err)
	require.Equal(t, int64(300), u.entries)
}

// TestDiskUsageFailsClosed: what cannot be read is an error, not zero.
func TestDiskUsageFailsClosed(t *testing.T) {
	t.Parallel()
	_, err := diskUsage(filepath.Join(t.TempDir(), "missing"), 0)
	require.Error(t, err)
	dir := t.TempDir()
	require.NoError(t, os.Symlink("/", filepath.Join(dir, "link")))
	u, err := diskUsage(dir, 0)
	require.NoError(t, err, "a symlink is counted, never followed")
	require.Equal(t, int64(1), u.entries)
	_, err = diskUsage(filepath.Join(dir, "link"), 0)
	require.Error(t, err, "the top directory itself must not be a symlink")
}

// dirSize is the allocated size of dir (0 when it cannot be measured).
func dirSize(dir string) int64 {
	u, _ := diskUsage(dir, 0)
	return u.bytes
}

// TestDiskUsageOwnedSparesHardLinks (red team): the watcher, as root, gives
// what is in a data directory and not the sandbox user's to it. A hard link
// in it to a file outside (made by a host process running as the sandbox
// user, which owns the directory: a root-run -sandbox none emulator's code
// linked a root-owned file of the host into its data directory, and the
// watcher chowned that host file to nobody; with fs.protected_hardlinks 0
// the same works on /etc/shadow) must leave the file's owner alone, while a
// file with one link (an upload) and a directory are still given.
func TestDiskUsageOwnedSparesHardLinks(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root: files owned by another user")
	}
	base := t.TempDir()
	data := filepath.Join(base, "data")
	require.NoError(t, os.Mkdir(data, 0o700))
	outside := filepath.Join(base, "host-file")
	require.NoError(t, os.WriteFile(outside, []byte("root's"), 0o666))
	require.NoError(t, os.Link(outside, filepath.Join(data, "link")))
	require.NoError(t, os.WriteFile(filepath.Join(data, "upload"), []byte("x"), 0o644))
	require.NoError(t, os.Mkdir(filepath.Join(data, "dir"), 0o755))
	owner := &hostID{uid: 64999, gid: 64998}

	_, err := diskUsageOwned(data, 0, maxWalkDepth, owner)
	require.NoError(t, err)
	uidGid := func(p string) [2]uint32 {
		fi, err := os.Lstat(p)
		require.NoError(t, err)
		st := fi.Sys().(*syscall.Stat_t)
		return [2]uint32{st.Uid, st.Gid}
	}
	require.Equal(t, [2]uint32{0, 0}, uidGid(outside), "the host file was given to the sandbox user")
	require.Equal(t, [2]uint32{64999, 64998}, uidGid(filepath.Join(data, "upload")))
	require.Equal(t, [2]uint32{64999, 64998}, uidGid(filepath.Join(data, "dir")))
}

// TestDiskUsageDirectoryRemovedMidWalk (red team): session code that makes
// and removes directories in /mnt/data while the watcher measures it (a
// build, an unpacked archive, shutil.rmtree) removes some directory after
// the walk read it from its parent and before it opened or read it; reading
// a removed directory fails with ENOENT, which counted as "could not be
// measured, over the limit" and killed the session's kernel (tried for real
// on a root-run bwrap Shell pool: a background mkdir/rmtree loop in
// /mnt/data was killed within a second). A removed directory is empty: it
// counts nothing, and the measurement goes on. Likewise a directory
// replaced by a symbolic link (ln -sfn's pattern; one leading out of the
// data directory made the walk's open fail with "path escapes") is not
// followed and not an error: the link is counted by the next measurement.
// Without the fixes a few % of the measurements below fail.
func TestDiskUsageDirectoryRemovedMidWalk(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		churn func(dir string)
	}{
		{"removed", func(dir string) {
			_ = os.MkdirAll(filepath.Join(dir, "d", "sub", "subsub"), 0o755)
			_ = os.RemoveAll(filepath.Join(dir, "d"))
		}},
		{"replaced by a symlink", func(dir string) {
			d := filepath.Join(dir, "d")
			_ = os.Remove(d)
			_ = os.MkdirAll(filepath.Join(d, "sub"), 0o755)
			_ = os.Rename(d, d+".old")
			_ = os.Symlink("/", d)
			_ = os.RemoveAll(d + ".old")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(dir, "kept"), []byte("x"), 0o644))
			stop, stopped := make(chan struct{}), make(chan struct{})
			go func() {
				defer close(stopped)
				for {
					select {
					case <-stop:
						return
					default:
					}
					tc.churn(dir)
				}
			}()
			defer func() { close(stop); <-stopped }()
			for i := 0; i < 5000; i++ {
				u, err := diskUsage(dir, 0)
				require.NoError(t, err, "measurement %d", i)
				require.GreaterOrEqual(t, u.entries, int64(1), "kept is counted")
			}
			owner := &hostID{uid: os.Getuid(), gid: os.Getgid()}
			for i := 0; i < 1000; i++ {
				_, err := diskUsageOwned(dir, 0, maxWalkDepth, owner)
				require.NoError(t, err, "owned measurement %d", i)
			}
		})
	}
}
