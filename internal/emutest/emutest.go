// Package emutest starts the embedded emulator with real, sandboxed Python
// for the tests of the adapters and commands (other modules of this
// repository): one helper instead of a copy per module.
package emutest

import (
	"errors"
	"os"
	"testing"

	"github.com/azsessions/azsessions"
	"github.com/azsessions/azsessions/emulator"
	"github.com/azsessions/azsessions/internal/testenv"
)

// Client serves the emulator with the bubblewrap executor and Debian's
// python3 on a loopback port (emulator.Start) for the rest of the test and
// returns a client for it. It skips the test when bwrap or Python with the
// given modules is missing, or bubblewrap cannot make a sandbox here, and
// fails it instead when AZSESSIONS_REQUIRE_SANDBOX=1.
func Client(t testing.TB, modules ...string) *azsessions.Client {
	t.Helper()
	testenv.NeedSandbox(t, modules...)
	ex, err := emulator.NewSandboxExecutor(emulator.SandboxOptions{Python: testenv.Python, DataDir: testenv.DataDir(t), Ready: 1})
	if errors.Is(err, emulator.ErrNoBubblewrap) {
		if os.Getenv(testenv.RequireSandboxEnv) == "1" {
			t.Fatalf("bubblewrap cannot create a sandbox here and %s=1: %v", testenv.RequireSandboxEnv, err)
		}
		t.Skipf("skipping: bubblewrap cannot create a sandbox here (set %s=1 to fail instead): %v", testenv.RequireSandboxEnv, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	srv, err := emulator.Start("127.0.0.1:0", emulator.Options{Executor: ex})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	client, err := azsessions.NewClientWithNoCredential(srv.Endpoint, nil)
	if err != nil {
		t.Fatal(err)
	}
	return client
}
