//go:build linux

package sandbox

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPastLimitNote(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ in, want string }{
		{"OSError: /mnt/data holds 9220096 bytes, over the limit of 4194304 bytes", "/mnt/data held 9220096 bytes, over the limit of 4194304 bytes"},
		{"OSError: /mnt/data holds more than 100 files and directories, over the limit of 100", "/mnt/data held more than 100 files and directories, over the limit of 100"},
		{"OSError: /mnt/data cannot be measured (the directory tree is deeper than 64 levels), which counts as over the limit of 4194304 bytes", "/mnt/data could not be measured (the directory tree is deeper than 64 levels), which counted as over the limit of 4194304 bytes"},
		{"OSError: the sessions of the pool hold 5 bytes in their /mnt/data together, over the pool-wide limit of 4 bytes (this one 5)", "the sessions of the pool held 5 bytes in their /mnt/data together, over the pool-wide limit of 4 bytes (this one 5)"},
	} {
		require.Equal(t, tt.want, pastLimitNote(tt.in))
	}
}

// TestWatcherStopNoteAfterDelete: files deleted after the idle watcher
// stopped a kernel over the data directory's limit, the next cell runs, and
// its restart note tells what the directory held then, not "holds" as if it
// still did (a fresh user read "/mnt/data holds 1258328064 bytes, over the
// limit" on a cell that ran after deleting them).
func TestWatcherStopNoteAfterDelete(t *testing.T) {
	t.Parallel()
	opts := smallDisk()
	e := diskExecutor(t, opts)
	k := newKernel(t, e)
	backgroundWriterStopped(t, k, opts.MaxFileSizeBytes)
	cleanDataDir(t, k)
	res := requireOK(t, k, "6 * 7")
	require.True(t, res.Restarted)
	require.Equal(t, "42", string(res.Value))
	require.Contains(t, res.Stderr, "/mnt/data held ")
	require.NotContains(t, res.Stderr, "holds")
	require.Contains(t, res.Stderr, "stopped between executions")
}
