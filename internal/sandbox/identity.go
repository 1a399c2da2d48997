//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// DefaultSandboxUser is the host account sandboxes run as when the emulator
// runs as root and Options.SandboxUser is "".
const DefaultSandboxUser = "nobody"

// hostID is the unprivileged host identity sandboxes run as when the
// emulator is root.
type hostID struct {
	uid, gid int
	setpriv  string // path of setpriv(1), which the cgroup wrapper execs
}

// resolveSandboxUser turns Options.SandboxUser into the host identity
// sandboxes run as: nil when the emulator is not root (its sandboxes then
// run as its own, unprivileged, uid), else the user's uid and primary gid.
// The account is looked up by name or given as "uid" or "uid:gid"; uid 0
// and gid 0 are refused.
func resolveSandboxUser(spec string) (*hostID, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	if spec == "" {
		spec = DefaultSandboxUser
	}
	id := &hostID{uid: -1, gid: -1}
	uidPart, gidPart, hasGid := strings.Cut(spec, ":")
	if n, err := strconv.Atoi(uidPart); err == nil {
		id.uid = n
		if !hasGid {
			id.gid = n
			if u, err := user.LookupId(uidPart); err == nil {
				id.gid, _ = strconv.Atoi(u.Gid)
			}
		}
	} else {
		u, err := user.Lookup(uidPart)
		if err != nil {
			return nil, fmt.Errorf("sandbox: sandbox user %q: %w (use an existing account or a numeric uid[:gid])", spec, err)
		}
		id.uid, _ = strconv.Atoi(u.Uid)
		id.gid, _ = strconv.Atoi(u.Gid)
	}
	if hasGid {
		n, err := strconv.Atoi(gidPart)
		if err != nil {
			return nil, fmt.Errorf("sandbox: sandbox user %q: the gid is not a number", spec)
		}
		id.gid = n
	}
	if id.uid < 0 || id.gid < 0 || id.uid > 1<<31 || id.gid > 1<<31 {
		return nil, fmt.Errorf("sandbox: sandbox user %q: invalid uid or gid", spec)
	}
	if id.uid == 0 || id.gid == 0 {
		return nil, fmt.Errorf("sandbox: sandbox user %q is root (uid or gid 0): sandboxes must run as an unprivileged host user", spec)
	}
	p, err := exec.LookPath("setpriv")
	if err != nil {
		return nil, errors.New("sandbox: setpriv (Debian package util-linux) is needed to run sandboxes as an unprivileged user when the emulator is root")
	}
	id.setpriv = p
	return id, nil
}

// credential is the SysProcAttr credential of a process that runs as id.
func (id *hostID) credential() *syscall.Credential {
	return &syscall.Credential{Uid: uint32(id.uid), Gid: uint32(id.gid), Groups: []uint32{}}
}

// setprivArgs drops a root process (the cgroup wrapper, after it joined the
// sandbox's cgroups) to id, with no supplementary groups and no capability
// left in any set, before it execs the sandbox.
func (id *hostID) setprivArgs() []string {
	return []string{id.setpriv, "--reuid", strconv.Itoa(id.uid), "--regid", strconv.Itoa(id.gid),
		"--clear-groups", "--inh-caps=-all", "--ambient-caps=-all", "--bounding-set=-all", "--"}
}

// chown gives path to id (a no-op for a nil id).
func (id *hostID) chown(path string) error {
	if id == nil {
		return nil
	}
	return os.Lchown(path, id.uid, id.gid)
}

// checkReachable makes sure the sandbox user can reach dir: bwrap, run as
// that user, resolves the data directories' paths itself, so every
// ancestor must be searchable by others.
func (id *hostID) checkReachable(dir string) error {
	if id == nil {
		return nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	for p := filepath.Dir(abs); ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("sandbox: %w", err)
		}
		if fi.Mode().Perm()&0o001 == 0 && !ownedBy(fi, id) {
			return fmt.Errorf("sandbox: the sandbox user (uid %d) cannot reach %s: %s is not searchable by others (chmod o+x %s, or choose another directory)", id.uid, filepath.Dir(abs), p, p)
		}
		if p == "/" {
			return nil
		}
	}
}

func ownedBy(fi fs.FileInfo, id *hostID) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == id.uid && fi.Mode().Perm()&0o100 != 0
}
