package emulator

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/azsessions/azsessions/internal/kernel"
	"github.com/azsessions/azsessions/internal/wire"
)

// Pool types (the session pool's containerType) the emulator can be
// (Options.PoolType, -pool-type).
const (
	// PoolTypePythonLTS is the Python code interpreter (the default).
	PoolTypePythonLTS = "PythonLTS"
	// PoolTypeShell is a Shell pool: executions run shellCommand (bash -c)
	// or execCommandAndArgs with stdin in the session's sandbox, working
	// directory /mnt/data, and answer the exit code as status ("0"), as the
	// spec examples CodeExecution_Execute_ShellCommand.json and
	// CodeExecution_Execute_ShellExecCommandAndArgs.json show.
	PoolTypeShell = "Shell"
)

// checkPoolType validates Options.PoolType.
func checkPoolType(t string) error {
	switch t {
	case "", PoolTypePythonLTS, PoolTypeShell, PoolTypeCustomContainer, PoolTypeNodeLTS:
		return nil
	}
	return fmt.Errorf("emulator: unknown pool type %q (PythonLTS, NodeLTS, Shell or CustomContainer)", t)
}

// shellParams decodes the Shell fields of a flat execution request on a
// Shell pool. Exactly one of shellCommand and execCommandAndArgs must be
// set; code is not accepted (the emulator's guess of the service's 400).
// shellCommand may be a string (swagger) or an array whose elements are
// joined by spaces when it is not ["/bin/bash","-c",cmd] (Learn's tutorial
// sends that array; how the service runs other arrays is not documented).
func shellParams(req wire.ExecuteRequest) (*kernel.ShellCommand, *apiError) {
	var cmd kernel.ShellCommand
	hasCmd := len(req.ShellCommand) > 0 && string(req.ShellCommand) != "null"
	if hasCmd {
		var s string
		if err := json.Unmarshal(req.ShellCommand, &s); err != nil {
			var argv []string
			if err := json.Unmarshal(req.ShellCommand, &argv); err != nil || len(argv) == 0 {
				return nil, badRequest("shellCommand must be a string")
			}
			if len(argv) == 3 && (argv[0] == "/bin/bash" || argv[0] == "/bin/sh" || argv[0] == "bash" || argv[0] == "sh") && argv[1] == "-c" {
				s = argv[2]
			} else {
				s = strings.Join(argv, " ")
			}
		}
		cmd.Command = s
		hasCmd = strings.TrimSpace(s) != ""
	}
	switch {
	case req.Code != "":
		return nil, badRequest("code: this is a Shell session pool; send shellCommand or execCommandAndArgs")
	case hasCmd && len(req.ExecCommandAndArgs) > 0:
		return nil, badRequest("send shellCommand or execCommandAndArgs, not both")
	case !hasCmd && len(req.ExecCommandAndArgs) == 0:
		return nil, badRequest("a Shell session pool needs shellCommand or execCommandAndArgs")
	case len(req.ExecCommandAndArgs) > 0 && req.ExecCommandAndArgs[0] == "":
		return nil, badRequest("execCommandAndArgs[0] is empty")
	}
	cmd.Argv = req.ExecCommandAndArgs
	if req.Stdin != nil {
		cmd.Stdin = *req.Stdin
	}
	return &cmd, nil
}

// shellExecuteResponse is a Shell execution's answer, shaped as the spec
// examples: no executionResult; executionType only when the request sent
// one (the ShellCommand example sends and answers it, the
// ExecCommandAndArgs example does neither: the emulator's reading of them).
type shellExecuteResponse struct {
	ID            string              `json:"id"`
	Identifier    string              `json:"identifier"`
	ExecutionType string              `json:"executionType,omitempty"`
	Status        string              `json:"status"`
	Result        *shellResult        `json:"result,omitempty"`
	Error         *wire.ErrorResponse `json:"error,omitempty"`
}

type shellResult struct {
	Stdout                      string `json:"stdout"`
	Stderr                      string `json:"stderr"`
	ExecutionTimeInMilliseconds int64  `json:"executionTimeInMilliseconds"`
}

// shellStatus is the status of a finished Shell execution: its exit code
// as a decimal string, or the OperationState word when the command did not
// exit by itself (timed out, canceled, not started: no public source shows
// what the service answers then; the emulator's guess).
func shellStatus(st string, res ExecutionResult) string {
	if res.ExitCode != nil && !res.TimedOut && res.Status != Canceled {
		return strconv.Itoa(*res.ExitCode)
	}
	return st
}

// ExecutionShell is the command of a Shell execution handed to a Kernel
// (ExecutionRequest.Shell): Command (for bash -c) or Argv, and Stdin.
type ExecutionShell = kernel.ShellCommand

// parseShellExecute decodes POST executions on a Shell pool.
func (h *Handler) parseShellExecute(c *call, req wire.ExecuteRequest) (execParams, *apiError) {
	cmd, aerr := shellParams(req)
	if aerr != nil {
		return execParams{}, aerr
	}
	ep := execParams{shell: cmd, outputMax: h.opt.OutputStreamsMaxLength, typ: req.ExecutionType}
	switch {
	case req.ExecutionType == "" || strings.EqualFold(req.ExecutionType, wire.ExecutionSynchronous):
	case strings.EqualFold(req.ExecutionType, wire.ExecutionAsynchronous):
		ep.async = true
	default:
		return execParams{}, badRequest("executionType must be Synchronous or Asynchronous")
	}
	if req.TimeoutInSeconds < 0 {
		return execParams{}, badRequest("timeoutInSeconds must not be negative")
	}
	ep.timeout = time.Duration(req.TimeoutInSeconds) * time.Second
	if ep.timeout == 0 {
		ep.timeout = wire.MaxExecutionSeconds * time.Second
	}
	ep.timeout = min(ep.timeout, h.opt.MaxExecutionTime)
	if o := req.OutputStreamsMaxLength; o != nil && c.feat.OutputStreamsMaxLength {
		if *o < 0 || *o > MaxOutputStreamsMaxLength {
			return execParams{}, badRequest("outputStreamsMaxLength must be in 0–%d", MaxOutputStreamsMaxLength)
		}
		if *o > 0 {
			ep.outputMax = int(*o)
		}
	}
	return ep, nil
}
