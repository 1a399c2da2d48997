package azsessions

// Issue 12, items 1–5: code never runs twice, whatever the interleaving of a
// slow first POST, lost answers, gateway 504s and look-ups; and an error says
// "outcome unknown" only when the request may really have left. Each case
// failed on the client before the exactly-once redesign (see execute.go,
// "Exactly once: the design").

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	azlog "github.com/Azure/azure-sdk-for-go/sdk/azcore/log"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/stretchr/testify/require"
)

// slowBackend is a fake pool whose backend keeps working on a POST after the
// client stopped waiting for it: the execution is recorded only when the
// test says so (record), like a POST still queued behind a gateway.
type slowBackend struct {
	mu       sync.Mutex
	runs     map[string]int // operation-id -> times the code ran
	recorded map[string]bool
	posts    atomic.Int32
	arrived  chan string // operation-ids of POSTs, as they arrive
}

func newSlowBackend() *slowBackend {
	return &slowBackend{runs: map[string]int{}, recorded: map[string]bool{}, arrived: make(chan string, 16)}
}

func (b *slowBackend) totalRuns() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, r := range b.runs {
		n += r
	}
	return n
}

// record runs and records the execution of id (the slow POST completes).
func (b *slowBackend) record(id string) {
	b.mu.Lock()
	b.runs[id]++
	b.recorded[id] = true
	b.mu.Unlock()
}

func (b *slowBackend) lookup(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	b.mu.Lock()
	ok := b.recorded[id]
	b.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, "ExecutionNotFound", "no execution with this id")
		return
	}
	writeJSON(w, http.StatusOK, []byte(`{"id":"`+id+`","identifier":"x","status":"Succeeded","result":{"stdout":"ran\n","stderr":"","executionResult":1,"executionTimeInMilliseconds":1}}`))
}

// TestExecuteNeverTwiceWhileFirstPOSTAlive (item 1): the client stops
// waiting for the first POST (a per-try timeout, or a gateway's 504) while
// the backend still has it; the look-up answers 404 because it is not
// recorded yet; it is recorded afterwards. The code runs once: the client
// never sends again, returns ErrExecutionOutcomeUnknown with the
// operation-id, and the execution is found later by that id.
func TestExecuteNeverTwiceWhileFirstPOSTAlive(t *testing.T) {
	cases := []struct {
		name string
		opts func(*ClientOptions)
		// post answers the POST; it must not record the execution
		post func(b *slowBackend, w http.ResponseWriter, r *http.Request)
	}{
		{"per-try timeout", func(o *ClientOptions) { o.Retry.TryTimeout = 50 * time.Millisecond }, func(b *slowBackend, w http.ResponseWriter, r *http.Request) {
			<-r.Context().Done() // the client gave up on this try; the backend goes on
		}},
		{"gateway 504", nil, func(b *slowBackend, w http.ResponseWriter, r *http.Request) {
			writeError(w, http.StatusGatewayTimeout, "GatewayTimeout", "the backend did not answer in time")
		}},
	}
	for _, tc := range cases {
		for _, begin := range []bool{false, true} {
			name := tc.name + "/Execute"
			if begin {
				name = tc.name + "/BeginExecute"
			}
			t.Run(name, func(t *testing.T) {
				b := newSlowBackend()
				var opts []setupOpt
				if tc.opts != nil {
					opts = append(opts, withOptions(tc.opts))
				}
				p := setup(t, APIVersion20251002Preview, opts...)
				p.handle("POST /executions", func(w http.ResponseWriter, r *http.Request) {
					_, _ = io.Copy(io.Discard, r.Body)
					b.posts.Add(1)
					b.arrived <- r.Header.Get("operation-id")
					tc.post(b, w, r)
				})
				p.handle("GET /executions/{id}", b.lookup)
				sess := p.client.Session(testIdentifier)
				ctx := context.Background()
				var err error
				if begin {
					_, err = sess.BeginExecute(ctx, "x += 1", nil)
				} else {
					_, err = sess.Execute(ctx, "x += 1", nil)
				}
				require.ErrorIs(t, err, ErrExecutionOutcomeUnknown)
				require.NotContains(t, err.Error(), "not run after", "the error never claims the code did not run")
				var unknown *ExecutionOutcomeUnknownError
				require.ErrorAs(t, err, &unknown)
				require.Equal(t, int32(1), b.posts.Load(), "never sent again while the first POST may be alive")
				first := <-b.arrived
				require.Equal(t, first, unknown.OperationID)

				// the slow POST completes on the backend
				b.record(first)
				got, err := sess.GetExecution(ctx, unknown.OperationID, nil)
				require.NoError(t, err)
				require.Equal(t, "ran\n", got.Stdout)
				poller, err := sess.ResumeExecution(unknown.OperationID, nil)
				require.NoError(t, err)
				resp, err := poller.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: time.Millisecond})
				require.NoError(t, err)
				require.Equal(t, unknown.OperationID, resp.ID)
				require.Equal(t, 1, b.totalRuns(), "the code ran once")
			})
		}
	}
}

// TestExecuteLegacyEmptyAnswer (item 3): on the legacy contract a 200 whose
// body holds no execution (empty, null, {}, no status) does not say whether
// the code ran: ErrExecutionOutcomeUnknown, never a success with Status "".
func TestExecuteLegacyEmptyAnswer(t *testing.T) {
	for _, body := range []string{"", "null", "{}", `{"properties":{}}`, `{"properties":null}`, `{"$id":"1"}`} {
		t.Run("body="+body, func(t *testing.T) {
			p := setup(t, APIVersion20240202Preview)
			p.handle("POST /code/execute", func(w http.ResponseWriter, r *http.Request) {
				writeJSON(w, http.StatusOK, []byte(body))
			})
			resp, err := p.client.Session(testIdentifier).Execute(context.Background(), "x", nil)
			require.ErrorIs(t, err, ErrExecutionOutcomeUnknown, "status %q", resp.Status)
			require.Equal(t, 1, p.count(), "not sent again")
		})
	}
}

// TestExecuteOperationIDReuse (item 4): an OperationID that already names an
// execution (of other code) is refused before the code is sent, so the
// other execution's result can never come back as this call's, even when
// this call's answer is lost and the look-up finds the old record.
func TestExecuteOperationIDReuse(t *testing.T) {
	p := setup(t, APIVersion20251002Preview)
	var posts atomic.Int32
	var recorded atomic.Bool
	p.handle("POST /executions", func(w http.ResponseWriter, r *http.Request) {
		posts.Add(1)
		if recorded.Load() {
			// the second call's answer is lost
			writeError(w, http.StatusBadGateway, "BadGateway", "lost")
			return
		}
		recorded.Store(true)
		writeJSON(w, http.StatusOK, []byte(`{"id":"op-1","identifier":"x","status":"Succeeded","result":{"stdout":"first\n","stderr":"","executionResult":1}}`))
	})
	p.handle("GET /executions/{id}", func(w http.ResponseWriter, r *http.Request) {
		if !recorded.Load() {
			writeError(w, http.StatusNotFound, "ExecutionNotFound", "none")
			return
		}
		writeJSON(w, http.StatusOK, []byte(`{"id":"op-1","identifier":"x","status":"Succeeded","result":{"stdout":"first\n","stderr":"","executionResult":1}}`))
	})
	sess := p.client.Session(testIdentifier)
	opts := &ExecuteOptions{OperationID: "op-1"}
	resp, err := sess.Execute(context.Background(), "print('first')", opts)
	require.NoError(t, err)
	require.Equal(t, "first\n", resp.Stdout)

	resp, err = sess.Execute(context.Background(), "print('second')", opts)
	require.ErrorIs(t, err, ErrOperationIDInUse, "got %q", resp.Stdout)
	require.Empty(t, resp.Stdout, "never the other execution's result")
	require.Equal(t, int32(1), posts.Load(), "the second code was not sent")
}

// blockingCredential blocks GetToken until ctx ends, and says when it is
// waiting.
type blockingCredential struct{ waiting chan struct{} }

func (c *blockingCredential) GetToken(ctx context.Context, _ policy.TokenRequestOptions) (azcore.AccessToken, error) {
	close(c.waiting)
	<-ctx.Done()
	return azcore.AccessToken{}, ctx.Err()
}

// TestExecuteNothingSentIsNotUnknown (item 5): when the request certainly
// did not leave, the error is a plain one (the code did not run), not
// ErrExecutionOutcomeUnknown; and an OperationID with CR/LF is refused
// before any I/O.
func TestExecuteNothingSentIsNotUnknown(t *testing.T) {
	t.Run("ctx cancelled before the call", func(t *testing.T) {
		for _, version := range []string{APIVersion20240202Preview, APIVersion20251002Preview} {
			p := setup(t, version)
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			_, err := p.client.Session(testIdentifier).Execute(ctx, "x", nil)
			require.ErrorIs(t, err, context.Canceled, version)
			require.NotErrorIs(t, err, ErrExecutionOutcomeUnknown, version)
			p.requireNoIO(t)
		}
	})
	t.Run("ctx cancelled during a 429 Retry-After wait", func(t *testing.T) {
		for _, version := range []string{APIVersion20240202Preview, APIVersion20251002Preview} {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			// the retry policy logs "End Try #1" just before it waits
			azlog.SetListener(func(ev azlog.Event, msg string) {
				if ev == azlog.EventRetryPolicy && len(msg) > 10 && msg[:10] == "End Try #1" {
					cancel()
				}
			})
			p := setup(t, version, withOptions(func(o *ClientOptions) { o.Retry.MaxRetryDelay = time.Minute }),
				withFallback(func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Retry-After", "30")
					writeError(w, http.StatusTooManyRequests, "TooManyRequests", "slow down")
				}))
			_, err := p.client.Session(testIdentifier).Execute(ctx, "x", nil)
			azlog.SetListener(nil)
			require.ErrorIs(t, err, context.Canceled, version)
			require.NotErrorIs(t, err, ErrExecutionOutcomeUnknown, version)
			require.Equal(t, 1, p.count(), version)
		}
	})
	t.Run("ctx cancelled while the credential is pending", func(t *testing.T) {
		p := setup(t, APIVersion20251002Preview, withCredential())
		cred := &blockingCredential{waiting: make(chan struct{})}
		co := &ClientOptions{}
		co.APIVersion = APIVersion20251002Preview
		co.Transport = p.srv.Client()
		c, err := NewClient(p.Endpoint, cred, co)
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		go func() { <-cred.waiting; cancel() }()
		_, err = c.Session(testIdentifier).Execute(ctx, "x", nil)
		require.ErrorIs(t, err, context.Canceled)
		require.NotErrorIs(t, err, ErrExecutionOutcomeUnknown)
		p.requireNoIO(t)
	})
	t.Run("TLS handshake fails", func(t *testing.T) {
		srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			t.Errorf("a request arrived: %s %s", r.Method, r.URL.Path)
		}))
		defer srv.Close()
		co := &ClientOptions{}
		co.Transport = &http.Client{} // does not trust the test certificate
		c, err := NewClientWithNoCredential(srv.URL+poolPath, co)
		require.NoError(t, err)
		_, err = c.Session(testIdentifier).Execute(context.Background(), "x", nil)
		require.Error(t, err)
		require.NotErrorIs(t, err, ErrExecutionOutcomeUnknown)
		require.ErrorContains(t, err, "certificate")
	})
	t.Run("OperationID with CR/LF", func(t *testing.T) {
		p := setup(t, APIVersion20251002Preview)
		for _, id := range []string{"a\r\nX-Injected: 1", "a\nb", "a b", "é", string(make([]byte, 129))} {
			_, err := p.client.Session(testIdentifier).Execute(context.Background(), "x", &ExecuteOptions{OperationID: id})
			require.Error(t, err, "%q", id)
			require.NotErrorIs(t, err, ErrExecutionOutcomeUnknown)
		}
		p.requireNoIO(t)
	})
}

// cancelOnAnswer is a Transporter that ends the caller's context (cancel)
// once the service's answer has arrived, before passing it on: the caller's
// deadline passes just as the answer comes back. azcore's retry policy then
// returns the caller's context error instead of the answer.
type cancelOnAnswer struct {
	next   policy.Transporter
	cancel context.CancelFunc
}

func (c cancelOnAnswer) Do(req *http.Request) (*http.Response, error) {
	resp, err := c.next.Do(req)
	if err == nil {
		c.cancel()
	}
	return resp, err
}

// TestExecuteAnswerAsContextEnds (found by a helper reading execute.go): the
// answer to the POST arrives, so the code ran, but the caller's context ends
// at that moment and azcore's retry policy returns the context's error in
// place of the answer. That error must say the outcome is unknown (the
// caller must not send the code again), not the plain context error that
// means it did not run. An answer that proves nothing ran (429, 400) keeps
// the plain error.
func TestExecuteAnswerAsContextEnds(t *testing.T) {
	tests := []struct {
		name    string
		version string
		status  int
		body    []byte
		unknown bool
	}{
		{"200 legacy", APIVersion20240202Preview, http.StatusOK, legacyResult("Success", "ran\n", "", "executionResult", "1"), true},
		{"200", APIVersion20251002Preview, http.StatusOK, newResult("Succeeded", "ran\n", "", "1"), true},
		{"202", APIVersion20251002Preview, http.StatusAccepted, []byte(`{"identifier":"x","executionType":"Synchronous","status":"Running"}`), true},
		{"502", APIVersion20251002Preview, http.StatusBadGateway, []byte(`{"error":{"code":"BadGateway","message":"upstream"}}`), true},
		{"429", APIVersion20251002Preview, http.StatusTooManyRequests, []byte(`{"error":{"code":"TooManyRequests","message":"slow down"}}`), false},
		{"400", APIVersion20251002Preview, http.StatusBadRequest, []byte(`{"error":{"code":"InvalidCode","message":"no"}}`), false},
	}
	calls := map[string]func(ctx context.Context, s *Session) error{
		"Execute": func(ctx context.Context, s *Session) error {
			_, err := s.Execute(ctx, "x", nil)
			return err
		},
		"BeginExecute": func(ctx context.Context, s *Session) error {
			_, err := s.BeginExecute(ctx, "x", nil)
			return err
		},
	}
	for _, tt := range tests {
		for name, call := range calls {
			if name == "BeginExecute" && tt.version == APIVersion20240202Preview {
				continue // the legacy versions have no BeginExecute
			}
			t.Run(name+"/"+tt.name, func(t *testing.T) {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				p := setup(t, tt.version,
					withOptions(func(o *ClientOptions) { o.Transport = cancelOnAnswer{next: o.Transport, cancel: cancel} }),
					withFallback(func(w http.ResponseWriter, r *http.Request) { writeJSON(w, tt.status, tt.body) }))
				err := call(ctx, p.client.Session(testIdentifier))
				require.ErrorIs(t, err, context.Canceled)
				if tt.unknown {
					require.ErrorIs(t, err, ErrExecutionOutcomeUnknown)
				} else {
					require.NotErrorIs(t, err, ErrExecutionOutcomeUnknown)
				}
				require.Equal(t, 1, p.count(), "sent once, never again")
			})
		}
	}
}
