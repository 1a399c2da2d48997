//go:build linux

// Package sandbox runs Python cells in long-lived interpreters isolated with
// bubblewrap (bwrap) or gVisor (runsc). It implements kernel.Executor and
// kernel.Kernel for the emulator: one Python process per session keeps
// variables and imports between executions, sees its own data directory as
// /mnt/data, has no network, and runs under memory, process and file-size
// limits.
//
// # Isolation
//
// In mode "bwrap" each kernel runs as
//
//	bwrap --unshare-all --unshare-user --disable-userns --uid 1000 --gid 1000
//	      --die-with-parent --new-session --cap-drop ALL --seccomp FD
//	      (/usr, /lib*, /bin, /sbin and a few /etc files read-only, /usr/local
//	      hidden, the driver and a synthetic /etc/passwd, /etc/group and
//	      /etc/hosts copied in (--file), /proc with /proc/sys,
//	      /proc/sysrq-trigger, /proc/irq and /proc/bus read-only, /dev
//	      read-only, a private /tmp and /dev/shm (size-capped tmpfs), the
//	      kernel's data dir read-write at /mnt/data, its proxy directory
//	      read-only at /opt/azsessions/proxy, --remount-ro /,
//	      --clearenv)
//
// so it has no network (a private loopback), sees no other kernel's files nor
// the executor's directory, and cannot write outside /mnt/data, /tmp and
// /dev/shm.
//
// Host identity: session code never runs as host root. When the emulator
// runs as root, every sandbox runs as an unprivileged host account
// (Options.SandboxUser, default "nobody"; uid 0 is refused): the process
// that starts it joins (or, on cgroup v2, is created in) the sandbox's
// cgroups as root, then drops to that
// uid and gid with no supplementary groups and empty capability sets
// (setpriv --reuid --regid --clear-groups --inh-caps=-all
// --bounding-set=-all; SysProcAttr.Credential without cgroups) and execs
// bwrap, which creates the user namespace as that user. The namespace maps
// the sandbox's uid 1000 to it, so the capabilities bwrap holds inside never
// apply to the host's namespace, /proc/sys is not writable (it is also
// mounted read-only), and what the session creates in /mnt/data is owned by
// that account on the host. Its data directory (0700) is owned by it; files
// the emulator writes there as root (uploads) are given to it by the data
// directory watcher before the next cell runs (lchown relative to directory
// descriptors, never following links). The executor's directory is 0711
// (every ancestor must be searchable by others: New says which is not). When
// the emulator is not root, sandboxes run as its own uid, which holds no
// capability to begin with.
//
// seccomp (see seccomp.go for the list and a comparison with Docker's and
// Flatpak's filters): only native-ABI system calls; socket families AF_UNIX,
// AF_INET, AF_INET6 and NETLINK_ROUTE (others fail with EAFNOSUPPORT, so no
// AF_VSOCK to the hypervisor); no keyring (keyctl, add_key, request_key),
// bpf, userfaultfd, perf_event_open, kexec, module, mount or namespace calls,
// no ptrace, no personality changes, no fallocate, no io_uring.
//
// What session code can read of the host: the system directories (as
// packaged), the interpreter's prefixes, the few /etc files listed above,
// and in /proc/self/mountinfo the host path of its own data directory
// (<DataDir or $TMPDIR>/azsessions-<emulator pid>-<start time>-<random>/<random>)
// and of its sibling <random>.proxy (read-only at /opt/azsessions/proxy, the
// custom containers' socket directory, see container.go): a bind mount
// always shows its path within its file system. No home
// directory, no other session's path, no emulator file.
//
// Processes are started from one OS thread locked for the executor's
// lifetime (--die-with-parent and Pdeathsig fire when that thread exits) and
// are killed explicitly by Kernel.Close and Executor.Close. An executor's
// directory and cgroups are named after its process (pid and start time):
// New removes those of executors whose process is gone (an emulator killed
// with SIGKILL), in its data directory's parent and its cgroups, and never
// those of a process that still runs. Directories of versions before this
// naming are left alone.
//
// In mode "gvisor" (ModeGvisor; root and runsc needed) each kernel runs in
// a gVisor sandbox instead: an OCI bundle built per kernel (read-only root
// of the same system directories and /etc files, /mnt/data read-write, no
// network), the sandbox user's uid inside, the same cgroups, rlimits and
// data directory watcher; session code talks to gVisor's user-space kernel,
// not to the host's. gvisor.go describes the bundle, the protocol socket
// and the known differences.
//
// In mode "none" the same driver runs as a plain child process (as the
// sandbox user when the emulator is root) with the same environment and the
// data directory as its working directory; /mnt/data does not exist there
// and nothing else is isolated.
//
// # Ready kernels
//
// The executor keeps Options.Ready kernels started (default 2), so that
// NewKernel is fast. Kernels start at most one per CPU at a time, for the
// NewKernel calls waiting for one first (oldest first), then to refill the
// ready list. After a burst of N NewKernel calls that the ready list could
// not serve (one had to wait for a start; the burst lasts until the ready
// list is full again), the pool keeps N ready, so that the next burst of N
// is served from the ready list; it keeps them while bursts go on needing
// more than Ready kernels and falls back toward Ready by one a minute
// without them. N is capped (Executor.ReadyCap): at Options.MaxReady
// (DefaultMaxReady, 32), at a quarter of MaxTotalMemoryBytes at ~64 MiB per
// ready kernel (128 MiB on gVisor) and at Capacity. Ready kernels count
// against the pool-wide limits below like sessions, every refill start
// needs room in them, and a new session takes a ready kernel first. The
// background preload of a kernel the pool started (numpy: ~0.1 s of CPU)
// is held while NewKernel calls still wait for a start, and begins once
// none waits: in a burst it would otherwise share the CPUs with the starts
// the rest of the burst waits for (each sandbox is its own CPU cgroup, so
// lowering its priority would not make the starts win). A cell that
// imports a preload module before then imports it itself. It is held only
// where a memory cgroup bounds the sandbox, since the address-space limit
// stays looser until the preload ends (see Limits); restarts and New's own
// kernel preload at once.
//
// New starts one kernel to check that a sandbox starts at all (with the
// cgroups, else without them). With Ready > 0 that kernel is the pool's
// first ready kernel: it is started as the pool starts ready kernels
// (cgroups named "ready-", the Preload imported in the background,
// oom_score_adj 1000 until a session takes it), so the first ready kernel
// is there when New returns and the pool starts Ready-1 more, instead of
// killing it and starting Ready. Ready kernels copy matplotlib's font cache
// at start, so New then builds the cache before that start, not after it
// in the background: New takes the build longer (~0.7 s of CPU) and the
// first ready kernel comes one start sooner (see BENCHMARKS.md,
// BenchmarkNewFirstReady). With Ready 0 the kernel is killed (it is started
// without the preload), as it is when the pool-wide limits leave it no room.
//
// # Limits
//
// Every kernel runs the embedded driver (driver.py), which lowers its own
// rlimits before it runs user code (limits can only be lowered, and they are
// inherited by subprocesses):
//   - RLIMIT_FSIZE = MaxFileSizeBytes: writes past it fail with EFBIG
//     ("File too large"; SIGXFSZ is ignored).
//   - RLIMIT_AS = the runtime's address space with the preloaded modules
//     (~300 MB) + MemoryLimitBytes: large allocations fail with MemoryError.
//     It is per process. Until the background preload (Options.Preload)
//     ends, the limit is up to 1 GiB looser (also while the pool holds the
//     preload back during a burst, see Ready kernels: only with a memory
//     cgroup, whose limit bounds the sandbox meanwhile); it is lowered when
//     the preload ends.
//   - RLIMIT_NPROC = the user's current task count + MaxProcesses, only when
//     there is no pids cgroup and the emulator does not run as root (root
//     ignores RLIMIT_NPROC). It counts all of the user's tasks, so it is only
//     approximate.
//
// When the emulator can create cgroups (root here, with cgroup v1 "pids",
// "memory", "cpu" and "cpuacct" hierarchies, or a cgroup v2 tree with those
// controllers) every sandbox also joins its own cgroup, before bwrap starts
// (on v2 it is created in it: clone3 with CLONE_INTO_CGROUP; on v1 a shell
// joins each hierarchy, then execs; see chooseCgroupJoin), with pids.max = MaxProcesses (tasks, threads included), a memory limit of
// MemoryLimitBytes for the whole sandbox (memory.limit_in_bytes or
// memory.max; tmpfs pages written to /tmp and /dev/shm are charged to it
// too): past it the kernel OOM-kills the sandbox, which is reported by the
// execution and restarted on the next one; and a CPU quota of CPUs cores
// (cpu.cfs_quota_us over a 100 ms cpu.cfs_period_us, or cpu.max): every
// process of the sandbox, those a cell left running in the background
// included, shares it, so a CPU-hungry session slows only itself.
// Executor.Limits says which mechanisms are active. Without cgroups
// (typically a non-root user without a delegated cgroup) memory is bounded
// per process only, the process limit is the approximate RLIMIT_NPROC, and
// CPU is not limited.
//
// Pool-wide (issue 10's budgets; issue 16 made them measured): the
// executor's kernels, ready ones included, share MaxTotalMemoryBytes and
// MaxTotalDiskBytes (default half of the host's RAM and half of the free
// space of the data directory's file system when New runs), half of the
// host's tasks (the smaller of kernel.pid_max and kernel.threads-max) and
// half of the free inodes of that file system. A per-kernel limit is a cap,
// not a reservation: a ready kernel uses ~40–55 MiB (bwrap) of its 1 GiB
// and an empty /mnt/data, so counting each at its limits let 11 sessions
// into a 23 GiB host. Instead:
//   - memory and tasks: the executor's cgroups, which hold every kernel's
//     groups, get the pool-wide limits (memory.limit_in_bytes and
//     memory.memsw.limit_in_bytes, or memory.max, and pids.max, on the
//     parent; v1 with hierarchical accounting). The host kernel then caps
//     what all sandboxes use together: past the memory limit it reclaims
//     their page cache, then one sandbox is killed (reported and restarted
//     on the next execution like a kernel over its own limit). On cgroup
//     v1 the executor picks it (the pool's OOM policy, oom.go): an idle
//     ready sandbox first, else the sandbox whose memory group holds the
//     most, /tmp files and gVisor's Sentry memory file included, which no
//     process's resident set shows; the kernel's OOM killer is off in the
//     pool's group (on in each sandbox's, for its own limit). On cgroup v2
//     the kernel's OOM killer picks the largest process by resident set
//     (with the oom_score_adj of setSessionOOMScore: ready sandboxes
//     first). Past the tasks limit fork and clone fail with EAGAIN in the
//     sandboxes. The emulator is not in these groups and is never the
//     victim.
//   - disk and entries: every measurement of a kernel's data directory by
//     the watcher (see below) updates the pool's totals. When they pass
//     MaxTotalDiskBytes (or the entries limit), a kernel whose directory
//     grew since its last measurement is stopped like one over
//     MaxDataDirBytes (the kernels that only read keep working), and an
//     upload's room (DataDirSpace) is what the other kernels leave. The
//     overshoot is bounded as for one kernel: what the writers write within
//     one watch interval.
//
// NewKernel admits by use: it fails with ErrPoolFull when the memory in use
// by the sandboxes (the memory group's charge less its inactive page cache,
// as kubelet counts a working set) plus a reserve per kernel being started
// (memReserve: 64 MiB, 128 MiB on gVisor), the tasks plus a reserve per
// start, or the bytes and entries of the data directories at their last
// measurement leave no room for one more beside the starts under way; the
// ready list only refills within the same room, and NewKernel calls waiting
// for a start are refused, the newest first, when a start finds no room.
// The reserves only keep admission from starting a kernel that would find
// no room; the limits themselves are the kernel's (memory, tasks) and the
// watcher's (disk).
// Without a memory cgroup (no root and no delegated cgroup, or the cgroup
// self-test failed) nothing would cap the sandboxes' sum, so each kernel
// counts its MemoryLimitBytes against MaxTotalMemoryBytes, as before issue
// 16, and Capacity says how many fit; tasks are then bounded per kernel by
// RLIMIT_NPROC only. On cgroup v2 the same limits go to the parent's
// memory.max and pids.max (written, not exercised: the machines this was
// tested on have cgroup v1); where the parent has no memory controller
// enabled the write fails and memory is counted per kernel, with a warning.
//
// MaxDataDirBytes and MaxDataDirEntries are watched from Go: the data
// directory is measured like du (the blocks allocated to every file and
// directory, so sparse and preallocated files count what they take, and the
// number of entries, i.e. inodes) when a cell starts, every 300 ms while it
// runs and when it ends, and while the kernel is idle (threads and processes
// a cell left running keep writing) every second, or every 20 × the last
// scan's duration (at most 30 s) when scans are slow, so that the watcher
// takes at most ~5 % of one core per idle session. Files the kernel's
// processes hold open after deleting them (or created with O_TMPFILE) on the
// data directory's file system count too (from /proc/<pid>/fd of the
// sandbox's processes), since du cannot see them. The walk goes from
// directory descriptor to directory descriptor (no path is ever longer than a
// name), so trees deeper than PATH_MAX are measured too; a tree that cannot be
// measured (a directory it cannot open, more than 4096 levels) counts as over
// the limit. A kernel found over a limit is killed (the cell fails; files are
// kept) and restarted on the same directory, at once during a cell, else by
// the next execution. The limits are never raised: while the directory is
// over one, no cell runs (it fails with a note; files are deleted through the
// files API, which works without the kernel). The overshoot is bounded by what
// the kernel writes within one interval (300 ms during a cell, 1 s idle), each
// file by RLIMIT_FSIZE. fallocate(2) fails with EOPNOTSUPP and io_uring with
// ENOSYS in the sandbox (a seccomp filter, on amd64 and arm64), because
// FALLOC_FL_KEEP_SIZE (also as IORING_OP_FALLOCATE) reserves
// blocks past RLIMIT_FSIZE in one call. The private /tmp is a tmpfs of
// min(MaxDataDirBytes, MemoryLimitBytes/2) and /dev/shm one of
// min(64 MiB, MemoryLimitBytes/8) (bwrap --size; their inodes are not
// limited by count, but each is kernel memory charged to the sandbox's memory
// cgroup, so MemoryLimitBytes bounds them when cgroups are active); /dev
// itself is read-only. CPU time is not limited per execution: the execution
// timeout is, and the CPU quota bounds the rate.
package sandbox

import (
	"bytes"
	"cmp"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/azsessions/azsessions/internal/kernel"
)

//go:embed driver.py
var driverSource []byte

// DefaultPreload is the Preload of a nil Options.Preload: numpy, which keeps
// a ready kernel under 64 MiB RSS; pandas and matplotlib.pyplot are then
// imported by the session that uses them (~0.1–0.15 s each on first use).
func DefaultPreload() []string { return []string{"numpy"} }

// preloadList normalizes Options.Preload: the default for nil, "matplotlib"
// as matplotlib.pyplot, no duplicates, only dotted Python identifiers.
func preloadList(mods []string) ([]string, error) {
	if mods == nil {
		mods = DefaultPreload()
	}
	out := []string{}
	for _, m := range mods {
		m = strings.TrimSpace(m)
		if m == "matplotlib" {
			m = "matplotlib.pyplot"
		}
		if !validModuleName(m) {
			return nil, fmt.Errorf("sandbox: preload: %q is not a module name", m)
		}
		if !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out, nil
}

func validModuleName(m string) bool {
	if m == "" {
		return false
	}
	for _, part := range strings.Split(m, ".") {
		if part == "" {
			return false
		}
		for i, r := range part {
			letter := r == '_' || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z')
			if !letter && (i == 0 || r < '0' || r > '9') {
				return false
			}
		}
	}
	return true
}

// Executor starts sandboxed kernels and keeps Ready of them started. It
// implements kernel.Executor. Its methods are safe for concurrent use.
type Executor struct {
	opts     Options
	log      *slog.Logger
	python   string   // interpreter path used in the sandbox
	node     string   // RuntimeNode: the Node.js executable (its real path)
	nodeBind bool     // RuntimeNode: node is bound alone at sandboxNode
	binds    []string // extra read-only bind mounts (interpreter prefixes)
	bwrap    string
	runsc    string // runsc executable (mode gvisor)
	gvDir    string // bundles and runsc state (mode gvisor)
	info     kernel.Info
	base     string  // directory holding the kernels' data dirs
	sysDir   string  // driver, synthetic /etc files, font cache
	id       *hostID // the sandboxes' host identity (nil: the emulator's own)
	cg       *cgroups
	limits   string
	sizeOpt  bool // bwrap supports --size
	noUserns bool // bwrap supports --disable-userns
	launchCh chan func()
	launchWG sync.WaitGroup
	rmWG     sync.WaitGroup // background removals: closed kernels' data, dead gVisor containers' state

	ctx    context.Context // canceled by Close
	cancel context.CancelFunc
	poolWG sync.WaitGroup
	wakeup chan struct{}

	mu       sync.Mutex
	closed   bool
	ready    []*proc
	kernels  map[*Kernel]struct{}
	starting int // kernels being started (counted against the pool limits)
	// waiters are NewKernel calls that found no ready kernel, oldest first:
	// each kernel that finishes starting goes to the oldest one (see pool).
	waiters []chan startResult
	// held are started kernels whose background preload waits until no
	// NewKernel call waits (holdPreloadLocked).
	held []*proc
	// handed are the kernels handed to a waiting NewKernel, not yet in
	// kernels: Close kills them too (the call may take one only after Close;
	// TestCloseKillsKernelHandedToWaiter).
	handed map[*proc]struct{}
	// target is the number of ready kernels the pool keeps: Options.Ready,
	// raised to the demand of a burst up to maxReady (the ready cap) and
	// lowered again by one per readyDecay without such demand (see
	// missLocked and decayLocked).
	target   int
	maxReady int
	// demand counts the NewKernel calls since the pool was last at rest
	// (its ready list at target, no call waiting): the size of the burst
	// under way.
	demand int
	// lastMiss is when demand last needed more than Options.Ready kernels
	// (a call waited for a start, or took a ready kernel beyond Ready's), or
	// the pool was last seen refilling the ready list (see decayLocked).
	lastMiss  time.Time
	failUntil time.Time // after a failed start, no refill before then
	fontCache bool      // matplotlib's font cache was built (or failed to)
	slots     int       // kernels started at once (the CPUs)
	capacity  int       // kernels that fit in the pool limits (-1: unbounded)
	// memByUse: the pool-wide memory limit is the limit of the cgroup of
	// every sandbox (set by poolLimits), and admission counts the memory
	// they use; else every kernel counts MemoryLimitBytes (capacity).
	memByUse bool
	// tasksByUse: the pool-wide tasks limit (maxTotalTasks) is the pids
	// limit of the cgroup of every sandbox.
	tasksByUse bool
	// oomPolicy: the executor, not the kernel's OOM killer, picks the
	// sandbox that dies when the sandboxes together reach the pool-wide
	// memory limit (cgroup v1; see arbitrateOOM).
	oomPolicy bool
	// diskBytes and diskEntries are what the kernels' data directories
	// held at their last measurement, together (see accountDisk).
	diskBytes, diskEntries int64

	closeOnce   sync.Once
	closeErr    error
	preloadWarn sync.Once
}

var _ kernel.Executor = (*Executor)(nil)

// probeResult is what the probe script prints.
type probeResult struct {
	Executable string            `json:"executable"`
	Prefix     string            `json:"prefix"`
	BasePrefix string            `json:"base_prefix"`
	Version    string            `json:"version"`
	Packages   map[string]string `json:"packages"`
}

const probeScript = `import sys, json
pk = {}
try:
    import importlib.metadata as md
except ImportError:
    md = None
for name in ("ipython", "numpy", "pandas", "matplotlib"):
    try:
        pk[name] = md.version(name)
    except Exception:
        import importlib.util
        if importlib.util.find_spec("IPython" if name == "ipython" else name):
            pk[name] = "unknown"
print(json.dumps({"executable": sys.executable, "prefix": sys.prefix,
    "base_prefix": getattr(sys, "base_prefix", sys.prefix),
    "version": "%d.%d.%d" % sys.version_info[:3], "packages": pk}))
`

// New checks the interpreter (and bubblewrap), prepares the base directory
// and starts the ready pool. The error wraps ErrNoBubblewrap when Mode is
// "bwrap" and bwrap is missing or unusable; it is also an error when the
// interpreter is missing or does not run.
func New(opts Options) (*Executor, error) {
	if opts.Mode == "" {
		opts.Mode = ModeBwrap
	}
	if opts.Mode != ModeBwrap && opts.Mode != ModeGvisor && opts.Mode != ModeNone {
		return nil, fmt.Errorf("sandbox: unknown mode %q (want %q, %q or %q)", opts.Mode, ModeBwrap, ModeGvisor, ModeNone)
	}
	switch opts.Runtime {
	case "":
		opts.Runtime = RuntimePython
	case RuntimePython, RuntimeNode:
	default:
		return nil, fmt.Errorf("sandbox: unknown runtime %q (want %q or %q)", opts.Runtime, RuntimePython, RuntimeNode)
	}
	if opts.Ready < 0 {
		opts.Ready = DefaultReady
	}
	if opts.MemoryLimitBytes <= 0 {
		opts.MemoryLimitBytes = DefaultMemoryLimitBytes
	}
	if opts.MaxProcesses <= 0 {
		opts.MaxProcesses = DefaultMaxProcesses
	}
	if opts.MaxFileSizeBytes <= 0 {
		opts.MaxFileSizeBytes = DefaultMaxFileSizeBytes
	}
	if opts.MaxDataDirBytes <= 0 {
		opts.MaxDataDirBytes = DefaultMaxDataDirBytes
	}
	if opts.MaxDataDirEntries <= 0 {
		opts.MaxDataDirEntries = DefaultMaxDataDirEntries
	}
	if opts.CPUs <= 0 {
		opts.CPUs = DefaultCPUs
	}
	if opts.killGrace <= 0 {
		opts.killGrace = 5 * time.Second
	}
	if opts.readyDecay <= 0 {
		opts.readyDecay = readyDecay
	}
	if opts.maxWalkDepth <= 0 {
		opts.maxWalkDepth = maxWalkDepth
	}
	preload, err := preloadList(opts.Preload)
	if err != nil {
		return nil, err
	}
	if opts.noPreload {
		preload = []string{}
	}
	opts.Preload = preload
	e := &Executor{opts: opts, log: opts.Logger, kernels: map[*Kernel]struct{}{}, handed: map[*proc]struct{}{}, wakeup: make(chan struct{}, 1)}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	if opts.Mode == ModeBwrap {
		p, err := exec.LookPath("bwrap")
		if err != nil {
			return nil, fmt.Errorf("sandbox: %w", ErrNoBubblewrap)
		}
		e.bwrap = p
		if out, err := exec.Command(p, "--help").CombinedOutput(); err == nil {
			e.sizeOpt = bytes.Contains(out, []byte("--size"))
			e.noUserns = bytes.Contains(out, []byte("--disable-userns"))
		}
	}
	if opts.Mode == ModeGvisor {
		if err := e.initGvisor(); err != nil {
			return nil, err
		}
	}
	if e.id, err = resolveSandboxUser(opts.SandboxUser); err != nil {
		return nil, err
	}
	probe := e.probe
	if opts.Runtime == RuntimeNode {
		probe = e.probeNode
	}
	if err := probe(); err != nil {
		return nil, err
	}
	if e.id != nil {
		for _, p := range append([]string{filepath.Dir(e.info.Interpreter)}, e.binds...) {
			if err := e.id.checkReachable(filepath.Join(p, "x")); err != nil {
				return nil, fmt.Errorf("sandbox: the interpreter %s cannot be used: %w (install it where every user can read it, e.g. under /usr or /opt, or set -sandbox-user)", e.info.Interpreter, err)
			}
		}
	}
	if err := e.prepareDirs(); err != nil {
		return nil, err
	}
	if opts.Mode == ModeGvisor {
		if err := e.prepareGvisor(); err != nil {
			_ = os.RemoveAll(e.base)
			return nil, err
		}
	}
	if err := e.setBudgets(); err != nil {
		_ = os.RemoveAll(e.base)
		return nil, err
	}
	// Limits: cgroups when we can create them, rlimits always.
	if opts.noCgroup {
		e.limits = "rlimits AS+FSIZE+NPROC (cgroups disabled)"
	} else if cg, err := newCgroups(); err == nil {
		e.cg = cg
		e.limits = cg.describe() + "; rlimits AS+FSIZE"
		e.poolLimits()
	} else {
		e.limits = "rlimits AS+FSIZE+NPROC (no cgroup: " + err.Error() + ")"
	}
	e.ctx, e.cancel = context.WithCancel(context.Background())
	e.launchCh = make(chan func())
	e.launchWG.Add(1)
	go e.launcher()
	// With Ready > 0 the self-test's kernel is kept as the first ready
	// kernel (see selfTest), so it must copy matplotlib's font cache as
	// the pool's ready kernels do: the cache is built first.
	keep := opts.Ready > 0
	if keep {
		e.buildFontCache(e.ctx)
		e.fontCache = true
	}
	// Check that a sandbox really starts, with cgroups if any.
	var first *proc
	if !keep && opts.noSelfTest {
		err = nil
	} else {
		first, err = e.selfTest(keep)
	}
	if err != nil && e.cg != nil {
		e.log.Warn("sandbox: cgroups unusable, falling back to rlimits", "err", err)
		e.cg.remove()
		e.cg = nil
		e.memByUse, e.tasksByUse = false, false
		e.limits = "rlimits AS+FSIZE+NPROC (cgroup test failed)"
		first, err = e.selfTest(keep)
		if err != nil {
			e.shutdownEarly()
			return nil, err
		}
	} else if err != nil {
		e.shutdownEarly()
		return nil, err
	}
	if e.cg == nil && os.Getuid() == 0 {
		e.log.Warn("sandbox: running as root without a pids cgroup: the number of processes per kernel is not limited")
	}
	if opts.Mode == ModeNone {
		e.log.Warn("sandbox: running kernels WITHOUT isolation (-sandbox=none): code has the emulator's user rights and network")
	}
	if opts.Runtime == RuntimeNode && e.cg != nil && e.cg.memory != "" {
		// node.go: no RLIMIT_AS where a memory cgroup bounds the sandbox.
		e.limits = strings.Replace(e.limits, "rlimits AS+FSIZE", "rlimits FSIZE (Node.js: V8 heap cap)", 1)
	}
	if e.cg == nil || e.cg.cpu == "" {
		e.limits += "; no CPU quota (no cpu cgroup)"
	}
	e.setCapacity()
	if e.memByUse {
		e.limits += "; pool-wide memory cgroup"
		// The pool's OOM policy (oom.go): cgroup v1 only.
		if w, err := e.cg.watchPoolOOM(e.opts.MaxTotalMemoryBytes); err == nil {
			e.oomPolicy = true
			e.limits += " (out of memory: the sandbox holding the most is killed)"
			e.poolWG.Add(1)
			go e.arbitrateOOM(w)
		} else if !errors.Is(err, errors.ErrUnsupported) {
			e.log.Warn("sandbox: the pool's OOM policy is off: when the sandboxes together run out of memory the kernel's OOM killer picks one by resident set", "err", err)
		}
		// Files in /mnt/data on a tmpfs are memory of the pool that no kill
		// frees (oom.go): only the disk limit bounds them.
		if dataDirInMemory(e.base) && (e.opts.MaxTotalDiskBytes <= 0 || e.opts.MaxTotalDiskBytes > e.opts.MaxTotalMemoryBytes/2) {
			e.log.Warn("sandbox: the data directory is in memory (tmpfs): files in /mnt/data count against the pool's memory limit and killing a sandbox does not free them; sessions that fill it leave the others no memory (each is killed on its next execution) until they are closed: set the pool-wide disk limit to at most half the pool's memory limit, or put the data directory on a disk",
				"max_total_disk", e.opts.MaxTotalDiskBytes, "max_total_memory", e.opts.MaxTotalMemoryBytes)
		}
	} else if e.opts.MaxTotalMemoryBytes > 0 {
		e.limits += "; pool-wide memory counted at each kernel's limit"
	}
	user := "the emulator's own uid " + strconv.Itoa(os.Geteuid())
	if e.id != nil {
		user = fmt.Sprintf("uid %d gid %d", e.id.uid, e.id.gid)
	}
	e.target, e.maxReady, e.slots = opts.Ready, e.readyCap(), startSlots()
	if first != nil {
		e.keepFirst(first)
	}
	capacity := "by use" // admission by what the sandboxes use (see Capacity)
	if e.capacity >= 0 {
		capacity = strconv.Itoa(e.capacity)
	}
	e.log.Info("sandbox: executor ready", "mode", opts.Mode, "interpreter", e.info.Interpreter, "version", cmp.Or(e.info.PythonVersion, e.info.NodeVersion),
		"packages", e.info.Packages, "limits", e.limits, "ready", opts.Ready, "max_ready", e.maxReady, "base", e.base, "sandbox_user", user,
		"capacity", capacity, "max_total_memory", e.opts.MaxTotalMemoryBytes, "max_total_disk", e.opts.MaxTotalDiskBytes)
	e.poolWG.Add(1)
	go e.pool()
	return e, nil
}

func (e *Executor) shutdownEarly() {
	e.cancel()
	close(e.launchCh)
	e.launchWG.Wait()
	if e.cg != nil {
		e.cg.remove()
	}
	_ = os.RemoveAll(e.base)
}

// resolvePython finds the interpreter and asks it about itself.
func (e *Executor) probe() error {
	py := e.opts.Python
	if py == "" {
		if _, err := os.Stat("/usr/bin/python3"); err == nil {
			py = "/usr/bin/python3"
		} else {
			py = "python3"
		}
	}
	path, err := exec.LookPath(py)
	if err != nil {
		return fmt.Errorf("sandbox: python interpreter %q not found: %w", py, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// -I: the current directory (the emulator's or the CLI's, possibly
	// holding a file a session wrote and someone downloaded there, e.g.
	// json.py) is not on sys.path, nor are PYTHON* variables or the user's
	// site-packages read: this runs on the host, unsandboxed (as root when
	// the emulator is). TestProbeIgnoresWorkingDirectory.
	cmd := exec.CommandContext(ctx, path, "-I", "-c", probeScript)
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8", "HOME=" + os.TempDir()}
	if home, err := os.UserHomeDir(); err == nil {
		// pyenv shims need HOME/PYENV_ROOT to find the real interpreter.
		cmd.Env = append(cmd.Env, "HOME="+home)
		if root := os.Getenv("PYENV_ROOT"); root != "" {
			cmd.Env = append(cmd.Env, "PYENV_ROOT="+root)
		}
		if v := os.Getenv("PYENV_VERSION"); v != "" {
			cmd.Env = append(cmd.Env, "PYENV_VERSION="+v)
		}
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("sandbox: python interpreter %s does not run: %w: %s", path, err, strings.TrimSpace(stderr.String()))
	}
	var pr probeResult
	if err := json.Unmarshal(out, &pr); err != nil || pr.Executable == "" {
		return fmt.Errorf("sandbox: python interpreter %s: unexpected probe output %q", path, out)
	}
	// sys.executable is the real interpreter behind shims; keep its path (a
	// venv's python is a symlink whose location matters) but bind what it
	// points to as well.
	e.python = pr.Executable
	real, err := filepath.EvalSymlinks(pr.Executable)
	if err != nil {
		real = pr.Executable
	}
	for _, p := range []string{pr.Prefix, pr.BasePrefix, filepath.Dir(pr.Executable), filepath.Dir(real)} {
		if p == "" || underSystemDirs(p) {
			continue
		}
		dup := false
		for _, b := range e.binds {
			if b == p || strings.HasPrefix(p, b+"/") {
				dup = true
			}
		}
		if !dup {
			e.binds = append(e.binds, p)
		}
	}
	sandboxName := "bubblewrap"
	switch e.opts.Mode {
	case ModeNone:
		sandboxName = "none"
	case ModeGvisor:
		sandboxName = "gvisor"
	}
	if pr.Packages == nil {
		pr.Packages = map[string]string{}
	}
	e.info = kernel.Info{Interpreter: e.python, PythonVersion: pr.Version, Packages: pr.Packages, Sandbox: sandboxName}
	return nil
}

// systemDirs are bound read-only into every sandbox.
var systemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

func underSystemDirs(p string) bool {
	for _, d := range systemDirs {
		if p == d || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

// prepareDirs creates the executor's directory, named by ownerName in the
// temporary directory or in Options.DataDir (whose leftovers of killed
// executors it removes first), and the sys directory in it.
func (e *Executor) prepareDirs() error {
	parent := e.opts.DataDir
	if parent == "" {
		parent = os.TempDir()
	} else if err := os.MkdirAll(parent, 0o700); err != nil {
		return fmt.Errorf("sandbox: data dir: %w", err)
	} else if e.id != nil {
		// The sandbox user must pass through it (not list it) to reach its
		// data directory: bwrap resolves the path as that user.
		if fi, err := os.Stat(parent); err == nil && fi.Mode().Perm()&0o001 == 0 {
			if err := os.Chmod(parent, fi.Mode().Perm()|0o001); err != nil {
				return fmt.Errorf("sandbox: data dir: %w", err)
			}
		}
	}
	if removed := removeLeftovers(parent); len(removed) > 0 {
		e.log.Info("sandbox: removed what killed emulators left (their processes are gone)", "paths", removed)
	}
	e.base = filepath.Join(parent, ownerName())
	// 0711: the sandbox user (when the emulator is root) reaches its own
	// data directory (0700, its own) but cannot list the others.
	if err := os.Mkdir(e.base, 0o711); err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	if err := os.Chmod(e.base, 0o711); err != nil { // umask
		return fmt.Errorf("sandbox: %w", err)
	}
	if e.id == nil {
		_ = os.Chmod(e.base, 0o700)
	} else if err := e.id.checkReachable(e.base); err != nil {
		_ = os.Remove(e.base)
		return err
	}
	sys, err := os.MkdirTemp(e.base, ".sys-")
	if err != nil {
		_ = os.Remove(e.base)
		return fmt.Errorf("sandbox: %w", err)
	}
	e.sysDir = sys
	files := map[string]string{
		"driver.py": string(driverSource),
		"driver.js": string(nodeDriverSource),
		"passwd":    "root:x:0:0:root:/root:/usr/sbin/nologin\nuser:x:1000:1000:user:/tmp:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
		"group":     "root:x:0:\nuser:x:1000:\nnogroup:x:65534:\n",
		"hosts":     "127.0.0.1 localhost sandbox\n::1 localhost\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(sys, name), []byte(content), 0o644); err != nil {
			return fmt.Errorf("sandbox: %w", err)
		}
	}
	if err := os.Mkdir(filepath.Join(sys, "mpl"), 0o755); err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	// Mode none reads the sys dir as the sandbox user; bwrap gets its files
	// as descriptors.
	return os.Chmod(sys, 0o755)
}

// buildFontCache lets matplotlib build its font cache once into the shared
// read-only directory that every kernel copies at start.
func (e *Executor) buildFontCache(ctx context.Context) {
	if _, ok := e.info.Packages["matplotlib"]; !ok || e.opts.noFontCache {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.python, "-I", "-c", "import matplotlib.font_manager") // -I: as in probe
	cmd.Env = []string{"MPLCONFIGDIR=" + filepath.Join(e.sysDir, "mpl"), "MPLBACKEND=Agg", "HOME=" + e.sysDir, "LANG=C.UTF-8"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if out, err := cmd.CombinedOutput(); err != nil {
		e.log.Warn("sandbox: building the matplotlib font cache failed", "err", err, "output", string(out))
	}
}

// launcher starts every process from one locked OS thread that lives until
// Close, because bwrap's --die-with-parent and Pdeathsig fire when the thread
// that started the process exits.
func (e *Executor) launcher() {
	defer e.launchWG.Done()
	runtime.LockOSThread()
	// Never unlocked: the thread exits with the goroutine at Close, after every
	// sandbox was killed.
	for f := range e.launchCh {
		f()
	}
}

// start runs cmd.Start on the launcher thread.
func (e *Executor) start(cmd *exec.Cmd) error {
	errc := make(chan error, 1)
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return ErrClosed
	}
	// Send while holding mu so Close cannot close launchCh in between.
	e.launchCh <- func() { errc <- cmd.Start() }
	e.mu.Unlock()
	return <-errc
}

// selfTest starts one kernel, to check that a sandbox starts (with the
// executor's cgroups, if any). Unless keep, it kills it and returns nil:
// that kernel imports nothing in the background (no Preload) and its
// cgroups are named "selftest-". With keep (Options.Ready > 0, matplotlib's
// font cache already built) it starts it as the pool would start a ready
// kernel (startOne: role "ready", the configured Preload, which goes on in
// the background after selfTest returns) and returns it, for keepFirst:
// the pool's first ready kernel costs no start of its own.
func (e *Executor) selfTest(keep bool) (*proc, error) {
	dir, err := e.newDataDir()
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var p *proc
	if keep {
		p, err = e.startProc(ctx, dir, "ready")
	} else {
		saved := e.opts.noPreload
		e.opts.noPreload = true
		p, err = e.startProc(ctx, dir, "selftest")
		e.opts.noPreload = saved
	}
	if err != nil {
		_ = removeKernelDirs(dir)
		switch e.opts.Mode {
		case ModeBwrap:
			return nil, fmt.Errorf("sandbox: %w: %v", ErrNoBubblewrap, err)
		case ModeGvisor:
			return nil, fmt.Errorf("sandbox: %w: %v", ErrNoGvisor, err)
		}
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	if keep {
		p.startPreload() // New's own start: nothing waits
		return p, nil
	}
	p.kill()
	_ = removeKernelDirs(dir)
	return nil, nil
}

// keepFirst puts the self-test's kernel p on the ready list, where the pool
// would have room to start it (the capacity and the pool-wide limits, as
// reserveLocked checks before a start; with p running, nothing else yet),
// else kills it. New calls it before the pool runs, which then starts the
// other Ready-1 kernels. The pool's accounting needs nothing more: a ready
// kernel counts as one of e.ready (not e.starting), and NewKernel takes it
// like any other (hitLocked, setSessionOOMScore).
func (e *Executor) keepFirst(p *proc) {
	e.mu.Lock()
	kept := len(e.ready) < e.target && (e.capacity < 0 || len(e.ready) < e.capacity) && e.roomLocked(0) == ""
	if kept {
		e.ready = append(e.ready, p)
	}
	e.mu.Unlock()
	if !kept {
		p.kill()
		_ = removeKernelDirs(p.dataDir)
	}
}

// Info describes the interpreter and the isolation. It is cheap: the
// interpreter was probed by New.
func (e *Executor) Info() kernel.Info {
	pk := make(map[string]string, len(e.info.Packages))
	for k, v := range e.info.Packages {
		pk[k] = v
	}
	info := e.info
	info.Packages = pk
	return info
}

// Limits describes how the limits are enforced, e.g.
// "cgroup v1 pids+memory; rlimits AS+FSIZE".
func (e *Executor) Limits() string { return e.limits }

// BaseDir is the directory holding the kernels' data directories.
func (e *Executor) BaseDir() string { return e.base }

// Start scheduling (issue 16). Every kernel is started by the pool, at most
// slots at a time (one per CPU, at least 2: a start is CPU-bound, more at
// once only makes each slower), and goes to the oldest NewKernel waiting for
// one, else to the ready list; starts for waiting calls come first, the ready
// list is refilled as it drains. A burst of new sessions thus gets its kernels
// in arrival order, each as soon as the CPUs can start it, instead of all of
// them sharing the CPUs and finishing together at the end.
//
// The ready list adapts to the bursts seen, within the pool-wide limits. A
// burst is the NewKernel calls from the moment the pool leaves rest (its
// ready list at target, no call waiting) until it is back at rest, i.e.
// until the ready list has been refilled (demand). When one of them has to
// wait for a start, the ready list was too short for the burst: the target
// becomes the burst's size so far, up to the ready cap (maxReady), so that
// the next burst of that size is served from the ready list. The target then
// holds while bursts keep needing more than Options.Ready kernels (a wait, or
// a ready kernel taken beyond Ready's), and after readyDecay without one it
// falls back by one per readyDecay, down to Options.Ready, closing a surplus
// ready kernel each time (linear: a test suite whose bursts come every few
// minutes keeps most of its ready list between them). The decay counts from
// the end of the refill, not from the burst.
//
// The ready cap (readyCap) is Options.MaxReady (DefaultMaxReady, 32: a
// burst of 32 on bwrap is ~16 s of starts on two cores, and 32 idle ready
// kernels hold ~1.7 GiB), at most a quarter of MaxTotalMemoryBytes at
// readyMem per ready kernel (idle ready kernels never hold more than a
// quarter of the sandboxes' memory budget: the cgroup OOM-kills a session's
// process when the sandboxes together pass it) and at most Capacity (when
// kernels are counted at their memory limit), never below Options.Ready.
// Within it, every refill start still needs room in the pool-wide limits
// (reserveLocked: memory and tasks in use, disk, Capacity), and ready
// kernels count against them like sessions; a larger ready list never takes
// a session's room at admission, since a new session takes a ready kernel
// first and sessions waiting for a start come before the refill. Nor after:
// ready kernels keep oom_score_adj 1000 and a session's is lowered when it
// takes one (sessionOOMScoreAdj), so when the sandboxes together pass the
// memory budget the kernel's OOM killer takes an idle ready kernel before a
// session that works within its own limit (TestReadySandboxesOOMKilledFirst;
// bwrap only, see setSessionOOMScore).
// A killed ready kernel is dropped when a session would take it and started
// again by the refill when there is room. The first ready kernel is New's
// self-test's (keepFirst), started like the others after the font cache was
// built; it enters the ready list before the pool runs and counts as a
// ready kernel from then on (no start, no reserve).
const (
	readyDecay = time.Minute
	// readyMemShare: demand raises the ready list to at most
	// 1/readyMemShare of MaxTotalMemoryBytes at readyMem per kernel (the
	// Options.Ready kernels are kept in any case).
	readyMemShare = 4
)

// startResult is a started kernel (or why it did not start) handed to a
// waiting NewKernel.
type startResult struct {
	p   *proc
	err error
}

// startSlots is how many kernels the pool starts at once.
func startSlots() int { return max(2, runtime.NumCPU()) }

// pool starts kernels: for waiting NewKernel calls and to keep target ready.
func (e *Executor) pool() {
	defer e.poolWG.Done()
	// Ready kernels wait for matplotlib's font cache (each copies it at
	// start); kernels for waiting calls do not. With Ready > 0, New built
	// it before the self-test, whose kernel is the first ready one.
	e.mu.Lock()
	built := e.fontCache
	e.mu.Unlock()
	if !built {
		e.poolWG.Add(1)
		go func() {
			defer e.poolWG.Done()
			e.buildFontCache(e.ctx)
			e.mu.Lock()
			e.fontCache = true
			e.mu.Unlock()
			e.wake()
		}()
	}
	tick := time.NewTicker(e.opts.readyDecay / 6)
	defer tick.Stop()
	for {
		e.mu.Lock()
		for !e.closed && e.ctx.Err() == nil && e.starting < e.slots && e.needStartLocked() {
			if !e.reserveLocked() {
				e.refuseWaitersLocked()
				break
			}
			e.poolWG.Add(1)
			go e.startOne()
		}
		surplus := e.decayLocked(time.Now())
		e.restLocked()
		e.releasePreloadsLocked()
		var wait <-chan time.Time
		if len(e.waiters) == 0 && time.Now().Before(e.failUntil) {
			wait = time.After(time.Until(e.failUntil))
		}
		e.mu.Unlock()
		for _, p := range surplus {
			p.kill()
			_ = removeKernelDirs(p.dataDir)
		}
		select {
		case <-e.ctx.Done():
			return
		case <-e.wakeup:
		case <-tick.C:
		case <-wait:
		}
	}
}

// needStartLocked says whether one more kernel should start: for a waiting
// NewKernel, or for the ready list (not right after a failed start). e.mu
// must be held.
func (e *Executor) needStartLocked() bool {
	if len(e.waiters) > e.starting {
		return true
	}
	if !e.fontCache || time.Now().Before(e.failUntil) {
		return false
	}
	return len(e.ready)+e.starting-len(e.waiters) < e.target
}

// startOne starts a kernel and hands it to the oldest waiting NewKernel, or
// adds it to the ready list. e.starting was counted by the caller.
func (e *Executor) startOne() {
	defer e.poolWG.Done()
	defer e.wake()
	if e.opts.startHook != nil {
		defer e.opts.startHook()()
	}
	dir, err := e.newDataDir()
	var p *proc
	if err == nil {
		p, err = e.startProc(e.ctx, dir, "ready")
		if err != nil {
			_ = removeKernelDirs(dir)
		}
	} else {
		err = fmt.Errorf("sandbox: %w", err)
	}
	e.mu.Lock()
	e.starting--
	if p != nil && e.closed {
		e.mu.Unlock()
		p.kill()
		_ = removeKernelDirs(dir)
		return
	}
	if p != nil {
		e.handLocked(p)
		e.holdPreloadLocked(p)
		e.mu.Unlock()
		return
	}
	if len(e.waiters) > 0 {
		// The oldest waiting call gets the error, as when it started its
		// kernel itself.
		if e.ctx.Err() != nil {
			err = ErrClosed
		}
		w := e.waiters[0]
		e.waiters = e.waiters[1:]
		w <- startResult{err: err}
	} else if e.ctx.Err() == nil {
		e.failUntil = time.Now().Add(time.Second)
		e.log.Warn("sandbox: starting a ready kernel failed", "err", err)
	}
	e.mu.Unlock()
}

// accountDisk records u, a new measurement of k's data directory, in the
// pool-wide totals, and says why k is over the pool-wide limits ("" when it
// is not): the data directories together hold more than MaxTotalDiskBytes
// (or the entries limit) and k's grew since its last measurement. So once
// the pool is full, the kernels that write are stopped (like one over
// MaxDataDirBytes: killed, restarted on the same files, no cell runs while
// it still grows), and those that do not write keep working. others is what
// the other kernels held at their last measurement.
func (e *Executor) accountDisk(k *Kernel, u usage) (over string, others int64) {
	o := &e.opts
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.kernels[k]; !ok {
		return "", e.diskBytes // closed: forget already took it out
	}
	grew := u.bytes > k.diskBytes || u.entries > k.diskEntries
	e.diskBytes += u.bytes - k.diskBytes
	e.diskEntries += u.entries - k.diskEntries
	k.diskBytes, k.diskEntries = u.bytes, u.entries
	others = e.diskBytes - u.bytes
	switch {
	case !grew:
	case o.MaxTotalDiskBytes > 0 && e.diskBytes > o.MaxTotalDiskBytes:
		over = fmt.Sprintf("OSError: the sessions of the pool hold %d bytes in their /mnt/data together, over the pool-wide limit of %d bytes (this one %d)", e.diskBytes, o.MaxTotalDiskBytes, u.bytes)
	case o.maxTotalEntries > 0 && e.diskEntries > o.maxTotalEntries:
		over = fmt.Sprintf("OSError: the sessions of the pool hold %d files and directories in their /mnt/data together, over the pool-wide limit of %d (this one %d)", e.diskEntries, o.maxTotalEntries, u.entries)
	}
	return over, others
}

// refuseWaitersLocked fails the NewKernel calls that wait for a start the
// pool-wide limits no longer leave room for (the memory or disk the
// sessions use grew since they were admitted), the newest first: the
// oldest ones get the kernels being started. e.mu must be held.
func (e *Executor) refuseWaitersLocked() {
	why := e.roomLocked(e.starting + 1)
	if why == "" {
		why = fmt.Sprintf("%d kernels of %d bytes of memory each in %d", e.capacity, e.opts.MemoryLimitBytes, e.opts.MaxTotalMemoryBytes)
	}
	for len(e.waiters) > e.starting {
		w := e.waiters[len(e.waiters)-1]
		e.waiters = e.waiters[:len(e.waiters)-1]
		w <- startResult{err: fmt.Errorf("sandbox: %w (%s)", ErrPoolFull, why)}
	}
}

// handLocked gives a started kernel to the oldest waiting NewKernel, or to
// the ready list when none waits. e.mu must be held.
func (e *Executor) handLocked(p *proc) {
	if len(e.waiters) == 0 {
		e.ready = append(e.ready, p)
		return
	}
	w := e.waiters[0]
	e.waiters = e.waiters[1:]
	e.handed[p] = struct{}{}
	w <- startResult{p: p}
}

// holdPreloadLocked holds the background preload of p, a kernel the pool
// just started (handed to a session or put on the ready list), while
// NewKernel calls still wait for a start, and lets it begin at once
// otherwise (releasePreloadsLocked). In a burst the preloads of the kernels
// already handed out (numpy: ~0.1 s of CPU each) would otherwise share the
// CPUs with the starts the rest of the burst waits for; held, they begin
// once the last waiting call got its kernel (BENCHMARKS.md, "Bursts:
// preloads held while starts wait"). A cell that imports a preload module meanwhile
// imports it itself. Only drivers that hold it (procCgroup: with a memory
// cgroup, whose limit bounds the sandbox while RLIMIT_AS is still looser by
// the preload's reserve) are held. e.mu must be held.
func (e *Executor) holdPreloadLocked(p *proc) {
	if !p.gated {
		return
	}
	e.held = append(e.held, p)
	e.releasePreloadsLocked()
}

// releasePreloadsLocked lets the held preloads begin when no NewKernel call
// waits for a start, at most e.slots at a time. e.mu must be held.
func (e *Executor) releasePreloadsLocked() {
	if len(e.waiters) > 0 || len(e.held) == 0 || e.opts.holdPreloads {
		return
	}
	held := e.held
	e.held = nil
	e.poolWG.Add(1)
	go func() {
		defer e.poolWG.Done()
		// At most slots preloads at once, oldest kernel first: 20 at once
		// would slow the last session's first cell, which runs just then.
		sem := make(chan struct{}, e.slots)
		for _, p := range held {
			select {
			case sem <- struct{}{}:
			case <-e.ctx.Done():
				return
			}
			p.startPreload()
			go func() {
				defer func() { <-sem }()
				select {
				case <-p.preloaded:
				case <-p.dead:
				case <-p.exited:
				case <-e.ctx.Done():
				}
			}()
		}
	}()
}

// missLocked records that an admitted NewKernel has to wait for a kernel:
// the ready list was too short for the burst under way, whose size (demand)
// becomes the target, up to the ready cap. With Options.Ready 0 the pool
// keeps no ready kernel at all. e.mu must be held.
func (e *Executor) missLocked() {
	e.demand++
	if e.opts.Ready == 0 {
		return
	}
	e.lastMiss = time.Now()
	if t := max(e.target, min(e.demand, e.maxReady)); t != e.target {
		e.target = t
		e.logInfo("sandbox: ready target raised by a burst of new sessions", "target", t, "max_ready", e.maxReady)
	}
}

// hitLocked records that a NewKernel took a ready kernel: when the burst
// under way needs more than Options.Ready kernels, the raised target is in
// use and does not decay. e.mu must be held.
func (e *Executor) hitLocked() {
	e.demand++
	if e.demand > e.opts.Ready {
		e.lastMiss = time.Now()
	}
}

// logInfo logs at Info on the executor's logger (none in the pool tests'
// bare executors).
func (e *Executor) logInfo(msg string, args ...any) {
	if e.log != nil {
		e.log.Info(msg, args...)
	}
}

// restLocked ends the burst under way when the pool is at rest: its ready
// list at target and no call waiting. e.mu must be held.
func (e *Executor) restLocked() {
	if len(e.waiters) == 0 && len(e.ready) >= e.target {
		e.demand = 0
	}
}

// readyMem is what readyCap counts per ready kernel: about a ready kernel's
// memory charge (~55 MiB on bwrap with numpy preloaded, ~150 MiB with
// gVisor's Sentry and Gofer; see memReserve).
func (e *Executor) readyMem() int64 {
	if e.opts.Mode == ModeGvisor {
		return gvisorMemReserve
	}
	return memReserve
}

// readyCap is the most ready kernels demand may raise the target to:
// Options.MaxReady (DefaultMaxReady when 0), at most a quarter of
// MaxTotalMemoryBytes at readyMem each and at most Capacity, never below
// Options.Ready (which the pool keeps in any case, within the pool-wide
// limits). It needs the budgets and capacity set.
func (e *Executor) readyCap() int {
	o := &e.opts
	if o.Ready == 0 {
		return 0
	}
	n := o.MaxReady
	if n <= 0 {
		n = DefaultMaxReady
	}
	if o.MaxTotalMemoryBytes > 0 {
		n = min(n, int(min(o.MaxTotalMemoryBytes/readyMemShare/e.readyMem(), math.MaxInt32)))
	}
	if e.capacity >= 0 {
		n = min(n, e.capacity)
	}
	return max(n, o.Ready)
}

// ReadyCap is the most ready kernels the pool keeps when bursts of demand
// raise its target (see Options.MaxReady).
func (e *Executor) ReadyCap() int { return e.maxReady }

// decayLocked lowers the ready target by one once readyDecay passed without
// demand beyond Options.Ready since the ready list was refilled, and returns
// the ready kernels over it (to be closed by the caller). While the ready
// list is still being refilled it does not decay: the kernels being started
// have not had a chance to be used yet (a refill of 20 gVisor kernels takes
// minutes on a busy host). e.mu must be held.
func (e *Executor) decayLocked(now time.Time) []*proc {
	if e.target <= e.opts.Ready {
		return nil
	}
	if e.starting > 0 && len(e.ready) < e.target {
		e.lastMiss = now // the decay counts from the refill's end
		return nil
	}
	if now.Sub(e.lastMiss) < e.opts.readyDecay {
		return nil
	}
	e.target--
	e.lastMiss = now
	if e.log != nil {
		e.log.Debug("sandbox: ready target lowered after a quiet period", "target", e.target)
	}
	var surplus []*proc
	for len(e.ready) > e.target {
		surplus = append(surplus, e.ready[len(e.ready)-1])
		e.ready = e.ready[:len(e.ready)-1]
	}
	return surplus
}

// newDataDir creates a kernel's data directory: 0700, owned by the sandbox
// user (the user namespace maps the sandbox's uid 1000 to it, so it owns the
// directory inside). Its name is random and says nothing.
func (e *Executor) newDataDir() (string, error) {
	dir, err := os.MkdirTemp(e.base, "")
	if err != nil {
		return "", err
	}
	if err := e.id.chown(dir); err != nil {
		_ = os.Remove(dir)
		return "", err
	}
	if err := e.makeProxyDir(dir); err != nil {
		_ = removeKernelDirs(dir)
		return "", err
	}
	return dir, nil
}

// NewKernel returns a kernel with a fresh, empty data directory: a ready one
// when the pool has one, else the next one the pool starts (see pool),
// waited for until ctx ends. It fails with ErrPoolFull when the kernels and
// the calls already waiting fill the pool-wide limits.
func (e *Executor) NewKernel(ctx context.Context) (kernel.Kernel, error) {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil, ErrClosed
	}
	var p *proc
	for len(e.ready) > 0 && p == nil {
		p = e.ready[0]
		e.ready = e.ready[1:]
		if !p.usable() {
			p.kill()
			_ = removeKernelDirs(p.dataDir)
			p = nil
		}
	}
	if p != nil {
		e.hitLocked()
		k := e.adoptLocked(p)
		e.mu.Unlock()
		e.setSessionOOMScore(p)
		e.wake() // refill
		return k, nil
	}
	if full := e.admitLocked(); full != "" {
		e.mu.Unlock()
		return nil, fmt.Errorf("sandbox: %w (%s)", ErrPoolFull, full)
	}
	w := make(chan startResult, 1)
	e.waiters = append(e.waiters, w)
	e.missLocked()
	e.mu.Unlock()
	e.wake()
	var r startResult
	select {
	case r = <-w:
	case <-ctx.Done():
		e.mu.Lock()
		if i := slices.Index(e.waiters, w); i >= 0 {
			e.waiters = slices.Delete(e.waiters, i, i+1)
			e.mu.Unlock()
			e.wake() // held preloads may begin (releasePreloadsLocked)
			return nil, ctx.Err()
		}
		e.mu.Unlock()
		// A kernel was handed over meanwhile: pass it on.
		if r = <-w; r.p != nil {
			e.mu.Lock()
			delete(e.handed, r.p)
			if e.closed {
				e.mu.Unlock()
				r.p.kill()
				_ = removeKernelDirs(r.p.dataDir)
			} else {
				e.handLocked(r.p)
				e.mu.Unlock()
			}
		}
		return nil, ctx.Err()
	}
	if r.err != nil {
		return nil, r.err
	}
	e.mu.Lock()
	delete(e.handed, r.p)
	if e.closed {
		e.mu.Unlock()
		r.p.kill()
		_ = removeKernelDirs(r.p.dataDir)
		return nil, ErrClosed
	}
	k := e.adoptLocked(r.p)
	e.mu.Unlock()
	e.setSessionOOMScore(r.p)
	return k, nil
}

// adoptLocked makes a started process a session's kernel. e.mu must be held.
func (e *Executor) adoptLocked(p *proc) *Kernel {
	k := &Kernel{e: e, dataDir: p.dataDir, p: p}
	e.kernels[k] = struct{}{}
	k.startWatch() // before Executor.Close can see (and close) k
	return k
}

// Close kills every sandbox, stops the pool and removes all data directories
// the executor created. It is idempotent.
func (e *Executor) Close() error {
	e.closeOnce.Do(func() {
		e.cancel()
		e.poolWG.Wait()
		e.mu.Lock()
		e.closed = true
		ready := e.ready
		e.ready = nil
		for _, w := range e.waiters {
			w <- startResult{err: ErrClosed}
		}
		e.waiters = nil
		kernels := make([]*Kernel, 0, len(e.kernels))
		for k := range e.kernels {
			kernels = append(kernels, k)
		}
		for p := range e.handed { // NewKernel finds e.closed and kills it again
			ready = append(ready, p)
		}
		e.mu.Unlock()
		var errs []error
		for _, p := range ready {
			p.kill()
			if err := removeKernelDirs(p.dataDir); err != nil {
				errs = append(errs, err)
			}
		}
		for _, k := range kernels {
			if err := k.Close(); err != nil {
				errs = append(errs, err)
			}
		}
		e.rmWG.Wait()
		e.mu.Lock()
		close(e.launchCh)
		e.mu.Unlock()
		e.launchWG.Wait()
		if e.cg != nil {
			e.cg.remove()
		}
		if err := os.RemoveAll(e.sysDir); err != nil {
			errs = append(errs, err)
		}
		if err := os.RemoveAll(e.base); err != nil {
			errs = append(errs, err)
		}
		e.closeErr = errors.Join(errs...)
	})
	return e.closeErr
}

// removeLater removes a closed kernel's directories without making the
// caller wait for it: a session's data can be hundreds of thousands of
// entries, which take a minute to delete. It renames them out of the way at
// once (DataDir is gone when it returns) and deletes them in a goroutine that
// Close waits for. After Close it removes them at once.
func (e *Executor) removeLater(dataDir string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return removeKernelDirs(dataDir)
	}
	trash := filepath.Join(filepath.Dir(dataDir), ".rm-"+randHex(8))
	if err := os.Rename(dataDir, trash); err != nil {
		return removeKernelDirs(dataDir)
	}
	if err := os.Rename(dataDir+".tmp", trash+".tmp"); err != nil && !errors.Is(err, os.ErrNotExist) {
		_ = os.RemoveAll(dataDir + ".tmp")
	}
	_ = os.RemoveAll(proxyDir(dataDir)) // at most a socket

	hook := e.opts.removeHook
	e.rmWG.Add(1)
	go func() {
		defer e.rmWG.Done()
		if hook != nil {
			hook()
		}
		if err := removeKernelDirs(trash); err != nil {
			e.log.Warn("sandbox: removing a closed kernel's data failed", "err", err)
		}
	}()
	return nil
}

func (e *Executor) forget(k *Kernel) {
	e.mu.Lock()
	delete(e.kernels, k)
	e.diskBytes -= k.diskBytes
	e.diskEntries -= k.diskEntries
	k.diskBytes, k.diskEntries = 0, 0
	e.mu.Unlock()
	e.wake() // the pool may have room for a ready kernel again
}

func (e *Executor) wake() {
	select {
	case e.wakeup <- struct{}{}:
	default:
	}
}

// setBudgets fills in the default pool-wide limits (see Options) and
// refuses limits in which not one kernel fits.
func (e *Executor) setBudgets() error {
	o := &e.opts
	if o.MaxTotalMemoryBytes == 0 {
		o.MaxTotalMemoryBytes = -1
		if mem, err := hostMemoryBytes(); err == nil {
			o.MaxTotalMemoryBytes = mem / 2
		} else {
			e.log.Warn("sandbox: no pool-wide memory limit: the host's memory is unknown", "err", err)
		}
	}
	var st unix.Statfs_t
	statErr := unix.Statfs(e.base, &st)
	if o.MaxTotalDiskBytes == 0 {
		o.MaxTotalDiskBytes = -1
		if statErr == nil {
			o.MaxTotalDiskBytes = int64(st.Bavail) * st.Bsize / 2
		} else {
			e.log.Warn("sandbox: no pool-wide disk limit: the free space is unknown", "err", statErr)
		}
	}
	if o.maxTotalEntries == 0 {
		o.maxTotalEntries = -1
		if statErr == nil && st.Files > 0 {
			o.maxTotalEntries = int64(min(st.Ffree/2, math.MaxInt64))
		}
	}
	if o.maxTotalTasks == 0 {
		if n, err := hostTasks(); err == nil {
			o.maxTotalTasks = n / 2
		}
	}
	if (o.MaxTotalMemoryBytes > 0 && o.MaxTotalMemoryBytes < o.MemoryLimitBytes) || (o.MaxTotalDiskBytes > 0 && o.MaxTotalDiskBytes < o.MaxDataDirBytes) {
		return fmt.Errorf("sandbox: not one kernel fits in the pool-wide limits (%d bytes of memory for kernels of %d, %d bytes of disk for kernels of %d)",
			o.MaxTotalMemoryBytes, o.MemoryLimitBytes, o.MaxTotalDiskBytes, o.MaxDataDirBytes)
	}
	return nil
}

// poolLimits makes the executor's cgroups, the parents of every sandbox's,
// enforce the pool-wide memory and tasks limits. A limit the cgroups cannot
// enforce is counted per kernel instead (see setCapacity).
func (e *Executor) poolLimits() {
	mem, err := e.cg.limitPool(max(e.opts.MaxTotalMemoryBytes, 0), max(e.opts.maxTotalTasks, 0))
	if err != nil {
		e.log.Warn("sandbox: the cgroups cannot enforce the pool-wide limits: every kernel counts its -memory-limit", "err", err)
		return
	}
	e.memByUse = mem
	e.tasksByUse = e.cg.pids != "" && e.opts.maxTotalTasks > 0
}

// setCapacity computes how many kernels fit when the pool-wide memory limit
// is counted per kernel (no memory cgroup enforces it): each counts its
// MemoryLimitBytes, ready ones included. With a memory cgroup there is no
// such count (-1): admission measures (see roomLocked).
func (e *Executor) setCapacity() {
	e.capacity = -1
	if o := e.opts; !e.memByUse && o.MaxTotalMemoryBytes > 0 {
		e.capacity = int(min(o.MaxTotalMemoryBytes/o.MemoryLimitBytes, math.MaxInt32))
	}
}

// hostMemoryBytes is MemTotal of /proc/meminfo.
func hostMemoryBytes() (int64, error) {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			f := strings.Fields(v)
			if len(f) == 2 && f[1] == "kB" {
				kb, err := strconv.ParseInt(f[0], 10, 64)
				return kb << 10, err
			}
		}
	}
	return 0, errors.New("no MemTotal in /proc/meminfo")
}

// Capacity is the number of kernels that fit in MaxTotalMemoryBytes when
// each counts its MemoryLimitBytes, ready kernels included, or -1 when no
// count bounds them: a memory cgroup enforces MaxTotalMemoryBytes on all
// sandboxes together and NewKernel measures what they use (see roomLocked),
// or there is no limit. A session pool should hold at most that many
// sessions.
func (e *Executor) Capacity() int { return e.capacity }

// What admission sets aside for one kernel being started, in the pool-wide
// limits that are measured rather than counted per kernel (see roomLocked):
// a ready kernel's charge is ~55 MiB of memory on bwrap with numpy
// preloaded and ~150 MiB with gVisor's Sentry and Gofer; ~5 host tasks on
// bwrap, ~45 on gVisor. Not a bound of anything: the cgroups and the data
// directory watcher enforce the limits; this only keeps admission from
// starting a kernel that would find no room.
const (
	memReserve         = 64 << 20
	gvisorMemReserve   = 128 << 20
	tasksReserve       = 16
	gvisorTasksReserve = 128
)

// roomLocked says which pool-wide limit leaves no room for pending kernel
// starts (those under way included) beyond the kernels that run, are ready
// or handed over ("" when they fit). Memory is measured when a memory cgroup
// holds every sandbox, as are tasks (each start set aside a reserve), and
// the data directories' bytes and entries at the watcher's last measurement
// of each; without a memory cgroup every kernel counts its MemoryLimitBytes
// (capacity, checked by the callers). e.mu must be held.
func (e *Executor) roomLocked(pending int) string {
	o := &e.opts
	gv := o.Mode == ModeGvisor
	if e.memByUse {
		reserve := int64(memReserve)
		if gv {
			reserve = gvisorMemReserve
		}
		used, err := e.cg.poolMemory()
		if err != nil {
			return "memory in use unknown: " + err.Error()
		}
		if used+int64(pending)*reserve > o.MaxTotalMemoryBytes {
			return fmt.Sprintf("%d bytes of memory in use of %d", used, o.MaxTotalMemoryBytes)
		}
	}
	if e.tasksByUse {
		reserve := int64(tasksReserve)
		if gv {
			reserve = gvisorTasksReserve
		}
		used, err := e.cg.poolTasks()
		if err != nil {
			return "tasks unknown: " + err.Error()
		}
		if used+int64(pending)*reserve > int64(o.maxTotalTasks) {
			return fmt.Sprintf("%d tasks of %d", used, o.maxTotalTasks)
		}
	}
	if o.MaxTotalDiskBytes > 0 && e.diskBytes+min(o.MaxDataDirBytes, o.MaxFileSizeBytes) > o.MaxTotalDiskBytes {
		return fmt.Sprintf("%d bytes of disk in use of %d", e.diskBytes, o.MaxTotalDiskBytes)
	}
	if o.maxTotalEntries > 0 && e.diskEntries >= o.maxTotalEntries {
		return fmt.Sprintf("%d files and directories of %d", e.diskEntries, o.maxTotalEntries)
	}
	return ""
}

// admitLocked says why a NewKernel that found no ready kernel may not wait
// for one ("" when it may): counted per kernel, the kernels that run or are
// handed over and the calls already waiting fill the pool; measured, what the
// sandboxes use leaves no room for the starts under way and one more. Calls
// waiting for a start are not set aside for one by one: the pool checks the
// room again for each start and refuses the newest waiting calls when it is
// gone (refuseWaitersLocked), so a burst is not refused for reserves far
// above what its kernels will use (100 gVisor kernels at 128 MiB each pass
// a 11.5 GiB budget they fit in). e.mu must be held.
func (e *Executor) admitLocked() string {
	if e.capacity >= 0 && len(e.kernels)+len(e.handed)+len(e.waiters) >= e.capacity {
		return fmt.Sprintf("%d kernels of %d bytes of memory each in %d", e.capacity, e.opts.MemoryLimitBytes, e.opts.MaxTotalMemoryBytes)
	}
	return e.roomLocked(e.starting + 1)
}

// reserveLocked takes room for one kernel about to start, or reports false
// when the pool-wide limits leave none. e.starting counts it until it is in
// e.ready or handed to a waiting NewKernel, or failed to start. e.mu must
// be held.
func (e *Executor) reserveLocked() bool {
	if e.capacity >= 0 && len(e.ready)+len(e.kernels)+e.starting+len(e.handed) >= e.capacity {
		return false
	}
	if e.roomLocked(e.starting+1) != "" {
		return false
	}
	e.starting++
	return true
}

// countUserTasks counts the tasks (threads) of the real uid, for RLIMIT_NPROC
// which counts per user across the whole machine.
func countUserTasks(uid int) int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	n := 0
	for _, ent := range ents {
		if _, err := strconv.Atoi(ent.Name()); err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + ent.Name() + "/status")
		if err != nil {
			continue
		}
		var ruid, threads = -1, 1
		for _, line := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "Uid:"); ok {
				if f := strings.Fields(v); len(f) > 0 {
					ruid, _ = strconv.Atoi(f[0])
				}
			} else if v, ok := strings.CutPrefix(line, "Threads:"); ok {
				threads, _ = strconv.Atoi(strings.TrimSpace(v))
			}
		}
		if ruid == uid {
			n += threads
		}
	}
	return n
}
