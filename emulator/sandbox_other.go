//go:build !linux

package emulator

import (
	"errors"
	"fmt"
	"runtime"
)

// newSandboxExecutor fails: the sandbox (bubblewrap or gVisor, cgroups,
// seccomp, and the Linux interfaces the executor uses in SandboxNone too)
// needs Linux.
func newSandboxExecutor(opts SandboxOptions) (Executor, error) {
	return nil, &needsLinuxError{mode: opts.Mode}
}

// needsLinuxError is NewSandboxExecutor's error on other systems. It says
// so alone (ErrNoBubblewrap's text, which suggests apt-get, would mislead)
// and wraps errors.ErrUnsupported and the mode's error, so that code that
// skips without bubblewrap skips here too.
type needsLinuxError struct{ mode string }

func (e *needsLinuxError) Error() string {
	mode := e.mode
	if mode == "" {
		mode = SandboxBwrap
	}
	return fmt.Sprintf("emulator: the sandbox executor (-sandbox=%s) needs Linux, this is %s: run the emulator on Linux (a VM or container), or use emulator.ScriptedExecutor or azsessionstest.EchoExecutor", mode, runtime.GOOS)
}

func (e *needsLinuxError) Unwrap() []error {
	switch e.mode {
	case "", SandboxBwrap:
		return []error{errors.ErrUnsupported, ErrNoBubblewrap}
	case SandboxGvisor:
		return []error{errors.ErrUnsupported, ErrNoGvisor}
	}
	return []error{errors.ErrUnsupported}
}
