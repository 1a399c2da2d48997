package sandbox

// ReadyKernels is the number of started kernels waiting in the pool (for
// benchmarks and health checks: a NewKernel now is fast when it is > 0).
func (e *Executor) ReadyKernels() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.ready)
}
