package emulator_test

import (
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/azsessions/azsessions/emulator"
)

// sharedSandboxes are the package's sandbox executors, one per mode and
// runtime, started on first use and shared by every test that needs real
// Python (or Node.js) in a sandbox: each NewSandboxExecutor checks its
// sandbox with a start, builds matplotlib's font cache and keeps a kernel
// ready, which cost more CPU than most of those tests' own executions. The
// tests' sessions (and so their kernels and data directories) stay their
// own. TestMain closes them.
var sharedSandboxes struct {
	mu   sync.Mutex
	byID map[string]*sharedSandbox
}

type sharedSandbox struct {
	once sync.Once
	ex   emulator.Executor
	err  error
}

// sharedExecutor returns the shared executor of mode and runtime ("" is
// Python) for a test that has checked that the sandbox is there
// (testenv.NeedSandbox, NeedGvisor). Closing it (a handler's Close) leaves
// it running.
func sharedExecutor(t *testing.T, mode, runtime string) emulator.Executor {
	t.Helper()
	sharedSandboxes.mu.Lock()
	if sharedSandboxes.byID == nil {
		sharedSandboxes.byID = map[string]*sharedSandbox{}
	}
	s, ok := sharedSandboxes.byID[mode+"/"+runtime]
	if !ok {
		s = &sharedSandbox{}
		sharedSandboxes.byID[mode+"/"+runtime] = s
	}
	sharedSandboxes.mu.Unlock()
	s.once.Do(func() {
		opts := emulator.SandboxOptions{Mode: mode, Runtime: runtime, Ready: 1, MaxReady: 1}
		if runtime == "" {
			opts.Preload = []string{}
		}
		s.ex, s.err = emulator.NewSandboxExecutor(opts)
	})
	require.NoError(t, s.err)
	return unclosedExecutor{s.ex}
}

// unclosedExecutor is a shared executor whose Close does nothing.
type unclosedExecutor struct{ emulator.Executor }

func (unclosedExecutor) Close() error { return nil }

// closeSharedExecutors closes the executors sharedExecutor started.
func closeSharedExecutors() error {
	sharedSandboxes.mu.Lock()
	defer sharedSandboxes.mu.Unlock()
	var errs []error
	for _, s := range sharedSandboxes.byID {
		if s.ex != nil {
			errs = append(errs, s.ex.Close())
		}
	}
	sharedSandboxes.byID = nil
	return errors.Join(errs...)
}
