//go:build linux

package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// The pool's OOM policy (cgroup v1).
//
// When the sandboxes together reach the pool-wide memory limit (the limit of
// the executor's memory group, MaxTotalMemoryBytes), the kernel's OOM killer
// would pick the process with the largest resident set plus its
// oom_score_adj. That is the wrong measure for a sandbox: under gVisor a
// session's memory is its Sentry's memory file, charged to the group but in
// no process's resident set (dmesg of TestEscapePoolMemory/gvisor: a Sentry
// showing ~50 MB was killed while another sandbox held 600 MiB), and under
// bubblewrap the files a session writes to its /tmp (tmpfs, charged to its
// group) are in no resident set either. So on cgroup v1 the executor turns
// the kernel's OOM killer off for the pool's group (memory.oom_control 1,
// the cgroup v1 "userland OOM handler"): a sandbox process whose page fault
// finds the pool full waits in the kernel, the executor is told through an
// eventfd (cgroup.event_control), and it kills the sandbox its cgroup shows
// holding the most: an idle ready sandbox first (the largest), else the
// sandbox whose group holds the most (see oomVictim). The waiting processes go on once the
// victim's memory is freed; when that was not enough, they wait again and
// the next one goes.
//
// Only page faults wait: with the OOM killer off, a charge the kernel makes
// outside a page fault (a write(2) to a tmpfs, a pipe's or a socket's
// buffer, a new file or process) fails at once with ENOMEM (ENFILE for a
// file, a short write), and the kernel tells no one. So the same eventfd
// also takes the pool's critical memory pressure (memory.pressure_level,
// "critical,local": its own reclaim found almost nothing to free), and when
// that comes while the pool is full of what reclaim cannot free (usage
// within oomSlack of the limit, less than oomSlack of file pages) the
// executor kills as for a waiting fault: before, a session that filled the
// pool with writes to its /tmp made the others' writes, pipes and forks fail
// until some process happened to fault (TestPoolOOMKernelCharges). The
// charge that set it off fails when the kill comes after the kernel gave up
// on it (in that test it came within the kernel's reclaim retries and the
// write went through whole); the charges after it find room. File pages
// that reclaim cannot free (a file's pages spliced into pipes) defeat the
// second test: with 110 MiB so pinned in a full 256 MiB pool, a bwrap
// session's write came back short and no kill came within 3 s (red team);
// the next page fault still has the pinning sandbox killed (oomVictim).
//
// What no kill frees: files in /mnt/data when the data directory is in
// memory (a tmpfs, as /tmp is on some systems): their pages are charged to
// the sandbox that wrote them and outlive it. Filled so, the pool stays full
// whatever dies: the policy killed the writer, then every other session's
// sandbox on each execution (TestPoolOOMWarnsDataDirInMemory's red-team
// run, bwrap and gVisor: 202 MiB of files in a 256 MiB pool). Only the
// pool-wide disk limit bounds them, so New warns (dataDirInMemory) when
// that limit leaves the sandboxes less than half of MaxTotalMemoryBytes.
//
// cgroup v2 has no such switch: there the kernel's OOM killer decides, by
// resident set (README, limitations). Without a pool-wide memory group (no
// memory controller, MaxTotalMemoryBytes 0) there is nothing to arbitrate.

// oomWatch is the registration of an eventfd on the pool group's
// memory.oom_control.
type oomWatch struct {
	dir   string   // the pool's memory group
	efd   *os.File // the eventfd (non-blocking, so reads take deadlines)
	ctl   *os.File // memory.oom_control, open while the registration lasts
	press *os.File // memory.pressure_level, likewise (nil: not registered)
	limit int64    // the group's memory limit, bytes
}

// oomRecheck is how often the policy looks at the pool again while it is
// out of memory after a kill (a notification that came while the victim
// was being killed may be the last one), and oomSlack how close to the
// limit its usage must be for the policy to kill: after a kill freed more
// than that, the waiting processes are woken and retry by themselves.
const (
	oomRecheck = 200 * time.Millisecond
	oomSlack   = 4 << 20
)

// watchPoolOOM registers an eventfd for the pool group's OOM notifications
// and then turns the kernel's OOM killer off for it (in that order, so that
// no process waits without the executor being told). cgroup v1 only
// (errors.ErrUnsupported otherwise).
func (c *cgroups) watchPoolOOM(limit int64) (w *oomWatch, err error) {
	if c.version != 1 || c.memory == "" || limit <= 0 {
		return nil, errors.ErrUnsupported
	}
	ctl, err := os.OpenFile(filepath.Join(c.memory, "memory.oom_control"), os.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		_ = ctl.Close()
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	w = &oomWatch{dir: c.memory, efd: os.NewFile(uintptr(fd), "pool-oom-eventfd"), ctl: ctl, limit: limit}
	defer func() {
		if err != nil {
			w.close()
		}
	}()
	reg := fmt.Sprintf("%d %d", fd, ctl.Fd())
	if err := os.WriteFile(filepath.Join(c.memory, "cgroup.event_control"), []byte(reg), 0o644); err != nil {
		return nil, fmt.Errorf("cgroup.event_control: %w", err)
	}
	// The pool's own critical reclaim, on the same eventfd (see the top of
	// this file). Without it the policy still acts on waiting faults.
	if press, err := os.Open(filepath.Join(c.memory, "memory.pressure_level")); err == nil {
		reg := fmt.Sprintf("%d %d critical,local", fd, press.Fd())
		if err := os.WriteFile(filepath.Join(c.memory, "cgroup.event_control"), []byte(reg), 0o644); err == nil {
			w.press = press
		} else {
			_ = press.Close()
		}
	}
	c.oomOff.Store(true) // from now on each sandbox's group turns it on for itself
	if _, err := ctl.WriteAt([]byte("1"), 0); err != nil {
		c.oomOff.Store(false)
		return nil, fmt.Errorf("memory.oom_control: %w", err)
	}
	return w, nil
}

func (w *oomWatch) close() {
	_ = w.efd.Close()
	_ = w.ctl.Close()
	if w.press != nil {
		_ = w.press.Close()
	}
}

// outOfMemory says whether the pool needs a kill: its usage is within
// oomSlack of its limit and processes of it wait for memory (the group is
// under OOM) or, when pressure (a notification just came, which may be the
// pool's critical pressure), its file pages, which reclaim could still
// free, are less than oomSlack.
func (w *oomWatch) outOfMemory(pressure bool) bool {
	data, err := readProcFile(filepath.Join(w.dir, "memory.oom_control"))
	if err != nil {
		return false
	}
	under := false
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "under_oom "); ok {
			under = strings.TrimSpace(v) == "1"
		}
	}
	if !under && !pressure {
		return false
	}
	used, err := charged(w.dir, false)
	if err != nil {
		return under
	}
	if used < w.limit-oomSlack {
		return false
	}
	if under {
		return true
	}
	file, err := fileBytes(w.dir)
	return err == nil && file < oomSlack
}

// fileBytes is what the v1 memory group dir holds in file pages (its
// total_inactive_file and total_active_file): without swap, what its
// reclaim can still free.
func fileBytes(dir string) (int64, error) {
	data, err := readProcFile(filepath.Join(dir, "memory.stat"))
	if err != nil {
		return 0, err
	}
	var n int64
	seen := 0
	for _, line := range strings.Split(string(data), "\n") {
		for _, f := range []string{"total_inactive_file ", "total_active_file "} {
			if v, ok := strings.CutPrefix(line, f); ok {
				k, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				if err != nil {
					return 0, err
				}
				n += k
				seen++
			}
		}
	}
	if seen != 2 {
		return 0, errors.New("memory.stat has no total_inactive_file or total_active_file")
	}
	return n, nil
}

// arbitrateOOM applies the pool's OOM policy until the executor closes
// (a goroutine of poolWG).
func (e *Executor) arbitrateOOM(w *oomWatch) {
	defer e.poolWG.Done()
	defer w.close()
	stop := context.AfterFunc(e.ctx, func() { _ = w.efd.Close() }) // the Read returns
	defer stop()
	buf := make([]byte, 8)
	var killed time.Time // when the last victim was gone
	for e.ctx.Err() == nil {
		// Wait for a notification; while the pool was last seen out of
		// memory, look again every oomRecheck without one.
		deadline := time.Time{}
		if !killed.IsZero() {
			deadline = time.Now().Add(oomRecheck)
		}
		_ = w.efd.SetReadDeadline(deadline)
		_, err := w.efd.Read(buf)
		if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			if e.ctx.Err() != nil {
				return
			}
			e.log.Warn("sandbox: the pool's OOM notifications stopped: processes that find its memory full wait until memory is freed", "err", err)
			return
		}
		if e.ctx.Err() != nil {
			return
		}
		// Pressure only on a notification: a full pool that no one asks
		// memory of (a recheck) is left alone.
		if !w.outOfMemory(err == nil) {
			killed = time.Time{}
			continue
		}
		if !killed.IsZero() && time.Since(killed) < oomRecheck {
			continue // the last victim's memory was just freed: let the waiters retry
		}
		victim, ready, used := e.oomVictim()
		if victim == nil {
			e.log.Warn("sandbox: the pool is out of memory and no sandbox can be killed")
			killed = time.Now()
			continue
		}
		e.log.Warn("sandbox: the sandboxes together reached the pool's memory limit: killing the one that holds the most",
			"ready", ready, "charged", used, "limit", w.limit)
		victim.oomKilled.Store(true)
		victim.killAll(5 * time.Second)
		killed = time.Now()
	}
}

// oomVictim is the sandbox the pool's OOM policy kills: the ready sandbox
// whose memory group holds the most, or when none is ready the sandbox
// whose group holds the most (starting ones included). ready says which it
// is, used is what its group holds in bytes.
//
// What a group holds is its whole charge, file pages included, not its
// working set (the charge less its inactive file pages, which admission
// counts): the policy acts once the kernel's reclaim has failed, so the
// file pages left are those reclaim could not free, such as a file's pages
// spliced into pipes, which stay on the inactive list; a kill frees them.
// By working set a session that pinned its /mnt/data file's cache so (its
// group 135 MiB, its working set 41 MiB) had the other session (132 MiB)
// killed instead (TestPoolOOMCountsPinnedPageCache).
func (e *Executor) oomVictim() (victim *cgroupSet, ready bool, used int64) {
	idle := map[*cgroupSet]bool{}
	e.mu.Lock()
	for _, p := range e.ready {
		if p.cg != nil {
			idle[p.cg] = true
		}
	}
	e.mu.Unlock()
	used = -1
	for _, s := range e.cg.liveSets() {
		if s.memory == "" || s.oomKilled.Load() && len(s.pids()) == 0 {
			continue
		}
		n, err := charged(s.memory, s.v2)
		if err != nil {
			continue
		}
		r := idle[s]
		if victim == nil || (r && !ready) || (r == ready && n > used) {
			victim, ready, used = s, r, n
		}
	}
	return victim, ready, used
}

// charged is what the memory group dir holds: memory.usage_in_bytes, or
// memory.current on cgroup v2.
func charged(dir string, v2 bool) (int64, error) {
	file := "memory.usage_in_bytes"
	if v2 {
		file = "memory.current"
	}
	data, err := readProcFile(filepath.Join(dir, file))
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
}

// dataDirInMemory says whether dir is on a file system held in memory
// (tmpfs or ramfs), whose files a kill does not free.
func dataDirInMemory(dir string) bool {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return false
	}
	return st.Type == unix.TMPFS_MAGIC || st.Type == unix.RAMFS_MAGIC
}

// memoryEvents reads the kernel's OOM counts of the memory group dir:
// kills is how many of its processes the kernel's OOM killer killed, own
// whether the group's own limit was what ran out. On cgroup v1 that is
// memory.oom_control's oom_kill (the pool's OOM policy keeps the kernel's
// killer off above the sandbox groups, so every such kill is for the
// group's own limit: own is left to the caller); on v2
// memory.events' oom_kill, and own from its oom (the group reached its own
// memory.max: a pool-wide OOM counts in the pool's group, not here).
// A kill for the pool's limit counts in the victim's group too, so on v1
// a kill means the group's own limit only while the pool's OOM policy is
// on (the kernel's OOM killer is then off at the pool's level).
func memoryEvents(dir string, v2 bool) (kills int64, own bool, err error) {
	file := "memory.oom_control"
	if v2 {
		file = "memory.events"
	}
	data, err := readProcFile(filepath.Join(dir, file))
	if err != nil {
		return 0, false, err
	}
	found := false
	for _, line := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			continue
		}
		switch k {
		case "oom_kill":
			kills, found = n, true
		case "oom":
			own = v2 && n > 0
		}
	}
	if !found {
		return 0, false, errors.New(file + " has no oom_kill count")
	}
	return kills, own, nil
}

// memoryDeath says, when the kernel's OOM killer killed a process of the
// sandbox, why it died in words for the session ("" when it did not, or
// the cgroup cannot tell): its own memory limit (e's MemoryLimitBytes), or
// without the pool's OOM policy possibly the pool's (MaxTotalMemoryBytes).
func (p *proc) memoryDeath(e *Executor) string {
	if p.cg == nil || p.cg.memory == "" {
		return ""
	}
	kills, own, err := memoryEvents(p.cg.memory, p.cg.v2)
	if err != nil || kills == 0 {
		return ""
	}
	if own || (!p.cg.v2 && e.oomPolicy) {
		return fmt.Sprintf("killed: it ran out of memory (the sandbox's memory limit is %d MiB, its /tmp and /dev/shm files included)", e.opts.MemoryLimitBytes>>20)
	}
	return "killed by the kernel's OOM killer: out of memory (the sandbox's limit or the pool's, which all sandboxes share)"
}
