package azsessions

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a goroutine outlives them: every
// fake server is closed and every client transport's idle connections are
// closed by the test that made them (see setup).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
