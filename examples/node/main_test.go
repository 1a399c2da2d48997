package main

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a goroutine outlives them (the
// emulator, its sessions' kernels and the client's connections must all be
// closed by the test that started them).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
