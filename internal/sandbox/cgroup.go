//go:build linux

package sandbox

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// cgroups places each sandbox in its own cgroup with a memory, a pids and a
// CPU limit, and a freezer that stops it while its data directory is
// measured. It supports cgroup v2 (unified) and the v1 "memory", "pids",
// "cpu", "cpuacct" and "freezer" hierarchies, creating its groups below the
// cgroup the emulator itself runs in. The executor's group is named after the owning
// process (see ownerName), so that a later executor can remove the groups
// of one that was killed.
type cgroups struct {
	version int      // 1 or 2
	bases   []string // executor-level group dirs (one per v1 hierarchy, one for v2)
	memory  string   // base that holds the memory controller ("" = none)
	pids    string   // base that holds the pids controller ("" = none)
	cpu     string   // base that holds the cpu controller ("" = none)
	cpuacct string   // base that accounts CPU time (v1 cpuacct, or the v2 base)
	freezer string   // base that can freeze its groups (v1 freezer, or the v2 base; "" = none)
	// cloneIntoFailed: starting a sandbox with CLONE_INTO_CGROUP failed and
	// the wrapper worked (see chooseCgroupJoin); the wrapper from then on.
	cloneIntoFailed atomic.Bool
	// oomOff: the kernel's OOM killer is off in the pool's memory group
	// (the pool's OOM policy, see watchPoolOOM); each sandbox's group turns
	// it on again for its own limit.
	oomOff atomic.Bool

	// setsMu guards sets: the sandboxes' groups that exist (created and
	// not yet removed), among which the pool's OOM policy picks (oom.go).
	setsMu sync.Mutex
	sets   map[*cgroupSet]struct{}
}

// cgroupSet is one sandbox's groups.
type cgroupSet struct {
	owner   *cgroups
	dirs    []string
	v2      bool
	cpu     string // the set's group of the cpu controller ("" = none)
	cpuacct string // the set's group that accounts CPU time ("" = none)
	memory  string // the set's group of the memory controller ("" = none)
	freezer string // the set's group that can be frozen ("" = none)
	// freezeMu guards frozen, the number of freeze calls not yet thawed
	// (measurements may overlap: the idle watcher's and DataDirSpace's).
	freezeMu sync.Mutex
	frozen   int
	// killing is set by forceThaw while it waits for freezeMu: a freeze
	// waiting for the set's tasks gives up at once.
	killing atomic.Bool
	// oomKilled: the pool's OOM policy killed the set's processes (the
	// sandboxes together reached the pool's memory limit and this one held
	// the most; see Executor.arbitrateOOM).
	oomKilled atomic.Bool
}

// cfsPeriodUS is the CFS bandwidth period of the CPU limit, in µs.
const cfsPeriodUS = 100_000

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// ownCgroups maps controller names ("" for the v2 unified hierarchy) to the
// path of this process's cgroup.
func ownCgroups() (map[string]string, error) {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			m[c] = parts[2]
		}
	}
	return m, nil
}

// cgroupMounts maps v1 controller names, and "" for cgroup2, to mount points.
func cgroupMounts() map[string]string {
	m := map[string]string{}
	f, err := os.Open("/proc/self/mounts")
	if err != nil {
		return m
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 4 {
			continue
		}
		switch fields[2] {
		case "cgroup2":
			if _, ok := m[""]; !ok {
				m[""] = fields[1]
			}
		case "cgroup":
			for _, o := range strings.Split(fields[3], ",") {
				switch o {
				case "memory", "pids", "cpu", "cpuacct", "freezer":
					m[o] = fields[1]
				}
			}
		}
	}
	return m
}

// newCgroups creates the executor's cgroups, or returns an error saying why
// cgroups cannot be used (the caller falls back to rlimits).
func newCgroups() (*cgroups, error) {
	own, err := ownCgroups()
	if err != nil {
		return nil, err
	}
	mounts := cgroupMounts()
	name := ownerName()
	// cgroup v2 when the unified hierarchy has the controllers we need.
	if mp, ok := mounts[""]; ok {
		if p, ok := own[""]; ok {
			if cg, err := newCgroupsV2(filepath.Join(mp, p), name); err == nil {
				return cg, nil
			}
		}
	}
	cg := &cgroups{version: 1}
	byMount := map[string]string{} // co-mounted controllers (cpu,cpuacct) share a dir
	for _, ctrl := range []string{"pids", "memory", "cpu", "cpuacct", "freezer"} {
		mp, ok := mounts[ctrl]
		if !ok {
			continue
		}
		p, ok := own[ctrl]
		if !ok {
			continue
		}
		dir, ok := byMount[mp]
		if !ok {
			dir = filepath.Join(mp, p, name)
			if err := os.Mkdir(dir, 0o755); err != nil {
				continue
			}
			byMount[mp] = dir
			cg.bases = append(cg.bases, dir)
		}
		switch ctrl {
		case "pids":
			cg.pids = dir
		case "memory":
			cg.memory = dir
		case "cpu":
			cg.cpu = dir
		case "cpuacct":
			cg.cpuacct = dir
		case "freezer":
			cg.freezer = dir
		}
	}
	if cg.pids == "" {
		cg.remove()
		return nil, errors.New("no writable pids cgroup")
	}
	return cg, nil
}

func newCgroupsV2(parent, name string) (*cgroups, error) {
	ctrls, err := os.ReadFile(filepath.Join(parent, "cgroup.controllers"))
	if err != nil {
		return nil, err
	}
	has := map[string]bool{}
	for _, c := range strings.Fields(string(ctrls)) {
		has[c] = true
	}
	if !has["pids"] {
		return nil, errors.New("cgroup v2 without the pids controller")
	}
	dir := filepath.Join(parent, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, err
	}
	cg := &cgroups{version: 2, bases: []string{dir}}
	enable := "+pids"
	for _, c := range []string{"memory", "cpu"} {
		if has[c] {
			enable += " +" + c
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte(enable), 0o644); err != nil {
		cg.remove()
		return nil, err
	}
	// cpu.stat's usage_usec and cgroup.freeze (Linux 5.2) are in every
	// non-root group.
	cg.pids, cg.cpuacct = dir, dir
	if _, err := os.Stat(filepath.Join(dir, "cgroup.freeze")); err == nil {
		cg.freezer = dir
	}
	if has["memory"] {
		cg.memory = dir
	}
	if has["cpu"] {
		cg.cpu = dir
	}
	return cg, nil
}

// describe says which limits the cgroups enforce.
func (c *cgroups) describe() string {
	s := fmt.Sprintf("cgroup v%d pids", c.version)
	if c.memory != "" {
		s += "+memory"
	}
	if c.cpu != "" {
		s += "+cpu"
	}
	return s
}

// create makes the groups of one sandbox with the given limits (cpus in
// cores; 0 = no CPU limit).
func (c *cgroups) create(name string, memBytes int64, maxProcs int, cpus float64) (*cgroupSet, error) {
	set := &cgroupSet{owner: c, v2: c.version == 2}
	write := func(dir, file, val string) error {
		return os.WriteFile(filepath.Join(dir, file), []byte(val), 0o644)
	}
	for _, base := range c.bases {
		dir := filepath.Join(base, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			set.remove()
			return nil, err
		}
		set.dirs = append(set.dirs, dir)
		if base == c.cpu {
			set.cpu = dir
		}
		if base == c.cpuacct {
			set.cpuacct = dir
		}
		if base == c.memory {
			set.memory = dir
		}
		if base == c.freezer {
			set.freezer = dir
		}
		quota := strconv.FormatInt(int64(cpus*cfsPeriodUS), 10)
		var err error
		switch {
		case c.version == 2:
			if maxProcs > 0 {
				err = write(dir, "pids.max", strconv.Itoa(maxProcs))
			}
			if err == nil && c.memory != "" && memBytes > 0 {
				err = write(dir, "memory.max", strconv.FormatInt(memBytes, 10))
				_ = write(dir, "memory.swap.max", "0")
			}
			if err == nil && c.cpu != "" && cpus > 0 {
				err = write(dir, "cpu.max", quota+" "+strconv.Itoa(cfsPeriodUS))
			}
		default: // v1: a base may hold several controllers (co-mounted)
			if base == c.pids && maxProcs > 0 {
				err = write(dir, "pids.max", strconv.Itoa(maxProcs))
			}
			if err == nil && base == c.memory && memBytes > 0 {
				err = write(dir, "memory.limit_in_bytes", strconv.FormatInt(memBytes, 10))
				_ = write(dir, "memory.memsw.limit_in_bytes", strconv.FormatInt(memBytes, 10))
			}
			if err == nil && base == c.memory && c.oomOff.Load() {
				// A new group inherits oom_kill_disable from its parent,
				// where the pool's OOM policy set it (oom.go); the
				// sandbox's own limit is the kernel's to enforce: without
				// this its processes waited past its limit until the
				// execution's timeout (TestPoolOOMPolicyKeepsSandboxLimit).
				err = write(dir, "memory.oom_control", "0")
			}
			if err == nil && base == c.cpu && cpus > 0 {
				err = write(dir, "cpu.cfs_period_us", strconv.Itoa(cfsPeriodUS))
				if err == nil {
					err = write(dir, "cpu.cfs_quota_us", quota)
				}
			}
		}
		if err != nil {
			set.remove()
			return nil, err
		}
	}
	c.setsMu.Lock()
	if c.sets == nil {
		c.sets = map[*cgroupSet]struct{}{}
	}
	c.sets[set] = struct{}{}
	c.setsMu.Unlock()
	return set, nil
}

// liveSets are the sandboxes' groups that exist now.
func (c *cgroups) liveSets() []*cgroupSet {
	c.setsMu.Lock()
	defer c.setsMu.Unlock()
	sets := make([]*cgroupSet, 0, len(c.sets))
	for s := range c.sets {
		sets = append(sets, s)
	}
	return sets
}

// procsFiles are the files a process writes its pid into to join the set.
func (s *cgroupSet) procsFiles() []string {
	var files []string
	for _, d := range s.dirs {
		files = append(files, filepath.Join(d, "cgroup.procs"))
	}
	return files
}

// cpuUsage is the CPU time the set's processes used, from cpuacct.usage (v1)
// or cpu.stat's usage_usec (v2).
func (s *cgroupSet) cpuUsage() (time.Duration, error) {
	if s == nil || s.cpuacct == "" {
		return 0, errors.New("no CPU accounting cgroup")
	}
	if !s.v2 {
		data, err := os.ReadFile(filepath.Join(s.cpuacct, "cpuacct.usage"))
		if err != nil {
			return 0, err
		}
		ns, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
		return time.Duration(ns), err
	}
	us, err := s.cpuStat("usage_usec")
	return time.Duration(us) * time.Microsecond, err
}

// memoryUsage is the memory charged to the set (memory.usage_in_bytes or
// memory.current): its processes' pages, and the tmpfs pages they wrote.
func (s *cgroupSet) memoryUsage() (int64, error) {
	if s == nil || s.memory == "" {
		return 0, errors.New("no memory cgroup")
	}
	file := "memory.usage_in_bytes"
	if s.v2 {
		file = "memory.current"
	}
	data, err := os.ReadFile(filepath.Join(s.memory, file))
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
}

// cpuStat reads one field of the cpu controller's cpu.stat (e.g.
// nr_throttled).
func (s *cgroupSet) cpuStat(field string) (int64, error) {
	dir := s.cpu
	if s.v2 {
		dir = s.cpuacct
	}
	if dir == "" {
		return 0, errors.New("no cpu cgroup")
	}
	data, err := os.ReadFile(filepath.Join(dir, "cpu.stat"))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, field+" "); ok {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, fmt.Errorf("cpu.stat has no %s", field)
}

// pids lists the processes in the set. Every process of the set is in
// each of its groups (one per v1 hierarchy), so the first group that can be
// read lists them all.
func (s *cgroupSet) pids() []int {
	for _, d := range s.dirs {
		data, err := readProcFile(filepath.Join(d, "cgroup.procs"))
		if err != nil {
			continue
		}
		var out []int
		for _, f := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil {
				out = append(out, pid)
			}
		}
		return out
	}
	return nil
}

// readProcFile reads a small pseudo-file (cgroup.procs) with plain system
// calls: os.ReadFile would also register the descriptor with the runtime's
// poller, which costs as much again, and pids runs twice per cell.
func readProcFile(path string) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	buf := make([]byte, 0, 512)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := unix.Read(fd, buf[len(buf):cap(buf)])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "read", Path: path, Err: err}
		}
		if n == 0 {
			return buf, nil
		}
		buf = buf[:len(buf)+n]
	}
}

// kill SIGKILLs every process in the set, waits up to wait for them to go and
// removes the groups. It reports whether the set was seen empty (every
// process of it gone; false for a nil set).
func (s *cgroupSet) kill(wait time.Duration) (empty bool) {
	if s == nil {
		return false
	}
	empty = s.killAll(wait)
	s.remove()
	return empty
}

// killAll SIGKILLs every process in the set until none is left or wait has
// passed, and reports whether the set was seen empty. It leaves the groups.
func (s *cgroupSet) killAll(wait time.Duration) (empty bool) {
	deadline := time.Now().Add(wait)
	for {
		if s.v2 {
			for _, d := range s.dirs {
				_ = os.WriteFile(filepath.Join(d, "cgroup.kill"), []byte("1"), 0o644)
			}
		}
		pids := s.pids()
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		// A v1 frozen task takes its SIGKILL only once thawed (a
		// measurement may hold the set frozen, or a killed emulator have
		// left it so); v2's cgroup.kill reaches frozen tasks.
		s.forceThaw()
		if len(pids) == 0 {
			empty = true
			break
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	return empty
}

// freezeWait bounds how long one attempt of freeze waits for the set's
// tasks to stop, and freezeTries how many attempts it makes: under
// gVisor's ptrace platform a v1 freeze sometimes stays FREEZING (a stub
// task in ptrace_stop with its tracer frozen; 4 of 300 freezes of a
// sandbox renaming in a loop took over a second, one over 5 s), and
// thawing and freezing again gets past it.
const (
	freezeWait  = 100 * time.Millisecond
	freezeTries = 20
)

// freezePatientTries is how many attempts a patient freeze (freeze(true):
// a bwrap sandbox) makes, the first of freezeWait, each twice as long as
// the last (12.7 s in all, the last 6.4 s). A task in an uninterruptible
// sleep (sync or fsync waiting for the disk, a page fault waiting for
// memory) stops only when its system call returns, and an attempt keeps
// the set FREEZING, so that the tasks that stopped start nothing new:
// one as long as the sleep succeeds. Red team: a session's os.sync() while
// other sessions wrote to the disk took over 2 s, the 20 tries of 100 ms
// ran out, and the session was killed as "cannot be measured"
// (TestFreezeWaitsForUninterruptibleSleep). The attempts still end with a
// thaw: a thread that calls execve in a process whose other threads are
// frozen waits for them to die, uninterruptibly, and they die only once
// thawed (3 of 150 freezes of a process exec'ing itself beside 4 threads
// hung so, red team).
const freezePatientTries = 7

// errNoFreezer says that a set cannot be frozen (no freezer hierarchy).
var errNoFreezer = errors.New("no freezer cgroup")

// errNotFrozen says that freezing a set failed.
var errNotFrozen = errors.New("the sandbox could not be frozen to measure it")

// freeze stops every task of the set (cgroup v1 freezer.state FROZEN, v2
// cgroup.freeze 1) and returns once they all are, so that nothing of the
// sandbox changes its data directory while it is measured; thaw undoes it.
// Calls nest: the set runs again after as many thaws as freezes. It fails
// with errNoFreezer without a freezer group, else with errNotFrozen when
// the tasks did not all stop in freezeTries attempts of freezeWait (the
// set is then thawed) or the group could not be written. A patient freeze
// makes longer attempts (see freezePatientTries); forceThaw ends any
// attempt.
func (s *cgroupSet) freeze(patient bool) error {
	if s == nil || s.freezer == "" {
		return errNoFreezer
	}
	s.freezeMu.Lock()
	defer s.freezeMu.Unlock()
	if s.frozen > 0 {
		s.frozen++
		return nil
	}
	tries, wait, total := freezeTries, freezeWait, time.Duration(0)
	if patient {
		tries = freezePatientTries
	}
	var err error
	for range tries {
		var done bool
		if done, err = s.tryFreeze(wait); done {
			s.frozen = 1
			return nil
		}
		s.writeThawed()
		if err != nil {
			break
		}
		total += wait
		if patient {
			wait *= 2
		}
	}
	if err == nil {
		err = fmt.Errorf("its tasks did not stop in %d tries (%v)", tries, total)
	}
	return fmt.Errorf("%w: %w", errNotFrozen, err)
}

// errKilling says that forceThaw ended a freeze.
var errKilling = errors.New("the sandbox is being killed")

// tryFreeze asks the set's tasks to stop and waits up to wait for them to
// be, unless forceThaw wants the set.
func (s *cgroupSet) tryFreeze(wait time.Duration) (bool, error) {
	file, val := "freezer.state", "FROZEN"
	if s.v2 {
		file, val = "cgroup.freeze", "1"
	}
	if err := os.WriteFile(filepath.Join(s.freezer, file), []byte(val), 0o644); err != nil {
		return false, err
	}
	deadline := time.Now().Add(wait)
	for pause := 20 * time.Microsecond; ; pause = min(2*pause, 5*time.Millisecond) {
		done, err := s.isFrozen()
		if err != nil || done || time.Now().After(deadline) {
			return done, err
		}
		if s.killing.Load() {
			return false, errKilling
		}
		// v1 completes the transition when freezer.state is read, v2
		// reports it in cgroup.events: poll both (v1 has no event).
		time.Sleep(pause)
	}
}

// isFrozen reports whether every task of the set is stopped.
func (s *cgroupSet) isFrozen() (bool, error) {
	if !s.v2 {
		data, err := readProcFile(filepath.Join(s.freezer, "freezer.state"))
		return strings.TrimSpace(string(data)) == "FROZEN", err
	}
	data, err := readProcFile(filepath.Join(s.freezer, "cgroup.events"))
	if err != nil {
		return false, err
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "frozen "); ok {
			return v == "1", nil
		}
	}
	return false, errors.New("cgroup.events has no frozen field")
}

// thaw undoes one freeze: the set's tasks run again after the last.
func (s *cgroupSet) thaw() {
	s.freezeMu.Lock()
	defer s.freezeMu.Unlock()
	if s.frozen == 0 {
		return
	}
	if s.frozen--; s.frozen == 0 {
		s.writeThawed()
	}
}

// forceThaw thaws the set whatever froze it (killAll: a SIGKILLed v1
// task dies only once thawed). A measurement that still holds the set
// finds its tasks gone.
func (s *cgroupSet) forceThaw() {
	s.killing.Store(true) // a freeze waiting for the tasks gives up
	s.freezeMu.Lock()
	defer s.freezeMu.Unlock()
	s.killing.Store(false)
	s.writeThawed()
	for _, d := range s.dirs {
		if d != s.freezer {
			// A leftover set (removeCgroupTree) knows its directories
			// only: thaw any that is a freezer group.
			_ = writeIfExists(filepath.Join(d, "freezer.state"), "THAWED")
		}
	}
}

// writeThawed lets the set's tasks run again.
func (s *cgroupSet) writeThawed() {
	if s.freezer == "" {
		return
	}
	if s.v2 {
		_ = os.WriteFile(filepath.Join(s.freezer, "cgroup.freeze"), []byte("0"), 0o644)
		return
	}
	_ = os.WriteFile(filepath.Join(s.freezer, "freezer.state"), []byte("THAWED"), 0o644)
}

// writeIfExists writes val to the existing file path (never creating it).
func writeIfExists(path, val string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(val)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func (s *cgroupSet) remove() {
	if s.owner != nil {
		s.owner.setsMu.Lock()
		delete(s.owner.sets, s)
		s.owner.setsMu.Unlock()
	}
	for i := len(s.dirs) - 1; i >= 0; i-- {
		// rmdir fails while a zombie is still charged; retry briefly.
		for try := 0; try < 50; try++ {
			if err := os.Remove(s.dirs[i]); err == nil || os.IsNotExist(err) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// remove deletes the executor's groups (they must be empty).
func (c *cgroups) remove() {
	for _, b := range c.bases {
		_ = os.Remove(b)
	}
}

// limitPool sets the pool-wide limits on the executor's groups, the parents
// of every sandbox's groups, so that the kernel enforces them on all the
// sandboxes together: memBytes on the memory group (0: none) and tasks on
// the pids group (0: none). memory reports whether the memory limit is in
// force: a v1 memory group must account its children hierarchically
// (memory.use_hierarchy 1, inherited from the parent; it can be set only
// while the group has no children, i.e. here).
func (c *cgroups) limitPool(memBytes int64, tasks int) (memory bool, err error) {
	write := func(dir, file, val string) error {
		return os.WriteFile(filepath.Join(dir, file), []byte(val), 0o644)
	}
	if c.pids != "" && tasks > 0 {
		if err := write(c.pids, "pids.max", strconv.Itoa(tasks)); err != nil {
			return false, fmt.Errorf("pool-wide pids.max: %w", err)
		}
	}
	if c.memory == "" || memBytes <= 0 {
		return false, nil
	}
	v := strconv.FormatInt(memBytes, 10)
	if c.version == 2 {
		if err := write(c.memory, "memory.max", v); err != nil {
			return false, fmt.Errorf("pool-wide memory.max: %w", err)
		}
		_ = write(c.memory, "memory.swap.max", "0")
		return true, nil
	}
	if h, err := os.ReadFile(filepath.Join(c.memory, "memory.use_hierarchy")); err != nil {
		return false, fmt.Errorf("pool-wide memory limit: %w", err)
	} else if strings.TrimSpace(string(h)) != "1" {
		if err := write(c.memory, "memory.use_hierarchy", "1"); err != nil {
			return false, fmt.Errorf("pool-wide memory limit: the memory cgroup does not account its children (memory.use_hierarchy 0): %w", err)
		}
	}
	if err := write(c.memory, "memory.limit_in_bytes", v); err != nil {
		return false, fmt.Errorf("pool-wide memory.limit_in_bytes: %w", err)
	}
	_ = write(c.memory, "memory.memsw.limit_in_bytes", v) // absent without swap accounting
	return true, nil
}

// poolMemory is the memory the sandboxes use together, as admission counts
// it: the working set of the executor's memory group (see workingSet).
func (c *cgroups) poolMemory() (int64, error) {
	return workingSet(c.memory, c.version == 2)
}

// workingSet is the charge of the memory group dir less its inactive file
// pages, which the kernel reclaims first when the group reaches its limit
// (the "working set" of kubelet and cAdvisor). Files written to /mnt/data
// stay in the page cache charged to the group, so its raw usage tends to the
// limit over time without being memory in use.
func workingSet(dir string, v2 bool) (int64, error) {
	usage, stat, inactive := "memory.usage_in_bytes", "memory.stat", "total_inactive_file "
	if v2 {
		usage, inactive = "memory.current", "inactive_file "
	}
	data, err := readProcFile(filepath.Join(dir, usage))
	if err != nil {
		return 0, err
	}
	used, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	if err != nil {
		return 0, err
	}
	if data, err = readProcFile(filepath.Join(dir, stat)); err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, inactive); ok {
			if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil && n <= used {
				used -= n
			}
			break
		}
	}
	return used, nil
}

// poolTasks is the number of tasks (threads) in the executor's pids group.
func (c *cgroups) poolTasks() (int64, error) {
	data, err := readProcFile(filepath.Join(c.pids, "pids.current"))
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
}

// hostTasks is the number of tasks the host can have: the smaller of
// kernel.pid_max and kernel.threads-max.
func hostTasks() (int, error) {
	n := 0
	for _, f := range []string{"/proc/sys/kernel/pid_max", "/proc/sys/kernel/threads-max"} {
		data, err := os.ReadFile(f)
		if err != nil {
			return 0, err
		}
		v, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil {
			return 0, err
		}
		if n == 0 || v < n {
			n = v
		}
	}
	return n, nil
}
