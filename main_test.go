package azsessions

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/azsessions/azsessions/internal/testenv"
)

// TestMain fails the package's tests when a goroutine outlives them: every
// fake server is closed and every client transport's idle connections are
// closed by the test that made them (see setup). It runs 4 tests at once
// unless -parallel is given: the parallel ones mostly wait (deadlines,
// per-try timeouts, slow fakes).
func TestMain(m *testing.M) {
	testenv.RaiseParallel(4)
	goleak.VerifyTestMain(m)
}
