package sandbox

import (
	"context"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/azsessions/azsessions/internal/kernel"
)

// closingM closes the shared executor after the tests, before goleak looks.
type closingM struct{ m *testing.M }

func (c closingM) Run() int {
	code := c.m.Run()
	closeShared()
	return code
}

func TestMain(m *testing.M) {
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
	testGrace     = 2 * time.Second
)

var (
	sharedOnce sync.Once
	sharedExec *Executor
	sharedErr  error
)

// shared returns an executor shared by the tests (closed in TestMain).
func shared(t testing.TB) *Executor {
	t.Helper()
	requireSandbox(t, true)
	sharedOnce.Do(func() {
		sharedExec, sharedErr = New(Options{
			Ready:            2,
			MemoryLimitBytes: testMemory,
			MaxFileSizeBytes: testFileSize,
			MaxDataDirBytes:  testDataDir,
			MaxProcesses:     testProcesses,
			killGrace:        testGrace,
		})
	})
	require.NoError(t, sharedErr)
	return sharedExec
}

func closeShared() {
	if sharedExec != nil {
		_ = sharedExec.Close()
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
	res, err := k.Execute(ctx, kernel.Request{Code: code, Timeout: timeout, OutputMaxLength: 4096})
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
