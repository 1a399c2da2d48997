//go:build linux

package sandbox

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestChooseCgroupJoin: cgroup v1 always joins with the wrapper; cgroup v2
// starts the sandbox in its group (CLONE_INTO_CGROUP) when the set is one
// group whose directory opened and clone3 into a cgroup has not failed
// before; no cgroups, no joining.
func TestChooseCgroupJoin(t *testing.T) {
	tests := []struct {
		name               string
		haveCgroup, v2     bool
		groups             int
		dirFD, cloneFailed bool
		want               cgroupJoin
	}{
		{"no cgroups", false, false, 0, false, false, joinNone},
		{"no cgroups, v2 host", false, true, 0, true, false, joinNone},
		{"v1, one hierarchy", true, false, 1, true, false, joinWrapper},
		{"v1, four hierarchies", true, false, 4, false, false, joinWrapper},
		{"v2 with its directory", true, true, 1, true, false, joinAtClone},
		{"v2, directory did not open", true, true, 1, false, false, joinWrapper},
		{"v2, clone3 failed before", true, true, 1, true, true, joinWrapper},
		{"v2, not one group", true, true, 2, true, false, joinWrapper},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, chooseCgroupJoin(tt.haveCgroup, tt.v2, tt.groups, tt.dirFD, tt.cloneFailed))
		})
	}
}

// TestCgroupJoinCommand: what each mode puts on the command line and in
// SysProcAttr: the wrapper shell writes the pid into every cgroup.procs and,
// as root, drops to the sandbox user with setpriv; at clone there is no
// shell (the process starts in its group: UseCgroupFD with the group's
// directory) and only the drop remains, none under gVisor (runsc drops
// itself); without cgroups the arguments are unchanged. The machines this
// runs on are cgroup v1, so the at-clone start itself is not exercised.
func TestCgroupJoinCommand(t *testing.T) {
	dir := t.TempDir()
	cg := &cgroupSet{dirs: []string{dir}, v2: true}
	id := &hostID{uid: 1000, gid: 1000, setpriv: "/usr/bin/setpriv"}
	args := []string{"/usr/bin/bwrap", "--", "python3"}
	tests := []struct {
		name      string
		mode      cgroupJoin
		sandbox   string
		id        *hostID
		wantFirst string // first argument
		wantShell bool
		wantFD    bool
	}{
		{"none", joinNone, ModeBwrap, id, "/usr/bin/bwrap", false, false},
		{"wrapper as root", joinWrapper, ModeBwrap, id, "/bin/sh", true, false},
		{"wrapper as user", joinWrapper, ModeBwrap, nil, "/bin/sh", true, false},
		{"at clone as root", joinAtClone, ModeBwrap, id, "/usr/bin/setpriv", false, true},
		{"at clone as user", joinAtClone, ModeBwrap, nil, "/usr/bin/bwrap", false, true},
		{"at clone, gVisor", joinAtClone, ModeGvisor, id, "/usr/bin/bwrap", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := &Executor{opts: Options{Mode: tt.sandbox}, id: tt.id}
			entry := cgroupEntry{mode: tt.mode}
			if tt.mode == joinAtClone {
				f, err := os.Open(dir)
				require.NoError(t, err)
				defer f.Close()
				entry.dir = f
			}
			got := e.cgroupWrap(cg, tt.mode, args)
			require.Equal(t, tt.wantFirst, got[0])
			require.Equal(t, args, got[len(got)-len(args):], "the sandbox's own arguments come last")
			if tt.wantShell {
				require.Contains(t, got, dir+"/cgroup.procs")
			} else {
				require.NotContains(t, got, dir+"/cgroup.procs")
			}
			if tt.id != nil && tt.sandbox != ModeGvisor && tt.mode != joinNone {
				require.Contains(t, got, "--bounding-set=-all", "root drops to the sandbox user")
			}
			cmd := e.procCommand(got, dir, nil, cg, entry)
			require.Equal(t, tt.wantFD, cmd.SysProcAttr.UseCgroupFD)
			if tt.wantFD {
				require.Equal(t, int(entry.dir.Fd()), cmd.SysProcAttr.CgroupFD)
			}
			require.Nil(t, cmd.SysProcAttr.Credential, "a process with cgroups drops privileges with setpriv")
		})
	}
}
