package azsessions_test

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"time"

	"github.com/azsessions/azsessions/azsessionstest"
	"github.com/azsessions/azsessions/emulator"
)

// cell answers one cell the tests send, over the session's variables.
type cell func(ctx context.Context, vars map[string]int) emulator.ExecutionResult

// cells is every cell this package's fake-server tests execute. No Python
// runs (the fake carries no interpreter): each cell is a Go function over
// the session's integer variables, kept per session data directory, so an
// expired session loses them as a real kernel would. The answers are those
// CPython gives for the same code.
var cells = map[string]cell{
	"1":        value(1),
	"6 * 7":    value(42),
	"print(1)": printed("1\n"),
	"print(2)": printed("2\n"),
	"print('once')\n6 * 7": func(context.Context, map[string]int) emulator.ExecutionResult {
		return withValue(printed("once\n")(nil, nil), 42)
	},
	"print('x')\n1 + 1": func(context.Context, map[string]int) emulator.ExecutionResult {
		return withValue(printed("x\n")(nil, nil), 2)
	},
	"c = 0":  set("c", 0),
	"x = 1":  set("x", 1),
	"x = 41": set("x", 41),
	"x = 1\nprint(x)": func(ctx context.Context, v map[string]int) emulator.ExecutionResult {
		v["x"] = 1
		return printed("1\n")(ctx, v)
	},
	"c":                                     read("c", 0),
	"x + 1":                                 read("x", 1),
	"c = c + 1\nc":                          increment("c"),
	"time.sleep(0.3)\nprint('long')\n6 * 7": sleeping(300 * time.Millisecond),
	"time.sleep(3)\nprint('long')\n6 * 7":   sleeping(3 * time.Second),
}

// sleeping is a cell that runs for d (unless the execution's timeout ends
// it first), prints "long" and has the value 42.
func sleeping(d time.Duration) cell {
	return func(ctx context.Context, _ map[string]int) emulator.ExecutionResult {
		select {
		case <-time.After(d):
		case <-ctx.Done(): // the execution's timeout: the emulator reports it
			return emulator.ExecutionResult{Status: emulator.Failed, Stderr: "TimeoutError\n"}
		}
		return withValue(printed("long\n")(nil, nil), 42)
	}
}

func value(n int) cell {
	return func(context.Context, map[string]int) emulator.ExecutionResult {
		return emulator.ExecutionResult{Value: json.RawMessage(strconv.Itoa(n))}
	}
}

func printed(s string) cell {
	return func(context.Context, map[string]int) emulator.ExecutionResult {
		return emulator.ExecutionResult{Stdout: s, Value: json.RawMessage(`""`)}
	}
}

func withValue(r emulator.ExecutionResult, n int) emulator.ExecutionResult {
	r.Value = json.RawMessage(strconv.Itoa(n))
	return r
}

func set(name string, n int) cell {
	return func(_ context.Context, v map[string]int) emulator.ExecutionResult {
		v[name] = n
		return emulator.ExecutionResult{Value: json.RawMessage(`""`)}
	}
}

func nameError(name string) emulator.ExecutionResult {
	return emulator.ExecutionResult{Status: emulator.Failed, Value: json.RawMessage(`""`),
		Stderr: "Traceback (most recent call last):\n  Cell In[1], line 1\nNameError: name '" + name + "' is not defined\n"}
}

// read answers name + add.
func read(name string, add int) cell {
	return func(_ context.Context, v map[string]int) emulator.ExecutionResult {
		n, ok := v[name]
		if !ok {
			return nameError(name)
		}
		return emulator.ExecutionResult{Value: json.RawMessage(strconv.Itoa(n + add))}
	}
}

func increment(name string) cell {
	return func(_ context.Context, v map[string]int) emulator.ExecutionResult {
		n, ok := v[name]
		if !ok {
			return nameError(name)
		}
		v[name] = n + 1
		return emulator.ExecutionResult{Value: json.RawMessage(strconv.Itoa(n + 1))}
	}
}

// cellsExecutor returns a fresh executor answering the cells table (unknown
// code fails with a NotImplementedError).
func cellsExecutor() emulator.Executor {
	var mu sync.Mutex
	sessions := map[string]map[string]int{}
	return emulator.ScriptedExecutor(func(ctx context.Context, code string) emulator.ExecutionResult {
		c, ok := cells[code]
		if !ok {
			return emulator.ExecutionResult{Status: emulator.Failed, Stderr: "NotImplementedError: no scripted answer for this cell in script_test.go\n"}
		}
		dir := emulator.DataDirFromContext(ctx)
		mu.Lock()
		vars := sessions[dir]
		if vars == nil {
			vars = map[string]int{}
			sessions[dir] = vars
		}
		mu.Unlock()
		// cells of one session run one at a time (the emulator queues them)
		return c(ctx, vars)
	})
}

// withCells returns opts (or new options) with the cells executor when no
// executor is set.
func withCells(opts *azsessionstest.Options) *azsessionstest.Options {
	var o azsessionstest.Options
	if opts != nil {
		o = *opts
	}
	if o.Executor == nil {
		o.Executor = cellsExecutor()
	}
	return &o
}
