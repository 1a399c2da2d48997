package main

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/azsessions/azsessions/emulator"
)

// requireSandbox skips unless bwrap and Debian's python3 are there (fails
// instead when AZSESSIONS_REQUIRE_SANDBOX=1).
func requireSandbox(t *testing.T) {
	t.Helper()
	missing := func(msg string) {
		t.Helper()
		if os.Getenv("AZSESSIONS_REQUIRE_SANDBOX") == "1" {
			t.Fatal(msg + " (AZSESSIONS_REQUIRE_SANDBOX=1)")
		}
		t.Skip(msg + "; set AZSESSIONS_REQUIRE_SANDBOX=1 to make this a failure")
	}
	if _, err := exec.LookPath("bwrap"); err != nil {
		missing("bwrap is missing (apt-get install bubblewrap)")
	}
	if err := exec.Command("/usr/bin/python3", "-c", "import sys").Run(); err != nil {
		missing("/usr/bin/python3 is missing")
	}
	ex, err := emulator.NewSandboxExecutor(emulator.SandboxOptions{Python: "/usr/bin/python3"})
	if errors.Is(err, emulator.ErrNoBubblewrap) {
		missing("bubblewrap cannot create a sandbox here")
	}
	require.NoError(t, err)
	require.NoError(t, ex.Close())
}

// TestRunStdioEmulator runs the command's run function on pipes with the
// embedded sandboxed emulator and talks to it with the go-sdk client.
func TestRunStdioEmulator(t *testing.T) {
	requireSandbox(t)
	clientR, serverW := io.Pipe()
	serverR, clientW := io.Pipe()
	var stderr strings.Builder
	done := make(chan error, 1)
	go func() {
		done <- run(t.Context(), []string{"--emulator", "--python", "/usr/bin/python3", "--local-dir", t.TempDir()}, serverR, serverW, &stderr, func(string) string { return "" })
		serverW.Close()
	}()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "stdio-test", Version: "v0"}, nil).Connect(t.Context(), &mcp.IOTransport{Reader: clientR, Writer: clientW}, nil)
	require.NoError(t, err)

	res, err := cs.ListTools(t.Context(), nil)
	require.NoError(t, err)
	require.Len(t, res.Tools, 4)

	text, isErr := callText(t, cs, "code_interpreter", map[string]any{"python_code": "x = 6 * 7\nprint(x)"})
	require.False(t, isErr)
	require.Contains(t, text, `{"status":"Succeeded","stdout":"42\n"`)
	text, isErr = callText(t, cs, "code_interpreter", map[string]any{"python_code": "x +"})
	require.False(t, isErr)
	require.Contains(t, text, `"status":"Failed"`)
	require.Contains(t, text, "SyntaxError")
	text, _ = callText(t, cs, "code_interpreter", map[string]any{"python_code": "x"})
	require.Contains(t, text, `"result":42`, "state persists within the connection")

	require.NoError(t, cs.Close())
	require.NoError(t, <-done)
	require.Contains(t, stderr.String(), "serving MCP on stdio")
}
