//go:build linux

package sandbox

import (
	"bufio"
	"io"
	"os/exec"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestKillSparesReusedGroupID: killing a proc whose process was reaped long
// ago sends nothing to the process group that now has its pid as id. The
// reuse is simulated: the reaped process's Pid is set to a live group
// leader's (a bystander, as another session's bwrap would be after the pid
// counter wrapped). Before, proc.kill SIGKILLed -pid whatever had become of
// it. The bystander is cat: it echoes a line while alive; once SIGKILLed
// (the signal is pending before the line is written) its stdout ends.
func TestKillSparesReusedGroupID(t *testing.T) {
	t.Parallel()
	by := startBystander(t, true)

	gone := exec.Command("true")
	gone.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, gone.Run())
	gone.Process.Pid = by.cmd.Process.Pid // its pid, reused by the bystander's group
	p := &proc{cmd: gone, exited: make(chan struct{}), dead: make(chan struct{})}
	close(p.exited)
	p.kill()

	by.requireAlive(t, "the bystander's group was killed")
}

// bystander is a process that tests must not kill: cat, which echoes a
// line while alive; once SIGKILLed its stdout ends.
type bystander struct {
	cmd *exec.Cmd
	in  io.Writer
	out *bufio.Reader
}

// startBystander starts a bystander (in a process group of its own when
// setpgid), killed at the test's end.
func startBystander(t *testing.T, setpgid bool) *bystander {
	t.Helper()
	cmd := exec.Command("cat")
	if setpgid {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	}
	in, err := cmd.StdinPipe()
	require.NoError(t, err)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return &bystander{cmd: cmd, in: in, out: bufio.NewReader(out)}
}

// requireAlive fails t with msg unless the bystander still echoes a line.
func (b *bystander) requireAlive(t *testing.T, msg string) {
	t.Helper()
	_, err := b.in.Write([]byte("alive\n"))
	require.NoError(t, err, msg)
	line, err := b.out.ReadString('\n')
	require.NoError(t, err, msg)
	require.Equal(t, "alive\n", line)
}
