//go:build linux

package emulator_test

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/azsessions/azsessions/emulator"
	"github.com/azsessions/azsessions/internal/wire"
)

// TestLeasedFileNeverBlocks (red team, passes: kept as a regression test):
// session code may take a write lease (fcntl F_SETLEASE) on a file of
// /mnt/data it owns and keep it from a background process; an open(2) of
// that file by anyone else then blocks until the holder lets go or
// /proc/sys/fs/lease-break-time (45 s) has passed. openRegular's
// O_NONBLOCK makes the download fail at once (EWOULDBLOCK: 404) instead,
// and the routes that do not open the file (metadata, listing) answer as
// usual. Here the test process holds the lease,
// as a sandbox's background process would.
func TestLeasedFileNeverBlocks(t *testing.T) {
	e, dataDir := dirEnv(t, emulator.Options{})
	v, id := wire.V20251002Preview, "sess-lease"
	dir := dataDir(id)
	leased := filepath.Join(dir, "leased.txt")
	require.NoError(t, os.WriteFile(leased, []byte("data"), 0o644))
	f, err := os.OpenFile(leased, os.O_WRONLY, 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close() }) // releases the lease (and a blocked open)
	// The runtime ignores the SIGIO the lease break sends (no signal.Notify).
	_, err = unix.FcntlInt(f.Fd(), unix.F_SETLEASE, unix.F_WRLCK)
	require.NoError(t, err, "write lease")

	status, body := timedGet(t, e, e.url("files/leased.txt/content", qv(v, id)))
	require.Equal(t, http.StatusNotFound, status, body)
	status, body = timedGet(t, e, e.url("files/leased.txt", qv(v, id)))
	require.Equal(t, http.StatusOK, status, body)
	status, body = timedGet(t, e, e.url("files", qv(v, id)))
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `"leased.txt"`)
}
