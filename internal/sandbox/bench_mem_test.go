//go:build linux

package sandbox

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/azsessions/azsessions/internal/kernel"
)

// smapsRollup sums the Rss, Pss and Private_* lines of
// /proc/<pid>/smaps_rollup over the processes of a kernel's cgroup. PSS
// divides each shared page by the number of processes mapping it, so the sum
// over N sandboxes is what they cost together.
func smapsRollup(p *proc) (rss, pss, private int64) {
	if p.cg == nil {
		return 0, 0, 0
	}
	seen := map[int]bool{}
	for _, pid := range p.cg.pids() {
		if seen[pid] {
			continue
		}
		seen[pid] = true
		data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/smaps_rollup")
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			switch f[0] {
			case "Rss:":
				rss += kb << 10
			case "Pss:":
				pss += kb << 10
			case "Private_Clean:", "Private_Dirty:":
				private += kb << 10
			}
		}
	}
	return rss, pss, private
}

// BenchmarkReadyKernelMemory starts `ready` kernels (default pool size 2),
// waits for their background preload, and reports, per kernel, the resident
// memory (RSS), the proportional set size (PSS: shared pages divided among
// the sandboxes mapping them) and the private memory, for each preload set.
// preload=numpy-ready=8 repeats the default set with 8 kernels: PSS per
// kernel falls towards the private memory as more sandboxes share the
// interpreter's and the libraries' pages (a pool that serves sessions holds
// more than the 2 ready ones). It needs cgroups to find a sandbox's
// processes (root here).
func BenchmarkReadyKernelMemory(b *testing.B) {
	benchBackends(b, benchReadyKernelMemory)
}

func benchReadyKernelMemory(b *testing.B, mode string) {
	sets := benchPreloadSets(mode)
	for _, set := range sets {
		b.Run("preload="+set.name, func(b *testing.B) { readyKernelMemory(b, mode, set.mods, 2) })
	}
	if !testing.Short() {
		b.Run("preload="+sets[0].name+"-ready=8", func(b *testing.B) { readyKernelMemory(b, mode, sets[0].mods, 8) })
	}
}

func readyKernelMemory(b *testing.B, mode string, mods []string, ready int) {
	e := benchExecutorOpts(b, Options{Mode: mode, Ready: ready, Preload: mods})
	if e.cg == nil {
		b.Skip("skipping: no cgroups to find a sandbox's processes")
	}
	var rss, pss, private int64
	for b.Loop() {
		waitReady(b, e, ready)
		e.mu.Lock()
		procs := append([]*proc(nil), e.ready...)
		e.mu.Unlock()
		rss, pss, private = 0, 0, 0
		for _, p := range procs {
			r, s, v := smapsRollup(p)
			rss, pss, private = rss+r, pss+s, private+v
		}
	}
	n := float64(ready) * (1 << 20)
	b.ReportMetric(float64(rss)/n, "MiB-rss/kernel")
	b.ReportMetric(float64(pss)/n, "MiB-pss/kernel")
	b.ReportMetric(float64(private)/n, "MiB-private/kernel")
}

// BenchmarkFirstFigure takes a ready kernel (a fresh session from a full
// pool) and draws and returns the first matplotlib figure, for each preload
// set (p50-ms: NewKernel + the cell).
func BenchmarkFirstFigure(b *testing.B) {
	benchBackends(b, func(b *testing.B, mode string) { benchFirstCell(b, mode, figureRequest(), `"image"`) })
}

// BenchmarkFirstImportPandas is a fresh session's first `import pandas`
// (and a DataFrame), for each preload set.
func BenchmarkFirstImportPandas(b *testing.B) {
	benchBackends(b, func(b *testing.B, mode string) {
		benchFirstCell(b, mode, kernel.Request{
			Code:                   "import pandas as pd\npd.DataFrame({'a': [1, 2]}).shape[0]",
			Timeout:                time.Minute,
			OutputStreamsMaxLength: 4096,
		}, "2")
	})
}

func benchFirstCell(b *testing.B, mode string, req kernel.Request, want string) {
	for _, set := range benchPreloadSets(mode) {
		b.Run("preload="+set.name, func(b *testing.B) {
			e := benchExecutorOpts(b, Options{Mode: mode, Ready: 1, Preload: set.mods})
			var lat []time.Duration
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				waitReady(b, e, 1)
				b.StartTimer()
				t0 := time.Now()
				k, err := e.NewKernel(context.Background())
				require.NoError(b, err)
				res, err := k.Execute(context.Background(), req)
				lat = append(lat, time.Since(t0))
				require.NoError(b, err)
				require.Contains(b, string(res.Value), want, res.Stderr)
				b.StopTimer()
				_ = k.Close()
				b.StartTimer()
			}
			reportP50(b, lat, "p50-ms")
		})
	}
}

// benchExecutorOpts is an executor of opts.Mode (bwrap when ""), closed at
// the end of the benchmark; the backend must be usable (benchBackends).
func benchExecutorOpts(b *testing.B, opts Options) *Executor {
	b.Helper()
	if opts.Mode == "" {
		opts.Mode = ModeBwrap
		requireSandbox(b, true)
	}
	e, err := newExecutor(opts)
	require.NoError(b, err)
	b.Cleanup(func() { _ = e.Close() })
	return e
}

func figureRequest() kernel.Request {
	return kernel.Request{
		Code:                   "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.title('t')\nplt.show()",
		Timeout:                time.Minute,
		OutputStreamsMaxLength: 4096,
	}
}
