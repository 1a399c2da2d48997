package emulator

// RecordedBytes returns the pool's account of the bytes of its live
// sessions' execution records (Options.MaxTotalRecordedBytes) and the sum of
// those sessions' own counts, which must agree.
func (h *Handler) RecordedBytes() (account, sum int64) {
	p := h.pool
	p.records.mu.Lock() // no finish in between: the two agree
	defer p.records.mu.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.sessions {
		s.execMu.Lock()
		sum += s.recBytes
		s.execMu.Unlock()
	}
	return p.records.total.Load(), sum
}

// TombstoneSize is what a forgotten execution's tombstone is counted for in
// the record budgets.
const TombstoneSize = tombstoneSize

// SetRunHook sets the function each execution's goroutine runs first, with
// the execution's operation-id (Handler.runHook).
func (h *Handler) SetRunHook(f func(operationID string)) { h.runHook = f }
