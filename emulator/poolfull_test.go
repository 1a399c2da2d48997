package emulator_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/azsessions/azsessions/emulator"
	"github.com/azsessions/azsessions/internal/wire"
)

// budgetExecutor refuses kernels past max with emulator.ErrPoolFull, as the
// sandbox does past its pool-wide memory and disk budgets.
type budgetExecutor struct {
	emulator.Executor
	mu   sync.Mutex
	live int
	max  int
}

type countedKernel struct {
	emulator.Kernel
	e    *budgetExecutor
	once sync.Once
}

func (k *countedKernel) Close() error {
	k.once.Do(func() {
		k.e.mu.Lock()
		k.e.live--
		k.e.mu.Unlock()
	})
	return k.Kernel.Close()
}

func (e *budgetExecutor) NewKernel(ctx context.Context) (emulator.Kernel, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.live >= e.max {
		return nil, fmt.Errorf("sandbox: %w", emulator.ErrPoolFull)
	}
	k, err := e.Executor.NewKernel(ctx)
	if err != nil {
		return nil, err
	}
	e.live++
	return &countedKernel{Kernel: k, e: e}, nil
}

// TestExecutorPoolFull: an executor out of room (ErrPoolFull) gets the same
// answer as MaxSessions, on both API generations; existing sessions keep
// working, and an ended session makes room again.
func TestExecutorPoolFull(t *testing.T) {
	s := newScript()
	ex := &budgetExecutor{Executor: emulator.ScriptedExecutor(s.run), max: 1}
	e := newEnv(t, emulator.Options{Executor: ex, MaxSessions: 10, Cooldown: 5 * time.Minute})
	for _, v := range []string{wire.V20240202Preview, wire.V20251002Preview} {
		t.Run(v, func(t *testing.T) {
			require.Equal(t, "x\n", e.stdout(v, "sess-a", "print:x"))
			r := e.exec(v, "sess-b", "print:x", nil)
			requireError(t, r, http.StatusNotFound, emulator.CodePoolFull)
			// The message names the cause: the budget, not MaxSessions.
			require.Contains(t, string(r.body), "memory and disk limits")
			require.NotContains(t, string(r.body), "max 10")
			require.Equal(t, "y\n", e.stdout(v, "sess-a", "print:y"))
			e.clock.Advance(6 * time.Minute)
			require.Equal(t, "z\n", e.stdout(v, "sess-b", "print:z"))
			e.clock.Advance(6 * time.Minute) // sess-b ends before the next run
			e.h.Sweep()
		})
	}
}
