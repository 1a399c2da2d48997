package azsessions

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"

	"github.com/azsessions/azsessions/internal/wire"
)

// ShellExecution is a command for a session of a Shell session pool
// (containerType Shell). Set exactly one of ShellCommand and
// ExecCommandAndArgs. Every string must be UTF-8 (the service takes JSON
// strings): ExecuteShell refuses another before any I/O.
type ShellExecution struct {
	// ShellCommand is a command line that the pool's shell interprets, with
	// pipes, redirections and variables, for example
	// `read LINE; echo first_input:$LINE` (sent as shellCommand).
	ShellCommand string
	// ExecCommandAndArgs is a program and its arguments, run without a
	// shell, for example []string{"ls", "-a"} (sent as execCommandAndArgs).
	// The first element must not be empty.
	ExecCommandAndArgs []string
	// Stdin is the command's standard input (sent as stdin when not empty).
	Stdin string
}

// ExecuteShellOptions contains the optional parameters of Session.ExecuteShell.
type ExecuteShellOptions struct {
	// Timeout bounds the command on the service side, sent as
	// timeoutInSeconds (whole seconds, rounded up). Zero means
	// DefaultShellTimeout. No cap is documented for Shell pools; the client
	// only refuses a negative value or one that does not fit the field
	// (int32 seconds). The caller's ctx bounds the whole call.
	Timeout time.Duration
	// OutputStreamsMaxLength caps stdout and stderr, each, in characters;
	// zero means the service default (4096). The service cuts longer output
	// silently (see ShellResult.Truncated).
	OutputStreamsMaxLength int32
	// OperationID sets the execution's id (the operation-id header), with
	// the rules of ExecuteOptions.OperationID; empty means a fresh UUID.
	OperationID string
}

// DefaultShellTimeout is the timeout sent when ExecuteShellOptions.Timeout
// is zero: 600 s, the value of the spec examples and of Learn's Shell tutorial.
const DefaultShellTimeout = 600 * time.Second

// maxShellTimeout is the largest timeout timeoutInSeconds (int32) can carry.
const maxShellTimeout = time.Duration(math.MaxInt32) * time.Second

// ShellResult is the outcome of a Shell execution. A command that exits
// with a non-zero code is a ShellResult with that ExitCode, not a Go error.
type ShellResult struct {
	// ID is the execution's id (the operation-id).
	ID string
	// Identifier is the session's identifier.
	Identifier string
	// Status is the service's status verbatim: the exit code as a decimal
	// string (for example "0") in the spec examples.
	Status string
	// ExitCode is Status as an integer, or -1 when Status is not an integer
	// (for example "Failed" or "Canceled" when the service could not run the
	// command or stopped it: the spec shows no such answer, so ErrorCode and
	// Stderr are then the only explanation).
	ExitCode int
	// Stdout and Stderr are what the command wrote, each cut by the service
	// at the output cap (see Truncated).
	Stdout, Stderr string
	// ExecutionTime is how long the command ran, as the service measured it
	// (millisecond resolution).
	ExecutionTime time.Duration
	// ErrorCode is the service's error code when the answer carried an
	// error object ("" otherwise).
	ErrorCode string

	outputMax int
}

// Truncated reports whether Stdout or Stderr reached the output cap (4096
// characters unless ExecuteShellOptions.OutputStreamsMaxLength said
// otherwise). The service cuts longer output without saying so and keeps
// the status (LangChain's maintainers measured the cut at 4096 bytes):
// redirect large output to a file under /mnt/data and download it.
func (r ShellResult) Truncated() bool {
	return reachedOutputMax(r.Stdout, r.outputMax) || reachedOutputMax(r.Stderr, r.outputMax)
}

// ExecuteShellResponse is the answer of Session.ExecuteShell.
type ExecuteShellResponse struct {
	ShellResult
}

// shellExecuteRequest is the body of POST executions for a Shell pool, as in
// the spec examples CodeExecution_Execute_ShellCommand.json and
// CodeExecution_Execute_ShellExecCommandAndArgs.json: no code, no
// codeInputType.
type shellExecuteRequest struct {
	ExecutionType          string   `json:"executionType"`
	ShellCommand           string   `json:"shellCommand,omitempty"`
	ExecCommandAndArgs     []string `json:"execCommandAndArgs,omitempty"`
	Stdin                  *string  `json:"stdin,omitempty"`
	TimeoutInSeconds       int32    `json:"timeoutInSeconds"`
	OutputStreamsMaxLength *int32   `json:"outputStreamsMaxLength,omitempty"`
}

// ExecuteShell runs a command in a session of a Shell session pool and
// waits for it to finish.
//
// REST: POST {endpoint}/executions with shellCommand or execCommandAndArgs,
// and stdin (api-version 2025-10-02-preview only: other versions give
// ErrUnsupported before any I/O). The command runs in the session's
// container; files under /mnt/data persist between calls of a session.
//
// A non-zero exit is data: the response has that ExitCode and err is nil.
// err is non-nil for bad input (before any I/O: neither or both of
// ShellCommand and ExecCommandAndArgs, an empty program name,
// ErrInvalidIdentifier, ErrUnsupported, a negative timeout, an invalid
// OperationID), for service errors (*azcore.ResponseError, or *AuthError
// for 401/403; a Python pool may refuse the request with 400), and for
// transport failures.
//
// ExecuteShell shares Execute's request path and its exactly-once rules: a
// command is never sent twice. A lost answer is resolved by looking the
// execution up by its operation-id; when that is not possible the error is
// an *ExecutionOutcomeUnknownError (errors.Is ErrExecutionOutcomeUnknown)
// and the command may or may not have run.
func (s *Session) ExecuteShell(ctx context.Context, cmd ShellExecution, options *ExecuteShellOptions) (ExecuteShellResponse, error) {
	const op = "Session.ExecuteShell"
	var err error
	if options == nil {
		options = &ExecuteShellOptions{}
	}
	ctx, end := s.client.startOp(ctx, op)
	defer func() { end(err) }()
	req, p, err := s.shellCreateRequest(ctx, op, cmd, options)
	if err != nil {
		return ExecuteShellResponse{}, err
	}
	poller, err := s.beginExecution(ctx, req, p)
	if err != nil {
		return ExecuteShellResponse{}, err
	}
	resp, err := poller.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: executePollFrequency})
	if err != nil {
		err = outcomeUnknown(ctx, p.operationID, err)
		return ExecuteShellResponse{}, err
	}
	return ExecuteShellResponse{ShellResult: shellResultFrom(resp.Execution)}, nil
}

// shellCreateRequest checks the arguments of ExecuteShell (op) before any
// I/O and builds POST executions with the Shell body (shellBody). Only
// 2025-10-02-preview has the Shell fields; its features include
// OutputStreamsMaxLength and the executions contract, so there is no legacy
// branch.
func (s *Session) shellCreateRequest(ctx context.Context, op string, cmd ShellExecution, options *ExecuteShellOptions) (*policy.Request, executeParams, error) {
	if !s.client.features.ExecutionOptions {
		return nil, executeParams{}, fmt.Errorf("%w: %s needs api-version %s (client uses %s)", ErrUnsupported, op, APIVersion20251002Preview, s.client.version)
	}
	if err := s.validate(); err != nil {
		return nil, executeParams{}, err
	}
	body, err := shellBody(cmd)
	if err != nil {
		return nil, executeParams{}, err
	}
	timeout, err := executeTimeout(options.Timeout, DefaultShellTimeout, maxShellTimeout)
	if err != nil {
		return nil, executeParams{}, err
	}
	if options.OutputStreamsMaxLength < 0 {
		return nil, executeParams{}, errors.New("azsessions: OutputStreamsMaxLength is negative")
	}
	p := executeParams{timeout: timeout, outputMax: int(options.OutputStreamsMaxLength)}
	if p.operationID, p.userID, err = newOperationID(options.OperationID); err != nil {
		return nil, executeParams{}, err
	}
	body.TimeoutInSeconds = timeout
	if options.OutputStreamsMaxLength > 0 {
		maxLength := options.OutputStreamsMaxLength
		body.OutputStreamsMaxLength = &maxLength
	}
	return s.newExecuteRequest(ctx, "executions", body, p)
}

// shellBody checks cmd and returns its request body (without the timeout).
func shellBody(cmd ShellExecution) (shellExecuteRequest, error) {
	hasCmd, hasArgv := strings.TrimSpace(cmd.ShellCommand) != "", len(cmd.ExecCommandAndArgs) > 0
	switch {
	case hasCmd && hasArgv:
		return shellExecuteRequest{}, errors.New("azsessions: set ShellCommand or ExecCommandAndArgs, not both")
	case !hasCmd && !hasArgv:
		return shellExecuteRequest{}, errors.New("azsessions: the shell execution is empty: set ShellCommand or ExecCommandAndArgs")
	case hasArgv && cmd.ExecCommandAndArgs[0] == "":
		return shellExecuteRequest{}, errors.New("azsessions: ExecCommandAndArgs[0], the program, is empty")
	}
	// encoding/json would send each byte that is not UTF-8 as U+FFFD: another
	// command than the caller's would run, or other input be read (as
	// Execute refuses such code; red-team finding, redcli)
	if !utf8.ValidString(cmd.ShellCommand) {
		return shellExecuteRequest{}, errors.New("azsessions: ShellCommand is not valid UTF-8")
	}
	for i, arg := range cmd.ExecCommandAndArgs {
		if !utf8.ValidString(arg) {
			return shellExecuteRequest{}, fmt.Errorf("azsessions: ExecCommandAndArgs[%d] is not valid UTF-8", i)
		}
	}
	if !utf8.ValidString(cmd.Stdin) {
		return shellExecuteRequest{}, errors.New("azsessions: Stdin is not valid UTF-8 (the service takes text)")
	}
	b := shellExecuteRequest{ExecutionType: wire.ExecutionSynchronous}
	if hasCmd {
		b.ShellCommand = cmd.ShellCommand
	} else {
		b.ExecCommandAndArgs = cmd.ExecCommandAndArgs
	}
	if cmd.Stdin != "" {
		stdin := cmd.Stdin
		b.Stdin = &stdin
	}
	return b, nil
}

// shellResultFrom maps a finished execution of a Shell pool.
func shellResultFrom(e Execution) ShellResult {
	r := ShellResult{
		ID: e.ID, Identifier: e.Identifier, Status: string(e.Status), ExitCode: -1,
		Stdout: e.Stdout, Stderr: e.Stderr, ExecutionTime: e.ExecutionTime, ErrorCode: e.ErrorCode,
		outputMax: e.outputMax,
	}
	if code, err := strconv.Atoi(strings.TrimSpace(r.Status)); err == nil {
		r.ExitCode = code
	}
	return r
}
