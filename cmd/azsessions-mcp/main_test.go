package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/azsessions/azsessions"
	"github.com/azsessions/azsessions/azsessionstest"
	"github.com/azsessions/azsessions/emulator"
	"github.com/azsessions/azsessions/tools"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// script answers like a tiny Python: "fail..." fails with a SyntaxError,
// "whoami" prints the data directory (one per session), anything else
// prints "ok".
func script(ctx context.Context, code string) emulator.ExecutionResult {
	switch {
	case strings.HasPrefix(code, "fail"):
		return emulator.ExecutionResult{Status: emulator.Failed, Stderr: "    'filename': 'TemperatureData.csv'\n    ^\nSyntaxError: illegal target for annotation\n"}
	case code == "whoami":
		return emulator.ExecutionResult{Stdout: emulator.DataDirFromContext(ctx)}
	case strings.HasPrefix(code, "write "):
		f := strings.SplitN(code, " ", 3)
		_ = os.WriteFile(filepath.Join(emulator.DataDirFromContext(ctx), f[1]), []byte(f[2]), 0o644)
		return emulator.ExecutionResult{}
	}
	return emulator.ExecutionResult{Stdout: "ok\n"}
}

// newEmulatorClient starts the emulator with the scripted executor.
func newEmulatorClient(t *testing.T) (*azsessions.Client, *emulator.Handler) {
	t.Helper()
	srv := azsessionstest.Start(t, &azsessionstest.Options{Options: emulator.Options{Executor: emulator.ScriptedExecutor(script)}})
	return srv.Client(), srv.Handler()
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// connect connects a go-sdk client to server over an in-memory transport.
func connect(t *testing.T, server *mcp.Server) *mcp.ClientSession {
	t.Helper()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := server.Connect(t.Context(), st, nil)
	require.NoError(t, err)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "v0.0.1"}, nil).Connect(t.Context(), ct, nil)
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = cs.Close()
		_ = ss.Wait()
	})
	return cs
}

func callText(t *testing.T, cs *mcp.ClientSession, name string, args any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: name, Arguments: args})
	require.NoError(t, err)
	require.Len(t, res.Content, 1)
	text, ok := res.Content[0].(*mcp.TextContent)
	require.True(t, ok)
	return text.Text, res.IsError
}

func TestInitializeAndListTools(t *testing.T) {
	tests := []struct {
		name     string
		localDir bool
		want     []string
	}{
		{"default", false, []string{"code_interpreter", "list_files"}},
		{"with local dir", true, []string{"code_interpreter", "download_file", "list_files", "upload_file"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client, _ := newEmulatorClient(t)
			cfg := serverConfig{Version: "v9"}
			if tt.localDir {
				cfg.Tools.LocalDir = t.TempDir()
			}
			cs := connect(t, newServer(client, cfg, discard()))
			init := cs.InitializeResult()
			require.Equal(t, "azsessions-mcp", init.ServerInfo.Name)
			require.Equal(t, "v9", init.ServerInfo.Version)
			require.NotNil(t, init.Capabilities.Tools)

			res, err := cs.ListTools(t.Context(), nil)
			require.NoError(t, err)
			var names []string
			want := map[string]tools.Tool{}
			for _, tool := range tools.New(client.NewSession(), &tools.Options{LocalDir: "x"}) {
				want[tool.Name] = tool
			}
			for _, tool := range res.Tools {
				names = append(names, tool.Name)
				require.Equal(t, want[tool.Name].Description, tool.Description)
				got, err := json.Marshal(tool.InputSchema)
				require.NoError(t, err)
				require.JSONEq(t, string(want[tool.Name].Parameters), string(got), tool.Name)
				require.NotNil(t, tool.Annotations)
			}
			require.ElementsMatch(t, tt.want, names)
		})
	}
}

func TestCallTools(t *testing.T) {
	client, _ := newEmulatorClient(t)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "TemperatureData.csv"), []byte("Time,Temperature\n00:00,7.2\n"), 0o644))
	cs := connect(t, newServer(client, serverConfig{Tools: tools.Options{LocalDir: dir}}, discard()))

	tests := []struct {
		name, tool string
		args       any
		want       []string // substrings of the text
		wantError  bool
	}{
		{"run code", "code_interpreter", map[string]any{"python_code": "print('hi')"}, []string{`{"status":"Succeeded","stdout":"ok\n"`}, false},
		{"failing program is data", "code_interpreter", map[string]any{"python_code": "fail = 1"}, []string{`"status":"Failed"`, "SyntaxError: illegal target for annotation"}, false},
		{"bad argument type", "code_interpreter", map[string]any{"python_code": 42}, []string{`{"error":"invalid arguments: python_code must be a string"}`}, false},
		{"missing argument", "code_interpreter", map[string]any{}, []string{`{"error":"invalid arguments: python_code is required (a string)"}`}, false},
		{"upload", "upload_file", map[string]any{"local_file_path": "TemperatureData.csv"}, []string{`"file_full_path":"/mnt/data/TemperatureData.csv"`}, false},
		{"list", "list_files", map[string]any{}, []string{`[{"filename":"TemperatureData.csv","size_in_bytes":27,"file_full_path":"/mnt/data/TemperatureData.csv"}]`}, false},
		{"list without arguments", "list_files", nil, []string{`"TemperatureData.csv"`}, false},
		{"download never overwrites", "download_file", map[string]any{"remote_file_path": "TemperatureData.csv"}, []string{`"saved_to":"TemperatureData-1.csv"`, "nothing was overwritten"}, false},
		{"path escape refused", "upload_file", map[string]any{"local_file_path": "../../etc/passwd"}, []string{`is refused`}, false},
	}
	for _, tt := range tests { // sequential: one session, order matters
		text, isErr := callText(t, cs, tt.tool, tt.args)
		require.Equal(t, tt.wantError, isErr, tt.name)
		for _, w := range tt.want {
			require.Contains(t, text, w, tt.name)
		}
	}
	got, err := os.ReadFile(filepath.Join(dir, "TemperatureData-1.csv"))
	require.NoError(t, err)
	require.Equal(t, "Time,Temperature\n00:00,7.2\n", string(got))
}

func TestOneSessionPerConnection(t *testing.T) {
	tests := []struct {
		name      string
		sessionID string
		wantSame  bool
	}{
		{"fresh session per connection", "", false},
		{"-session-id shared", "shared-session-1", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client, h := newEmulatorClient(t)
			server := newServer(client, serverConfig{SessionID: tt.sessionID}, discard())
			var dirs []string
			for range 2 {
				cs := connect(t, server)
				var first string
				for i := range 2 { // the same connection keeps its session
					text, isErr := callText(t, cs, "code_interpreter", map[string]any{"python_code": "whoami"})
					require.False(t, isErr)
					var m map[string]any
					require.NoError(t, json.Unmarshal([]byte(text), &m))
					if i == 0 {
						first = m["stdout"].(string)
					}
					require.Equal(t, first, m["stdout"])
				}
				dirs = append(dirs, first)
			}
			require.Equal(t, tt.wantSame, dirs[0] == dirs[1])
			stats := h.Stats()
			if tt.wantSame {
				require.Equal(t, map[string]int64{tt.sessionID: 4}, stats.ByIdentifier)
			} else {
				require.Len(t, stats.ByIdentifier, 2)
			}
		})
	}
}

type staticToken string

func (s staticToken) GetToken(context.Context, policy.TokenRequestOptions) (azcore.AccessToken, error) {
	return azcore.AccessToken{Token: string(s)}, nil
}

func TestServiceErrorIsToolError(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("x-ms-error-code", "AuthorizationFailed")
		w.WriteHeader(http.StatusForbidden)
		_, _ = io.WriteString(w, `{"error":{"code":"AuthorizationFailed","message":"no access for `+r.URL.String()+`"}}`)
	}))
	t.Cleanup(srv.Close)
	client, err := azsessions.NewClient(srv.URL, staticToken("secret-token"), &azsessions.ClientOptions{ClientOptions: azcore.ClientOptions{
		Transport: srv.Client(), InsecureAllowCredentialWithHTTP: true, Retry: policy.RetryOptions{MaxRetries: -1},
	}})
	require.NoError(t, err)
	var logs strings.Builder
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return logs.Write(p)
	}), nil))
	cs := connect(t, newServer(client, serverConfig{SessionID: "secret-session-id"}, logger))
	for _, name := range []string{"code_interpreter", "list_files"} {
		text, isErr := callText(t, cs, name, map[string]any{"python_code": "1+1"})
		require.True(t, isErr)
		require.Equal(t, "the code interpreter service answered 403 (AuthorizationFailed)", text)
	}
	mu.Lock()
	defer mu.Unlock()
	require.Contains(t, logs.String(), "tool call failed")
	require.Contains(t, logs.String(), "level=ERROR")
	require.Contains(t, logs.String(), "cause_kind=service status=403 error_code=AuthorizationFailed")
	require.Contains(t, logs.String(), "cause=", "the cause is logged")
	require.NotContains(t, logs.String(), "secret-session-id")
	require.NotContains(t, logs.String(), "secret-token")
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func TestStreamableHTTP(t *testing.T) {
	client, h := newEmulatorClient(t)
	server := newServer(client, serverConfig{}, discard())
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	t.Cleanup(hs.Close)
	for range 2 {
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "http-client", Version: "v0"}, nil).Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: hs.URL, HTTPClient: hs.Client()}, nil)
		require.NoError(t, err)
		for range 2 {
			text, isErr := callText(t, cs, "code_interpreter", map[string]any{"python_code": "whoami"})
			require.False(t, isErr)
			require.Contains(t, text, `"status":"Succeeded"`)
		}
		require.NoError(t, cs.Close())
	}
	// two connections, two calls each: two sessions of two executions
	require.Equal(t, []int64{2, 2}, values(h.Stats().ByIdentifier))
}

func values(m map[string]int64) []int64 {
	var out []int64
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

func TestRunErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"no backend", nil, nil, "set AZURE_POOL_MANAGEMENT_ENDPOINT"},
		{"bad local dir", []string{"--local-dir", "/nonexistent/dir"}, nil, "is not a directory"},
		{"extra args", []string{"foo"}, nil, "unexpected arguments"},
		{"bad endpoint", nil, map[string]string{"AZURE_POOL_MANAGEMENT_ENDPOINT": "http://insecure.example"}, "https"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr strings.Builder
			err := run(t.Context(), tt.args, strings.NewReader(""), io.Discard, &stderr, func(k string) string { return tt.env[k] })
			require.Error(t, err)
			require.Contains(t, err.Error(), tt.want)
		})
	}
}
