//go:build linux

package sandbox

import (
	"os"
)

// cgroupJoin is how a sandbox's first process enters its cgroups (and so
// every process it starts).
type cgroupJoin int

const (
	// joinNone: no cgroups (limits by rlimits only).
	joinNone cgroupJoin = iota
	// joinWrapper: a shell writes its pid into each group's cgroup.procs,
	// then execs the sandbox (cgroupWrap). Cgroup v1 needs it (a process
	// joins one group per hierarchy, clone3 takes one group), and so does
	// v2 when CLONE_INTO_CGROUP is not usable.
	joinWrapper
	// joinAtClone: the process is created in its group by clone3 with
	// CLONE_INTO_CGROUP (SysProcAttr.UseCgroupFD, cgroup v2, Linux 5.7):
	// no shell, and no moment when it runs outside its limits.
	joinAtClone
)

// chooseCgroupJoin decides how a sandbox joins its cgroups: none without
// cgroups; at clone on cgroup v2 when the set is one group whose directory
// could be opened (dirFD) and clone3 into a cgroup has not already failed
// on this host (cloneFailed); the wrapper otherwise (every v1 set).
func chooseCgroupJoin(haveCgroup, v2 bool, groups int, dirFD, cloneFailed bool) cgroupJoin {
	switch {
	case !haveCgroup:
		return joinNone
	case v2 && groups == 1 && dirFD && !cloneFailed:
		return joinAtClone
	default:
		return joinWrapper
	}
}

// cgroupEntry is the decision for one start: the mode and, for joinAtClone,
// the open directory of the set's group (closed by close once started).
type cgroupEntry struct {
	mode cgroupJoin
	dir  *os.File
}

// cgroupEntryFor opens the directory of cg's group when the v2 path may be
// taken and decides with chooseCgroupJoin.
func (e *Executor) cgroupEntryFor(cg *cgroupSet) cgroupEntry {
	if cg == nil {
		return cgroupEntry{mode: joinNone}
	}
	failed := e.cg == nil || e.cg.cloneIntoFailed.Load()
	var dir *os.File
	if cg.v2 && len(cg.dirs) == 1 && !failed {
		if f, err := os.Open(cg.dirs[0]); err == nil {
			dir = f
		}
	}
	mode := chooseCgroupJoin(true, cg.v2, len(cg.dirs), dir != nil, failed)
	if mode != joinAtClone && dir != nil {
		_ = dir.Close()
		dir = nil
	}
	return cgroupEntry{mode: mode, dir: dir}
}

// close closes the group's directory, if open.
func (c cgroupEntry) close() {
	if c.dir != nil {
		_ = c.dir.Close()
	}
}
