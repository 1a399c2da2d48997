package azsessions_test

// Exactly-once execution and long executions against the fake
// (azsessionstest): the executions contract's operation-id look-ups, the
// legacy contract's ErrExecutionOutcomeUnknown, and BeginExecute's poller
// with its resume token.

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/stretchr/testify/require"

	"github.com/azsessions/azsessions"
	"github.com/azsessions/azsessions/azsessionstest"
)

const longCode = "time.sleep(0.3)\nprint('long')\n6 * 7"

// slowCode outlasts TestExecuteLongerThanDeadline's 1 s deadline.
const slowCode = "time.sleep(3)\nprint('long')\n6 * 7"

var fastPoll = &runtime.PollUntilDoneOptions{Frequency: 20 * time.Millisecond}

// TestBeginExecuteResumeToken: an asynchronous execution is started, polled
// once, handed over as a resume token to another client (another process),
// and finished there; the code ran once and was POSTed once. Faults on the
// polls (GET executions/{id}, idempotent) are retried. The fake runs in
// process inside a testing/synctest bubble: the code's 0.3 s, the fake's
// Retry-After: 1 on a running execution and the faults' delays pass on the
// bubble's clock (a connection reset is an ECONNRESET error there).
func TestBeginExecuteResumeToken(t *testing.T) {
	pollFaults := map[string]azsessionstest.Fault{
		"no fault":          {},
		"503 on polls":      {Status: http.StatusServiceUnavailable},
		"reset on polls":    {ResetAfterHandler: true},
		"slow polls (50ms)": {Delay: 50 * time.Millisecond},
	}
	for _, version := range relNewVersions {
		for name, fault := range pollFaults {
			t.Run(version+"/"+name, func(t *testing.T) {
				t.Parallel()
				synctest.Test(t, func(t *testing.T) {
					srv, c := relStart(t, version, &azsessionstest.Options{InProcess: true})
					sess := c.NewSession()
					ctx := context.Background()
					poller, err := sess.BeginExecute(ctx, longCode, nil)
					require.NoError(t, err)
					require.False(t, poller.Done(), "the execution is still running")
					if fault != (azsessionstest.Fault{}) {
						srv.InjectFault(azsessionstest.RouteGetExecution, fault, 2)
					}
					_, err = poller.Poll(ctx)
					require.NoError(t, err)
					token, err := poller.ResumeToken()
					require.NoError(t, err)

					// another client, as another process would make it
					other, err := srv.NewClient(nil)
					require.NoError(t, err)
					resumed, err := other.Session(sess.Identifier()).BeginExecute(ctx, "ignored", &azsessions.BeginExecuteOptions{ResumeToken: token})
					require.NoError(t, err)
					resp, err := resumed.PollUntilDone(ctx, fastPoll)
					require.NoError(t, err)
					require.Equal(t, azsessions.ExecutionStatusSucceeded, resp.Status)
					require.Equal(t, "long\n", resp.Stdout)
					require.JSONEq(t, "42", string(resp.Result))
					require.NotEmpty(t, resp.ID)
					require.Positive(t, resp.ExecutionTime)

					// resuming again after the end gives the same result, without running anything
					again, err := c.Session(sess.Identifier()).BeginExecute(ctx, "", &azsessions.BeginExecuteOptions{ResumeToken: token})
					require.NoError(t, err)
					resp2, err := again.PollUntilDone(ctx, fastPoll)
					require.NoError(t, err)
					require.Equal(t, resp.ID, resp2.ID)
					require.Equal(t, resp.Stdout, resp2.Stdout)

					require.Equal(t, int64(1), srv.ExecutionsFor(sess.Identifier()), "ran once")
					require.Equal(t, 1, srv.Requests(azsessionstest.RouteExecute), "POSTed once")
					require.GreaterOrEqual(t, srv.Requests(azsessionstest.RouteGetExecution), 2)
				})
			})
		}
	}
}

// TestBeginExecuteAmbiguousStart: the answer to the asynchronous POST is
// lost after the execution was recorded; BeginExecute finds it by its
// operation-id and the poller finishes it, once. In process, inside a
// testing/synctest bubble (fake clock), as TestBeginExecuteResumeToken.
func TestBeginExecuteAmbiguousStart(t *testing.T) {
	for _, version := range relNewVersions {
		for name, fault := range map[string]azsessionstest.Fault{
			"504 after handler":   {Status: http.StatusGatewayTimeout, AfterHandler: true},
			"reset after handler": {ResetAfterHandler: true},
		} {
			t.Run(version+"/"+name, func(t *testing.T) {
				t.Parallel()
				synctest.Test(t, func(t *testing.T) {
					srv, c := relStart(t, version, &azsessionstest.Options{InProcess: true})
					sess := c.NewSession()
					srv.InjectFault(azsessionstest.RouteExecute, fault, 1)
					poller, err := sess.BeginExecute(context.Background(), longCode, &azsessions.BeginExecuteOptions{ExecuteOptions: azsessions.ExecuteOptions{OperationID: "op-ambiguous-1"}})
					require.NoError(t, err)
					resp, err := poller.PollUntilDone(context.Background(), fastPoll)
					require.NoError(t, err)
					require.Equal(t, "op-ambiguous-1", resp.ID)
					require.Equal(t, "long\n", resp.Stdout)
					require.Equal(t, int64(1), srv.ExecutionsFor(sess.Identifier()))
					require.Equal(t, 1, srv.Requests(azsessionstest.RouteExecute))
				})
			})
		}
	}
}

// TestBeginExecuteLegacyUnsupported: the legacy contract has no
// asynchronous executions; nothing is sent.
func TestBeginExecuteLegacyUnsupported(t *testing.T) {
	for _, version := range relLegacyVersions {
		srv, c := relStart(t, version, nil)
		_, err := c.NewSession().BeginExecute(context.Background(), "1", nil)
		require.ErrorIs(t, err, azsessions.ErrUnsupported)
		require.Zero(t, srv.Requests(azsessionstest.RouteAny))
	}
}

// TestExecuteLongerThanDeadline: a synchronous execution outlives the
// caller's deadline. The error says the outcome is unknown (and wraps the
// ctx error); the code goes on running on the service. On the executions
// contract the error carries the operation-id, and ResumeExecution waits for
// the recorded result without running the code again. In process, inside a
// testing/synctest bubble: the deadline, the code's 3 s and the polls pass
// on the fake clock. (TestFaultSlowHandlerPastDeadline keeps a deadline
// passing during an execution POST over a real socket.)
func TestExecuteLongerThanDeadline(t *testing.T) {
	for _, version := range relOneOfEach {
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				srv, c := relStart(t, version, &azsessionstest.Options{InProcess: true})
				sess := c.NewSession()
				opts := &azsessions.ExecuteOptions{OperationID: "op-long-1"}
				// The deadline (1 s) passes while the code (3 s) runs, both on
				// the bubble's clock: the POST is in the handler, waiting for
				// the result, when it passes; Execute returns on it with the
				// outcome unknown instead of waiting for the result.
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				_, err := sess.Execute(ctx, slowCode, opts)
				cancel()
				require.ErrorIs(t, err, azsessions.ErrExecutionOutcomeUnknown)
				require.ErrorIs(t, err, context.DeadlineExceeded)
				require.Equal(t, 1, srv.Requests(azsessionstest.RouteExecute))
				require.Eventually(t, func() bool { return srv.ExecutionsFor(sess.Identifier()) == 1 }, 5*time.Second, 10*time.Millisecond, "the code ran on the service anyway")
				if relIsLegacy(version) {
					return // no way to ask; the caller was told the outcome is unknown
				}
				var unknown *azsessions.ExecutionOutcomeUnknownError
				require.ErrorAs(t, err, &unknown)
				require.Equal(t, "op-long-1", unknown.OperationID)
				poller, err := sess.ResumeExecution(unknown.OperationID, nil)
				require.NoError(t, err)
				resp, err := poller.PollUntilDone(context.Background(), fastPoll)
				require.NoError(t, err)
				require.Equal(t, "long\n", resp.Stdout)
				require.Equal(t, "op-long-1", resp.ID)
				// Execute with the same operation-id is refused: the record
				// cannot tell whose code it ran (issue 12 item 4)
				_, err = sess.Execute(context.Background(), slowCode, opts)
				require.ErrorIs(t, err, azsessions.ErrOperationIDInUse)
				require.Equal(t, int64(1), srv.ExecutionsFor(sess.Identifier()), "the code ran once")
				require.Equal(t, 1, srv.Requests(azsessionstest.RouteExecute), "and was POSTed once")
			})
		})
	}
}

// TestExecuteConcurrentFaultsExactlyOnce: many sessions execute at once
// while every answer is lost after the code ran (alternating 500s and
// resets). Every caller gets its own result and every execution ran once.
func TestExecuteConcurrentFaultsExactlyOnce(t *testing.T) {
	const n = 24
	srv, c := relStart(t, azsessions.APIVersion20251002Preview, nil)
	srv.InjectFault(azsessionstest.RouteExecute, azsessionstest.Fault{Status: http.StatusInternalServerError, AfterHandler: true}, n/2)
	srv.InjectFault(azsessionstest.RouteExecute, azsessionstest.Fault{ResetAfterHandler: true}, n/2)
	var wg sync.WaitGroup
	errs := make([]error, n)
	sessions := make([]*azsessions.Session, n)
	for i := range n {
		sessions[i] = c.NewSession()
		wg.Go(func() {
			resp, err := sessions[i].Execute(context.Background(), "print('x')\n1 + 1", nil)
			if err == nil && resp.Stdout != "x\n" {
				err = errors.New("wrong stdout " + resp.Stdout)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, i)
		require.Equal(t, int64(1), srv.ExecutionsFor(sessions[i].Identifier()), i)
	}
	require.Equal(t, int64(n), srv.Executions())
	require.Equal(t, n, srv.Requests(azsessionstest.RouteExecute), "no POST was sent twice")
	require.Equal(t, n, srv.Requests(azsessionstest.RouteGetExecution), "one look-up per lost answer")
}

// TestExecute429HintOverMaxRetryDelay: a Retry-After longer than the
// client's Retry.MaxRetryDelay is not waited for: the 429 comes back at
// once as an ordinary service error (nothing ran, so the outcome is known).
func TestExecute429HintOverMaxRetryDelay(t *testing.T) {
	for _, version := range relOneOfEach {
		srv := azsessionstest.Start(t, withCells(&azsessionstest.Options{APIVersion: version}))
		srv.InjectFault(azsessionstest.RouteExecute, azsessionstest.Fault{Status: http.StatusTooManyRequests, Code: "TooManyRequests", RetryAfter: "30"}, 1)
		start := time.Now()
		sess := srv.Client().NewSession() // MaxRetryDelay 200 ms
		_, err := sess.Execute(context.Background(), "1", nil)
		var re *azcore.ResponseError
		require.ErrorAs(t, err, &re, version)
		require.Equal(t, http.StatusTooManyRequests, re.StatusCode)
		require.Equal(t, "TooManyRequests", re.ErrorCode)
		require.NotErrorIs(t, err, azsessions.ErrExecutionOutcomeUnknown)
		require.Less(t, time.Since(start), 5*time.Second)
		require.Equal(t, 1, srv.Requests(azsessionstest.RouteExecute))
		require.Zero(t, srv.Executions())
	}
}
