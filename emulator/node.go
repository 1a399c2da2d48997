package emulator

import (
	"encoding/json"
	"fmt"

	"github.com/azsessions/azsessions/internal/sandbox"
)

// PoolTypeNodeLTS is the JavaScript code interpreter (Options.PoolType,
// -pool-type NodeLTS): executions take JavaScript code, which runs in one
// long-lived Node.js process per session (NewSandboxExecutor with
// SandboxOptions.Runtime SandboxRuntimeNode), with the same routes, limits,
// files, cooldown and answers as a Python pool. A cell's declarations stay
// for the next ones and its last expression's value is the
// executionResult; see the guesses in the package documentation.
const PoolTypeNodeLTS = "NodeLTS"

// Runtimes of SandboxOptions.Runtime.
const (
	// SandboxRuntimePython runs Python (the default): PythonLTS and Shell
	// pools.
	SandboxRuntimePython = sandbox.RuntimePython
	// SandboxRuntimeNode runs JavaScript in Node.js: NodeLTS pools.
	SandboxRuntimeNode = sandbox.RuntimeNode
)

// checkExecutorRuntime refuses an Executor that says it runs the other
// language than the pool type's (Info's PythonVersion and NodeVersion; an
// executor that names neither, such as ScriptedExecutor, is taken as is).
func checkExecutorRuntime(poolType string, info Info) error {
	switch {
	case poolType == PoolTypeNodeLTS && info.NodeVersion == "" && info.PythonVersion != "":
		return fmt.Errorf("emulator: a %s pool needs an executor that runs Node.js (SandboxOptions.Runtime %q); this one runs Python", PoolTypeNodeLTS, SandboxRuntimeNode)
	case poolType != PoolTypeNodeLTS && info.NodeVersion != "" && info.PythonVersion == "":
		return fmt.Errorf("emulator: this executor runs Node.js, which serves %s pools only (Options.PoolType)", PoolTypeNodeLTS)
	}
	return nil
}

// nodeLegacyResponse is a NodeLTS pool's answer to a legacy POST
// code/execute (2024-02-02-preview, 2024-08-02-preview), shaped as Learn's
// JavaScript tutorial (sessions-tutorial-nodejs.md) shows it: the value is
// named executionResult, and neither object has a $id.
type nodeLegacyResponse struct {
	Properties nodeLegacyProps `json:"properties"`
}

type nodeLegacyProps struct {
	Status                      string          `json:"status"`
	Stdout                      string          `json:"stdout"`
	Stderr                      string          `json:"stderr"`
	ExecutionResult             json.RawMessage `json:"executionResult"`
	ExecutionTimeInMilliseconds int64           `json:"executionTimeInMilliseconds"`
}
