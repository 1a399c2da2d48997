// Package kernel defines the contract between the emulator's HTTP handler and
// the things that run code: the bubblewrap sandbox (internal/sandbox) and
// scripted executors for tests. The emulator package re-exports these types.
package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/azsessions/azsessions/internal/wire"
)

// ErrPoolFull is wrapped by the error of Executor.NewKernel when the
// executor has no room for one more kernel (its pool-wide memory or disk
// budget is spent). The emulator answers it like a session pool at
// MaxSessions: 404 SessionPoolFull (or its legacy equivalent); existing
// sessions keep working.
var ErrPoolFull = errors.New("the session pool is full: no room for one more sandbox within the pool-wide memory and disk limits")

// Request is one execution handed to a Kernel.
type Request struct {
	// Code is the Python source of the cell.
	Code string
	// Timeout bounds the execution; the kernel interrupts the code when it passes.
	Timeout time.Duration
	// OutputStreamsMaxLength caps stdout and stderr, each, in characters
	// (the service's outputStreamsMaxLength): the kernel cuts them there
	// (with TruncateOutput; the handler does not cut them again) and must
	// not buffer much more than this however much the code prints. 0 means
	// 4096.
	OutputStreamsMaxLength int
	// OutputMaxLength is the former name of OutputStreamsMaxLength; the
	// emulator sets both to the same value. A kernel reads the cap with
	// OutputCap, which takes either and refuses two different values.
	//
	// Deprecated: use OutputStreamsMaxLength.
	OutputMaxLength int
	// Shell, when set, makes this the execution of a Shell session pool: the
	// kernel runs the command (Code is ignored) in /mnt/data and reports its
	// exit code in Result.ExitCode.
	Shell *ShellCommand
}

// DefaultOutputStreamsMaxLength is the output cap of a Request that sets
// none, in characters (the service's default).
const DefaultOutputStreamsMaxLength = wire.DefaultOutputStreamsMaxLength

// OutputCap returns req's output cap in characters: OutputStreamsMaxLength
// or its deprecated name OutputMaxLength, whichever is set (both may be, to
// the same value), else DefaultOutputStreamsMaxLength. Two different values
// or a negative one are an error.
func OutputCap(req Request) (int, error) {
	n, old := req.OutputStreamsMaxLength, req.OutputMaxLength
	if n < 0 || old < 0 {
		return 0, errors.New("kernel: negative output cap in Request")
	}
	if n != 0 && old != 0 && n != old {
		return 0, fmt.Errorf("kernel: Request.OutputStreamsMaxLength (%d) and its deprecated name OutputMaxLength (%d) differ", n, old)
	}
	if n = max(n, old); n == 0 {
		n = DefaultOutputStreamsMaxLength
	}
	return n, nil
}

// TruncateOutput cuts s to its first n characters and says whether it did:
// the one truncation of a kernel's output streams (and of notes in them),
// in the unit of Request.OutputStreamsMaxLength.
func TruncateOutput(s string, n int) (string, bool) {
	c := 0
	for i := range s {
		if c == n {
			return s[:i], true
		}
		c++
	}
	return s, false
}

// ShellCommand is the command of a Shell execution: Command for bash -c
// (sh -c without bash), or Argv run without a shell; Stdin is its standard
// input.
type ShellCommand struct {
	Command string   `json:"command,omitempty"`
	Argv    []string `json:"argv,omitempty"`
	Stdin   string   `json:"stdin"`
}

// Status is the outcome of an execution. The zero value counts as Succeeded.
type Status string

// Outcomes of an execution: the executions contract's terminal states, its
// words taken from internal/wire (the one list of the service's status
// words; the client's ExecutionStatus constants use the same).
const (
	Succeeded Status = wire.StatusSucceeded
	Failed    Status = wire.StatusFailed
	Canceled  Status = wire.StatusCanceled
)

// Word is the status word the service answers for s (the zero value is
// Succeeded).
func (s Status) Word() string {
	if s == "" {
		return wire.StatusSucceeded
	}
	return string(s)
}

// Result is what a Kernel answers.
type Result struct {
	Status Status
	// Stdout and Stderr are the cell's output streams, at most
	// Request.OutputStreamsMaxLength characters each.
	Stdout string
	Stderr string
	// Value is the JSON of the cell's last expression: a number, a string, null,
	// the image object {"type":"image","format":"png","base64_data":...}, or the
	// empty JSON string "" when the cell has no last expression. Nil means "".
	Value json.RawMessage
	// Text is the value's text/plain form from IPython's display formatter
	// (IPython.lib.pretty), such as "'nan'" for the string "nan" or a long list
	// broken over lines; nil when the cell has no value, its value is None or
	// an image, or the kernel does not know it. The emulator answers it for
	// returnJupyterFormatExecutionResult.
	Text *string
	// ExitCode is the exit status of a Shell execution (128+N for a command
	// killed by signal N, as bash reports it); nil for Python executions and
	// for a command that could not be started or was stopped at its timeout.
	ExitCode *int
	// Duration is how long the code ran.
	Duration time.Duration
	// StdoutTruncated and StderrTruncated say the stream was cut at
	// Request.OutputStreamsMaxLength.
	StdoutTruncated, StderrTruncated bool
	// TimedOut says the execution passed its timeout; Restarted says the kernel
	// had to be killed and started again (its variables are gone).
	TimedOut, Restarted bool
}

// Kernel is one session's long-lived interpreter. Execute is never called
// concurrently on one Kernel (the handler queues executions per session).
type Kernel interface {
	// DataDir is the host directory that the kernel sees as /mnt/data. The
	// handler stores the session's files there.
	DataDir() string
	// Execute runs one cell. A Python error is a Result with Status Failed, not
	// an error; an error means the kernel itself is broken.
	Execute(ctx context.Context, req Request) (Result, error)
	// Close stops the kernel and removes its data directory.
	Close() error
}

// Executor starts kernels. It may keep a few ready so that NewKernel is fast.
type Executor interface {
	// NewKernel returns a kernel with a fresh, empty data directory.
	NewKernel(ctx context.Context) (Kernel, error)
	// Info describes the runtime for GET metadata and for logs.
	Info() Info
	// Close stops every kernel the executor started and removes their data.
	Close() error
}

// Info describes an executor's runtime.
type Info struct {
	// Interpreter is the path of the Python interpreter, or of Node.js for
	// NodeVersion ("" for scripted executors).
	Interpreter string
	// PythonVersion such as "3.11.2" ("" when the kernels run no Python).
	PythonVersion string
	// NodeVersion such as "20.20.2" when the kernels run JavaScript in
	// Node.js (NodeLTS session pools), else "".
	NodeVersion string
	// Packages maps the name of a found package (ipython, numpy, pandas,
	// matplotlib) to its version.
	Packages map[string]string
	// Sandbox names the isolation: "bubblewrap", "none" or "scripted".
	Sandbox string
}

// SpaceReporter is implemented by kernels that limit the disk space of their
// data directory; the handler refuses an upload that would pass the limit.
type SpaceReporter interface {
	// DataDirSpace returns the bytes the data directory uses (as du counts
	// them: allocated blocks) and its limit in bytes (0 = no limit).
	DataDirSpace() (used, limit int64, err error)
}

// ContainerSpec is the custom container a session of a CustomContainer
// session pool runs in its sandbox.
type ContainerSpec struct {
	// Command is run with /bin/sh -c in the sandbox, working directory
	// /mnt/data, as the sandbox's unprivileged user.
	Command string
	// Port is the TCP port the command listens on, on the sandbox's own
	// loopback (127.0.0.1; the sandbox has no other network).
	Port int
	// StartTimeout bounds the cold start: how long the command may take to
	// accept a connection on Port.
	StartTimeout time.Duration
	// Dir, when not empty, is a host directory whose files (regular files
	// and directories; symbolic links and others are skipped) are copied
	// into the session's /mnt/data before Command starts: the files of the
	// container's image, such as its server program.
	Dir string
}

// ErrContainerExited is wrapped by the errors of Container methods once the
// container's command has exited (or was killed): the container is gone.
var ErrContainerExited = errors.New("the container's command exited")

// ErrContainerStartTimeout is wrapped by the error of
// Container.StartContainer when the command did not accept a connection on
// its port within ContainerSpec.StartTimeout (it is killed).
var ErrContainerStartTimeout = errors.New("the container's command did not listen on its port in time")

// Container is implemented by kernels that can run a custom container (an
// HTTP server of the user's) in their sandbox, for CustomContainer pools.
type Container interface {
	// StartContainer starts spec.Command in the sandbox and returns once it
	// accepts connections on spec.Port (the cold start). It is called once,
	// before any DialContainer. A command that exits first gives an error
	// wrapping ErrContainerExited, one that does not listen in time an error
	// wrapping ErrContainerStartTimeout; both say what the command wrote to
	// its stderr (its first 4,096 characters).
	StartContainer(ctx context.Context, spec ContainerSpec) error
	// DialContainer returns a new connection to the container's port inside
	// the sandbox (a byte stream: the sandbox's network stays its own). It
	// may be called concurrently. Once the command exited, the error wraps
	// ErrContainerExited.
	DialContainer(ctx context.Context) (net.Conn, error)
}
