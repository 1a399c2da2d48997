package azsessionstest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/azsessions/azsessions"
	"github.com/azsessions/azsessions/azsessionstest"
	"github.com/azsessions/azsessions/emulator"
	"github.com/azsessions/azsessions/internal/wire"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const v = wire.V20251002Preview

func executeURL(s *azsessionstest.Server, ident string) string {
	return s.Endpoint() + "/executions?" + url.Values{"api-version": {v}, "identifier": {ident}}.Encode()
}

func post(t *testing.T, s *azsessionstest.Server, ident, code, opID string) (*http.Response, []byte, error) {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"code": code, "timeoutInSeconds": 60})
	req, err := http.NewRequest(http.MethodPost, executeURL(s, ident), bytes.NewReader(b))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	if opID != "" {
		req.Header.Set("operation-id", opID)
	}
	resp, err := s.HTTPClient().Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp, body, err
}

func TestFaultStatus(t *testing.T) {
	tests := []struct {
		name      string
		fault     azsessionstest.Fault
		wantExecs int64
	}{
		{"503 before handler", azsessionstest.Fault{Status: 503, RetryAfter: "2", RetryAfterMs: 1500}, 0},
		{"429 custom code", azsessionstest.Fault{Status: 429, Code: "TooManyRequests", RetryAfter: "1"}, 0},
		{"500 after handler", azsessionstest.Fault{Status: 500, AfterHandler: true}, 1},
		{"504 after handler", azsessionstest.Fault{Status: 504, AfterHandler: true}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := azsessionstest.Start(t, nil)
			s.InjectFault(azsessionstest.RouteExecute, tt.fault, 1)
			resp, body, err := post(t, s, "sess-fault", "print(1)", "op1")
			require.NoError(t, err)
			require.Equal(t, tt.fault.Status, resp.StatusCode)
			code := tt.fault.Code
			if code == "" {
				code = "InjectedFault"
			}
			require.Equal(t, code, resp.Header.Get("x-ms-error-code"))
			require.Equal(t, tt.fault.RetryAfter, resp.Header.Get("Retry-After"))
			if tt.fault.RetryAfterMs > 0 {
				require.Equal(t, "1500", resp.Header.Get("retry-after-ms"))
			}
			require.Contains(t, string(body), `"code":"`+code+`"`)
			require.Equal(t, tt.wantExecs, s.Executions())
			// The fault is used up: the retry succeeds (and, after the fact,
			// finds the recorded execution instead of running it again).
			resp, body, err = post(t, s, "sess-fault", "print(1)", "op1")
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
			require.Equal(t, int64(1), s.Executions())
			require.Equal(t, 2, s.Requests(azsessionstest.RouteExecute))
		})
	}
}

func isReset(err error) bool {
	return err != nil && (errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		strings.Contains(err.Error(), "connection reset") || strings.Contains(err.Error(), "EOF"))
}

func TestFaultResets(t *testing.T) {
	tests := []struct {
		name      string
		fault     azsessionstest.Fault
		wantExecs int64
	}{
		{"before handler", azsessionstest.Fault{ResetBeforeHandler: true}, 0},
		{"mid request", azsessionstest.Fault{ResetMidRequest: true}, 0},
		{"after handler", azsessionstest.Fault{ResetAfterHandler: true}, 1},
		{"mid body", azsessionstest.Fault{ResetMidBody: true}, 1},
	}
	transports := []struct {
		name string
		opts azsessionstest.Options
	}{{"http", azsessionstest.Options{}}, {"https", azsessionstest.Options{TLS: true}}, {"in process", azsessionstest.Options{InProcess: true}}}
	for _, tr := range transports {
		for _, tt := range tests {
			t.Run(tt.name+" "+tr.name, func(t *testing.T) {
				s := azsessionstest.Start(t, &tr.opts)
				s.InjectFault("POST executions", tt.fault, 1)
				resp, _, err := post(t, s, "sess-reset", "print(1)", "op1")
				require.True(t, isReset(err), "want a cut connection, got resp %v err %v", resp, err)
				if tt.fault.ResetMidBody {
					// Status and headers arrived; the body was cut short.
					var ue interface{ Unwrap() error }
					_ = ue
					require.ErrorIs(t, err, io.ErrUnexpectedEOF)
				}
				require.Equal(t, tt.wantExecs, s.Executions())
				resp, body, err := post(t, s, "sess-reset", "print(1)", "op1")
				require.NoError(t, err)
				require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
				require.Equal(t, int64(1), s.Executions(), "executed exactly once")
			})
		}
	}
}

func TestFaultDelay(t *testing.T) {
	s := azsessionstest.Start(t, nil)
	s.InjectFault("executions", azsessionstest.Fault{Delay: 200 * time.Millisecond}, 1)
	start := time.Now()
	resp, _, err := post(t, s, "sess-delay", "print(1)", "")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.GreaterOrEqual(t, time.Since(start), 200*time.Millisecond)

	// A client that gives up ends the delay and the request never runs.
	s.InjectFault(azsessionstest.RouteExecute, azsessionstest.Fault{Delay: time.Hour}, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, executeURL(s, "sess-delay"), strings.NewReader(`{"code":"1"}`))
	_, err = s.HTTPClient().Do(req)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Eventually(t, func() bool { return s.Requests("*") == 2 }, time.Second, 10*time.Millisecond)
	require.Equal(t, int64(1), s.Executions())
}

func TestFaultRouting(t *testing.T) {
	s := azsessionstest.Start(t, nil)
	files := s.Endpoint() + "/files?api-version=" + v + "&identifier=sess-route"
	get := func(u string) int {
		resp, err := s.HTTPClient().Get(u)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	// n <= 0: until cleared; only the matching route is affected.
	s.InjectFault(azsessionstest.RouteListFiles, azsessionstest.Fault{Status: 502}, 0)
	for range 3 {
		require.Equal(t, 502, get(files))
	}
	resp, _, err := post(t, s, "sess-route", "1", "")
	require.NoError(t, err)
	require.Equal(t, 200, resp.StatusCode)
	s.ClearFaults()
	require.Equal(t, 200, get(files))
	// n faults, then normal service; faults queue in order.
	s.InjectFault("GET files", azsessionstest.Fault{Status: 500}, 2)
	s.InjectFault("*", azsessionstest.Fault{Status: 503}, 1)
	require.Equal(t, 500, get(files))
	require.Equal(t, 500, get(files))
	require.Equal(t, 503, get(files))
	require.Equal(t, 200, get(files))
	require.Equal(t, 8, s.Requests(azsessionstest.RouteListFiles))
	require.Equal(t, 8, s.Requests("files"))
	require.Equal(t, 1, s.Requests("POST executions"))
	require.Equal(t, 9, s.Requests("*"))
	// Legacy routes share the operation names.
	s.InjectFault(azsessionstest.RouteExecute, azsessionstest.Fault{Status: 503}, 1)
	resp, err = s.HTTPClient().Post(s.Endpoint()+"/code/execute?api-version="+wire.V20240202Preview+"&identifier=sess-route", "application/json", strings.NewReader(`{"properties":{"code":"1"}}`))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 503, resp.StatusCode)
}

func TestAdvanceExpiresSessions(t *testing.T) {
	s := azsessionstest.Start(t, cellsOptions(azsessionstest.Options{Options: emulator.Options{Cooldown: 5 * time.Minute}}))
	stdout := func(code string) string {
		resp, body, err := post(t, s, "sess-clock", code, "")
		require.NoError(t, err)
		require.Equal(t, 200, resp.StatusCode, "%s", body)
		var m wire.ExecuteResponse
		require.NoError(t, json.Unmarshal(body, &m))
		return m.Result.Stdout
	}
	t0 := s.Clock().Now()
	stdout("x = 42")
	s.Advance(4 * time.Minute)
	require.Equal(t, "42\n", stdout("print(x)"))
	require.WithinDuration(t, t0.Add(4*time.Minute), s.Clock().Now(), time.Second)
	s.Advance(5*time.Minute + time.Second)
	require.Equal(t, 0, s.Stats().Sessions)
	require.Equal(t, "", stdout("print(1)\nx = 1")[:0])
	resp, body, err := post(t, s, "sess-clock", "print(y)", "")
	require.NoError(t, err)
	require.Equal(t, 200, resp.StatusCode)
	require.Contains(t, string(body), "NameError")
}

// TestDefaultExecutor: the fake runs no Python; every cell succeeds and
// prints its code back, deterministically (issue 15 item 5).
func TestDefaultExecutor(t *testing.T) {
	s := azsessionstest.Start(t, nil)
	for _, code := range []string{"6 * 7", "print('hello')\n", "raise ValueError('bad')", "import time\ntime.sleep(30)"} {
		t.Run(code, func(t *testing.T) {
			resp, body, err := post(t, s, "sess-default", code, "")
			require.NoError(t, err)
			require.Equal(t, 200, resp.StatusCode)
			var m wire.ExecuteResponse
			require.NoError(t, json.Unmarshal(body, &m))
			require.Equal(t, "Succeeded", m.Status)
			want := code
			if !strings.HasSuffix(want, "\n") {
				want += "\n"
			}
			require.Equal(t, want, m.Result.Stdout)
			require.Empty(t, m.Result.Stderr)
			require.JSONEq(t, `""`, string(m.Result.ExecutionResult))
		})
	}
}

// TestCanned: answers by code, a failure for any other code.
func TestCanned(t *testing.T) {
	answers := map[string]emulator.ExecutionResult{
		"6 * 7":                   {Value: json.RawMessage("42")},
		"raise ValueError('bad')": {Status: emulator.Failed, Stderr: "ValueError: bad\n"},
	}
	s := azsessionstest.Start(t, &azsessionstest.Options{Options: emulator.Options{Executor: azsessionstest.Canned(answers)}})
	answers["6 * 7"] = emulator.ExecutionResult{Value: json.RawMessage("0")} // Canned copied the table
	tests := []struct {
		code, status, result, stderr string
	}{
		{"6 * 7", "Succeeded", "42", ""},
		{"raise ValueError('bad')", "Failed", `""`, "ValueError: bad"},
		{"6*7", "Failed", `""`, "NotImplementedError: azsessionstest.Canned has no answer for this code"},
	}
	for _, tt := range tests {
		t.Run(tt.code, func(t *testing.T) {
			_, body, err := post(t, s, "sess-canned", tt.code, "")
			require.NoError(t, err)
			var m wire.ExecuteResponse
			require.NoError(t, json.Unmarshal(body, &m))
			require.Equal(t, tt.status, m.Status)
			require.JSONEq(t, tt.result, string(m.Result.ExecutionResult))
			require.Contains(t, m.Result.Stderr, tt.stderr)
		})
	}
}

// TestSandboxExecutorSemantics: what the fake's former tiny Python subset
// was tested for, now with real Python (the sandbox executor), which is
// what tests that need Python semantics use. Its two servers share one
// executor, and the timeout case waits while the others run.
func TestSandboxExecutorSemantics(t *testing.T) {
	t.Parallel() // it mostly waits: for sandboxes, and for a timeout
	ex := sandboxExecutor(t)
	t.Cleanup(func() { require.NoError(t, ex.Close()) }) // after the servers' (last in, first out)
	t.Run("cells", func(t *testing.T) {
		t.Parallel()
		s := azsessionstest.Start(t, &azsessionstest.Options{Options: emulator.Options{Executor: unclosedExecutor{ex}}})
		tests := []struct {
			code, status, stdout, result, stderr string
		}{
			{"6 * 7", "Succeeded", "", "42", ""},
			{"print('hello', 1 + 2.5)", "Succeeded", "hello 3.5\n", `""`, ""},
			{"import math\n# comment\na = 2 ** 10\na // 3", "Succeeded", "", "341", ""},
			{"'a' + \"b\"", "Succeeded", "", `"ab"`, ""},
			{"None", "Succeeded", "", `""`, ""}, // None is "" (spec example CodeExecution_Execute_Result_None.json)
			{"7 / 2", "Succeeded", "", "3.5", ""},
			{"-7 // 2", "Succeeded", "", "-4", ""},
			{"print(1)\nraise ValueError('bad')", "Failed", "1\n", `""`, "ValueError: bad"},
			{"1 / 0", "Failed", "", `""`, "ZeroDivisionError"},
			{"undefined_name", "Failed", "", `""`, "NameError: name 'undefined_name' is not defined"},
		}
		for _, tt := range tests {
			t.Run(tt.code, func(t *testing.T) {
				resp, body, err := post(t, s, "sess-python", tt.code, "")
				require.NoError(t, err)
				require.Equal(t, 200, resp.StatusCode)
				var m wire.ExecuteResponse
				require.NoError(t, json.Unmarshal(body, &m))
				require.Equal(t, tt.status, m.Status, "%s", body)
				require.Equal(t, tt.stdout, m.Result.Stdout)
				require.JSONEq(t, tt.result, string(m.Result.ExecutionResult))
				require.Contains(t, m.Result.Stderr, tt.stderr)
			})
		}
	})
	t.Run("sleep honours the timeout", func(t *testing.T) {
		t.Parallel()
		s := azsessionstest.Start(t, &azsessionstest.Options{Options: emulator.Options{Executor: unclosedExecutor{ex}, MaxExecutionTime: time.Second}})
		start := time.Now()
		_, body, err := post(t, s, "sess-sleep", "import time\ntime.sleep(30)", "")
		require.NoError(t, err)
		require.Less(t, time.Since(start), 15*time.Second)
		require.Contains(t, string(body), `"status":"Failed"`)
	})
}

// unclosedExecutor is an executor shared by several servers: their Close
// leaves it running.
type unclosedExecutor struct{ emulator.Executor }

func (unclosedExecutor) Close() error { return nil }

func TestNewServerErrors(t *testing.T) {
	_, err := azsessionstest.NewServer(&azsessionstest.Options{APIVersion: "2020-01-01"})
	require.Error(t, err)
	_, err = azsessionstest.NewServer(&azsessionstest.Options{Options: emulator.Options{Cooldown: -1}})
	require.Error(t, err)
	_, err = azsessionstest.NewServer(&azsessionstest.Options{InProcess: true, TLS: true})
	require.ErrorContains(t, err, "InProcess serves no TLS")
	s, err := azsessionstest.NewServer(nil)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(s.Endpoint(), s.URL+"/subscriptions/"))
	require.NoError(t, s.Close())
	require.NoError(t, s.Close())
}

// TestInProcess: an InProcess server answers its clients (raw HTTP and the
// SDK's) without a socket, inside a testing/synctest bubble: an injected
// Delay takes fake time only.
func TestInProcess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := azsessionstest.Start(t, &azsessionstest.Options{InProcess: true})
		require.Equal(t, "http://azsessionstest.invalid", s.URL)
		s.InjectFault(azsessionstest.RouteExecute, azsessionstest.Fault{Delay: time.Hour}, 1)
		start := time.Now()
		resp, body, err := post(t, s, "sess-inproc", "print(1)", "")
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
		require.Equal(t, time.Hour, time.Since(start), "the delay passed on the bubble's clock")
		require.Contains(t, string(body), `"status":"Succeeded"`)
		res, err := s.Client().NewSession().Execute(context.Background(), "print(2)", nil)
		require.NoError(t, err)
		require.Equal(t, int64(2), s.Executions())
		require.NotEmpty(t, res.Stdout)
	})
}

// TestInProcessContextEnds: on an InProcess server, a request whose context
// ends while the handler runs (an injected Delay, a synchronous execution
// still running) fails with the context's error, as over a socket, instead
// of answering what the handler wrote after it noticed (an empty 200, which
// the client took for an answer: its Execute error did not say the outcome
// was unknown).
func TestInProcessContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := azsessionstest.Start(t, &azsessionstest.Options{InProcess: true, Options: emulator.Options{
			Executor: emulator.ScriptedExecutor(func(ctx context.Context, code string) emulator.ExecutionResult {
				select { // runs for a minute of the bubble's clock
				case <-time.After(time.Minute):
				case <-ctx.Done():
				}
				return emulator.ExecutionResult{Stdout: "done\n"}
			}),
		}})
		s.InjectFault(azsessionstest.RouteListFiles, azsessionstest.Fault{Delay: time.Hour}, 1)
		sess := s.Client().NewSession()
		for name, call := range map[string]func(context.Context) error{
			"Delay": func(ctx context.Context) error { _, err := sess.NewListFilesPager(nil).NextPage(ctx); return err },
			"synchronous execution": func(ctx context.Context) error {
				_, err := sess.Execute(ctx, "slow", nil)
				if !errors.Is(err, azsessions.ErrExecutionOutcomeUnknown) {
					return fmt.Errorf("not ErrExecutionOutcomeUnknown: %v", err)
				}
				return err
			},
		} {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			start := time.Now()
			err := call(ctx)
			cancel()
			require.ErrorIs(t, err, context.DeadlineExceeded, name)
			require.Equal(t, time.Second, time.Since(start), name)
		}
		require.Equal(t, 1, s.Requests(azsessionstest.RouteExecute), "the execution was sent once")
		require.Equal(t, int64(1), s.Executions(), "and goes on running")
	})
}
