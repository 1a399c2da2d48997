//go:build linux

package emulator_test

// Benchmarks of the emulator with real Python in bubblewrap, over HTTP with
// the SDK. They skip when bwrap or /usr/bin/python3 is missing (and fail
// then with AZSESSIONS_REQUIRE_SANDBOX=1). Latencies are measured per
// operation and reported as p50/max metrics; nothing is asserted on time.
// The 10 and 50 concurrent first executions run only with
// AZSESSIONS_BENCH_LARGE=1.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/azsessions/azsessions"
	"github.com/azsessions/azsessions/emulator"
	"github.com/azsessions/azsessions/internal/sandbox"
	"github.com/azsessions/azsessions/internal/testenv"
)

type sandboxEnv struct {
	client *azsessions.Client
	exec   *sandbox.Executor
	srv    *httptest.Server
	h      *emulator.Handler

	closeFn   func()
	closeOnce sync.Once
}

func newSandboxEnv(b *testing.B, ready int) *sandboxEnv {
	b.Helper()
	return newSandboxEnvOpts(b, emulator.SandboxOptions{Python: testenv.Python, Ready: ready})
}

func newSandboxEnvOpts(b *testing.B, opts emulator.SandboxOptions) *sandboxEnv {
	b.Helper()
	testenv.NeedSandbox(b, "IPython", "numpy", "pandas", "matplotlib")
	ex, err := emulator.NewSandboxExecutor(opts)
	if err != nil {
		b.Fatal(err)
	}
	h, err := emulator.NewHandler(emulator.Options{Executor: ex})
	if err != nil {
		_ = ex.Close()
		b.Fatal(err)
	}
	srv := httptest.NewServer(h)
	env := &sandboxEnv{exec: ex.(*sandbox.Executor), srv: srv, h: h}
	env.closeFn = func() {
		srv.CloseClientConnections()
		srv.Close()
		_ = h.Close()
	}
	b.Cleanup(env.close)
	copts := &azsessions.ClientOptions{}
	copts.Transport = srv.Client()
	c, err := azsessions.NewClientWithNoCredential(srv.URL+h.PoolPath(), copts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(srv.Client().CloseIdleConnections)
	env.client = c
	return env
}

// close stops the server and the handler with its executor (once; also at
// the benchmark's end).
func (e *sandboxEnv) close() { e.closeOnce.Do(e.closeFn) }

// waitReady waits until the executor's pool holds n started sandboxes and
// the machine had a moment to settle (the refill competes for the CPUs).
func (e *sandboxEnv) waitReady(b *testing.B, n int) {
	b.Helper()
	for deadline := time.Now().Add(5 * time.Minute); e.exec.ReadyKernels() < n; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatal("the ready pool did not refill")
		}
	}
}

// waitRefilled waits until the executor's ready list holds as many
// sandboxes as its target (raised by a burst), their preload done.
func (e *sandboxEnv) waitRefilled(b *testing.B) {
	b.Helper()
	for deadline := time.Now().Add(10 * time.Minute); e.exec.ReadyKernels() < e.exec.ReadyTarget(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatalf("the ready pool did not refill: %d of %d", e.exec.ReadyKernels(), e.exec.ReadyTarget())
		}
	}
}

func reportLatencies(b *testing.B, lat []time.Duration) { reportLatenciesAs(b, "", lat) }

// reportLatenciesAs reports the p50, p95, p99 and max of lat, their names
// prefixed.
func reportLatenciesAs(b *testing.B, prefix string, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(lat[len(lat)/2]), prefix+"p50-ms")
	b.ReportMetric(ms(lat[int(0.95*float64(len(lat)-1))]), prefix+"p95-ms")
	b.ReportMetric(ms(lat[int(0.99*float64(len(lat)-1))]), prefix+"p99-ms")
	b.ReportMetric(ms(lat[len(lat)-1]), prefix+"max-ms")
}

func mustSucceed(b *testing.B, resp azsessions.ExecuteResponse, err error) {
	if err != nil {
		b.Fatal(err)
	}
	if resp.Status != azsessions.ExecutionStatusSucceeded {
		b.Fatalf("%s: %s", resp.Status, resp.Stderr)
	}
}

// BenchmarkSandboxWarmExecute runs 1+1 over HTTP in a session whose
// sandbox is already started (the SDK's Execute, end to end).
func BenchmarkSandboxWarmExecute(b *testing.B) {
	env := newSandboxEnv(b, 1)
	session := env.client.NewSession()
	ctx := context.Background()
	resp, err := session.Execute(ctx, "1+1", nil)
	mustSucceed(b, resp, err)
	var lat []time.Duration
	for b.Loop() {
		t0 := time.Now()
		resp, err := session.Execute(ctx, "1+1", nil)
		lat = append(lat, time.Since(t0))
		mustSucceed(b, resp, err)
	}
	reportLatencies(b, lat)
}

// BenchmarkSandboxFirstExecute runs 1+1 on new identifiers while the ready
// pool is full (default 2 ready sandboxes): c identifiers at once, c = 1
// (always) and 20, 50 and 100 (AZSESSIONS_BENCH_LARGE=1), and reports the
// p50, p95 and max of the first executions, and the load average (1 min,
// /proc/loadavg) before and after the burst. Beyond the ready sandboxes,
// sessions wait for sandboxes started for them, as many at once as the host
// has CPUs, in arrival order. The executor has its default limits, pool-wide
// budgets included (as root they cap what the sandboxes use, not their
// count); every execution must succeed.
//
// Each iteration is a new executor: the cold burst (p50-ms, p95-ms, max-ms,
// load1-before, load1-after), then, once the sessions are deleted and the
// ready list has refilled to the target the burst raised (ready-target, up
// to the ready cap), the same burst again (adapted-p50-ms, adapted-p95-ms,
// adapted-max-ms, adapted-load1-before, adapted-load1-after): what the next
// burst of c costs after the pool adapted to the first.
//
// Per backend (sandbox=bwrap, sandbox=gvisor; gvisor not with -short).
func BenchmarkSandboxFirstExecute(b *testing.B) {
	for _, mode := range []string{emulator.SandboxBwrap, emulator.SandboxGvisor} {
		b.Run("sandbox="+mode, func(b *testing.B) {
			if mode == emulator.SandboxGvisor {
				if testing.Short() {
					b.Skip("-short: gvisor sandboxes start several times slower; make bench runs it")
				}
				testenv.NeedGvisor(b, "IPython", "numpy")
			}
			benchFirstExecute(b, mode)
		})
	}
}

// burstStats collects one kind of burst's first executions and load averages.
type burstStats struct {
	lat                   []time.Duration
	loadBefore, loadAfter []float64
	cpu                   []float64 // CPU-s of the burst in the caller's cgroup, sandboxes included
	goCPU                 []float64 // CPU-s of the burst in this process (emulator and client)
}

func (s *burstStats) report(b *testing.B, prefix string) {
	reportLatenciesAs(b, prefix, s.lat)
	if len(s.loadBefore) > 0 {
		b.ReportMetric(slices.Max(s.loadBefore), prefix+"load1-before")
		b.ReportMetric(slices.Max(s.loadAfter), prefix+"load1-after")
	}
	if len(s.cpu) > 0 {
		b.ReportMetric(slices.Max(s.cpu), prefix+"cpu-s")
	}
	if len(s.goCPU) > 0 {
		b.ReportMetric(slices.Max(s.goCPU), prefix+"go-cpu-s")
	}
}

func benchFirstExecute(b *testing.B, mode string) {
	levels := []int{1}
	if os.Getenv("AZSESSIONS_BENCH_LARGE") == "1" {
		levels = append(levels, 20, 50, 100)
	}
	for _, c := range levels {
		b.Run(fmt.Sprintf("concurrent=%d", c), func(b *testing.B) {
			const ready = 2
			var cold, adapted burstStats
			var targets []float64
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				env := newSandboxEnvOpts(b, emulator.SandboxOptions{Python: testenv.Python, Mode: mode, Ready: ready})
				env.waitReady(b, ready)
				b.StartTimer()
				firstExecuteBurst(b, env, c, &cold)
				b.StopTimer()
				targets = append(targets, float64(env.exec.ReadyTarget()))
				env.waitRefilled(b)
				b.StartTimer()
				firstExecuteBurst(b, env, c, &adapted)
				b.StopTimer()
				env.close()
				b.StartTimer()
			}
			cold.report(b, "")
			adapted.report(b, "adapted-")
			b.ReportMetric(slices.Max(targets), "ready-target")
		})
	}
}

// firstExecuteBurst runs 1+1 on c new identifiers at once, adds their
// latencies and the load average before and after to st, and deletes the
// sessions (timer stopped).
func firstExecuteBurst(b *testing.B, env *sandboxEnv, c int, st *burstStats) {
	ctx := context.Background()
	b.StopTimer()
	st.loadBefore = append(st.loadBefore, loadAverage(b))
	cpu0, cpuOK := cgroupCPU()
	goCPU0 := processCPU()
	b.StartTimer()
	var (
		wg sync.WaitGroup
		mu sync.Mutex
	)
	sessions := make([]*azsessions.Session, c)
	for j := range c {
		sessions[j] = env.client.NewSession()
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := time.Now()
			resp, err := sessions[j].Execute(ctx, "1+1", nil)
			d := time.Since(t0)
			if err != nil || resp.Status != azsessions.ExecutionStatusSucceeded {
				b.Errorf("first execution %d of %d: %v %s %s", j, c, err, resp.Status, resp.Stderr)
				return
			}
			mu.Lock()
			st.lat = append(st.lat, d)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
	b.StopTimer()
	st.goCPU = append(st.goCPU, (processCPU() - goCPU0).Seconds())
	if cpu1, ok := cgroupCPU(); ok && cpuOK {
		st.cpu = append(st.cpu, (cpu1 - cpu0).Seconds())
	}
	st.loadAfter = append(st.loadAfter, loadAverage(b))
	for _, s := range sessions {
		_, _ = s.Delete(ctx, nil)
	}
	b.StartTimer()
}

// BenchmarkSandboxFirstFigure draws the first matplotlib figure of a fresh
// session (a ready sandbox, numpy/pandas/pyplot preloaded) and gets it back
// as the execution's image.
func BenchmarkSandboxFirstFigure(b *testing.B) {
	env := newSandboxEnv(b, 1)
	ctx := context.Background()
	const code = "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.title('first')\nplt.show()"
	var lat []time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		env.waitReady(b, 1)
		session := env.client.NewSession()
		b.StartTimer()
		t0 := time.Now()
		resp, err := session.Execute(ctx, code, nil)
		lat = append(lat, time.Since(t0))
		mustSucceed(b, resp, err)
		if _, ok := resp.Image(); !ok {
			b.Fatalf("no image: %s", strings.TrimSpace(string(resp.Result)))
		}
		b.StopTimer()
		_, _ = session.Delete(ctx, nil)
		b.StartTimer()
	}
	reportLatencies(b, lat)
}

// BenchmarkSandboxHotPath compares a warm 1+1 over HTTP (one keep-alive
// connection, raw net/http, POST executions) with the same cell run on a
// kernel of the same executor in process (Kernel.Execute, as the sandbox
// package's WarmExecute), alternating the two in every iteration so that the
// machine's load moves both alike. It reports each path's median
// (kernel-p50-ms, http-p50-ms) and their ratio (http/kernel): what the
// emulator's own work (HTTP, routing, records, queueing, framing) adds to a
// cell. Per backend (sandbox=bwrap, sandbox=gvisor; gvisor not with -short).
func BenchmarkSandboxHotPath(b *testing.B) {
	for _, mode := range []string{emulator.SandboxBwrap, emulator.SandboxGvisor} {
		b.Run("sandbox="+mode, func(b *testing.B) {
			if mode == emulator.SandboxGvisor {
				if testing.Short() {
					b.Skip("-short: gvisor kernels start several times slower; make bench runs it")
				}
				testenv.NeedGvisor(b, "IPython", "numpy")
			}
			env := newSandboxEnvOpts(b, emulator.SandboxOptions{Python: testenv.Python, Ready: 2, Mode: mode})
			env.waitReady(b, 2)
			ctx := context.Background()
			k, err := env.exec.NewKernel(ctx)
			if err != nil {
				b.Fatal(err)
			}
			defer k.Close()
			kreq := emulator.ExecutionRequest{Code: "1+1", Timeout: 220 * time.Second, OutputStreamsMaxLength: emulator.DefaultOutputStreamsMaxLength}
			hc := env.srv.Client()
			url := env.srv.URL + env.h.PoolPath() + "/executions?api-version=" + azsessions.DefaultAPIVersion + "&identifier=bench-hot-path"
			body := []byte(`{"codeInputType":"Inline","executionType":"Synchronous","code":"1+1","timeoutInSeconds":220}`)
			post := func() {
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
				if err != nil {
					b.Fatal(err)
				}
				req.Header.Set("Content-Type", "application/json")
				resp, err := hc.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				data, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK || !bytes.Contains(data, []byte(`"executionResult":2`)) {
					b.Fatalf("%d %v %s", resp.StatusCode, err, data)
				}
			}
			direct := func() {
				res, err := k.Execute(ctx, kreq)
				if err != nil || res.Status != emulator.Succeeded || string(res.Value) != "2" {
					b.Fatal(err, res)
				}
			}
			post() // the session's kernel starts (or comes from the pool)
			direct()
			env.waitReady(b, 2) // the refill must not overlap the measurement
			var kl, hl []time.Duration
			cpu0 := processCPU()
			for b.Loop() {
				t0 := time.Now()
				direct()
				t1 := time.Now()
				post()
				kl = append(kl, t1.Sub(t0))
				hl = append(hl, time.Since(t1))
			}
			cpu := processCPU() - cpu0
			slices.Sort(kl)
			slices.Sort(hl)
			// The CPU of this process (emulator, HTTP client and server, the
			// measurements around each cell) per iteration, both paths:
			// steadier than wall time on a shared machine.
			b.ReportMetric(float64(cpu.Microseconds())/float64(len(kl)), "go-cpu-µs/op")
			ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
			b.ReportMetric(ms(kl[len(kl)/2]), "kernel-p50-ms")
			b.ReportMetric(ms(hl[len(hl)/2]), "http-p50-ms")
			b.ReportMetric(float64(hl[len(hl)/2])/float64(kl[len(kl)/2]), "http/kernel")
		})
	}
}

// processCPU is the user + system CPU time this process used so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cgroupCPU is the CPU time used so far in this process's CPU accounting
// cgroup (cgroup v1 cpuacct.usage, v2 cpu.stat usage_usec), whose subgroups
// hold the executor's sandboxes: the benchmark reports a burst's CPU-s from
// it (cpu-s; false where it cannot be read). Only meaningful when the
// process is alone in its group, e.g. after
// `mkdir /sys/fs/cgroup/cpuacct/probe; echo $$ > /sys/fs/cgroup/cpuacct/probe/tasks`
// in the shell that runs the benchmark (at the root group it counts the
// whole machine).
func cgroupCPU() (time.Duration, bool) {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		if slices.Contains(strings.Split(f[1], ","), "cpuacct") {
			var ns int64
			raw, err := os.ReadFile("/sys/fs/cgroup/cpuacct" + f[2] + "/cpuacct.usage")
			if err != nil {
				raw, err = os.ReadFile("/sys/fs/cgroup/cpu,cpuacct" + f[2] + "/cpuacct.usage")
			}
			if err != nil {
				return 0, false
			}
			if _, err := fmt.Sscan(string(raw), &ns); err != nil {
				return 0, false
			}
			return time.Duration(ns), true
		}
		if f[0] == "0" && f[1] == "" {
			raw, err := os.ReadFile("/sys/fs/cgroup" + f[2] + "/cpu.stat")
			if err != nil {
				continue
			}
			for _, l := range strings.Split(string(raw), "\n") {
				var us int64
				if _, err := fmt.Sscanf(l, "usage_usec %d", &us); err == nil {
					return time.Duration(us) * time.Microsecond, true
				}
			}
		}
	}
	return 0, false
}

// loadAverage is the 1-minute load average of /proc/loadavg (0 where it
// cannot be read), reported with the burst figures: this machine is shared.
func loadAverage(b *testing.B) float64 {
	b.Helper()
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	var l float64
	_, _ = fmt.Sscan(string(data), &l)
	return l
}
