//go:build linux

package sandbox

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/azsessions/azsessions/internal/kernel"
	"github.com/azsessions/azsessions/internal/testenv"
)

// closingM closes the shared executor after the tests, before goleak looks.
type closingM struct{ m *testing.M }

func (c closingM) Run() int {
	code := c.m.Run()
	closeProbeKernels()
	closeShared()
	return code
}

// testParallel is how many tests of this package run at once unless -parallel
// says otherwise: they mostly wait (for sandboxes to start, for timeouts,
// for the data directory watcher), so more than GOMAXPROCS of them overlap
// well even on two cores. Tests that measure something process- or host-wide
// (Go's allocations, free disk) or race a writer against the watcher's polls
// do not call t.Parallel and so run alone.
const testParallel = 4

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "1" {
		os.Exit(runHelperExecutor())
	}
	testenv.RaiseParallel(testParallel)
	goleak.VerifyTestMain(closingM{m})
}

// requireSandbox skips the test when bwrap or the system Python is missing,
// or fails it instead when AZSESSIONS_REQUIRE_SANDBOX=1.
func requireSandbox(t testing.TB, needBwrap bool) {
	t.Helper()
	var missing []string
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		if _, err := exec.LookPath("python3"); err != nil {
			missing = append(missing, "python3")
		}
	}
	if needBwrap {
		if _, err := exec.LookPath("bwrap"); err != nil {
			missing = append(missing, "bwrap")
		}
	}
	if len(missing) == 0 {
		return
	}
	if os.Getenv("AZSESSIONS_REQUIRE_SANDBOX") == "1" {
		t.Fatalf("AZSESSIONS_REQUIRE_SANDBOX=1 but %v is missing", missing)
	}
	t.Skipf("%v not installed (install bubblewrap and python3; set AZSESSIONS_REQUIRE_SANDBOX=1 to make this fatal)", missing)
}

// Limits of the shared executor: small, so that the escape tests are quick.
const (
	testMemory    = 256 << 20
	testFileSize  = 8 << 20
	testDataDir   = 40 << 20
	testProcesses = 64
	// testGrace is generous: on a loaded machine a starved driver can take
	// seconds to answer an interrupt (its first traceback imports and
	// formats while the preload imports numpy beside it, each thread getting
	// a fifteenth of a core at load 30), and tests that expect the driver to
	// stop a cell itself must not see it killed: TestCancel and
	// TestBackgroundPreload/interrupt_while_preloading were killed after a
	// 10 s grace in two runs at load 13-30. No passing test waits for it:
	// tests of a kernel that ignores interrupts set shortGrace on their
	// kernel instead, and limit kills do not wait for a grace.
	testGrace = 30 * time.Second
	// shortGrace is the kill grace of the kernels of tests that wait for a
	// kill after the grace (a cell that ignores interrupts; the grace
	// itself is not what they test): Kernel.killGrace, long enough for a
	// loaded machine to run the cell's first lines before the kill.
	shortGrace = 2 * time.Second
)

// testCPUs is the CPU quota of the shared executors' kernels.
const testCPUs = 1.0

// testOptions are the limits of the shared executors, for mode.
func testOptions(mode string) Options {
	return Options{
		Mode:             mode,
		Ready:            2,
		MemoryLimitBytes: testMemory,
		MaxFileSizeBytes: testFileSize,
		MaxDataDirBytes:  testDataDir,
		MaxProcesses:     testProcesses,
		CPUs:             testCPUs,
		killGrace:        testGrace,
	}
}

// backend is an isolation the escape suite runs against.
type backend struct {
	name string
	opts Options // Mode and the test limits
	// need skips (or fails under AZSESSIONS_REQUIRE_SANDBOX=1) when the
	// backend cannot run here.
	need func(t testing.TB)
}

// backends lists the isolations the escape suite covers.
func backends() []backend {
	return []backend{
		{name: ModeBwrap, opts: testOptions(ModeBwrap), need: func(t testing.TB) { requireSandbox(t, true) }},
		{name: ModeGvisor, opts: testOptions(ModeGvisor), need: requireGvisor},
	}
}

// forEachBackend runs f as a parallel subtest per backend, with that
// backend's Options (Mode and the test limits; sharedFor(t, opts) gives its
// shared executor). The subtests run beside each other and beside the
// package's other parallel tests: f must assert nothing about the host or
// the test process as a whole (see forEachBackendAlone).
func forEachBackend(t *testing.T, f func(t *testing.T, opts Options)) {
	t.Helper()
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			b.need(t)
			f(t, b.opts)
		})
	}
}

// forEachBackendAlone runs f as a subtest per backend, one after the other:
// for tests that measure the host or the test process (free disk, Go's
// heap), which another sandbox's work would disturb. Their callers do not
// call t.Parallel either.
func forEachBackendAlone(t *testing.T, f func(t *testing.T, opts Options)) {
	t.Helper()
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			b.need(t)
			f(t, b.opts)
		})
	}
}

// requireGvisor skips the test in the quick loop (testenv.SkipGvisorInQuickLoop)
// and when runsc, root or the system Python is missing, or fails it then when
// AZSESSIONS_REQUIRE_SANDBOX=1.
func requireGvisor(t testing.TB) {
	t.Helper()
	// go test ./... is the quick loop: the gVisor runs (two thirds of this
	// package's CPU) are make test's (AZSESSIONS_REQUIRE_SANDBOX=1).
	testenv.SkipGvisorInQuickLoop(t)
	requireSandbox(t, false)
	if _, err := exec.LookPath("runsc"); err != nil {
		if os.Getenv("AZSESSIONS_REQUIRE_SANDBOX") == "1" {
			t.Fatal("AZSESSIONS_REQUIRE_SANDBOX=1 but runsc (gVisor) is missing: apt-get install runsc")
		}
		t.Skip("runsc (gVisor) not installed (apt-get install runsc; set AZSESSIONS_REQUIRE_SANDBOX=1 to make this fatal)")
	}
	requireRoot(t)
}

// requireRoot skips a test that needs root (or fails it under
// AZSESSIONS_REQUIRE_SANDBOX=1, as CI runs as root).
func requireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("AZSESSIONS_REQUIRE_SANDBOX") == "1" {
		t.Fatal("AZSESSIONS_REQUIRE_SANDBOX=1 but the tests do not run as root, which this test needs")
	}
	t.Skip("needs root (set AZSESSIONS_REQUIRE_SANDBOX=1 to make this fatal)")
}

// newMu orders the tests' executor starts (New here, and in helper
// processes) against TestLeftoversRemoved's window from killing a helper to
// the New that must find what it left: any New removes the cgroups of dead
// executors. Tests start executors with newExecutor.
var newMu sync.RWMutex

// newExecutor is New for tests (see newMu). An executor of Ready 0 skips
// New's self-test start (noSelfTest): its test starts the kernels it needs
// at once, and a sandbox that cannot start fails the first of them
// (TestSelfTestKernelKept tests the self-test itself, with newExecutorSelfTest).
func newExecutor(opts Options) (*Executor, error) {
	if opts.Ready == 0 {
		opts.noSelfTest = true
	}
	return newExecutorSelfTest(opts)
}

// newExecutorSelfTest is New for tests (see newMu), with the self-test.
func newExecutorSelfTest(opts Options) (*Executor, error) {
	newMu.RLock()
	defer newMu.RUnlock()
	return New(opts)
}

// sharedKey names a shared executor: its backend, runtime and variant
// ("" for the executors of testOptions and nodeOptions; see diskExecutor).
type sharedKey struct{ mode, runtime, variant string }

// sharedExec is a shared executor, created once (by the first test that
// asks for it: the others wait for that creation, not for other keys').
type sharedExec struct {
	once sync.Once
	e    *Executor
	err  error
}

var (
	sharedMu    sync.Mutex
	sharedExecs = map[sharedKey]*sharedExec{}
)

// shared returns the executor shared by the tests (closed in TestMain), of
// the test's backend (see contractMode).
func shared(t testing.TB) *Executor {
	t.Helper()
	mode := contractMode(t)
	if mode == ModeGvisor {
		requireGvisor(t)
	} else {
		requireSandbox(t, true)
	}
	return sharedFor(t, testOptions(mode))
}

// contractMode is the backend of a kernel contract test: ModeGvisor when it
// runs as a subtest of TestGvisorKernelContract or
// TestGvisorKernelContractAlone, else ModeBwrap.
func contractMode(t testing.TB) string {
	top, _, sub := strings.Cut(t.Name(), "/")
	if sub && (top == "TestGvisorKernelContract" || top == "TestGvisorKernelContractAlone") {
		return ModeGvisor
	}
	return ModeBwrap
}

// sharedFor returns the executor of opts.Mode and opts.Runtime shared by
// the tests, created with opts on first use (closed in TestMain).
func sharedFor(t testing.TB, opts Options) *Executor {
	t.Helper()
	return sharedVariant(t, "", opts)
}

// sharedVariant returns the executor of opts.Mode, opts.Runtime and
// variant shared by the tests, created with opts on first use (closed in
// TestMain). Callers with the same key pass the same opts.
func sharedVariant(t testing.TB, variant string, opts Options) *Executor {
	t.Helper()
	key := sharedKey{opts.Mode, opts.Runtime, variant}
	sharedMu.Lock()
	s, ok := sharedExecs[key]
	if !ok {
		s = &sharedExec{}
		sharedExecs[key] = s
	}
	sharedMu.Unlock()
	if opts.MaxReady == 0 {
		// Ready kernels, never more: the tests' bursts of parallel
		// NewKernel calls would raise the ready target (see readyCap)
		// and leave kernels started for nothing at the end, each a
		// sandbox start (seconds of CPU under gVisor).
		opts.MaxReady = opts.Ready
	}
	s.once.Do(func() { s.e, s.err = newExecutor(opts) })
	require.NoError(t, s.err)
	return s.e
}

func closeShared() {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	for _, s := range sharedExecs {
		if s.e != nil {
			_ = s.e.Close()
		}
	}
}

var (
	probeMu      sync.Mutex
	probeKernels = map[probeKey]*Kernel{}
)

// probeKey names a kernel shared by tests: its backend and its use ("probe"
// or "figure").
type probeKey struct{ mode, use string }

// probeKernel returns the kernel that the probe tests of opts.Mode share
// (taken from that backend's shared executor on first use, closed in
// TestMain): one sandbox start per backend instead of one per test. Only
// tests whose cells read or attempt something and change nothing that
// another test looks at (no file left in /mnt/data, no process left
// running, no limit used up) share it; with their defense in place their
// attempts fail, so each still sees a fresh sandbox's state. Tests that
// write, fill or kill take their own kernel with newKernel. Cells of tests
// running in parallel take turns (Kernel.Execute runs one at a time).
func probeKernel(t testing.TB, opts Options) *Kernel {
	t.Helper()
	return sharedKernel(t, opts, "probe")
}

// figureKernel returns the kernel of the shared executor of t's backend
// (see shared) that the tests drawing matplotlib figures share: matplotlib
// is imported once (~1.4 s of CPU here) instead of once per test. Their
// cells leave no figure open (the driver closes them after each cell) and
// nothing in /mnt/data.
func figureKernel(t testing.TB) *Kernel {
	t.Helper()
	shared(t) // skips without the backend
	return sharedKernel(t, testOptions(contractMode(t)), "figure")
}

// sharedKernel returns the kernel of opts' shared executor kept for use.
func sharedKernel(t testing.TB, opts Options, use string) *Kernel {
	t.Helper()
	e := sharedFor(t, opts)
	probeMu.Lock()
	defer probeMu.Unlock()
	key := probeKey{opts.Mode, use}
	if k, ok := probeKernels[key]; ok {
		return k
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	k, err := e.NewKernel(ctx)
	require.NoError(t, err)
	probeKernels[key] = k.(*Kernel)
	return k.(*Kernel)
}

func closeProbeKernels() {
	probeMu.Lock()
	defer probeMu.Unlock()
	for _, k := range probeKernels {
		_ = k.Close()
	}
}

// newKernel takes a kernel from e and closes it at the end of the test.
func newKernel(t testing.TB, e *Executor) *Kernel {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	k, err := e.NewKernel(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = k.Close() })
	return k.(*Kernel)
}

// run executes code with a generous timeout and no error.
func run(t testing.TB, k kernel.Kernel, code string) kernel.Result {
	t.Helper()
	return runT(t, k, code, 60*time.Second)
}

func runT(t testing.TB, k kernel.Kernel, code string, timeout time.Duration) kernel.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout+time.Minute)
	defer cancel()
	res, err := k.Execute(ctx, kernel.Request{Code: code, Timeout: timeout, OutputStreamsMaxLength: 4096})
	require.NoError(t, err)
	return res
}

// requireOK runs code and requires it to succeed.
func requireOK(t testing.TB, k kernel.Kernel, code string) kernel.Result {
	t.Helper()
	res := run(t, k, code)
	require.Equal(t, kernel.Succeeded, res.Status, "stdout: %s\nstderr: %s", res.Stdout, res.Stderr)
	return res
}
