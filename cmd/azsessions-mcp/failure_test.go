package main

import (
	"errors"
	"io"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/azsessions/azsessions/tools"
)

// lockedBuffer is a strings.Builder safe for a writer and a reader.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestCredentialFailure runs the command against a pool with
// DefaultAzureCredential limited (AZURE_TOKEN_CREDENTIALS) to the Azure CLI
// credential and no az on PATH: the credential fails before any request, and
// the tool result and the log say which credential failed and what to do.
func TestCredentialFailure(t *testing.T) {
	t.Setenv("AZURE_TOKEN_CREDENTIALS", "AzureCLICredential")
	t.Setenv("PATH", t.TempDir()) // no az
	const endpoint = "https://eastus.dynamicsessions.io/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg/sessionPools/pool"
	tests := []struct {
		name string
		tool string
	}{
		{"code_interpreter", "code_interpreter"},
		{"list_files", "list_files"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clientR, serverW := io.Pipe()
			serverR, clientW := io.Pipe()
			var stderr lockedBuffer
			done := make(chan error, 1)
			go func() {
				done <- run(t.Context(), []string{"--session-id", "secret-session-id", "--log-level", "debug"}, serverR, serverW, &stderr, func(k string) string {
					return map[string]string{"AZURE_POOL_MANAGEMENT_ENDPOINT": endpoint}[k]
				})
				serverW.Close()
			}()
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "cred-test", Version: "v0"}, nil).Connect(t.Context(), &mcp.IOTransport{Reader: clientR, Writer: clientW}, nil)
			require.NoError(t, err)
			text, isErr := callText(t, cs, tt.tool, map[string]any{"python_code": "1+1"})
			require.True(t, isErr)
			for _, want := range []string{"authentication failed", "DefaultAzureCredential", "AzureCLICredential", "az login", "AZURE_CLIENT_SECRET", "Session Executor"} {
				require.Contains(t, text, want)
			}
			require.NoError(t, cs.Close())
			require.NoError(t, <-done)
			logs := stderr.String()
			require.Contains(t, logs, "level=ERROR msg=\"tool call failed\"")
			require.Contains(t, logs, "cause_kind=credential credential=DefaultAzureCredential")
			require.Contains(t, logs, "AzureCLICredential: executable not found on path", "the log has the credential's own reason")
			require.Contains(t, logs, `cause="DefaultAzureCredential: failed to acquire a token.`)
			require.NotContains(t, logs, "secret-session-id")
		})
	}
}

func TestRedact(t *testing.T) {
	tests := []struct {
		name, in, want string
		secrets        []string
	}{
		{"identifier query", `GET https://x/executions?api-version=2025-10-02-preview&identifier=abc123&x=1`, `GET https://x/executions?api-version=2025-10-02-preview&identifier=REDACTED&x=1`, nil},
		{"named secret", `session my-id failed`, `session REDACTED failed`, []string{"my-id"}},
		{"escaped secret", `identifier%3Da+b`, `identifierREDACTED`, []string{"=a b"}},
		{"bearer", `Authorization: Bearer abc.def-ghi`, `Authorization: Bearer REDACTED`, nil},
		{"jwt", `token eyJhbGciOi.eyJzdWIiOi.sig_nature here`, `token REDACTED here`, nil},
		{"nothing", `plain text`, `plain text`, []string{""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, redact(tt.in, tt.secrets...))
		})
	}
}

func TestLogLevelFlag(t *testing.T) {
	tests := []struct {
		arg     string
		wantErr bool
	}{
		{"debug", false}, {"info", false}, {"warn", false}, {"error", false}, {"loud", true},
	}
	for _, tt := range tests {
		t.Run(tt.arg, func(t *testing.T) {
			_, err := parseFlags([]string{"--emulator", "--log-level", tt.arg}, io.Discard)
			if tt.wantErr {
				require.ErrorContains(t, err, "use debug, info, warn or error")
				return
			}
			require.NoError(t, err)
		})
	}
}

// TestFailureRedactsCause: the logged cause of a transport failure (whose
// url.Error carries the request URL) has no identifier.
func TestFailureRedactsCause(t *testing.T) {
	tests := []struct {
		name     string
		err      error
		wantKind string
		wantText string
	}{
		{"transport", &tools.Error{Message: "could not reach the code interpreter service", Err: &url.Error{Op: "Post", URL: "https://pool.example/executions?identifier=secret-id&api-version=x", Err: errors.New("connection refused")}}, "transport", "could not reach the code interpreter service"},
		{"named identifier", &tools.Error{Message: "the call to the code interpreter service failed", Err: errors.New("session secret-id: Bearer abcdef")}, "other", "the call to the code interpreter service failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text, attrs := failure(tt.err, "secret-id")
			require.Equal(t, tt.wantText, text)
			m := map[string]any{}
			for i := 0; i+1 < len(attrs); i += 2 {
				m[attrs[i].(string)] = attrs[i+1]
			}
			require.Equal(t, tt.wantKind, m["cause_kind"])
			require.NotContains(t, m["cause"], "secret-id")
			require.NotContains(t, m["cause"], "abcdef")
			require.Contains(t, m["cause"], "REDACTED")
		})
	}
}
