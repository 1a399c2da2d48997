package emulator_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/azsessions/azsessions/emulator"
	"github.com/azsessions/azsessions/internal/wire"
)

// countingRuns is a ScriptedExecutor function that counts the runs of each
// code; code "NAME:N" prints N bytes.
type countingRuns struct {
	mu   sync.Mutex
	runs map[string]int
}

func (c *countingRuns) run(_ context.Context, code string) emulator.ExecutionResult {
	c.mu.Lock()
	c.runs[code]++
	c.mu.Unlock()
	_, n, _ := strings.Cut(code, ":")
	size, _ := strconv.Atoi(n)
	return emulator.ExecutionResult{Stdout: strings.Repeat("x", size)}
}

// TestForgetRaceNeverRunsTwice: several sessions run executions at once while
// the pool-wide bound forgets records under them; every operation-id is
// POSTed by three goroutines at once (one asynchronous), so that retries
// race the first run, its finish and the forgetting of its result (run with
// -race). Each code runs exactly once; every answer is the result, 409
// ExecutionResultForgotten, or 429 (nothing ran; sent again); and the pool's
// account equals its sessions' records.
func TestForgetRaceNeverRunsTwice(t *testing.T) {
	counts := &countingRuns{runs: map[string]int{}}
	e := newEnv(t, emulator.Options{Executor: emulator.ScriptedExecutor(counts.run), MaxTotalRecordedBytes: 6 * recUnit})
	const sessions, ops, retries = 4, 25, 3
	post := func(ident, op, code, typ string) (int, string, error) {
		b, _ := json.Marshal(map[string]any{"code": code, "executionType": typ, "timeoutInSeconds": 60, "outputStreamsMaxLength": 1 << 20})
		req, err := http.NewRequest(http.MethodPost, e.url("executions", qv(wire.V20251002Preview, ident)), bytes.NewReader(b))
		if err != nil {
			return 0, "", err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("operation-id", op)
		resp, err := e.srv.Client().Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("x-ms-error-code") + " " + string(body[:min(len(body), 200)]), nil
	}
	var wg sync.WaitGroup
	errs := make(chan error, sessions*ops*retries)
	for s := range sessions {
		for g := range retries {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ident := sid("r" + strconv.Itoa(s))
				typ := "Synchronous"
				if g == retries-1 {
					typ = "Asynchronous"
				}
				for i := range ops {
					code := fmt.Sprintf("%s-op%d:%d", ident, i, (1+(s+i)%3)*recUnit-512)
					for {
						status, body, err := post(ident, "op"+strconv.Itoa(i), code, typ)
						if err != nil {
							errs <- err
							return
						}
						switch {
						case status == http.StatusTooManyRequests:
							time.Sleep(time.Millisecond) // a refusal: nothing ran
							continue
						case status == http.StatusOK || status == http.StatusAccepted,
							status == http.StatusConflict && strings.HasPrefix(body, emulator.CodeExecutionResultForgotten+" "):
						default:
							errs <- fmt.Errorf("%s op%d (%s): %d %s", ident, i, typ, status, body)
						}
						break
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	// Wait for the asynchronous ones: each is finished (recorded) or forgotten.
	for s := range sessions {
		for i := range ops {
			require.Eventually(t, func() bool {
				r := e.get("executions/op"+strconv.Itoa(i), qv(wire.V20251002Preview, sid("r"+strconv.Itoa(s))))
				return r.status == http.StatusNotFound || r.status == http.StatusOK && r.json(t)["status"] != wire.StatusRunning
			}, 10*time.Second, time.Millisecond)
		}
	}
	// Every operation-id once more, after the fact: its result or 409
	// ExecutionResultForgotten, never a run.
	forgotten := 0
	for s := range sessions {
		ident := sid("r" + strconv.Itoa(s))
		for i := range ops {
			status, body, err := post(ident, "op"+strconv.Itoa(i), fmt.Sprintf("%s-op%d:%d", ident, i, (1+(s+i)%3)*recUnit-512), "Synchronous")
			require.NoError(t, err)
			if status == http.StatusConflict {
				require.True(t, strings.HasPrefix(body, emulator.CodeExecutionResultForgotten+" "), body)
				forgotten++
				continue
			}
			require.Equal(t, http.StatusOK, status, body)
		}
	}
	require.Greater(t, forgotten, sessions*ops/2, "the pool-wide bound forgot most results")
	counts.mu.Lock()
	defer counts.mu.Unlock()
	require.Len(t, counts.runs, sessions*ops)
	for code, n := range counts.runs {
		require.Equal(t, 1, n, "%.20s ran %d times", code, n)
	}
	recordedBytes(t, e)
}
