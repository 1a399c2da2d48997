package azsessions

// Issue 12 items 12–16 (the papercuts a new user hit) and issue 15 item 3
// (resend back-off like azcore's).

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/stretchr/testify/require"
)

// funcTransport answers requests in-process (no network), so that tests can
// run inside a testing/synctest bubble with its fake clock.
type funcTransport func(*http.Request) (*http.Response, error)

func (f funcTransport) Do(r *http.Request) (*http.Response, error) { return f(r) }

func jsonResponse(r *http.Request, status int, body string, header ...string) *http.Response {
	h := http.Header{"Content-Type": {"application/json"}}
	for i := 0; i+1 < len(header); i += 2 {
		h.Set(header[i], header[i+1])
	}
	return &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body)), Request: r}
}

// TestPollUntilDoneHonoursRetryAfter (item 12): PollUntilDone(ctx, nil)
// waits as the service's Retry-After (or retry-after-ms) on a running
// execution says, not azcore's 30 s default; without a hint it waits the
// Frequency passed (the documented time.Second for Azure) or 30 s.
func TestPollUntilDoneHonoursRetryAfter(t *testing.T) {
	cases := []struct {
		name    string
		hint    []string // header name and value on every running answer
		options *runtime.PollUntilDoneOptions
		want    time.Duration // fake time from the first poll to the result (two running answers)
	}{
		{"Retry-After seconds, nil options", []string{"Retry-After", "1"}, nil, 2 * time.Second},
		{"retry-after-ms, nil options", []string{"retry-after-ms", "250"}, nil, 500 * time.Millisecond},
		{"Retry-After wins over Frequency", []string{"Retry-After", "2"}, &runtime.PollUntilDoneOptions{Frequency: time.Second}, 4 * time.Second},
		{"no hint, Frequency one second", nil, &runtime.PollUntilDoneOptions{Frequency: time.Second}, 2 * time.Second},
		{"no hint, nil options: azcore's 30 s", nil, nil, 60 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var polls atomic.Int32
				o := &ClientOptions{}
				o.Transport = funcTransport(func(r *http.Request) (*http.Response, error) {
					if r.Method == http.MethodPost {
						return jsonResponse(r, http.StatusAccepted, `{"identifier":"x","status":"Running"}`), nil
					}
					if polls.Add(1) <= 2 {
						return jsonResponse(r, http.StatusOK, `{"identifier":"x","status":"Running"}`, tc.hint...), nil
					}
					return jsonResponse(r, http.StatusOK, `{"identifier":"x","status":"Succeeded","result":{"stdout":"done\n","stderr":"","executionResult":""}}`), nil
				})
				c, err := NewClientWithNoCredential("http://localhost"+poolPath, o)
				require.NoError(t, err)
				poller, err := c.Session(testIdentifier).BeginExecute(context.Background(), "slow()", nil)
				require.NoError(t, err)
				start := time.Now()
				resp, err := poller.PollUntilDone(context.Background(), tc.options)
				require.NoError(t, err)
				require.Equal(t, "done\n", resp.Stdout)
				require.Equal(t, tc.want, time.Since(start))
				require.Equal(t, int32(3), polls.Load())
			})
		})
	}
}

// TestExecutePollsEverySecond: Execute, when the service answers that the
// execution is still running, asks again every second (executePollFrequency),
// or as a Retry-After says. Fake clock: no real waiting.
func TestExecutePollsEverySecond(t *testing.T) {
	cases := []struct {
		name string
		hint []string
		want time.Duration
	}{
		{"no hint", nil, time.Second},
		{"retry-after-ms", []string{"retry-after-ms", "100"}, 100 * time.Millisecond},
		{"Retry-After", []string{"Retry-After", "3"}, 3 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var polls atomic.Int32
				o := &ClientOptions{}
				o.Transport = funcTransport(func(r *http.Request) (*http.Response, error) {
					if r.Method == http.MethodPost {
						return jsonResponse(r, http.StatusAccepted, `{"identifier":"x","status":"Running"}`, tc.hint...), nil
					}
					if polls.Add(1) <= 1 {
						return jsonResponse(r, http.StatusOK, `{"identifier":"x","status":"Running"}`, tc.hint...), nil
					}
					return jsonResponse(r, http.StatusOK, `{"identifier":"x","status":"Succeeded","result":{"stdout":"done\n","stderr":"","executionResult":""}}`), nil
				})
				c, err := NewClientWithNoCredential("http://localhost"+poolPath, o)
				require.NoError(t, err)
				start := time.Now()
				resp, err := c.Session(testIdentifier).Execute(context.Background(), "slow()", nil)
				require.NoError(t, err)
				require.Equal(t, "done\n", resp.Stdout)
				require.Equal(t, int32(2), polls.Load())
				// the first poll follows the POST at once; one wait before the second
				require.Equal(t, tc.want, time.Since(start))
			})
		})
	}
}

// TestExecuteResendBackoff (issue 15 item 3): an execution answered 429
// without Retry-After is sent again after azcore's delays: (2^try − 1) ×
// RetryDelay with jitter in [0.8, 1.3), capped at Retry.MaxRetryDelay; a
// Retry-After over MaxRetryDelay stops at once. Fake clock (synctest): no
// real sleeps.
func TestExecuteResendBackoff(t *testing.T) {
	const base, capDelay = time.Second, 5 * time.Second
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var sent []time.Time
		o := &ClientOptions{}
		o.Retry = policy.RetryOptions{MaxRetries: 8, RetryDelay: base, MaxRetryDelay: capDelay}
		o.Transport = funcTransport(func(r *http.Request) (*http.Response, error) {
			mu.Lock()
			sent = append(sent, time.Now())
			mu.Unlock()
			return jsonResponse(r, http.StatusTooManyRequests, `{"error":{"code":"TooManyRequests","message":"slow down"}}`), nil
		})
		c, err := NewClientWithNoCredential("http://localhost"+poolPath, o)
		require.NoError(t, err)
		_, err = c.Session(testIdentifier).Execute(context.Background(), "x", nil)
		var re *azcore.ResponseError
		require.ErrorAs(t, err, &re)
		require.Equal(t, http.StatusTooManyRequests, re.StatusCode)
		require.NotErrorIs(t, err, ErrExecutionOutcomeUnknown, "a 429 proves the code did not run")
		require.Len(t, sent, 9, "MaxRetries 8: nine tries")
		capped := 0
		for i := 1; i < len(sent); i++ {
			gap := sent[i].Sub(sent[i-1])
			raw := time.Duration(1<<i-1) * base
			lo, hi := time.Duration(float64(raw)*0.8), time.Duration(float64(raw)*1.3)
			require.LessOrEqual(t, gap, capDelay, "try %d: capped at MaxRetryDelay", i+1)
			if lo >= capDelay {
				require.Equal(t, capDelay, gap, "try %d", i+1)
				capped++
				continue
			}
			require.GreaterOrEqual(t, gap, lo, "try %d", i+1)
			require.LessOrEqual(t, gap, min(hi, capDelay), "try %d", i+1)
		}
		require.Equal(t, 6, capped, "from the third delay on, (2^try-1) s is over the 5 s cap")
	})
	t.Run("Retry-After over MaxRetryDelay", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var tries atomic.Int32
			o := &ClientOptions{}
			o.Retry = policy.RetryOptions{MaxRetryDelay: capDelay}
			o.Transport = funcTransport(func(r *http.Request) (*http.Response, error) {
				tries.Add(1)
				return jsonResponse(r, http.StatusTooManyRequests, `{"error":{"code":"TooManyRequests","message":"slow down"}}`, "Retry-After", "60"), nil
			})
			c, err := NewClientWithNoCredential("http://localhost"+poolPath, o)
			require.NoError(t, err)
			start := time.Now()
			_, err = c.Session(testIdentifier).Execute(context.Background(), "x", nil)
			require.Error(t, err)
			require.Equal(t, int32(1), tries.Load())
			require.Zero(t, time.Since(start), "no wait")
		})
	})
}

// TestExecutionHelpers (items 13 and 14): TimedOut without parsing stderr,
// Err keeping the exception line and saying stderr was cut, ResultText and
// DecodeResult.
func TestExecutionHelpers(t *testing.T) {
	longTrace := "Traceback (most recent call last):\n" + strings.Repeat("  File \"x.py\", line 1, in f\n", 200)
	cases := []struct {
		name      string
		exec      Execution
		timedOut  bool
		errText   string // "" means Err is nil
		stderrCut bool
		text      string
	}{
		{name: "succeeded number", exec: Execution{Status: ExecutionStatusSucceeded, Result: json.RawMessage(`42`)}, text: "42"},
		{name: "succeeded string", exec: Execution{Status: ExecutionStatusSucceeded, Result: json.RawMessage(`"hello \"you\""`)}, text: `hello "you"`},
		{name: "null result", exec: Execution{Status: ExecutionStatusSucceeded, Result: json.RawMessage(`null`)}, text: ""},
		{name: "no result", exec: Execution{Status: ExecutionStatusSucceeded}, text: ""},
		{name: "object result", exec: Execution{Status: ExecutionStatusSucceeded, Result: json.RawMessage(`{"a":1}`)}, text: `{"a":1}`},
		{name: "failed", exec: Execution{Status: ExecutionStatusFailed, Stderr: "Traceback...\nNameError: name 'x' is not defined\n"},
			errText: "azsessions: execution failed: NameError: name 'x' is not defined"},
		{name: "timeout error code", exec: Execution{Status: ExecutionStatusFailed, ErrorCode: "ExecutionTimeout", Stderr: "ExecutionTimeout: took too long"},
			timedOut: true, errText: "azsessions: execution failed (timed out): ExecutionTimeout: took too long"},
		{name: "ran for its whole timeout", exec: Execution{Status: ExecutionStatusCanceled, ExecutionTime: 10 * time.Second, timeout: 10 * time.Second},
			timedOut: true, errText: "azsessions: execution canceled (timed out)"},
		{name: "failed quickly", exec: Execution{Status: ExecutionStatusFailed, ExecutionTime: time.Second, timeout: 10 * time.Second, Stderr: "ValueError: v"},
			errText: "azsessions: execution failed: ValueError: v"},
		{name: "succeeded after long", exec: Execution{Status: ExecutionStatusSucceeded, ExecutionTime: 20 * time.Second, timeout: 10 * time.Second}},
		{name: "stderr cut at the cap mid-line", exec: Execution{Status: ExecutionStatusFailed, Stderr: longTrace[:4096]},
			stderrCut: true, errText: `File "x.py", line 1, in f (stderr was cut at the output cap`},
		{name: "stderr cut at a custom cap", exec: Execution{Status: ExecutionStatusFailed, Stderr: "a\nb\nZeroDivisionError: division by zero\n", outputMax: 10},
			stderrCut: true, errText: "ZeroDivisionError: division by zero (stderr was cut"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.timedOut, tc.exec.TimedOut())
			require.Equal(t, tc.text, tc.exec.ResultText())
			err := tc.exec.Err()
			if tc.errText == "" {
				require.NoError(t, err)
				return
			}
			var ee *ExecutionError
			require.ErrorAs(t, err, &ee)
			require.Contains(t, err.Error(), tc.errText)
			require.Equal(t, tc.timedOut, ee.TimedOut)
			require.Equal(t, tc.stderrCut, ee.StderrCut)
			require.Equal(t, tc.stderrCut, tc.exec.Truncated())
		})
	}
	t.Run("DecodeResult", func(t *testing.T) {
		var n int
		require.NoError(t, Execution{Result: json.RawMessage(`42`)}.DecodeResult(&n))
		require.Equal(t, 42, n)
		var m map[string]int
		require.NoError(t, Execution{Result: json.RawMessage(`{"a":1}`)}.DecodeResult(&m))
		require.Equal(t, map[string]int{"a": 1}, m)
		require.ErrorContains(t, Execution{}.DecodeResult(&n), "no result")
	})
}

// TestExecutionTimedOutFromService (item 13): the timeout the execution
// was started with travels with it, so TimedOut works on what Execute and
// the poller return.
func TestExecutionTimedOutFromService(t *testing.T) {
	p := setup(t, APIVersion20251002Preview)
	p.handle("POST /executions", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, []byte(`{"identifier":"x","status":"Failed","result":{"stdout":"","stderr":"","executionResult":"","executionTimeInMilliseconds":2000}}`))
	})
	resp, err := p.client.Session(testIdentifier).Execute(context.Background(), "while True: pass", &ExecuteOptions{Timeout: 2 * time.Second})
	require.NoError(t, err)
	require.True(t, resp.TimedOut())
	var ee *ExecutionError
	require.ErrorAs(t, resp.Err(), &ee)
	require.True(t, ee.TimedOut)
}

// TestTransportFailuresNotRetried (item 16): a refused connection to a
// loopback address (no emulator running) and an untrusted certificate fail
// at the first try, with a hint, for idempotent calls and executions.
func TestTransportFailuresNotRetried(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	refused := "http://" + ln.Addr().String() + poolPath
	require.NoError(t, ln.Close())
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(tlsSrv.Close)

	cases := []struct {
		name, endpoint string
		hint           string
		is             error
	}{
		{"connection refused on loopback", refused, "is the emulator running?", syscall.ECONNREFUSED},
		{"untrusted certificate", tlsSrv.URL + poolPath, "certificate is not trusted", nil},
	}
	ops := map[string]func(*Session) error{
		"GetFile": func(s *Session) error { _, err := s.GetFile(context.Background(), "a.txt", nil); return err },
		"Execute": func(s *Session) error { _, err := s.Execute(context.Background(), "x", nil); return err },
	}
	for _, tc := range cases {
		for opName, op := range ops {
			t.Run(tc.name+"/"+opName, func(t *testing.T) {
				var tries atomic.Int32
				hc := &http.Client{Transport: &http.Transport{}}
				t.Cleanup(hc.CloseIdleConnections)
				o := &ClientOptions{}
				o.Retry.RetryDelay = time.Millisecond
				o.Transport = funcTransport(func(r *http.Request) (*http.Response, error) {
					tries.Add(1)
					return hc.Do(r)
				})
				c, err := NewClientWithNoCredential(tc.endpoint, o)
				require.NoError(t, err)
				err = op(c.Session(testIdentifier))
				require.ErrorContains(t, err, tc.hint)
				require.NotContains(t, err.Error(), testIdentifier)
				require.NotErrorIs(t, err, ErrExecutionOutcomeUnknown, "nothing was sent")
				if tc.is != nil {
					require.ErrorIs(t, err, tc.is)
				}
				require.Equal(t, int32(1), tries.Load(), "not retried")
			})
		}
	}
}

// TestUploadFileFromPath (item 14): a local file is streamed up under its
// own or a given name; directories and missing files fail before any I/O.
func TestUploadFileFromPath(t *testing.T) {
	dir := t.TempDir()
	local := filepath.Join(dir, "data.csv")
	require.NoError(t, os.WriteFile(local, []byte("a,b\n1,2\n"), 0o600))
	cases := []struct {
		name, remote, local string
		wantName, wantDir   string
		errText             string
	}{
		{name: "base name", remote: "", local: local, wantName: "data.csv"},
		{name: "given name", remote: "sub/other.csv", local: local, wantName: "other.csv", wantDir: "sub"},
		{name: "missing", remote: "", local: filepath.Join(dir, "nope"), errText: "no such file"},
		{name: "directory", remote: "x", local: dir, errText: "not a regular file"},
		{name: "empty path", remote: "x", local: "", errText: "local path is empty"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := setup(t, APIVersion20251002Preview)
			var got []byte
			var gotName, gotPath string
			p.handle("POST /files", func(w http.ResponseWriter, r *http.Request) {
				f, h, err := r.FormFile("file")
				require.NoError(t, err)
				got, _ = io.ReadAll(f)
				gotName, gotPath = h.Filename, r.URL.Query().Get("path")
				writeJSON(w, http.StatusOK, []byte(`{"name":"`+h.Filename+`","type":"file","sizeInBytes":8,"lastModifiedAt":"2025-01-01T00:00:00Z"}`))
			})
			resp, err := p.client.Session(testIdentifier).UploadFileFromPath(context.Background(), tc.remote, tc.local, nil)
			if tc.errText != "" {
				require.ErrorContains(t, err, tc.errText)
				p.requireNoIO(t)
				return
			}
			require.NoError(t, err)
			require.Equal(t, "a,b\n1,2\n", string(got))
			require.Equal(t, tc.wantName, gotName)
			require.Equal(t, tc.wantDir, gotPath)
			require.Equal(t, tc.wantName, resp.Name)
			require.Equal(t, tc.wantDir, resp.Directory)
		})
	}
}

// TestIterators (item 14): Session.Files and Client.Sessions walk every
// page; an error is yielded once and ends the loop; break stops without
// another request.
func TestIterators(t *testing.T) {
	pages := func(p *fakePool, route, key string) {
		p.handle(route, func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Query().Get("page") {
			case "":
				writeJSON(w, http.StatusOK, []byte(`{"`+key+`":[`+item(key, "a")+`,`+item(key, "b")+`],"nextLink":"`+p.url(strings.TrimPrefix(route, "GET "))+`?page=2"}`))
			case "2":
				writeJSON(w, http.StatusOK, []byte(`{"`+key+`":[`+item(key, "c")+`],"nextLink":"`+p.url(strings.TrimPrefix(route, "GET "))+`?page=3"}`))
			default:
				writeError(w, http.StatusInternalServerError, "Boom", "page 3 failed")
			}
		})
	}
	cases := []struct {
		name  string
		route string
		key   string
		iter  func(c *Client) func(yield func(string, error) bool)
	}{
		{"Session.Files", "GET /files", "value", func(c *Client) func(yield func(string, error) bool) {
			return func(yield func(string, error) bool) {
				for f, err := range c.Session(testIdentifier).Files(context.Background(), nil) {
					if !yield(f.Name, err) {
						return
					}
				}
			}
		}},
		{"Client.Sessions", "GET /listSessions", "sessions", func(c *Client) func(yield func(string, error) bool) {
			return func(yield func(string, error) bool) {
				for s, err := range c.Sessions(context.Background(), nil) {
					if !yield(s.Identifier, err) {
						return
					}
				}
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := setup(t, APIVersion20251002Preview, withOptions(func(o *ClientOptions) { o.Retry.MaxRetries = -1 }))
			pages(p, tc.route, tc.key)
			var names []string
			var errs []error
			for name, err := range tc.iter(p.client) {
				if err != nil {
					errs = append(errs, err)
					continue
				}
				names = append(names, name)
			}
			require.Equal(t, []string{"a", "b", "c"}, names)
			require.Len(t, errs, 1)
			var re *azcore.ResponseError
			require.ErrorAs(t, errs[0], &re)
			require.Equal(t, "Boom", re.ErrorCode)
			require.Equal(t, 3, p.count())

			q := setup(t, APIVersion20251002Preview)
			pages(q, tc.route, tc.key)
			for name, err := range tc.iter(q.client) {
				require.NoError(t, err)
				require.Equal(t, "a", name)
				break
			}
			require.Equal(t, 1, q.count(), "break sends nothing more")
		})
	}
}

func item(key, name string) string {
	if key == "sessions" {
		return `{"identifier":"` + name + `"}`
	}
	return `{"name":"` + name + `","type":"file","sizeInBytes":1,"lastModifiedAt":"2025-01-01T00:00:00Z"}`
}

// TestIsSessionNotFound (item 14): the documented way to learn that a
// session expired.
func TestIsSessionNotFound(t *testing.T) {
	cases := []struct {
		name   string
		status int
		code   string
		want   bool
	}{
		{"400 SessionWithIdentifierNotFound", http.StatusBadRequest, "SessionWithIdentifierNotFound", true},
		{"404 SessionWithIdentifierNotFound", http.StatusNotFound, "SessionWithIdentifierNotFound", true},
		{"404 other code", http.StatusNotFound, "NotFound", false},
		{"403 forbidden", http.StatusForbidden, "Forbidden", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := setup(t, APIVersion20251002Preview)
			p.handle("GET /session", func(w http.ResponseWriter, r *http.Request) {
				writeError(w, tc.status, tc.code, "no session")
			})
			_, err := p.client.Session(testIdentifier).Get(context.Background(), nil)
			require.Error(t, err)
			require.Equal(t, tc.want, IsSessionNotFound(err))
		})
	}
	require.False(t, IsSessionNotFound(nil))
	require.False(t, IsSessionNotFound(errors.New("SessionWithIdentifierNotFound")))
}
