package azsessions_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/azsessions/azsessions"
	"github.com/azsessions/azsessions/azsessionstest"
	"github.com/azsessions/azsessions/emulator"
)

// TestTimedOutAgainstFake (issue 12 item 13): a cell stopped at its
// timeout is recognisable through Execution.TimedOut and the
// ExecutionError, without parsing stderr, on both contracts: the executions
// contract by the error code the emulator sends, the legacy one (no error
// field) by the execution time reaching the timeout. A quick failure is
// not a timeout. The fake runs in process inside a testing/synctest
// bubble: the execution's 1 s timeout passes on the fake clock.
func TestTimedOutAgainstFake(t *testing.T) {
	cell := func(ctx context.Context, code string) emulator.ExecutionResult {
		if code == "fail" {
			return emulator.ExecutionResult{Status: emulator.Failed, Stderr: "ValueError: quick\n"}
		}
		<-ctx.Done() // runs until the execution's timeout
		return emulator.ExecutionResult{}
	}
	for _, version := range relOneOfEach {
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				srv := azsessionstest.Start(t, &azsessionstest.Options{APIVersion: version, InProcess: true, Options: emulator.Options{
					// one executor per server: closing a server closes its executor
					Executor: emulator.ScriptedExecutor(cell),
				}})
				sess := srv.Client().NewSession()
				resp, err := sess.Execute(context.Background(), "while True: pass", &azsessions.ExecuteOptions{Timeout: time.Second})
				require.NoError(t, err, "a timed-out cell is data")
				require.Equal(t, azsessions.ExecutionStatusFailed, resp.Status)
				require.True(t, resp.TimedOut(), "execution time %v, error code %q", resp.ExecutionTime, resp.ErrorCode)
				var ee *azsessions.ExecutionError
				require.ErrorAs(t, resp.Err(), &ee)
				require.True(t, ee.TimedOut)
				require.Contains(t, ee.Error(), "(timed out)")

				resp, err = sess.Execute(context.Background(), "fail", &azsessions.ExecuteOptions{Timeout: time.Second})
				require.NoError(t, err)
				require.Equal(t, azsessions.ExecutionStatusFailed, resp.Status)
				require.False(t, resp.TimedOut())
			})
		})
	}
}
