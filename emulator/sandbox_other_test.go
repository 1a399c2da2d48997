//go:build !linux

package emulator_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/azsessions/azsessions/emulator"
)

// TestSandboxExecutorNeedsLinux: off Linux, NewSandboxExecutor fails in
// every mode, with an error that says so and wraps errors.ErrUnsupported and
// the mode's error (so that code which skips without bubblewrap skips).
func TestSandboxExecutorNeedsLinux(t *testing.T) {
	for _, tc := range []struct {
		mode string
		is   error
	}{
		{"", emulator.ErrNoBubblewrap},
		{emulator.SandboxBwrap, emulator.ErrNoBubblewrap},
		{emulator.SandboxGvisor, emulator.ErrNoGvisor},
		{emulator.SandboxNone, errors.ErrUnsupported},
	} {
		ex, err := emulator.NewSandboxExecutor(emulator.SandboxOptions{Mode: tc.mode})
		require.Nil(t, ex, tc.mode)
		require.ErrorIs(t, err, errors.ErrUnsupported, tc.mode)
		require.ErrorIs(t, err, tc.is, tc.mode)
		require.ErrorContains(t, err, "needs Linux", tc.mode)
		if tc.mode == emulator.SandboxNone {
			require.NotErrorIs(t, err, emulator.ErrNoBubblewrap)
		}
	}
}
