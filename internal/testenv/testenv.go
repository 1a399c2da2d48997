// Package testenv decides whether tests that need the sandbox (bubblewrap and
// Debian's python3 with IPython, pandas and matplotlib) can run here.
package testenv

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// RequireSandboxEnv is the environment variable that turns a missing sandbox
// from a skip into a failure (CI and `make test` set it to 1).
const RequireSandboxEnv = "AZSESSIONS_REQUIRE_SANDBOX"

// TestGvisorEnv is the environment variable that adds the gVisor backend's
// tests to a plain go test run (make test and CI include them through
// AZSESSIONS_REQUIRE_SANDBOX=1).
const TestGvisorEnv = "AZSESSIONS_TEST_GVISOR"

// TestLongEnv is the environment variable that adds the long tests
// (SkipLongInQuickLoop) to a plain go test run (make test and CI include
// them through AZSESSIONS_REQUIRE_SANDBOX=1).
const TestLongEnv = "AZSESSIONS_TEST_LONG"

// Python is the interpreter the sandboxed tests use.
const Python = "/usr/bin/python3"

// NeedSandbox skips t when bwrap or Python with the given modules is missing,
// or fails it when AZSESSIONS_REQUIRE_SANDBOX=1.
func NeedSandbox(t testing.TB, modules ...string) {
	t.Helper()
	missing := ""
	if _, err := exec.LookPath("bwrap"); err != nil {
		missing = "bwrap (Debian package bubblewrap)"
	}
	need(t, missing, "run `make test` (it installs bubblewrap, python3-ipython, python3-pandas, python3-matplotlib, python3-tz)", modules)
}

// need skips or fails t for what is missing (a tool, else Debian's Python or
// one of modules); hint says how to get it.
func need(t testing.TB, missing, hint string, modules []string) {
	t.Helper()
	if missing == "" {
		if _, err := os.Stat(Python); err != nil {
			missing = Python
		}
	}
	for _, m := range modules {
		if missing != "" {
			break
		}
		if err := exec.Command(Python, "-c", "import "+m).Run(); err != nil {
			missing = "the Python module " + m + " for " + Python
		}
	}
	if missing == "" {
		return
	}
	if os.Getenv(RequireSandboxEnv) == "1" {
		t.Fatalf("%s is missing and %s=1; %s", missing, RequireSandboxEnv, hint)
	}
	t.Skipf("skipping: %s is missing (set %s=1 to fail instead)", missing, RequireSandboxEnv)
}

// DataDir is a directory for an executor's data (SandboxOptions.DataDir)
// removed at the end of the test. Unlike t.TempDir it can be passed through
// by other users (mode 0711 up to the temporary directory): when the tests
// run as root, sandboxes run as an unprivileged user, which must reach its
// data directory inside.
func DataDir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	tmp := filepath.Clean(os.TempDir())
	for p := dir; p != tmp && p != "/" && p != "."; p = filepath.Dir(p) {
		if err := os.Chmod(p, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// NeedGvisor skips t in the quick loop (SkipGvisorInQuickLoop) and when
// gVisor's runsc, root (runsc needs it) or Python with the given modules is
// missing, or fails it then when AZSESSIONS_REQUIRE_SANDBOX=1.
func NeedGvisor(t testing.TB, modules ...string) {
	t.Helper()
	SkipGvisorInQuickLoop(t)
	missing := ""
	if _, err := exec.LookPath("runsc"); err != nil {
		missing = "runsc (Debian package runsc)"
	} else if os.Geteuid() != 0 {
		missing = "root (runsc needs it)"
	}
	need(t, missing, "run `make test` as root (it installs runsc)", modules)
}

// RaiseParallel makes at least n tests run at once (t.Parallel) unless
// -parallel was given; call it from TestMain before m.Run. For packages
// whose parallel tests mostly wait on sandboxes, where more of them than
// GOMAXPROCS (the default) overlap well even on two cores.
func RaiseParallel(n int) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	p := flag.Lookup("test.parallel")
	if set || p == nil {
		return
	}
	if cur, err := strconv.Atoi(p.Value.String()); err == nil && cur < n {
		_ = p.Value.Set(strconv.Itoa(n))
	}
}

// SkipGvisorInQuickLoop skips t, a test of the gVisor backend, in the quick
// loop: under -short, and in a plain go test run unless
// AZSESSIONS_REQUIRE_SANDBOX=1 (make test, CI) or AZSESSIONS_TEST_GVISOR=1
// ask for the full suite. The gVisor runs cost about twice the CPU of
// everything else in the root module's tests (runsc on the ptrace platform:
// 112 of internal/sandbox's 165 CPU-seconds), which a go test ./... meant
// to take under 45 s on two cores cannot hold (issue 15; BENCHMARKS.md,
// "Test suite").
func SkipGvisorInQuickLoop(t testing.TB) {
	t.Helper()
	if ok, why := GvisorInThisRun(); !ok {
		t.Skip(why)
	}
}

// GvisorInThisRun says whether this run includes the gVisor backend's
// tests (see SkipGvisorInQuickLoop), and if not, why.
func GvisorInThisRun() (bool, string) {
	return inFullSuite(TestGvisorEnv, "the gVisor backend is tested")
}

// inFullSuite says whether this run includes a part of the full suite that
// the quick loop leaves out (what, "… by the full suite"): not under -short;
// else when AZSESSIONS_REQUIRE_SANDBOX=1 or env=1. If not, it says why.
func inFullSuite(env, what string) (bool, string) {
	if testing.Short() {
		return false, "-short: " + what + " by the full suite (make test)"
	}
	if os.Getenv(RequireSandboxEnv) != "1" && os.Getenv(env) != "1" {
		return false, what + " by the full suite: make test, or " + env + "=1 go test ./..."
	}
	return true, ""
}

// SkipLongInQuickLoop skips t, a long test, in the quick loop: under -short,
// and in a plain go test run unless AZSESSIONS_REQUIRE_SANDBOX=1 (make test,
// CI) or AZSESSIONS_TEST_LONG=1 ask for the full suite. Long tests are those
// whose property needs many sandboxes or a fight: the pool under load (bursts,
// the ready pool's adaptation, pool-wide memory, task and disk exhaustion, the
// pool's OOM policy), hostile cells fighting the driver (forged and flooded
// replies, swallowed interrupts, the background preload's interleavings), and
// the alternative runners (no cgroups, the fallback runner, Node restarts).
// The quick loop keeps the kernel contract, the escape suite's per-sandbox
// tests, the emulator and the client: go test ./... is meant to take under
// 45 s on two cores (issue 15; BENCHMARKS.md, "Test suite").
func SkipLongInQuickLoop(t testing.TB) {
	t.Helper()
	if ok, why := inFullSuite(TestLongEnv, "a long test, run"); !ok {
		t.Skip(why)
	}
}
