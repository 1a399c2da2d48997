//go:build linux

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

// ReadyTarget is the number of ready kernels the pool keeps now: Options.Ready,
// or more after a burst of demand, up to ReadyCap (for benchmarks and health
// checks: the ready list is refilled when ReadyKernels reaches it).
func (e *Executor) ReadyTarget() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.target
}
