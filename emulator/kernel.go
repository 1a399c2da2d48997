package emulator

import (
	"context"
	"errors"
	"os"
	"sync"
	"time"

	"github.com/azsessions/azsessions/internal/kernel"
)

// The contract between the handler and the things that run code is defined
// and documented once, in package internal/kernel; these are its names here.

// Executor starts kernels, one per session (kernel.Executor). See
// NewSandboxExecutor for real Python and ScriptedExecutor for tests.
type Executor = kernel.Executor

// Kernel is one session's long-lived interpreter (kernel.Kernel).
type Kernel = kernel.Kernel

// ExecutionRequest is one execution handed to a Kernel (kernel.Request).
type ExecutionRequest = kernel.Request

// ExecutionResult is what a Kernel answers for one execution
// (kernel.Result). The kernel cuts Stdout and Stderr at the request's
// output cap, in characters; the handler answers them as they are.
type ExecutionResult = kernel.Result

// ExecutionStatus is the outcome of an execution (kernel.Status): Succeeded,
// Failed or Canceled. The zero value counts as Succeeded.
type ExecutionStatus = kernel.Status

// Info describes an executor's runtime, for GET metadata and logs
// (kernel.Info).
type Info = kernel.Info

// Outcomes of an execution.
const (
	Succeeded = kernel.Succeeded
	Failed    = kernel.Failed
	Canceled  = kernel.Canceled
)

type dataDirKey struct{}

// DataDirFromContext returns the host data directory (the session's
// /mnt/data) of the kernel that runs a ScriptedExecutor function, so that a
// script can create files as real code would. It returns "" outside one.
func DataDirFromContext(ctx context.Context) string {
	s, _ := ctx.Value(dataDirKey{}).(string)
	return s
}

// ScriptedExecutor returns an Executor that runs no Python: every execution
// calls fn with the cell's code and answers what fn returns. fn runs with a
// context that ends at the execution's timeout (a result returned after that
// is reported as timed out) and that carries the data directory
// (DataDirFromContext). Each kernel gets a fresh temporary data directory,
// removed by Kernel.Close. A zero Status means Succeeded; a zero Duration is
// replaced by the measured one; Stdout and Stderr are cut at the request's
// output cap, in characters. Info reports Sandbox "scripted".
func ScriptedExecutor(fn func(ctx context.Context, code string) ExecutionResult) Executor {
	return &scriptedExecutor{fn: fn, kernels: map[*scriptedKernel]struct{}{}}
}

type scriptedExecutor struct {
	fn      func(ctx context.Context, code string) ExecutionResult
	mu      sync.Mutex
	closed  bool
	kernels map[*scriptedKernel]struct{}
}

func (e *scriptedExecutor) NewKernel(ctx context.Context) (Kernel, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "azsessions-scripted-")
	if err != nil {
		return nil, err
	}
	k := &scriptedKernel{e: e, dir: dir}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		_ = os.RemoveAll(dir)
		return nil, errors.New("emulator: executor is closed")
	}
	e.kernels[k] = struct{}{}
	return k, nil
}

func (e *scriptedExecutor) Info() Info {
	return Info{Sandbox: "scripted", Packages: map[string]string{}}
}

func (e *scriptedExecutor) Close() error {
	e.mu.Lock()
	e.closed = true
	ks := make([]*scriptedKernel, 0, len(e.kernels))
	for k := range e.kernels {
		ks = append(ks, k)
	}
	e.mu.Unlock()
	var errs []error
	for _, k := range ks {
		errs = append(errs, k.Close())
	}
	return errors.Join(errs...)
}

type scriptedKernel struct {
	e    *scriptedExecutor
	dir  string
	once sync.Once
}

func (k *scriptedKernel) DataDir() string { return k.dir }

func (k *scriptedKernel) Execute(ctx context.Context, req ExecutionRequest) (ExecutionResult, error) {
	if req.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, req.Timeout)
		defer cancel()
	}
	ctx = context.WithValue(ctx, dataDirKey{}, k.dir)
	start := time.Now()
	outputMax, err := kernel.OutputCap(req)
	if err != nil {
		return ExecutionResult{}, err
	}
	res := k.e.fn(ctx, req.Code)
	var cut bool
	res.Stdout, cut = kernel.TruncateOutput(res.Stdout, outputMax)
	res.StdoutTruncated = res.StdoutTruncated || cut
	res.Stderr, cut = kernel.TruncateOutput(res.Stderr, outputMax)
	res.StderrTruncated = res.StderrTruncated || cut
	if res.Duration == 0 {
		res.Duration = time.Since(start)
	}
	if res.Status == "" {
		res.Status = Succeeded
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) && !res.TimedOut {
		res.TimedOut, res.Status = true, Failed
	}
	return res, nil
}

func (k *scriptedKernel) Close() error {
	var err error
	k.once.Do(func() {
		k.e.mu.Lock()
		delete(k.e.kernels, k)
		k.e.mu.Unlock()
		err = os.RemoveAll(k.dir)
	})
	return err
}
