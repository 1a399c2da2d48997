package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
)

// InspectorEnv turns on TestInspectorCLI (`make test-inspector`, run by
// `make test`): it downloads @modelcontextprotocol/inspector with npx on first
// use (about 110 MB), so plain `go test` skips it.
const inspectorEnv = "AZSESSIONS_TEST_INSPECTOR"

// readmeBlock returns the text of the fenced code block that follows the
// HTML comment marker in the repository's README.
func readmeBlock(t *testing.T, marker string) string {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	require.NoError(t, err)
	re := regexp.MustCompile("(?s)<!-- " + regexp.QuoteMeta(marker) + " -->\\s*```[a-z]*\\n(.*?)```")
	m := re.FindSubmatch(readme)
	require.NotNil(t, m, "README.md has no code block after <!-- %s -->", marker)
	return string(m[1])
}

// buildServer builds this command as dir/azsessions-mcp (the name the README
// uses) and returns dir, to put first on PATH.
func buildServer(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	out, err := exec.Command("go", "build", "-o", filepath.Join(dir, "azsessions-mcp"), ".").CombinedOutput()
	require.NoError(t, err, string(out))
	return dir
}

// TestClaudeDesktopConfig parses the claude_desktop_config.json snippet of
// the README and starts the server as Claude Desktop would (command, args,
// env), then lists the tools and runs code through it.
func TestClaudeDesktopConfig(t *testing.T) {
	requireSandbox(t)
	var cfg struct {
		MCPServers map[string]struct {
			Command string            `json:"command"`
			Args    []string          `json:"args"`
			Env     map[string]string `json:"env"`
		} `json:"mcpServers"`
	}
	require.NoError(t, json.Unmarshal([]byte(readmeBlock(t, "claude-desktop-config")), &cfg))
	server, ok := cfg.MCPServers["azsessions"]
	require.True(t, ok, "the snippet names the server azsessions")
	require.Equal(t, "azsessions-mcp", filepath.Base(server.Command))
	for _, a := range server.Args {
		require.False(t, strings.HasPrefix(a, "-e") && !strings.HasPrefix(a, "--"), "single-dash -e… flags are mangled by MCP client command lines: %s", a)
	}

	bin := filepath.Join(buildServer(t), "azsessions-mcp")
	cmd := exec.Command(bin, server.Args...)
	cmd.Env = os.Environ()
	for k, v := range server.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "claude-desktop-like", Version: "v0"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	require.NoError(t, err)
	defer cs.Close()
	res, err := cs.ListTools(ctx, nil)
	require.NoError(t, err)
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	require.Contains(t, names, "code_interpreter")
	text, isErr := callText(t, cs, "code_interpreter", map[string]any{"python_code": "print(6 * 7)"})
	require.False(t, isErr, text)
	require.Contains(t, text, `"stdout":"42\n"`)
}

// TestInspectorCLI runs the README's `npx @modelcontextprotocol/inspector
// --cli` commands, word for word, against this command built as
// azsessions-mcp on PATH, and checks what they print.
func TestInspectorCLI(t *testing.T) {
	if os.Getenv(inspectorEnv) != "1" {
		t.Skipf("skipping: set %s=1 (make test-inspector) to run the README's MCP Inspector commands; they download @modelcontextprotocol/inspector with npx", inspectorEnv)
	}
	if _, err := exec.LookPath("npx"); err != nil {
		t.Skip("skipping: npx is missing (install Node.js 20 or later to run the MCP Inspector)")
	}
	requireSandbox(t)
	dir := buildServer(t)
	var commands []string
	for _, line := range strings.Split(readmeBlock(t, "inspector-commands"), "\n") {
		if strings.HasPrefix(line, "npx ") {
			commands = append(commands, line)
		}
	}
	require.Len(t, commands, 2, "the README shows tools/list and tools/call")
	for _, c := range commands {
		t.Run(strings.Fields(c)[5], func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute) // the first run downloads the inspector
			defer cancel()
			cmd := exec.CommandContext(ctx, "sh", "-c", c)
			cmd.Env = append(os.Environ(), "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"), "npm_config_update_notifier=false")
			cmd.WaitDelay = 10 * time.Second
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			require.NoError(t, err, "%s\nstdout: %s\nstderr: %s", c, out, stderr.String())
			var res map[string]any
			require.NoError(t, json.Unmarshal(out, &res), "%s", out)
			switch {
			case strings.Contains(c, "tools/list"):
				var names []string
				for _, tl := range res["tools"].([]any) {
					names = append(names, tl.(map[string]any)["name"].(string))
				}
				require.Equal(t, []string{"code_interpreter", "list_files"}, names)
			case strings.Contains(c, "tools/call"):
				content := res["content"].([]any)
				require.NotEmpty(t, content)
				require.Contains(t, content[0].(map[string]any)["text"], `"stdout":"42\n"`)
				require.NotEqual(t, true, res["isError"])
			default:
				t.Fatalf("unexpected README command %s", c)
			}
		})
	}
}
