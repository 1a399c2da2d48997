package azsessionstest

import (
	"context"
	"strings"

	"github.com/azsessions/azsessions/emulator"
)

// DefaultExecutor returns the executor a Server uses when Options.Executor
// is nil: EchoExecutor. The fake runs no Python of its own; for real Python
// use emulator.NewSandboxExecutor (see package emulator), and for scripted
// answers EchoExecutor, Canned or emulator.ScriptedExecutor.
func DefaultExecutor() emulator.Executor { return EchoExecutor() }

// EchoExecutor returns an executor that runs nothing: every execution
// succeeds at once and prints its code back on stdout (with a final newline
// added when the code has none), with no value (Execution.Result is the
// JSON string ""). It is deterministic, so a test can check what code its
// subject sent.
func EchoExecutor() emulator.Executor {
	return emulator.ScriptedExecutor(func(_ context.Context, code string) emulator.ExecutionResult {
		if !strings.HasSuffix(code, "\n") {
			code += "\n"
		}
		return emulator.ExecutionResult{Stdout: code}
	})
}

// Canned returns an executor that answers each execution with the result
// answers holds for its code, exactly as sent (a zero Status means
// Succeeded; Value is the last expression's JSON, such as
// json.RawMessage("42")). Code without an answer fails: Status Failed and
// a "NotImplementedError: azsessionstest.Canned has no answer for this
// code" line in Stderr. For answers that depend on the code's text or on
// earlier executions, use emulator.ScriptedExecutor, whose function gets
// each cell's code and a context carrying the session's data directory
// (emulator.DataDirFromContext).
func Canned(answers map[string]emulator.ExecutionResult) emulator.Executor {
	table := make(map[string]emulator.ExecutionResult, len(answers))
	for code, res := range answers {
		table[code] = res
	}
	return emulator.ScriptedExecutor(func(_ context.Context, code string) emulator.ExecutionResult {
		if res, ok := table[code]; ok {
			return res
		}
		return emulator.ExecutionResult{Status: emulator.Failed, Stderr: "Traceback (most recent call last):\nNotImplementedError: azsessionstest.Canned has no answer for this code\n"}
	})
}
