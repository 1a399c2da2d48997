package emulator

import (
	"context"
	"crypto/sha256"
	"net/http"
	"sync"
	"time"
)

// session is one identifier's container: a kernel, its files and its
// executions.
type session struct {
	id        string
	etag      string
	createdAt time.Time

	// Guarded by pool.mu.
	lastAccess time.Time
	inflight   int  // requests and background executions holding the session
	gone       bool // removed from the map
	closed     bool // kernel close scheduled

	ready  chan struct{} // closed once kernel/err are set
	kernel Kernel
	err    error

	ctx    context.Context // canceled when the session ends
	cancel context.CancelFunc
	// turn is closed when the last execution accepted so far is done with
	// the kernel: each execution waits for its predecessor's turn channel
	// (given it under execMu when accepted) and closes its own, so they run
	// one at a time in the order they were accepted.
	turn chan struct{}

	execMu       sync.Mutex
	execs        map[string]*execution
	execOrder    []string             // ids oldest first, to forget the oldest beyond the bounds
	recBytes     int64                // bytes of the recorded finished executions and the tombstones
	tombs        map[string]tombstone // finished executions whose results were forgotten
	tombOrder    []string             // ids of tombs, oldest first (the order they were forgotten)
	lastFinished *execution           // the most recently finished execution, never forgotten by trimLocked
	pending      int                  // executions queued or running (their code is held until they end)
	// budget is the pool's account of the bytes of all sessions' records
	// (nil: none). recBytes counts in it until the session ends (recGone).
	budget  *recordBudget
	recGone bool

	upMu       sync.Mutex
	upReserved int64 // bytes written by uploads in progress (see uploadQuota)

	proxyMu     sync.Mutex
	transport   *http.Transport // custom containers: to the session's container
	proxyClosed bool            // the session ended: no new transport
}

// maxRecordedExecutions bounds the executions a session remembers for GET
// executions/{id} and operation-id idempotency: its records and its
// tombstones together. Beyond it the oldest tombstone goes first (the only
// way an operation-id becomes unknown again, and so the only way a retry
// runs its code again), then, with no tombstone left, the oldest finished
// record. A record holds the result and a hash of the code, never the code.
const maxRecordedExecutions = 1000

// tombstone is what a session keeps of a finished execution whose result it
// has forgotten (the byte bounds, MaxRecordedBytes and
// MaxTotalRecordedBytes): the fact that it ran, so that a retry with its
// operation-id is refused instead of running the code again. No outputs.
type tombstone struct {
	codeHash    [sha256.Size]byte
	status      string // the final wire.Status* word
	finishedAt  time.Time
	forgottenAt time.Time
}

// tombstoneSize is what a tombstone is counted for in the byte bounds (its
// fields, its map entry and an operation-id of about 100 characters; as for
// a record's recordOverhead, the operation-id's own length is not counted).
// It is below recordOverhead, so that forgetting a result always frees
// bytes.
const tombstoneSize = 256

// recordLocked remembers e, a new (running) execution, and forgets old ones
// beyond the bounds (see trimLocked). session.execMu must be held.
func (s *session) recordLocked(e *execution, maxBytes int64, now time.Time) {
	s.execs[e.id] = e
	s.execOrder = append(s.execOrder, e.id)
	s.trimLocked(maxBytes, now)
}

// finishedLocked accounts the stored size of e, which has just finished
// (its result is set), and forgets old records beyond the bounds.
// session.execMu must be held.
func (s *session) finishedLocked(e *execution, size, maxBytes int64, now time.Time) {
	e.finished, e.size, e.finishedAt = true, size, now
	s.lastFinished = e
	if s.execs[e.id] == e {
		s.addRecBytesLocked(size)
	}
	s.trimLocked(maxBytes, now)
}

// addRecBytesLocked changes the session's recorded bytes by n, and the
// pool's account with them while the session lives. session.execMu must be
// held.
func (s *session) addRecBytesLocked(n int64) {
	s.recBytes += n
	if s.budget != nil && !s.recGone {
		s.budget.total.Add(n)
	}
}

// releaseRecordsLocked takes the session's recorded bytes (records and
// tombstones) out of the pool's account, for good: the session has ended
// (its records go with it once the requests that still hold it are done).
// session.execMu must be held.
func (s *session) releaseRecordsLocked() {
	if s.budget != nil && !s.recGone {
		s.budget.total.Add(-s.recBytes)
	}
	s.recGone = true
}

// trimLocked forgets the results of the oldest finished executions, keeping
// a tombstone of each, while the session records more than maxBytes bytes;
// then, while it remembers more than maxRecordedExecutions executions
// (records and tombstones), drops the oldest tombstones and, when none is
// left, the oldest finished records whole. Running executions (whose
// results are not in yet) and the most recently finished one are always
// kept, so a record over the bound alone still answers until the next
// execution finishes; tombstones are never dropped for bytes. session.execMu
// must be held.
func (s *session) trimLocked(maxBytes int64, now time.Time) {
	s.forgetLocked(func() bool { return s.recBytes > maxBytes }, s.lastFinished, now, true)
	over := func() bool { return len(s.execs)+len(s.tombs) > maxRecordedExecutions }
	for over() && len(s.tombOrder) > 0 {
		id := s.tombOrder[0]
		s.tombOrder[0] = ""
		s.tombOrder = s.tombOrder[1:]
		delete(s.tombs, id)
		s.addRecBytesLocked(-tombstoneSize)
	}
	s.forgetLocked(over, s.lastFinished, now, false)
}

// forgetLocked forgets the oldest finished executions while over reports
// true, never a running execution nor keep; with tomb, each leaves a
// tombstone. It reports whether over still holds at the end: nothing was
// left to forget. session.execMu must be held.
func (s *session) forgetLocked(over func() bool, keep *execution, now time.Time, tomb bool) bool {
	if !over() {
		return false
	}
	// Walk from the oldest while over the bounds; the entries kept on the
	// way (running, or keep) move up to just before the first entry not
	// visited, so that only the visited prefix is touched: a session at its
	// 1,000 records forgets one per execution, which must not copy the
	// other 999 ids each time.
	var kept []string
	i := 0
	for ; i < len(s.execOrder) && over(); i++ {
		id := s.execOrder[i]
		if e := s.execs[id]; e.finished && e != keep {
			delete(s.execs, id)
			s.addRecBytesLocked(-e.size)
			if tomb {
				e.mu.Lock()
				status := e.status
				e.mu.Unlock()
				if s.tombs == nil {
					s.tombs = map[string]tombstone{}
				}
				s.tombs[id] = tombstone{codeHash: e.codeHash, status: status, finishedAt: e.finishedAt, forgottenAt: now}
				s.tombOrder = append(s.tombOrder, id)
				s.addRecBytesLocked(tombstoneSize)
			}
			continue
		}
		kept = append(kept, id)
	}
	start := i - len(kept)
	copy(s.execOrder[start:i], kept)
	clear(s.execOrder[:start])
	s.execOrder = s.execOrder[start:]
	return over()
}

func (s *session) expireAt(cooldown time.Duration) time.Time { return s.lastAccess.Add(cooldown) }

// Sweep ends every session idle for longer than Cooldown by the Now clock,
// removing its kernel, variables and files, and returns how many ended. The
// janitor calls it every SweepInterval; tests that move a fake clock may call
// it directly.
func (h *Handler) Sweep() int { return h.pool.sweep() }

func (h *Handler) janitor() {
	defer h.wg.Done()
	t := time.NewTicker(h.opt.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-h.closed:
			return
		case <-t.C:
			h.Sweep()
		}
	}
}

// closedTurn is the turn of a session's first execution: nothing before it.
func closedTurn() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}
