package emulator

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestTrimRecords: a session keeps at most maxRecordedExecutions records,
// forgetting the oldest finished ones first, never a running execution or the
// most recently finished one, and keeps the order of the others (trimLocked
// moves the kept ones instead of copying the whole list).
func TestTrimRecords(t *testing.T) {
	t.Parallel() // CPU only (thousands of records under -race): beside the sandbox tests' waits
	tests := []struct {
		name    string
		n       int   // executions recorded, each finished right after, in order
		running []int // these stay running (never finished)
		want    []int // the records left, oldest first
	}{
		{"under the bound", 3, nil, []int{0, 1, 2}},
		{"one over", maxRecordedExecutions + 1, nil, seq(1, maxRecordedExecutions+1)},
		{"many over", 3 * maxRecordedExecutions, nil, seq(2*maxRecordedExecutions, 3*maxRecordedExecutions)},
		{"running ones stay in order", maxRecordedExecutions + 5, []int{0, 2}, append([]int{0, 2}, seq(7, maxRecordedExecutions+5)...)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &session{execs: map[string]*execution{}}
			running := map[int]bool{}
			for _, i := range tc.running {
				running[i] = true
			}
			for i := range tc.n {
				e := &execution{id: strconv.Itoa(i)}
				s.recordLocked(e, 1<<40, time.Time{})
				if !running[i] {
					s.finishedLocked(e, 1, 1<<40, time.Time{})
				}
				require.LessOrEqual(t, len(s.execs), maxRecordedExecutions+1)
				require.Len(t, s.execOrder, len(s.execs))
			}
			var got []int
			for _, id := range s.execOrder {
				i, err := strconv.Atoi(id)
				require.NoError(t, err)
				got = append(got, i)
				_, ok := s.execs[id] // not require.Contains: it walks the map's keys by reflection
				require.True(t, ok, "execOrder holds %s, execs does not", id)
			}
			require.Equal(t, tc.want, got)
			require.Equal(t, int64(len(tc.want)-len(tc.running)), s.recBytes)
		})
	}
}

// seq is lo, lo+1, ..., hi-1.
func seq(lo, hi int) []int {
	var out []int
	for i := lo; i < hi; i++ {
		out = append(out, i)
	}
	return out
}

// TestTombstonesCap: forgetting a result for bytes leaves a tombstone, never
// dropped for bytes; records and tombstones together are at most
// maxRecordedExecutions, the oldest tombstone going first (the only way an
// operation-id becomes unknown again).
func TestTombstonesCap(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		n        int // executions of 1,000 bytes, bound 1,000 bytes: each one's result goes when the next finishes
		tombs    []int
		record   int
		recBytes int64
	}{
		{"under the cap", 3, []int{0, 1}, 2, 2*tombstoneSize + 1000},
		{"at the cap", maxRecordedExecutions, seq(0, maxRecordedExecutions-1), maxRecordedExecutions - 1, (maxRecordedExecutions-1)*tombstoneSize + 1000},
		{"over: the oldest tombstones go", maxRecordedExecutions + 5, seq(5, maxRecordedExecutions+4), maxRecordedExecutions + 4, (maxRecordedExecutions-1)*tombstoneSize + 1000},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &session{execs: map[string]*execution{}}
			for i := range tc.n {
				e := &execution{id: strconv.Itoa(i), status: "Succeeded"}
				s.recordLocked(e, 1000, time.Time{})
				s.finishedLocked(e, 1000, 1000, time.Time{})
				require.LessOrEqual(t, len(s.execs)+len(s.tombs), maxRecordedExecutions)
				require.Len(t, s.tombOrder, len(s.tombs))
			}
			var got []int
			for _, id := range s.tombOrder {
				i, err := strconv.Atoi(id)
				require.NoError(t, err)
				got = append(got, i)
				require.Equal(t, "Succeeded", s.tombs[id].status)
			}
			require.Equal(t, tc.tombs, got)
			require.Equal(t, []string{strconv.Itoa(tc.record)}, s.execOrder)
			require.Equal(t, tc.recBytes, s.recBytes)
		})
	}
}
