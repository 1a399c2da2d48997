package emulator

import "github.com/azsessions/azsessions/internal/sandbox"

// SandboxOptions configures NewSandboxExecutor: Python (the interpreter, ""
// for the system python3), Runtime (SandboxRuntimePython, the default, or
// SandboxRuntimeNode for NodeLTS pools) and Node (its executable, "" for
// /usr/bin/node or node on PATH), Mode (SandboxBwrap, the default, SandboxGvisor or
// SandboxNone),
// DataDir (where the kernels' data directories go; "" for a temporary
// directory), Ready (kernels kept started; after a burst of N new sessions
// that they could not serve, N, up to MaxReady), MaxReady (the most kept
// started after bursts: 0 for DefaultMaxReady, at most a quarter of
// MaxTotalMemoryBytes at ~64 MiB each), MemoryLimitBytes, MaxProcesses,
// MaxFileSizeBytes, MaxDataDirBytes, MaxDataDirEntries, CPUs (one
// sandbox's CPU quota in cores, default 1), MaxTotalMemoryBytes and
// MaxTotalDiskBytes (pool-wide budgets of what the sandboxes use together,
// default half of the host's RAM and of the data directory's free disk: as
// root a parent cgroup caps their memory and a new session is admitted
// while their use leaves room, see the package documentation; past them a
// new session gets the pool's full answer), SandboxUser (the unprivileged host account sandboxes run as
// when the emulator is root, default "nobody"; never uid 0), Preload
// (modules every kernel imports in the background; nil for the default,
// numpy) and Logger. The zero value is usable.
type SandboxOptions = sandbox.Options

// DefaultMaxReady is the SandboxOptions.MaxReady of 0: after bursts of new
// sessions, at most 32 sandboxes are kept started (and at most a quarter of
// MaxTotalMemoryBytes at ~64 MiB each).
const DefaultMaxReady = sandbox.DefaultMaxReady

// Sandbox modes of SandboxOptions.Mode.
const (
	// SandboxBwrap isolates every kernel with bubblewrap (no network, its own
	// /mnt/data, resource limits).
	SandboxBwrap = sandbox.ModeBwrap
	// SandboxGvisor runs every kernel in a gVisor sandbox (runsc): a
	// user-space kernel between session code and the host's, for code that
	// is not trusted at all, at the price of slower starts and system calls
	// (see the README's isolation levels). It needs root and the Debian
	// package runsc; the same files, limits and features as SandboxBwrap.
	SandboxGvisor = sandbox.ModeGvisor
	// SandboxNone runs kernels as plain processes: no isolation at all. Only for
	// trusted code on Linux machines without bubblewrap (like every mode, it
	// needs Linux: on other systems NewSandboxExecutor returns an error
	// wrapping errors.ErrUnsupported).
	SandboxNone = sandbox.ModeNone
)

// ErrPoolFull is wrapped by an Executor's NewKernel error when it has no room
// for one more sandbox (SandboxOptions.MaxTotalMemoryBytes or
// MaxTotalDiskBytes). The Handler answers it like a pool at MaxSessions: 404
// NoSessionsAvailable; existing sessions keep working. Custom executors may
// return it too.
var ErrPoolFull = sandbox.ErrPoolFull

// ErrNoBubblewrap is wrapped by NewSandboxExecutor's error when the mode is
// SandboxBwrap and bwrap is missing or unusable (apt-get install bubblewrap).
var ErrNoBubblewrap = sandbox.ErrNoBubblewrap

// ErrNoGvisor is wrapped by NewSandboxExecutor's error when the mode is
// SandboxGvisor and runsc is missing or unusable (apt-get install runsc; the
// emulator must run as root).
var ErrNoGvisor = sandbox.ErrNoGvisor

// NewSandboxExecutor returns an Executor that runs real Python (or, with
// SandboxRuntimeNode, JavaScript in Node.js): one long-lived interpreter
// (IPython when installed; a Node.js process) per session, isolated with
// bubblewrap (or gVisor, SandboxGvisor), with the session's data directory
// mounted at /mnt/data. The error wraps ErrNoBubblewrap when bwrap is needed
// and missing, ErrNoGvisor when runsc is; it is also an error when the
// interpreter does not run. Handler.Close closes it.
//
// It needs Linux, in every mode (SandboxNone too: its limits, process
// handling and data directory watcher use Linux interfaces). On other
// systems it returns an error that wraps errors.ErrUnsupported, and
// ErrNoBubblewrap or ErrNoGvisor for those modes; ScriptedExecutor and
// azsessionstest.EchoExecutor work everywhere.
func NewSandboxExecutor(opts SandboxOptions) (Executor, error) {
	return newSandboxExecutor(opts)
}
