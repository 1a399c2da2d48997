//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ownerPrefix starts the names of what an executor leaves on the host: its
// directory (the base of its kernels' data directories) and its cgroups.
const ownerPrefix = "azsessions-"

var (
	selfStartOnce sync.Once
	selfStart     string
)

// ownerName is a new name for an executor's directory or cgroup:
// "azsessions-<pid>-<start>-<random>", where pid and start (the process's
// start time in clock ticks since boot, /proc/<pid>/stat field 22) identify
// the owning process even after its pid is reused.
func ownerName() string {
	selfStartOnce.Do(func() { selfStart = processStart(os.Getpid()) })
	return fmt.Sprintf("%s%d-%s-%s", ownerPrefix, os.Getpid(), selfStart, randHex(4))
}

// processStart is the start time of pid (field 22 of /proc/<pid>/stat), ""
// when the process does not exist.
func processStart(pid int) string {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(string(data[i+1:])) // fields 3...
	if len(f) < 20 {
		return ""
	}
	return f[19]
}

// ownerDead says whether name (an entry named by ownerName, or by earlier
// versions "azsessions-<pid>-<random>") belongs to a process that no longer
// runs. It answers false when in doubt: a name it does not know, our own
// process, or a process with that pid that is alive (for names without a
// start time, whatever that process is).
func ownerDead(name string) bool {
	rest, ok := strings.CutPrefix(name, ownerPrefix)
	if !ok {
		return false
	}
	parts := strings.Split(rest, "-")
	if len(parts) < 2 {
		return false
	}
	pid, err := strconv.Atoi(parts[0])
	if err != nil || pid <= 0 || pid == os.Getpid() {
		return false
	}
	start := processStart(pid)
	if len(parts) == 3 {
		if _, err := strconv.ParseUint(parts[1], 10, 64); err != nil {
			return false
		}
		return start != parts[1] // gone, or the pid now names another process
	}
	// An older name without the start time: only a pid nobody has is dead.
	return start == "" && !pidExists(pid)
}

func pidExists(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// removeLeftovers removes what executors killed before their Close left:
// directories named by ownerName under dataParent (the temporary directory,
// or Options.DataDir), and cgroups named so under our own cgroups. Only
// entries whose owning process is gone are touched, so executors of other
// processes that still run keep theirs. It returns what it removed, for the
// log.
func removeLeftovers(dataParent string) []string {
	var removed []string
	if ents, err := os.ReadDir(dataParent); err == nil {
		for _, ent := range ents {
			if !ent.IsDir() || !ownerDead(ent.Name()) {
				continue
			}
			dir := filepath.Join(dataParent, ent.Name())
			if !ownDir(dir) {
				// Not an executor's: anyone can make a directory of that
				// name in a shared temporary directory (red team: a fake
				// runsc state in it made gvisorLeftovers' runsc run its OCI
				// poststop hook as root and SIGKILL the pids it named).
				continue
			}
			gvisorLeftovers(dir)
			if err := removeTree(dir); err == nil {
				removed = append(removed, dir)
			}
		}
	}
	own, err := ownCgroups()
	if err != nil {
		return removed
	}
	mounts := cgroupMounts()
	seen := map[string]bool{}
	for ctrl, mp := range mounts {
		p, ok := own[ctrl]
		if !ok {
			continue
		}
		parent := filepath.Join(mp, p)
		if seen[parent] {
			continue
		}
		seen[parent] = true
		ents, err := os.ReadDir(parent)
		if err != nil {
			continue
		}
		for _, ent := range ents {
			if !ent.IsDir() || !ownerDead(ent.Name()) {
				continue
			}
			dir := filepath.Join(parent, ent.Name())
			if removeCgroupTree(dir) == nil {
				removed = append(removed, dir)
			}
		}
	}
	return removed
}

// ownDir reports whether dir is a directory (not a symlink) of the
// executor's own user that no one else may write to: what prepareDirs and
// gvisorArgs make (0711, 0700). Only such a directory is an executor's
// leftover, and only such a runsc root is handed to runsc, which trusts its
// state files (the container's pids, its OCI hooks).
func ownDir(dir string) bool {
	fi, err := os.Lstat(dir)
	if err != nil || !fi.IsDir() {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Geteuid() && fi.Mode().Perm()&0o022 == 0
}

// removeTree removes a directory tree that sandboxed code wrote, making
// directories it chmod-ed away writable again.
func removeTree(dir string) error {
	if err := os.RemoveAll(dir); err == nil {
		return nil
	}
	_ = filepath.WalkDir(dir, func(path string, ent fs.DirEntry, err error) error {
		if ent != nil && ent.IsDir() {
			_ = os.Chmod(path, 0o700)
		}
		return nil
	})
	return os.RemoveAll(dir)
}

// removeCgroupTree kills what still runs in a cgroup and its children and
// removes them, deepest first.
func removeCgroupTree(dir string) error {
	ents, _ := os.ReadDir(dir)
	var errs []error
	for _, ent := range ents {
		if ent.IsDir() {
			errs = append(errs, removeCgroupTree(filepath.Join(dir, ent.Name())))
		}
	}
	set := &cgroupSet{dirs: []string{dir}}
	_, err := os.Stat(filepath.Join(dir, "cgroup.kill"))
	set.v2 = err == nil
	set.kill(3 * time.Second)
	if _, err := os.Stat(dir); err == nil {
		errs = append(errs, fmt.Errorf("cgroup %s could not be removed", dir))
	}
	return errors.Join(errs...)
}
