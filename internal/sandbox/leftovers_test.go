//go:build linux

package sandbox

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLeftoversOfOthersUntouched (red team): every executor start removes
// what dead executors left in its data parent, by default the shared
// temporary directory, where anyone can make a directory named like an
// executor's with a dead owner pid. One made by another user (nobody here:
// the code of a root-run -sandbox none emulator, or any local account) held
// a runsc state whose container "ran" with a bystander's pids and an OCI
// poststop hook: the next emulator started as root, whatever its -sandbox
// mode, and so every `azsessions --emulator` run by root, ran `runsc delete
// --force` on it, which ran the hook as root and SIGKILLed the bystanders.
// Directories not of the executor's own user are now left alone.
func TestLeftoversOfOthersUntouched(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root: a directory of another user")
	}
	runsc, err := exec.LookPath("runsc")
	if err != nil {
		t.Skip("runsc is not installed: the hook could not run anyway")
	}
	t.Logf("runsc: %s", runsc)
	parent := t.TempDir()
	require.NoError(t, os.Chmod(parent, 0o755))
	marker := filepath.Join(parent, "hook-ran")
	by := startBystander(t, false)

	// Pid 4194304 is above any pid_max: its owner is dead.
	planted := filepath.Join(parent, "azsessions-4194304-12345-0badf00d")
	const cid = "azs-0badf00d0badf00d"
	state := filepath.Join(planted, ".gvisor", "state")
	require.NoError(t, os.MkdirAll(state, 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(planted, ".gvisor", cid), 0o755))
	st := map[string]any{
		"id": cid, "bundleDir": filepath.Join(planted, ".gvisor", cid), "status": "running",
		"goferPid": by.cmd.Process.Pid,
		"sandbox":  map[string]any{"id": cid, "pid": by.cmd.Process.Pid},
		"saver":    map[string]any{"rootDir": state, "id": map[string]string{"sandboxId": cid, "containerId": cid}},
		"spec": map[string]any{
			"ociVersion": "1.0.2",
			"process":    map[string]any{"args": []string{"/bin/true"}, "cwd": "/"},
			"root":       map[string]any{"path": "/"},
			"hooks": map[string]any{"poststop": []map[string]any{{
				"path": "/bin/sh", "args": []string{"sh", "-c", "id > " + marker},
			}}},
		},
	}
	data, err := json.Marshal(st)
	require.NoError(t, err)
	name := cid + "_sandbox:" + cid
	require.NoError(t, os.WriteFile(filepath.Join(state, name+".state"), data, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(state, name+".lock"), nil, 0o644))
	require.NoError(t, filepath.Walk(planted, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, 65534, 65534)
	}))

	removed := removeLeftovers(parent)
	require.NotContains(t, removed, planted)
	require.DirExists(t, planted, "another user's directory was removed")
	require.NoFileExists(t, marker, "runsc ran the planted poststop hook as root")
	by.requireAlive(t, "the bystander was killed")
}
