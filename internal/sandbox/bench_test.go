//go:build linux

package sandbox

import (
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/azsessions/azsessions/internal/kernel"
)

// benchBackends runs f as a sub-benchmark "sandbox=<mode>" per isolation
// backend (bwrap, gvisor); a backend that cannot run here is skipped (or
// fails under AZSESSIONS_REQUIRE_SANDBOX=1). With -short (make test's
// run-once pass, which only checks that the benchmarks work) gvisor is
// skipped: its kernels start several times slower, and the tests already run
// every kernel operation on it.
func benchBackends(b *testing.B, f func(b *testing.B, mode string)) {
	for _, be := range backends() {
		if testing.Short() && be.name == ModeGvisor {
			continue
		}
		b.Run("sandbox="+be.name, func(b *testing.B) {
			be.need(b)
			f(b, be.opts.Mode)
		})
	}
}

// benchPreloadSets are the preload sets a backend's benchmarks compare: all
// of preloadSets on bwrap, the default on gvisor (whose kernels start
// several times slower: the comparison of sets is bwrap's).
func benchPreloadSets(mode string) []struct {
	name string
	mods []string
} {
	// gVisor and -short (make test's run-once pass) measure the default
	// preload only: the other sets cost seconds per run each.
	if mode == ModeGvisor || testing.Short() {
		return preloadSets[:1]
	}
	return preloadSets
}

// waitReady waits until the pool holds n kernels that finished their
// background preload (a pool that had time to fill: what a new session
// normally gets).
func waitReady(b *testing.B, e *Executor, n int) {
	b.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if e.ReadyKernels() >= n {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	b.Fatal("the pool did not refill")
}

// preloadSets are the Options.Preload values the benchmarks compare; the
// first is DefaultPreload.
var preloadSets = []struct {
	name string
	mods []string
}{
	{"numpy", []string{"numpy"}},
	{"none", []string{}},
	{"numpy+pyplot", []string{"numpy", "matplotlib.pyplot"}},
	{"numpy+pandas+pyplot", []string{"numpy", "pandas", "matplotlib.pyplot"}},
}

func reportP50(b *testing.B, lat []time.Duration, unit string) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, unit)
}

// rssBytes sums VmRSS over the processes of a kernel's cgroup (0 without one).
func rssBytes(p *proc) int64 {
	if p.cg == nil {
		return 0
	}
	var total int64
	seen := map[int]bool{}
	for _, pid := range p.cg.pids() {
		if seen[pid] {
			continue
		}
		seen[pid] = true
		data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				kb, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
				total += kb * 1024
			}
		}
	}
	return total
}

// BenchmarkWarmExecute runs 1+1 on a started kernel. It also reports the
// resident memory of a ready kernel (DefaultPreload).
func BenchmarkWarmExecute(b *testing.B) {
	benchBackends(b, benchWarmExecute)
}

func benchWarmExecute(b *testing.B, mode string) {
	e := benchExecutorOpts(b, Options{Mode: mode, Ready: 1})
	waitReady(b, e, 1)
	kk, err := e.NewKernel(context.Background())
	require.NoError(b, err)
	k := kk.(*Kernel)
	defer k.Close()
	rss := rssBytes(k.p)
	req := kernel.Request{Code: "1+1", Timeout: time.Minute, OutputStreamsMaxLength: 4096}
	b.ResetTimer()
	for b.Loop() {
		res, err := k.Execute(context.Background(), req)
		if err != nil || res.Status != kernel.Succeeded {
			b.Fatal(err, res)
		}
	}
	if rss > 0 {
		b.ReportMetric(float64(rss)/(1<<20), "MiB-rss/kernel")
	}
}

// BenchmarkNewKernelReady takes a kernel from the pool (refilled between
// iterations, outside the timer).
func BenchmarkNewKernelReady(b *testing.B) {
	benchBackends(b, benchNewKernelReady)
}

func benchNewKernelReady(b *testing.B, mode string) {
	e := benchExecutorOpts(b, Options{Mode: mode, Ready: 1})
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		waitReady(b, e, 1)
		b.StartTimer()
		k, err := e.NewKernel(context.Background())
		require.NoError(b, err)
		b.StopTimer()
		_ = k.Close()
		b.StartTimer()
	}
}

// BenchmarkColdStart starts a kernel without a pool and runs a first cell
// (p50-ms: bwrap + interpreter + IPython + 1+1). The kernel answers that
// cell while it still preloads in the background; preloaded-p50-ms is the
// time from the start until the preload finished too (outside the timer).
func BenchmarkColdStart(b *testing.B) {
	benchBackends(b, benchColdStart)
}

func benchColdStart(b *testing.B, mode string) {
	for _, set := range benchPreloadSets(mode) {
		if set.name == "numpy+pyplot" {
			continue
		}
		b.Run("preload="+set.name, func(b *testing.B) {
			e := benchExecutorOpts(b, Options{Mode: mode, Ready: 0, Preload: set.mods})
			req := kernel.Request{Code: "1+1", Timeout: time.Minute, OutputStreamsMaxLength: 4096}
			var cold, full []time.Duration
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				kk, err := e.NewKernel(context.Background())
				require.NoError(b, err)
				res, err := kk.Execute(context.Background(), req)
				cold = append(cold, time.Since(t0))
				require.NoError(b, err)
				require.Equal(b, kernel.Succeeded, res.Status)
				b.StopTimer()
				k := kk.(*Kernel)
				select {
				case <-k.p.preloaded:
				case <-time.After(time.Minute):
					b.Fatal("the preload did not finish")
				}
				full = append(full, time.Since(t0))
				_ = k.Close()
				b.StartTimer()
			}
			reportP50(b, cold, "p50-ms")
			reportP50(b, full, "preloaded-p50-ms")
		})
	}
}

// BenchmarkKernelClose closes a started kernel (started outside the timer):
// what deleting a session or restarting its kernel waits for. Under gVisor
// the container's runsc state is removed in the background once its cgroup
// is empty (gvisorContainer.removeLater); Executor.Close waits for it.
func BenchmarkKernelClose(b *testing.B) {
	benchBackends(b, benchKernelClose)
}

func benchKernelClose(b *testing.B, mode string) {
	e := benchExecutorOpts(b, Options{Mode: mode, Ready: 0, noPreload: true, noFontCache: true})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		k, err := e.NewKernel(context.Background())
		require.NoError(b, err)
		b.StartTimer()
		require.NoError(b, k.Close())
	}
}

// BenchmarkNewFirstReady creates an executor as the emulator does (Ready 2,
// the default preload, matplotlib's font cache) and waits for its ready
// kernels: new-p50-ms is New's own latency, first-ready-p50-ms the time from
// New's call until the first ready kernel finished its preload (a NewKernel
// then gets a preloaded kernel at once), all-ready-p50-ms until both did.
// Close is outside the timer.
func BenchmarkNewFirstReady(b *testing.B) {
	benchBackends(b, func(b *testing.B, mode string) {
		var newLat, first, all []time.Duration
		for i := 0; i < b.N; i++ {
			t0 := time.Now()
			e, err := newExecutor(Options{Mode: mode, Ready: 2})
			require.NoError(b, err)
			newLat = append(newLat, time.Since(t0))
			waitReady(b, e, 1)
			first = append(first, time.Since(t0))
			waitReady(b, e, 2)
			all = append(all, time.Since(t0))
			b.StopTimer()
			require.NoError(b, e.Close())
			b.StartTimer()
		}
		reportP50(b, newLat, "new-p50-ms")
		reportP50(b, first, "first-ready-p50-ms")
		reportP50(b, all, "all-ready-p50-ms")
	})
}

// BenchmarkStartCPU starts kernels one at a time without a pool or a
// preload and runs 1+1 on each: the CPU time a cold start costs, which a
// burst of new sessions pays once per sandbox on the two-core machine of
// issue 16. sandbox-cpu-ms is the median of the kernel's cgroup (the
// cgroup-joining shell, bwrap and Python with the driver, up to the first
// cell's reply), go-cpu-ms the median of this process's (the executor's
// share: cgroups, pipes, the seccomp program, reading the replies).
func BenchmarkStartCPU(b *testing.B) {
	benchBackends(b, func(b *testing.B, mode string) {
		e := benchExecutorOpts(b, Options{Mode: mode, Ready: 0, noPreload: true, noFontCache: true})
		req := kernel.Request{Code: "1+1", Timeout: time.Minute, OutputStreamsMaxLength: 4096}
		var sandboxCPU, goCPU []time.Duration
		for i := 0; i < b.N; i++ {
			go0 := processCPUTime()
			kk, err := e.NewKernel(context.Background())
			require.NoError(b, err)
			res, err := kk.Execute(context.Background(), req)
			require.NoError(b, err)
			require.Equal(b, kernel.Succeeded, res.Status)
			goCPU = append(goCPU, processCPUTime()-go0)
			k := kk.(*Kernel)
			if used, err := k.p.cg.cpuUsage(); err == nil {
				sandboxCPU = append(sandboxCPU, used)
			}
			b.StopTimer()
			_ = k.Close()
			b.StartTimer()
		}
		reportP50(b, sandboxCPU, "sandbox-cpu-ms")
		reportP50(b, goCPU, "go-cpu-ms")
	})
}

// processCPUTime is the user and system time of this process so far.
func processCPUTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
