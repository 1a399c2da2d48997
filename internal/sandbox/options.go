package sandbox

// The declarations of this file build on every OS, so that the emulator
// (and the fake, azsessionstest, behind users' tests) compiles on macOS and
// Windows too. The executor itself (New, Executor, Kernel: bubblewrap,
// gVisor, cgroups, seccomp) is Linux-only: the other files of the package
// are built for linux alone, and emulator.NewSandboxExecutor returns an
// error elsewhere.

import (
	"errors"
	"log/slog"
	"time"

	"github.com/azsessions/azsessions/internal/kernel"
)

// Sandbox modes for Options.Mode.
const (
	// ModeBwrap isolates each kernel with bubblewrap (the default).
	ModeBwrap = "bwrap"
	// ModeGvisor isolates each kernel in a gVisor sandbox (runsc); see
	// gvisor.go.
	ModeGvisor = "gvisor"
	// ModeNone runs kernels as plain processes of the emulator's user, with no
	// isolation. Only for machines without bubblewrap, on explicit request.
	ModeNone = "none"
)

// Defaults for the zero values of Options.
const (
	DefaultReady            = 2
	DefaultMemoryLimitBytes = 1 << 30
	DefaultMaxProcesses     = 64
	DefaultMaxFileSizeBytes = 128 << 20
	DefaultMaxDataDirBytes  = 1 << 30
	// DefaultMaxDataDirEntries bounds the files and directories (inodes) of
	// one kernel's /mnt/data.
	DefaultMaxDataDirEntries = 100_000
	// DefaultCPUs is one sandbox's CPU quota, in cores.
	DefaultCPUs = 1.0
	// DefaultMaxReady is the MaxReady of 0: how many ready kernels demand
	// may raise the pool to (see Options.MaxReady).
	DefaultMaxReady = 32
)

// Runtimes for Options.Runtime.
const (
	// RuntimePython runs Python cells (driver.py; the default).
	RuntimePython = "python"
	// RuntimeNode runs JavaScript cells in Node.js (driver.js).
	RuntimeNode = "node"
)

// ErrNoBubblewrap is wrapped by the error of New when Mode is "bwrap" and the
// bwrap executable is missing or cannot create a sandbox on this machine.
var ErrNoBubblewrap = errors.New(`bubblewrap (bwrap) is missing or unusable: install the Debian package "bubblewrap" (apt-get install bubblewrap), or run without isolation with -sandbox=none`)

// ErrNoGvisor is wrapped by the error of New when Mode is "gvisor" and runsc
// is missing or cannot create a sandbox on this machine.
var ErrNoGvisor = errors.New(`gVisor (runsc) is missing or unusable: install the Debian package "runsc" (apt-get install runsc) and run the emulator as root, or use -sandbox=bwrap`)

// ErrClosed is returned by NewKernel after Executor.Close and by Execute after
// Kernel.Close.
var ErrClosed = errors.New("sandbox: closed")

// ErrPoolFull is wrapped by the error of NewKernel when one more kernel would
// pass Options.MaxTotalMemoryBytes or MaxTotalDiskBytes. It is
// kernel.ErrPoolFull, which the emulator answers like a full session pool.
var ErrPoolFull = kernel.ErrPoolFull

// Options configures an Executor. The zero value is usable: bubblewrap, the
// system Python, no ready kernels (set Ready to DefaultReady for a pool) and
// the default limits. Sizes are in bytes.
type Options struct {
	// Python is the interpreter. "" means /usr/bin/python3 when it exists, else
	// python3 on PATH. Shims and venvs are resolved by asking the interpreter
	// for sys.executable; prefixes outside /usr are bound read-only.
	Python string
	// Runtime is what the kernels run: RuntimePython ("python", the default
	// when "") or RuntimeNode ("node": JavaScript in a long-lived Node.js
	// process per kernel, for NodeLTS session pools; see node.go). Python is
	// not needed then.
	Runtime string
	// Node is the Node.js executable of RuntimeNode: "" means /usr/bin/node
	// when it exists, else node on PATH. An executable outside the system
	// directories (such as /usr/local/bin/node, which the sandbox hides) is
	// bound into the sandbox alone, read-only.
	Node string
	// Mode is ModeBwrap ("bwrap", the default when ""), ModeGvisor
	// ("gvisor": a gVisor sandbox per kernel, needs root and runsc; see
	// gvisor.go) or ModeNone ("none").
	Mode string
	// DataDir is the directory under which each kernel gets a fresh data
	// directory. "" means a new temporary directory removed by Close. A given
	// DataDir itself is kept; the kernels' directories in it are removed.
	DataDir string
	// Ready is the number of kernels kept started in the background so that
	// NewKernel is fast: 0 means none (every NewKernel waits for a start,
	// ~0.5 s), a negative value means DefaultReady (2). After a burst of N
	// new kernels that Ready could not serve, the pool keeps N ready (up to
	// the ready cap, see MaxReady), so that the next burst of N is served
	// from the ready list, and falls back toward Ready by one a minute
	// without such demand; kernels start at most one per CPU at a time, the
	// oldest waiting NewKernel first. The first ready kernel is the one New
	// starts to check the sandbox, kept (with the font cache built before
	// it). See the package documentation.
	Ready int
	// MaxReady bounds how many ready kernels the pool keeps when demand
	// raises its target above Ready: 0 means DefaultMaxReady (32). The
	// bound in force (ReadyCap) is also at most a quarter of
	// MaxTotalMemoryBytes at ~64 MiB per ready kernel (128 MiB on gVisor)
	// and at most Capacity, and never below Ready. Set it to Ready to keep
	// the ready list at Ready.
	MaxReady int
	// MemoryLimitBytes bounds one kernel's memory (default 1 GiB).
	MemoryLimitBytes int64
	// MaxProcesses bounds one kernel's processes and threads (default 64).
	MaxProcesses int
	// MaxFileSizeBytes bounds each file written in the sandbox (default 128 MiB).
	MaxFileSizeBytes int64
	// MaxDataDirBytes bounds the total size of one kernel's /mnt/data
	// (default 1 GiB); see the package documentation for how.
	MaxDataDirBytes int64
	// MaxDataDirEntries bounds the number of files, directories and other
	// entries under one kernel's /mnt/data (default 100,000), watched like
	// MaxDataDirBytes.
	MaxDataDirEntries int64
	// CPUs is one kernel's CPU quota in cores (default 1; 0.5 is half a
	// core), enforced by the cgroup cpu controller for every process of the
	// sandbox, background ones included. Without a cpu cgroup it is not
	// enforced (Executor.Limits says so).
	CPUs float64
	// MaxTotalMemoryBytes bounds the memory of the executor's sandboxes
	// together, ready ones included (default: half of the host's RAM, from
	// /proc/meminfo; negative: no bound). With a memory cgroup it is the
	// limit of the group that holds every sandbox's group: the kernel caps
	// what they use together (past it, it reclaims their page cache and then
	// one sandbox is killed, never the emulator: on cgroup v1 the idle ready
	// sandbox or else the sandbox whose group holds the most, on v2 the
	// largest process by resident set; see the package documentation), and
	// NewKernel fails with ErrPoolFull when their memory in use leaves no
	// room for one more kernel's start. Without one (no root, no delegated
	// cgroup) nothing would cap their sum, so every kernel counts its
	// MemoryLimitBytes against it and NewKernel fails when one more would
	// pass it (Capacity). See the package documentation.
	MaxTotalMemoryBytes int64
	// MaxTotalDiskBytes bounds what the executor's kernels hold in their
	// data directories together, as the data directory watcher measures
	// them (default: half of the free space of the file system of the data
	// directories when New runs; negative: no bound). Once they hold it, a
	// kernel whose directory grows is stopped like one over
	// MaxDataDirBytes, uploads get no more room, and NewKernel fails with
	// ErrPoolFull.
	MaxTotalDiskBytes int64
	// SandboxUser is the host account sandboxes run as when the emulator
	// runs as root: a user name, a uid or "uid:gid" (default "nobody"). uid 0
	// and gid 0 are refused: session code never runs as host root. The
	// kernels' data directories are owned by it; files the emulator writes
	// there (uploads) are given to it before the next cell runs. It is
	// ignored when the emulator is not root: sandboxes then run as the
	// emulator's own uid.
	SandboxUser string
	// Preload lists the modules every kernel imports in the background once
	// it can run cells, so that a session's first use of them is fast, at
	// the price of memory per kernel (RSS of a ready kernel on Debian's
	// Python 3.11: ~40 MiB with nothing, ~54 MiB with numpy, ~78 MiB with
	// numpy and matplotlib.pyplot, ~106 MiB with numpy, pandas and
	// matplotlib.pyplot). nil means DefaultPreload(); an empty non-nil slice
	// preloads nothing. "matplotlib" stands for matplotlib.pyplot. A cell that
	// imports a module while the kernel still preloads it waits for that
	// import; a module that fails to import is skipped.
	Preload []string
	// Logger receives warnings and lifecycle events; nil discards them.
	Logger *slog.Logger

	// killGrace is how long Execute waits for a kernel to answer after its
	// timeout or a cancellation before it kills it (tests shorten it).
	killGrace time.Duration
	// noPreload overrides Preload with nothing (tests).
	noPreload bool
	// noIPython makes the driver use its stdlib runner (tests).
	noIPython bool
	// noFontCache skips building matplotlib's font cache (tests whose
	// kernels never import matplotlib: the build runs Python on the host
	// for every executor).
	noFontCache bool
	// noCgroup disables cgroups, as on a machine without them (tests).
	noCgroup bool
	// holdPreloads keeps every held preload held (tests start it with
	// proc.startPreload themselves).
	holdPreloads bool
	// noSelfTest skips New's self-test start when Ready is 0 (tests whose
	// executor starts its first kernel at once anyway: a sandbox that
	// cannot start fails that start instead; with Ready > 0 the self-test's
	// kernel is the first ready kernel and is always started). It also
	// skips the fallback to rlimits that a failed self-test with cgroups
	// triggers, so tests set it only where cgroups are absent or usable.
	noSelfTest bool
	// maxFigureBytes overrides the constant maxFigureBytes for the driver
	// (tests lower it; the reply check keeps the constant).
	maxFigureBytes int
	// idleScanEvery, when set, replaces nextWatchInterval between the idle
	// watcher's periodic scans (tests: only the free-space trigger scans).
	idleScanEvery time.Duration
	// maxWalkDepth bounds how deep the data directory watcher walks
	// (default the package's maxWalkDepth; tests lower it).
	maxWalkDepth int
	// removeHook, when set, runs in the goroutine that removes a closed
	// kernel's data, before it does (tests).
	removeHook func()
	// startHook, when set, runs when the pool begins a kernel's start; the
	// function it returns when that start ended (tests).
	startHook func() (done func())
	// launchPrefix, when set, is prepended to each kernel's host command
	// line (before bwrap or runsc; tests start drivers through a launcher
	// that passes them a signal disposition, see TestCancelWithSIGINTIgnored).
	launchPrefix []string
	// holdCells makes the driver start a cell whose code begins with
	// "# hold\n" only once it received an interrupt, which then arrives
	// before the cell runs (tests: TestInterruptBeforeCellStarts).
	holdCells bool
	// readyDecay overrides the constant readyDecay (tests).
	readyDecay time.Duration
	// maxTotalTasks bounds the tasks of all sandboxes together (the pids
	// limit of the group that holds theirs; 0: half of the host's tasks,
	// see hostTasks; tests lower it).
	maxTotalTasks int
	// maxTotalEntries bounds the entries of all data directories together
	// (0: half of the free inodes of their file system when New runs;
	// negative: none; tests lower it).
	maxTotalEntries int64
}
