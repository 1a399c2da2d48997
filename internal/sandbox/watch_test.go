//go:build linux

package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestNextWatchInterval: the idle watcher waits 20 × its last scan (at most
// ~5 % of one core), between 1 s and 30 s (red team F3).
func TestNextWatchInterval(t *testing.T) {
	t.Parallel()
	tests := []struct {
		last, want time.Duration
	}{
		{0, time.Second}, // no scan (a cell ran, or the kernel is dead)
		{10 * time.Millisecond, time.Second},
		{50 * time.Millisecond, time.Second},
		{60 * time.Millisecond, 1200 * time.Millisecond},
		{500 * time.Millisecond, 10 * time.Second}, // 98,000 entries
		{1500 * time.Millisecond, 30 * time.Second},
		{10 * time.Second, 30 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.last.String(), func(t *testing.T) {
			require.Equal(t, tc.want, nextWatchInterval(tc.last))
		})
	}
}

// processCPU is the CPU time (user + system) this process used so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	require.NoError(b, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkWatcherIdleScan: the idle watcher's scan of a 50,000-entry data
// directory (500 directories of 99 empty files), and the share of one core
// it takes per idle session with the fixed 1 s interval of before and with
// nextWatchInterval (red team F3). No sandbox needed: the tree walk is the
// cost that grows with the directory.
func BenchmarkWatcherIdleScan(b *testing.B) {
	dir := b.TempDir()
	for d := range 500 {
		sub := filepath.Join(dir, fmt.Sprintf("d%03d", d))
		require.NoError(b, os.Mkdir(sub, 0o755))
		for f := range 99 {
			require.NoError(b, os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%02d", f)), nil, 0o644))
		}
	}
	var wall, cpu time.Duration
	b.ResetTimer()
	for b.Loop() {
		start, c0 := time.Now(), processCPU(b)
		u, err := diskUsage(dir, 0)
		wall += time.Since(start)
		cpu += processCPU(b) - c0
		require.NoError(b, err)
		require.EqualValues(b, 50_000, u.entries)
	}
	n := time.Duration(b.N)
	scanWall, scanCPU := wall/n, cpu/n
	b.ReportMetric(float64(scanCPU)/float64(time.Millisecond), "scan-cpu-ms")
	b.ReportMetric(100*float64(scanCPU)/float64(watchIdleInterval), "cpu-%-fixed-1s")
	b.ReportMetric(100*float64(scanCPU)/float64(nextWatchInterval(scanWall)), "cpu-%-adaptive")
}
