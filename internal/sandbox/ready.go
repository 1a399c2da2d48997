package sandbox

// ReadyKernels is the number of started kernels waiting in the pool that
// also finished their background preload (for benchmarks and health checks:
// a NewKernel now is fast, with Options.Preload imported, when it is > 0).
func (e *Executor) ReadyKernels() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, p := range e.ready {
		if p.preloadDone() {
			n++
		}
	}
	return n
}
