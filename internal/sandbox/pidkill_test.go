//go:build linux

package sandbox

import (
	"bufio"
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
	bystander := exec.Command("cat")
	bystander.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	in, err := bystander.StdinPipe()
	require.NoError(t, err)
	out, err := bystander.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, bystander.Start())
	t.Cleanup(func() {
		_ = bystander.Process.Kill()
		_ = bystander.Wait()
	})

	gone := exec.Command("true")
	gone.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, gone.Run())
	gone.Process.Pid = bystander.Process.Pid // its pid, reused by the bystander's group
	p := &proc{cmd: gone, exited: make(chan struct{}), dead: make(chan struct{})}
	close(p.exited)
	p.kill()

	_, err = in.Write([]byte("alive\n"))
	require.NoError(t, err)
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err, "the bystander's group was killed")
	require.Equal(t, "alive\n", line)
}
