package azsessions

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	exShellCommand = "spec/2025-10-02-preview/CodeExecution_Execute_ShellCommand.json"
	exShellArgv    = "spec/2025-10-02-preview/CodeExecution_Execute_ShellExecCommandAndArgs.json"
)

// TestExecuteShellSpecExamples sends each Shell spec example's request
// through ExecuteShell and serves its response as written: the request
// carries the example's Shell fields (read from the example as data, never
// code), and every field of the response is decoded.
func TestExecuteShellSpecExamples(t *testing.T) {
	for _, file := range []string{exShellCommand, exShellArgv} {
		t.Run(file, func(t *testing.T) {
			var req map[string]json.RawMessage
			require.NoError(t, json.Unmarshal(example(t, file, "parameters", "codeExecutionRequest"), &req))
			var params struct {
				Identifier string `json:"identifier"`
			}
			require.NoError(t, json.Unmarshal(example(t, file, "parameters"), &params))
			var headers map[string]string
			require.NoError(t, json.Unmarshal(example(t, file, "responses", "200", "headers"), &headers))
			respBody := example(t, file, "responses", "200", "body")
			var want struct {
				ID, Identifier, Status string
				Result                 struct {
					Stdout, Stderr              string
					ExecutionTimeInMilliseconds int64
				}
			}
			require.NoError(t, json.Unmarshal(respBody, &want))

			var cmd ShellExecution
			if raw, ok := req["shellCommand"]; ok {
				require.NoError(t, json.Unmarshal(raw, &cmd.ShellCommand))
			}
			if raw, ok := req["execCommandAndArgs"]; ok {
				require.NoError(t, json.Unmarshal(raw, &cmd.ExecCommandAndArgs))
			}
			if raw, ok := req["stdin"]; ok {
				require.NoError(t, json.Unmarshal(raw, &cmd.Stdin))
			}
			var opts ExecuteShellOptions
			var timeout int
			require.NoError(t, json.Unmarshal(req["timeoutInSeconds"], &timeout))
			opts.Timeout = time.Duration(timeout) * time.Second
			require.NoError(t, json.Unmarshal(req["outputStreamsMaxLength"], &opts.OutputStreamsMaxLength))
			opts.OperationID = headers["operation-id"]

			p := setup(t, APIVersion20251002Preview)
			p.handle("GET /executions/{id}", func(w http.ResponseWriter, r *http.Request) {
				writeError(w, http.StatusNotFound, "ExecutionNotFound", "no such execution") // the OperationID is unused
			})
			p.handle("POST /executions", func(w http.ResponseWriter, r *http.Request) {
				wantQuery(t, r, stdQuery(APIVersion20251002Preview, params.Identifier))
				assert.Equal(t, headers["operation-id"], r.Header.Get("operation-id"))
				var got map[string]json.RawMessage
				assert.NoError(t, json.NewDecoder(r.Body).Decode(&got))
				for _, k := range []string{"shellCommand", "execCommandAndArgs", "stdin", "timeoutInSeconds", "outputStreamsMaxLength"} {
					if w, ok := req[k]; ok {
						assert.JSONEq(t, string(w), string(got[k]), "field %s", k)
					} else {
						assert.NotContains(t, got, k)
					}
				}
				assert.NotContains(t, got, "code", "a Shell request has no code")
				hs := []string{}
				for k, v := range headers {
					hs = append(hs, k, v)
				}
				writeJSON(w, http.StatusOK, respBody, hs...)
			})
			resp, err := p.client.Session(params.Identifier).ExecuteShell(context.Background(), cmd, &opts)
			require.NoError(t, err)
			code, err := strconv.Atoi(want.Status)
			require.NoError(t, err)
			require.Equal(t, code, resp.ExitCode)
			require.Equal(t, want.Status, resp.Status)
			require.Equal(t, want.ID, resp.ID)
			require.Equal(t, want.Identifier, resp.Identifier)
			require.Equal(t, want.Result.Stdout, resp.Stdout)
			require.Equal(t, want.Result.Stderr, resp.Stderr)
			require.Equal(t, time.Duration(want.Result.ExecutionTimeInMilliseconds)*time.Millisecond, resp.ExecutionTime)
			require.False(t, resp.Truncated())
			require.Equal(t, 1, p.requestsTo(http.MethodPost, "/executions"))
		})
	}
}

// TestExecuteShellExitCodeIsData: a non-zero exit code, or a status that is
// not an exit code, is a result, not an error.
func TestExecuteShellExitCodeIsData(t *testing.T) {
	cases := []struct {
		status string
		want   int
	}{{"0", 0}, {"1", 1}, {"127", 127}, {"-9", -9}, {"Failed", -1}}
	for _, tc := range cases {
		t.Run(tc.status, func(t *testing.T) {
			p := setup(t, APIVersion20251002Preview)
			p.handle("POST /executions", func(w http.ResponseWriter, r *http.Request) {
				writeJSON(w, http.StatusOK, []byte(`{"id":"e","identifier":"`+testIdentifier+`","status":"`+tc.status+`","result":{"stdout":"","stderr":"boom\n","executionTimeInMilliseconds":5}}`))
			})
			resp, err := p.client.Session(testIdentifier).ExecuteShell(context.Background(), ShellExecution{ShellCommand: "false"}, nil)
			require.NoError(t, err)
			require.Equal(t, tc.want, resp.ExitCode)
			require.Equal(t, tc.status, resp.Status)
			require.Equal(t, "boom\n", resp.Stderr)
		})
	}
}

// TestExecuteShellValidation: bad input fails before any I/O.
func TestExecuteShellValidation(t *testing.T) {
	cases := []struct {
		name    string
		version string
		cmd     ShellExecution
		opts    *ExecuteShellOptions
		is      error
		msg     string
	}{
		{"empty", APIVersion20251002Preview, ShellExecution{}, nil, nil, "is empty"},
		{"blank command", APIVersion20251002Preview, ShellExecution{ShellCommand: "  \n"}, nil, nil, "is empty"},
		{"stdin only", APIVersion20251002Preview, ShellExecution{Stdin: "x"}, nil, nil, "is empty"},
		{"both", APIVersion20251002Preview, ShellExecution{ShellCommand: "ls", ExecCommandAndArgs: []string{"ls"}}, nil, nil, "not both"},
		{"empty program", APIVersion20251002Preview, ShellExecution{ExecCommandAndArgs: []string{"", "-a"}}, nil, nil, "program"},
		{"negative timeout", APIVersion20251002Preview, ShellExecution{ShellCommand: "ls"}, &ExecuteShellOptions{Timeout: -time.Second}, nil, "timeout"},
		{"bad operation-id", APIVersion20251002Preview, ShellExecution{ShellCommand: "ls"}, &ExecuteShellOptions{OperationID: "a b"}, nil, "OperationID"},
		{"negative cap", APIVersion20251002Preview, ShellExecution{ShellCommand: "ls"}, &ExecuteShellOptions{OutputStreamsMaxLength: -1}, nil, "negative"},
		{"2025-02-02-preview", APIVersion20250202Preview, ShellExecution{ShellCommand: "ls"}, nil, ErrUnsupported, "2025-10-02-preview"},
		{"2024-10-02-preview", APIVersion20241002Preview, ShellExecution{ShellCommand: "ls"}, nil, ErrUnsupported, "2025-10-02-preview"},
		{"legacy", APIVersion20240202Preview, ShellExecution{ShellCommand: "ls"}, nil, ErrUnsupported, "2025-10-02-preview"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := setup(t, tc.version)
			_, err := p.client.Session(testIdentifier).ExecuteShell(context.Background(), tc.cmd, tc.opts)
			require.Error(t, err)
			if tc.is != nil {
				require.ErrorIs(t, err, tc.is)
			}
			require.ErrorContains(t, err, tc.msg)
			p.requireNoIO(t)
		})
	}
	t.Run("bad identifier", func(t *testing.T) {
		p := setup(t, APIVersion20251002Preview)
		_, err := p.client.Session("bad identifier").ExecuteShell(context.Background(), ShellExecution{ShellCommand: "ls"}, nil)
		require.ErrorIs(t, err, ErrInvalidIdentifier)
		p.requireNoIO(t)
	})
}

// TestExecuteShellDefaults: the timeout defaults to DefaultShellTimeout and
// may pass Execute's 220 s cap; stdin is omitted when empty.
func TestExecuteShellDefaults(t *testing.T) {
	cases := []struct {
		name string
		opts *ExecuteShellOptions
		want string
	}{
		{"default", nil, `{"executionType":"Synchronous","execCommandAndArgs":["ls","-a"],"timeoutInSeconds":600}`},
		{"long", &ExecuteShellOptions{Timeout: 30*time.Minute + time.Millisecond}, `{"executionType":"Synchronous","execCommandAndArgs":["ls","-a"],"timeoutInSeconds":1801}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := setup(t, APIVersion20251002Preview)
			p.handle("POST /executions", func(w http.ResponseWriter, r *http.Request) {
				wantJSONBody(t, r, tc.want)
				writeJSON(w, http.StatusOK, []byte(`{"id":"e","identifier":"`+testIdentifier+`","status":"0","result":{"stdout":"","stderr":"","executionTimeInMilliseconds":1}}`))
			})
			_, err := p.client.Session(testIdentifier).ExecuteShell(context.Background(), ShellExecution{ExecCommandAndArgs: []string{"ls", "-a"}}, tc.opts)
			require.NoError(t, err)
		})
	}
}

// shellBackend records Shell executions by operation-id and answers look-ups.
type shellBackend struct {
	mu    sync.Mutex
	runs  map[string]int
	posts atomic.Int32
}

func (b *shellBackend) run(r *http.Request) string {
	_, _ = io.Copy(io.Discard, r.Body)
	id := r.Header.Get("operation-id")
	b.posts.Add(1)
	b.mu.Lock()
	b.runs[id]++
	b.mu.Unlock()
	return id
}

func (b *shellBackend) lookup(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	b.mu.Lock()
	n := b.runs[id]
	b.mu.Unlock()
	if n == 0 {
		writeError(w, http.StatusNotFound, "ExecutionNotFound", "no execution "+id)
		return
	}
	writeJSON(w, http.StatusOK, []byte(`{"id":"`+id+`","identifier":"`+testIdentifier+`","status":"3","result":{"stdout":"ran\n","stderr":"","executionTimeInMilliseconds":4}}`))
}

// TestExecuteShellNeverResent: a Shell command whose answer is lost after
// the service got it is never sent again. When the service recorded it the
// caller gets the recorded result (exit code included); otherwise
// ErrExecutionOutcomeUnknown with the operation-id.
func TestExecuteShellNeverResent(t *testing.T) {
	cases := []struct {
		name   string
		record bool
		answer func(t *testing.T, w http.ResponseWriter)
	}{
		{"502 after run", true, func(t *testing.T, w http.ResponseWriter) {
			writeError(w, http.StatusBadGateway, "BadGateway", "upstream failed")
		}},
		{"500 after run", true, func(t *testing.T, w http.ResponseWriter) {
			writeError(w, http.StatusInternalServerError, "InternalServerError", "oops")
		}},
		{"hang up after run", true, func(t *testing.T, w http.ResponseWriter) {
			conn, _, err := http.NewResponseController(w).Hijack()
			if assert.NoError(t, err) {
				conn.Close()
			}
		}},
		{"cut body after run", true, func(t *testing.T, w http.ResponseWriter) {
			conn, buf, err := http.NewResponseController(w).Hijack()
			if !assert.NoError(t, err) {
				return
			}
			defer conn.Close()
			_, _ = buf.WriteString("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n{\"id\":\"x\",\"status\":\"")
			_ = buf.Flush()
		}},
		{"504 not recorded", false, func(t *testing.T, w http.ResponseWriter) {
			writeError(w, http.StatusGatewayTimeout, "GatewayTimeout", "no answer in time")
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := &shellBackend{runs: map[string]int{}}
			p := setup(t, APIVersion20251002Preview)
			p.handle("POST /executions", func(w http.ResponseWriter, r *http.Request) {
				id := b.run(r)
				if !tc.record {
					b.mu.Lock()
					delete(b.runs, id)
					b.mu.Unlock()
				}
				tc.answer(t, w)
			})
			p.handle("GET /executions/{id}", b.lookup)
			resp, err := p.client.Session(testIdentifier).ExecuteShell(context.Background(), ShellExecution{ShellCommand: "echo ran; exit 3"}, nil)
			require.Equal(t, int32(1), b.posts.Load(), "never sent twice")
			require.Equal(t, 1, lookups(p), "one look-up")
			if !tc.record {
				require.ErrorIs(t, err, ErrExecutionOutcomeUnknown)
				var unknown *ExecutionOutcomeUnknownError
				require.ErrorAs(t, err, &unknown)
				require.NotEmpty(t, unknown.OperationID)
				require.NotContains(t, err.Error(), testIdentifier)
				return
			}
			require.NoError(t, err)
			require.Equal(t, 3, resp.ExitCode)
			require.Equal(t, "ran\n", resp.Stdout)
			require.NotEmpty(t, resp.ID)
		})
	}
}

// lookups counts the GET executions/{id} requests p received.
func lookups(p *fakePool) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, s := range p.seen {
		if strings.HasPrefix(s, "GET /executions/") {
			n++
		}
	}
	return n
}
