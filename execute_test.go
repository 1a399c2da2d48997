package azsessions

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"maps"

	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// newResult builds a new-contract execution answer.
func newResult(status, stdout, stderr, result string) []byte {
	return []byte(`{"identifier":"x","executionType":"Synchronous","status":"` + status + `","result":{"stdout":` + jsonString(stdout) + `,"stderr":` + jsonString(stderr) + `,"executionResult":` + result + `,"executionTimeInMilliseconds":5}}`)
}

// legacyResult builds a legacy execution answer.
func legacyResult(status, stdout, stderr, resultField, result string) []byte {
	return []byte(`{"$id":"1","properties":{"$id":"2","status":"` + status + `","stdout":` + jsonString(stdout) + `,"stderr":` + jsonString(stderr) + `,"` + resultField + `":` + result + `,"executionTimeInMilliseconds":9}}`)
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// executeWith runs Execute against a fake that answers every POST with status and body.
func executeWith(t *testing.T, version string, status int, body []byte, opts *ExecuteOptions) (ExecuteResponse, error) {
	t.Helper()
	p := setup(t, version)
	route := "POST /executions"
	if features(t, version).Legacy {
		route = "POST /code/execute"
	}
	p.handle(route, func(w http.ResponseWriter, r *http.Request) { writeJSON(w, status, body) })
	return p.client.Session(testIdentifier).Execute(context.Background(), "x", opts)
}

func TestExecutionStatusNormalisation(t *testing.T) {
	cases := []struct {
		version string
		wire    string
		want    ExecutionStatus
		failed  bool
	}{
		{APIVersion20240202Preview, "Success", ExecutionStatusSucceeded, false},
		{APIVersion20240202Preview, "Failure", ExecutionStatusFailed, true},
		{APIVersion20240802Preview, "success", ExecutionStatusSucceeded, false},
		{APIVersion20240802Preview, "FAILURE", ExecutionStatusFailed, true},
		{APIVersion20251002Preview, "Succeeded", ExecutionStatusSucceeded, false},
		{APIVersion20251002Preview, "failed", ExecutionStatusFailed, true},
		{APIVersion20251002Preview, "Failed", ExecutionStatusFailed, true},
		{APIVersion20251002Preview, "Canceled", ExecutionStatusCanceled, true},
		{APIVersion20251002Preview, "canceled", ExecutionStatusCanceled, true},
		{APIVersion20251002Preview, "Success", ExecutionStatusSucceeded, false},
		{APIVersion20251002Preview, "0", ExecutionStatus("0"), false},
		{APIVersion20251002Preview, "1", ExecutionStatus("1"), false},
		{APIVersion20251002Preview, "SomethingNew", ExecutionStatus("SomethingNew"), false},
	}
	for _, c := range cases {
		t.Run(c.version+"/"+c.wire, func(t *testing.T) {
			var body []byte
			if features(t, c.version).Legacy {
				body = legacyResult(c.wire, "", "boom\n", "result", `""`)
			} else {
				body = newResult(c.wire, "", "boom\n", `""`)
			}
			resp, err := executeWith(t, c.version, http.StatusOK, body, nil)
			require.NoError(t, err)
			require.Equal(t, c.want, resp.Status)
			require.True(t, resp.Status.Terminal())
			if c.failed {
				require.Error(t, resp.Err())
			} else {
				require.NoError(t, resp.Err())
			}
		})
	}
	require.False(t, ExecutionStatusRunning.Terminal())
	require.False(t, ExecutionStatusNotStarted.Terminal())
	require.False(t, ExecutionStatus("").Terminal())
}

func TestShellExitCodeStatusKeptVerbatim(t *testing.T) {
	body := example(t, exShell, "CodeExecution_Execute_ShellCommand.json@796fc696", "response200", "body")
	resp, err := executeWith(t, APIVersion20251002Preview, http.StatusOK, body, nil)
	require.NoError(t, err)
	require.Equal(t, ExecutionStatus("0"), resp.Status)
	require.Equal(t, "first_input:testinputlineline\n", resp.Stdout)
	require.Nil(t, resp.Result, "a Shell answer has no executionResult")
	require.NoError(t, resp.Err())
	require.Equal(t, 2*time.Millisecond, resp.ExecutionTime)
}

func TestExecutionResultKinds(t *testing.T) {
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
	img := `{"type":"image","format":"png","base64_data":"` + base64.StdEncoding.EncodeToString(png) + `"}`
	cases := []struct {
		name   string
		result string
		want   string // JSON; "" means Result must be nil
		image  bool
	}{
		{"integer", `42`, `42`, false},
		{"float", `3.25`, `3.25`, false},
		{"string", `"hello"`, `"hello"`, false},
		{"empty string", `""`, `""`, false},
		{"null", `null`, `null`, false},
		{"nan", `"nan"`, `"nan"`, false},
		{"object", `{"a":[1,2]}`, `{"a":[1,2]}`, false},
		{"image", img, img, true},
		{"image upper-case type", strings.Replace(img, `"image"`, `"Image"`, 1), strings.Replace(img, `"image"`, `"Image"`, 1), true},
		{"not an image", `{"type":"table","format":"png","base64_data":""}`, `{"type":"table","format":"png","base64_data":""}`, false},
		{"bad base64", `{"type":"image","format":"png","base64_data":"!!"}`, `{"type":"image","format":"png","base64_data":"!!"}`, false},
	}
	for _, version := range []string{APIVersion20240202Preview, APIVersion20251002Preview} {
		for _, c := range cases {
			t.Run(version+"/"+c.name, func(t *testing.T) {
				var body []byte
				if features(t, version).Legacy {
					body = legacyResult("Success", "", "", "result", c.result)
				} else {
					body = newResult("Succeeded", "", "", c.result)
				}
				resp, err := executeWith(t, version, http.StatusOK, body, nil)
				require.NoError(t, err)
				require.JSONEq(t, c.want, string(resp.Result))
				got, ok := resp.Image()
				require.Equal(t, c.image, ok)
				if c.image {
					require.Equal(t, Image{Format: "png", Data: png}, got)
				}
			})
		}
	}
}

func TestExecuteNaNAndNoneExamples(t *testing.T) {
	for key, want := range map[string]string{"NaN": `"nan"`, "None": `null`} {
		t.Run(key, func(t *testing.T) {
			p := setup(t, APIVersion20251002Preview)
			p.handle("POST /executions", func(w http.ResponseWriter, r *http.Request) {
				var req map[string]any
				assert.NoError(t, jsonDecode(r.Body, &req))
				var wantReq map[string]any
				assert.NoError(t, json.Unmarshal(example(t, exNaNNone, key, "request"), &wantReq))
				assert.Equal(t, wantReq, req)
				writeJSON(w, http.StatusOK, example(t, exNaNNone, key, "response200"))
			})
			var wantReq struct{ Code string }
			require.NoError(t, json.Unmarshal(example(t, exNaNNone, key, "request"), &wantReq))
			resp, err := p.client.Session(testIdentifier).Execute(context.Background(), wantReq.Code, &ExecuteOptions{Timeout: time.Minute, OutputStreamsMaxLength: 4096})
			require.NoError(t, err)
			require.JSONEq(t, want, string(resp.Result))
			_, isImage := resp.Image()
			require.False(t, isImage)
		})
	}
}

func TestLegacyImageExample(t *testing.T) {
	body := example(t, exLegacyExecute, "response_200_body_image_result_shape")
	// the example's base64 is elided ("iVBORw0KGgo...<base64 PNG>"); use a real one
	body = bytes.Replace(body, []byte(`iVBORw0KGgo...\u003cbase64 PNG\u003e`), []byte(`iVBORw0KGgo=`), 1)
	resp, err := executeWith(t, APIVersion20240202Preview, http.StatusOK, body, nil)
	require.NoError(t, err)
	img, ok := resp.Image()
	require.True(t, ok, "result %s", resp.Result)
	require.Equal(t, "png", img.Format)
	require.Equal(t, []byte("\x89PNG\r\n\x1a\n"), img.Data)
	require.Equal(t, 123*time.Millisecond, resp.ExecutionTime)
}

// TestLegacyExecutionResult202 is the BYOC capture: HTTP 202 and the value
// under executionResult instead of result.
func TestLegacyExecutionResult202(t *testing.T) {
	p := setup(t, APIVersion20240802Preview)
	p.handle("POST /code/execute", func(w http.ResponseWriter, r *http.Request) {
		headers := []string{}
		var hs map[string]string
		assert.NoError(t, json.Unmarshal(example(t, exLegacyBYOC, "execute", "response_headers"), &hs))
		for k, v := range hs {
			headers = append(headers, k, v)
		}
		writeJSON(w, http.StatusAccepted, example(t, exLegacyBYOC, "execute", "response_body"), headers...)
	})
	resp, err := p.client.Session("test-identifier").Execute(context.Background(), `print("inline-synchronous")`, nil)
	require.NoError(t, err)
	require.Equal(t, ExecutionStatusSucceeded, resp.Status)
	require.Equal(t, "inline-synchronous\n", resp.Stdout)
	require.JSONEq(t, `""`, string(resp.Result))
	require.Equal(t, 9*time.Millisecond, resp.ExecutionTime)

	// executionResult is used only when result is absent.
	resp, err = executeWith(t, APIVersion20240802Preview, http.StatusAccepted, []byte(`{"properties":{"status":"Success","stdout":"","stderr":"","executionResult":7}}`), nil)
	require.NoError(t, err)
	require.JSONEq(t, `7`, string(resp.Result))
	resp, err = executeWith(t, APIVersion20240802Preview, http.StatusOK, []byte(`{"properties":{"status":"Success","result":1,"executionResult":7}}`), nil)
	require.NoError(t, err)
	require.JSONEq(t, `1`, string(resp.Result))
}

// TestExecutionErrLastStderrLine uses the stderr of a real SyntaxError.
func TestExecutionErrLastStderrLine(t *testing.T) {
	body, err := json.Marshal(map[string]any{"$id": "1", "properties": map[string]any{
		"$id": "1", "status": "Failure", "stdout": "", "stderr": syntaxErrorStderr, "result": nil, "executionTimeInMilliseconds": 9,
	}})
	require.NoError(t, err)
	resp, err := executeWith(t, APIVersion20240202Preview, http.StatusOK, body, nil)
	require.NoError(t, err, "a program error is not a Go error")
	require.Equal(t, ExecutionStatusFailed, resp.Status)
	require.Equal(t, syntaxErrorStderr, resp.Stderr)
	require.JSONEq(t, `null`, string(resp.Result))
	execErr := resp.Err()
	var ee *ExecutionError
	require.ErrorAs(t, execErr, &ee)
	require.Equal(t, ExecutionStatusFailed, ee.Status)
	require.Equal(t, "SyntaxError: illegal target for annotation", ee.Message)
	require.Equal(t, "azsessions: execution failed: SyntaxError: illegal target for annotation", execErr.Error())

	// the same on the executions contract, and Canceled without stderr
	resp, err = executeWith(t, APIVersion20251002Preview, http.StatusOK, newResult("Failed", "partial", syntaxErrorStderr, "null"), nil)
	require.NoError(t, err)
	require.ErrorAs(t, resp.Err(), &ee)
	require.Equal(t, "SyntaxError: illegal target for annotation", ee.Message)
	resp, err = executeWith(t, APIVersion20251002Preview, http.StatusOK, newResult("Canceled", "", "", "null"), nil)
	require.NoError(t, err)
	require.EqualError(t, resp.Err(), "azsessions: execution canceled")

	// an error object without stderr becomes the message
	resp, err = executeWith(t, APIVersion20251002Preview, http.StatusOK, []byte(`{"id":"a","identifier":"b","status":"Failed","error":{"error":{"code":"Timeout","message":"execution timed out"}}}`), nil)
	require.NoError(t, err)
	require.ErrorAs(t, resp.Err(), &ee)
	require.Equal(t, "Timeout: execution timed out", ee.Message)
}

func TestExecutionTruncated(t *testing.T) {
	cases := []struct {
		name   string
		stdout string
		stderr string
		maxLen int32
		want   bool
	}{
		{"short", "hello", "", 0, false},
		{"4095 stdout", strings.Repeat("a", 4095), "", 0, false},
		{"4096 stdout", strings.Repeat("a", 4096), "", 0, true},
		{"4096 stderr", "", strings.Repeat("e", 4096), 0, true},
		{"4096 runes", strings.Repeat("é", 4096), "", 0, true},
		{"4095 runes of 2 bytes", strings.Repeat("é", 4095), "", 0, false},
		{"custom cap reached", strings.Repeat("a", 100), "", 100, true},
		{"custom cap not reached", strings.Repeat("a", 99), "", 100, false},
		{"custom cap above default", strings.Repeat("a", 5000), "", 10000, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, err := executeWith(t, APIVersion20251002Preview, http.StatusOK, newResult("Succeeded", c.stdout, c.stderr, `""`), &ExecuteOptions{OutputStreamsMaxLength: c.maxLen})
			require.NoError(t, err)
			require.Equal(t, c.want, resp.Truncated())
		})
	}
	// legacy: the default cap
	resp, err := executeWith(t, APIVersion20240202Preview, http.StatusOK, legacyResult("Success", strings.Repeat("a", 4096), "", "result", `""`), nil)
	require.NoError(t, err)
	require.True(t, resp.Truncated())
}

// TestExecuteRunningThenPolled: a synchronous execution answered with a
// non-terminal status (a 2024-10 202) is polled until done.
func TestExecuteRunningThenPolled(t *testing.T) {
	p := setup(t, APIVersion20241002Preview)
	var opID string
	p.handle("POST /executions", func(w http.ResponseWriter, r *http.Request) {
		opID = r.Header.Get("operation-id")
		writeJSON(w, http.StatusAccepted, []byte(`{"id":"`+opID+`","identifier":"x","executionType":"Synchronous","status":"Running"}`))
	})
	var polls atomic.Int32
	p.handle("GET /executions/{id}", func(w http.ResponseWriter, r *http.Request) {
		assert.Equal(t, opID, r.PathValue("id"))
		wantQuery(t, r, stdQuery(APIVersion20241002Preview, testIdentifier))
		if polls.Add(1) == 1 {
			// a short hint keeps the test fast; the one-second cadence
			// without it is TestExecutePollsEverySecond's (fake clock)
			writeJSON(w, http.StatusOK, []byte(`{"id":"`+opID+`","identifier":"x","status":"Running"}`), "retry-after-ms", "1")
			return
		}
		writeJSON(w, http.StatusOK, newResult("Succeeded", "done\n", "", `1`))
	})
	resp, err := p.client.Session(testIdentifier).Execute(context.Background(), "x", nil)
	require.NoError(t, err)
	require.Equal(t, "done\n", resp.Stdout)
	require.Equal(t, int32(2), polls.Load())
	require.Equal(t, 1, p.requestsTo("POST", "/executions"))
}

// ---- retries ----

// TestExecuteRetriedOnlyOn429 checks that Execute is retried on 429, honouring
// Retry-After, on every api-version.
func TestExecuteRetriedOnlyOn429(t *testing.T) {
	for _, version := range allVersions {
		t.Run(version, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { // fake clock: the second waited is not real
				testExecuteRetriedOnlyOn429(t, version)
			})
		})
	}
}

func testExecuteRetriedOnlyOn429(t *testing.T, version string) {
	p := setup(t, version, inProcess())
	route, ok := "POST /executions", newResult("Succeeded", "", "", `1`)
	if features(t, version).Legacy {
		route, ok = "POST /code/execute", legacyResult("Success", "", "", "result", `1`)
	}
	var n atomic.Int32
	var first time.Time
	var opIDs []string
	p.handle(route, func(w http.ResponseWriter, r *http.Request) {
		opIDs = append(opIDs, r.Header.Get("operation-id"))
		if n.Add(1) == 1 {
			first = time.Now()
			w.Header().Set("Retry-After", "1")
			writeError(w, http.StatusTooManyRequests, "TooManyRequests", "slow down")
			return
		}
		assert.GreaterOrEqual(t, time.Since(first), 900*time.Millisecond, "Retry-After: 1 is honoured")
		assert.Equal(t, time.Second, time.Since(first), "Retry-After: 1 is honoured, no more")
		writeJSON(w, http.StatusOK, ok)
	})
	resp, err := p.client.Session(testIdentifier).Execute(context.Background(), "x", nil)
	require.NoError(t, err)
	require.JSONEq(t, `1`, string(resp.Result))
	require.Equal(t, int32(2), n.Load())
	require.Equal(t, opIDs[0], opIDs[1], "a retry keeps the operation-id")
}

func TestExecute429Exhausted(t *testing.T) {
	for _, version := range []string{APIVersion20240202Preview, APIVersion20251002Preview} {
		p := setup(t, version)
		route := "POST /executions"
		if features(t, version).Legacy {
			route = "POST /code/execute"
		}
		p.handle(route, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("retry-after-ms", "1")
			writeError(w, http.StatusTooManyRequests, "TooManyRequests", "slow down")
		})
		_, err := p.client.Session(testIdentifier).Execute(context.Background(), "x", nil)
		var re *azcore.ResponseError
		require.ErrorAs(t, err, &re)
		require.Equal(t, http.StatusTooManyRequests, re.StatusCode)
		require.NotErrorIs(t, err, ErrExecutionOutcomeUnknown)
		require.Equal(t, 4, p.count(), "1 try + azcore's default 3 retries")
	}
}

// TestExecuteLegacyNeverResent: on the legacy contract an ambiguous failure
// is reported after exactly one POST.
func TestExecuteLegacyNeverResent(t *testing.T) {
	for _, version := range []string{APIVersion20240202Preview, APIVersion20240802Preview} {
		for _, status := range []int{http.StatusRequestTimeout, http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout} {
			t.Run(version+"/"+http.StatusText(status), func(t *testing.T) {
				p := setup(t, version)
				p.handle("POST /code/execute", func(w http.ResponseWriter, r *http.Request) {
					writeError(w, status, "Oops", "the container failed")
				})
				_, err := p.client.Session(testIdentifier).Execute(context.Background(), "x", nil)
				require.ErrorIs(t, err, ErrExecutionOutcomeUnknown)
				var re *azcore.ResponseError
				require.ErrorAs(t, err, &re)
				require.Equal(t, status, re.StatusCode)
				require.Equal(t, 1, p.count())
			})
		}
	}
}

// TestExecuteNonAmbiguousErrorsNotResent: 4xx answers prove nothing ran
// twice but are not retried either.
func TestExecuteNonAmbiguousErrorsNotResent(t *testing.T) {
	for _, version := range []string{APIVersion20240202Preview, APIVersion20251002Preview} {
		for _, status := range []int{http.StatusBadRequest, http.StatusNotFound, http.StatusRequestEntityTooLarge} {
			p := setup(t, version)
			route := "POST /executions"
			if features(t, version).Legacy {
				route = "POST /code/execute"
			}
			p.handle(route, func(w http.ResponseWriter, r *http.Request) {
				writeError(w, status, "SessionRequestValidationFailed", "bad")
			})
			_, err := p.client.Session(testIdentifier).Execute(context.Background(), "x", nil)
			var re *azcore.ResponseError
			require.ErrorAs(t, err, &re)
			require.Equal(t, status, re.StatusCode)
			require.NotErrorIs(t, err, ErrExecutionOutcomeUnknown)
			require.Equal(t, 1, p.count(), "%s %d", version, status)
		}
	}
}

// TestExecuteAmbiguousLookup covers the executions contract's look-up after
// a 500/502/503/504: the client asks GET executions/{operation-id} and only
// re-POSTs (with the same operation-id) when the service says 404.
func TestExecuteAmbiguousLookup(t *testing.T) {
	statuses := []int{http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout}
	for _, version := range []string{APIVersion20241002Preview, APIVersion20250202Preview, APIVersion20251002Preview} {
		for _, status := range statuses {
			name := version + "/" + http.StatusText(status)
			t.Run(name+"/lookup finds result", func(t *testing.T) {
				p := setup(t, version)
				var opID string
				p.handle("POST /executions", func(w http.ResponseWriter, r *http.Request) {
					opID = r.Header.Get("operation-id")
					writeError(w, status, "Oops", "lost")
				})
				p.handle("GET /executions/{id}", func(w http.ResponseWriter, r *http.Request) {
					assert.Equal(t, opID, r.PathValue("id"))
					wantQuery(t, r, stdQuery(version, testIdentifier))
					writeJSON(w, http.StatusOK, []byte(`{"id":"`+opID+`","identifier":"x","status":"Succeeded","result":{"stdout":"ran once\n","stderr":"","executionResult":3,"executionTimeInMilliseconds":2}}`))
				})
				resp, err := p.client.Session(testIdentifier).Execute(context.Background(), "x", nil)
				require.NoError(t, err)
				require.Equal(t, "ran once\n", resp.Stdout)
				require.Equal(t, opID, resp.ID)
				require.Equal(t, 1, p.requestsTo("POST", "/executions"))
				require.Equal(t, 1, p.requestsTo("GET", "/executions/"+opID))
			})
			t.Run(name+"/lookup 404 is not sent again", func(t *testing.T) {
				// Issue 12 item 1: a 404 look-up only means "not recorded
				// yet"; the first POST may still be alive, so the code is
				// never sent again and the caller gets the operation-id.
				p := setup(t, version)
				var opIDs []string
				p.handle("POST /executions", func(w http.ResponseWriter, r *http.Request) {
					opIDs = append(opIDs, r.Header.Get("operation-id"))
					writeError(w, status, "Oops", "lost")
				})
				p.handle("GET /executions/{id}", func(w http.ResponseWriter, r *http.Request) {
					writeError(w, http.StatusNotFound, "NotFound", "No execution available for operation Id")
				})
				_, err := p.client.Session(testIdentifier).Execute(context.Background(), "x", nil)
				require.ErrorIs(t, err, ErrExecutionOutcomeUnknown)
				var unknown *ExecutionOutcomeUnknownError
				require.ErrorAs(t, err, &unknown)
				require.Len(t, opIDs, 1, "never sent again")
				require.Regexp(t, uuidV4, opIDs[0])
				require.Equal(t, opIDs[0], unknown.OperationID)
				var re *azcore.ResponseError
				require.ErrorAs(t, err, &re)
				require.Equal(t, status, re.StatusCode)
				require.Equal(t, 1, p.requestsTo("GET", "/executions/"+opIDs[0]))
			})
		}
	}
	t.Run("lookup fails: outcome unknown after one POST", func(t *testing.T) {
		p := setup(t, APIVersion20251002Preview)
		p.handle("POST /executions", func(w http.ResponseWriter, r *http.Request) {
			writeError(w, http.StatusServiceUnavailable, "Oops", "lost")
		})
		p.handle("GET /executions/{id}", func(w http.ResponseWriter, r *http.Request) {
			writeError(w, http.StatusInternalServerError, "Oops", "down")
		})
		_, err := p.client.Session(testIdentifier).Execute(context.Background(), "x", nil)
		require.ErrorIs(t, err, ErrExecutionOutcomeUnknown)
		require.Equal(t, 1, p.requestsTo("POST", "/executions"))
	})
	t.Run("POST answered with another execution's id: looked up, its own result returned", func(t *testing.T) {
		// red-team finding 6: a 200 whose id is not the operation-id sent
		// (a confused proxy or cache) is not this execution's answer
		p := setup(t, APIVersion20251002Preview)
		p.handle("POST /executions", func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			// written raw: the fake's echo of the operation-id is bypassed
			w.Header().Set("Content-Type", "application/json")
			w.(interface{ Unwrap() http.ResponseWriter }).Unwrap().Write([]byte(`{"id":"someone-elses","identifier":"x","status":"Succeeded","result":{"stdout":"secret of another call\n","stderr":"","executionResult":""}}`))
		})
		var asked string
		p.handle("GET /executions/{id}", func(w http.ResponseWriter, r *http.Request) {
			asked = r.PathValue("id")
			writeJSON(w, http.StatusOK, []byte(`{"id":"`+asked+`","identifier":"x","status":"Succeeded","result":{"stdout":"mine\n","stderr":"","executionResult":""}}`))
		})
		resp, err := p.client.Session(testIdentifier).Execute(context.Background(), "x", nil)
		require.NoError(t, err)
		require.Equal(t, "mine\n", resp.Stdout, "never the other execution's output")
		require.Equal(t, asked, resp.ID)
		require.Equal(t, 1, p.requestsTo("POST", "/executions"))
	})
	t.Run("lookup answers another execution's record: outcome unknown, not its result", func(t *testing.T) {
		// red-team finding 6: a record whose id is not the operation-id asked
		// for (a confused proxy or cache) is not this execution's result
		p := setup(t, APIVersion20251002Preview)
		p.handle("POST /executions", func(w http.ResponseWriter, r *http.Request) {
			writeError(w, http.StatusBadGateway, "Oops", "lost")
		})
		p.handle("GET /executions/{id}", func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusOK, []byte(`{"id":"someone-elses","identifier":"x","status":"Succeeded","result":{"stdout":"secret of another call\n","stderr":"","executionResult":""}}`))
		})
		resp, err := p.client.Session(testIdentifier).Execute(context.Background(), "x", nil)
		require.ErrorIs(t, err, ErrExecutionOutcomeUnknown)
		require.ErrorIs(t, err, errOtherExecution)
		require.Empty(t, resp.Stdout)
		require.NotContains(t, err.Error(), "someone-elses")
		require.Equal(t, 1, p.requestsTo("POST", "/executions"))
	})
	t.Run("lookup finds running execution: polled", func(t *testing.T) {
		p := setup(t, APIVersion20251002Preview)
		p.handle("POST /executions", func(w http.ResponseWriter, r *http.Request) {
			writeError(w, http.StatusGatewayTimeout, "Timeout", "lost")
		})
		var n atomic.Int32
		p.handle("GET /executions/{id}", func(w http.ResponseWriter, r *http.Request) {
			if n.Add(1) == 1 {
				writeJSON(w, http.StatusOK, []byte(`{"identifier":"x","status":"Running"}`))
				return
			}
			writeJSON(w, http.StatusOK, newResult("Succeeded", "late\n", "", "1"))
		})
		resp, err := p.client.Session(testIdentifier).Execute(context.Background(), "x", nil)
		require.NoError(t, err)
		require.Equal(t, "late\n", resp.Stdout)
		require.Equal(t, 1, p.requestsTo("POST", "/executions"))
	})
}

// TestExecuteContextCancelled: a deadline during an execution gives an
// error that matches both ErrExecutionOutcomeUnknown and the ctx error.
func TestExecuteContextCancelled(t *testing.T) {
	t.Parallel() // it waits for its context's deadline
	for _, version := range []string{APIVersion20240202Preview, APIVersion20251002Preview} {
		t.Run(version, func(t *testing.T) {
			p := setup(t, version)
			route := "POST /executions"
			if features(t, version).Legacy {
				route = "POST /code/execute"
			}
			release := make(chan struct{})
			defer close(release)
			p.handle(route, func(w http.ResponseWriter, r *http.Request) {
				select {
				case <-release:
				case <-r.Context().Done():
				}
			})
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			_, err := p.client.Session(testIdentifier).Execute(ctx, "x", nil)
			require.ErrorIs(t, err, ErrExecutionOutcomeUnknown)
			require.ErrorIs(t, err, context.DeadlineExceeded)
			require.Equal(t, 1, p.requestsTo("POST", strings.TrimPrefix(route, "POST ")))
		})
	}
}

// TestFileOperationsRetriedOn503 checks that the idempotent (and upload)
// operations keep azcore's default retries.
func TestFileOperationsRetriedOn503(t *testing.T) {
	type op struct {
		route string
		ok    func(w http.ResponseWriter)
		call  func(ctx context.Context, s *Session) error
	}
	okFile := func(w http.ResponseWriter) {
		writeJSON(w, http.StatusOK, example(t, exBYOC2410, "get_metadata", "response_body"))
	}
	ops := map[string]op{
		"ListFiles": {"GET /files", func(w http.ResponseWriter) {
			writeJSON(w, http.StatusOK, example(t, exBYOC2410, "list", "response_body"))
		},
			func(ctx context.Context, s *Session) error {
				_, err := s.NewListFilesPager(nil).NextPage(ctx)
				return err
			}},
		"GetFile": {"GET /files/{name}", okFile, func(ctx context.Context, s *Session) error { _, err := s.GetFile(ctx, "a.txt", nil); return err }},
		"DownloadFile": {"GET /files/{name}/content", func(w http.ResponseWriter) { _, _ = w.Write([]byte("abc")) }, func(ctx context.Context, s *Session) error {
			resp, err := s.DownloadFile(ctx, "a.txt", nil)
			if err == nil {
				resp.Body.Close()
			}
			return err
		}},
		"DeleteFile": {"DELETE /files/{name}", func(w http.ResponseWriter) { w.WriteHeader(http.StatusNoContent) }, func(ctx context.Context, s *Session) error { _, err := s.DeleteFile(ctx, "a.txt", nil); return err }},
		"UploadFile": {"POST /files", okFile, func(ctx context.Context, s *Session) error {
			_, err := s.UploadFile(ctx, "a.txt", strings.NewReader("abc"), nil)
			return err
		}},
		"SessionGet": {"GET /session", func(w http.ResponseWriter) {
			writeJSON(w, http.StatusOK, example(t, exManagement, "code_interpreter_GET_session_2025-02-02-preview", "response200"))
		}, func(ctx context.Context, s *Session) error { _, err := s.Get(ctx, nil); return err }},
	}
	for name, o := range ops {
		for _, status := range []int{http.StatusServiceUnavailable, http.StatusInternalServerError} {
			t.Run(name+"/"+http.StatusText(status)+"/then ok", func(t *testing.T) {
				p := setup(t, APIVersion20251002Preview)
				var n atomic.Int32
				p.handle(o.route, func(w http.ResponseWriter, r *http.Request) {
					if n.Add(1) == 1 {
						writeError(w, status, "ServiceUnavailable", "try again")
						return
					}
					o.ok(w)
				})
				require.NoError(t, o.call(context.Background(), p.client.Session(testIdentifier)))
				require.Equal(t, 2, p.count())
			})
		}
		t.Run(name+"/always 503", func(t *testing.T) {
			p := setup(t, APIVersion20251002Preview)
			p.handle(o.route, func(w http.ResponseWriter, r *http.Request) {
				writeError(w, http.StatusServiceUnavailable, "ServiceUnavailable", "try again")
			})
			err := o.call(context.Background(), p.client.Session(testIdentifier))
			var re *azcore.ResponseError
			require.ErrorAs(t, err, &re)
			require.Equal(t, http.StatusServiceUnavailable, re.StatusCode)
			require.Equal(t, "ServiceUnavailable", re.ErrorCode)
			require.Equal(t, 4, p.count(), "1 try + 3 retries")
		})
	}
	t.Run("MaxRetries -1 disables retries", func(t *testing.T) {
		p := setup(t, APIVersion20251002Preview, withOptions(func(o *ClientOptions) { o.Retry.MaxRetries = -1 }))
		p.handle("GET /files", func(w http.ResponseWriter, r *http.Request) {
			writeError(w, http.StatusServiceUnavailable, "ServiceUnavailable", "try again")
		})
		_, err := p.client.Session(testIdentifier).NewListFilesPager(nil).NextPage(context.Background())
		require.Error(t, err)
		require.Equal(t, 1, p.count())
	})
}

// TestBeginExecuteErrors: a 4xx answer to the initial POST is returned as is
// (no look-up); an ambiguous one is resolved by looking the execution up.
func TestBeginExecuteErrors(t *testing.T) {
	t.Run("400", func(t *testing.T) {
		p := setup(t, APIVersion20251002Preview)
		p.handle("POST /executions", func(w http.ResponseWriter, r *http.Request) {
			writeError(w, http.StatusBadRequest, "SessionRequestValidationFailed", "bad request")
		})
		_, err := p.client.Session(testIdentifier).BeginExecute(context.Background(), "x", nil)
		var re *azcore.ResponseError
		require.ErrorAs(t, err, &re)
		require.Equal(t, http.StatusBadRequest, re.StatusCode)
		require.Equal(t, "SessionRequestValidationFailed", re.ErrorCode)
		require.NotErrorIs(t, err, ErrExecutionOutcomeUnknown)
		require.Equal(t, 1, p.count(), "no look-up after a 400")
	})
	t.Run("503 then found", func(t *testing.T) {
		p := setup(t, APIVersion20251002Preview)
		var opID string
		p.handle("POST /executions", func(w http.ResponseWriter, r *http.Request) {
			opID = r.Header.Get("operation-id")
			writeError(w, http.StatusServiceUnavailable, "Oops", "lost")
		})
		p.handle("GET /executions/{id}", func(w http.ResponseWriter, r *http.Request) {
			assert.Equal(t, opID, r.PathValue("id"))
			writeJSON(w, http.StatusOK, newResult("Succeeded", "ok\n", "", "1"))
		})
		poller, err := p.client.Session(testIdentifier).BeginExecute(context.Background(), "x", nil)
		require.NoError(t, err)
		resp, err := poller.PollUntilDone(context.Background(), &runtime.PollUntilDoneOptions{Frequency: time.Millisecond})
		require.NoError(t, err)
		require.Equal(t, "ok\n", resp.Stdout)
		require.Equal(t, 1, p.requestsTo("POST", "/executions"))
	})
	t.Run("503 and never recorded", func(t *testing.T) {
		// Issue 12 item 1: the 404 look-ups prove nothing while the first
		// POST may still be alive: one POST, and the error says the outcome
		// is unknown (not the false "not run after 4 attempts").
		p := setup(t, APIVersion20251002Preview)
		p.handle("POST /executions", func(w http.ResponseWriter, r *http.Request) {
			writeError(w, http.StatusServiceUnavailable, "Oops", "lost")
		})
		p.handle("GET /executions/{id}", func(w http.ResponseWriter, r *http.Request) {
			writeError(w, http.StatusNotFound, "NotFound", "none")
		})
		_, err := p.client.Session(testIdentifier).BeginExecute(context.Background(), "x", nil)
		require.ErrorIs(t, err, ErrExecutionOutcomeUnknown)
		require.NotContains(t, err.Error(), "not run")
		require.Equal(t, 1, p.requestsTo("POST", "/executions"), "never sent again")
	})
}

// TestExecuteConnectionDropped: a connection dropped after the request was
// sent is ambiguous: never re-POSTed blindly; the executions contract looks
// the execution up, the legacy one reports ErrExecutionOutcomeUnknown.
func TestExecuteConnectionDropped(t *testing.T) {
	hangUp := func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		conn, _, err := http.NewResponseController(w).Hijack()
		if assert.NoError(t, err) {
			conn.Close()
		}
	}
	cutBody := func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		conn, buf, err := http.NewResponseController(w).Hijack()
		if !assert.NoError(t, err) {
			return
		}
		defer conn.Close()
		_, _ = buf.WriteString("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n{\"id\":\"x\",\"status\":\"Succ")
		_ = buf.Flush()
	}
	for name, h := range map[string]http.HandlerFunc{"hang up": hangUp, "cut body": cutBody} {
		t.Run(name+"/legacy", func(t *testing.T) {
			p := setup(t, APIVersion20240202Preview)
			p.handle("POST /code/execute", h)
			_, err := p.client.Session(testIdentifier).Execute(context.Background(), "x", nil)
			require.ErrorIs(t, err, ErrExecutionOutcomeUnknown)
			require.Equal(t, 1, p.count())
		})
		t.Run(name+"/executions", func(t *testing.T) {
			p := setup(t, APIVersion20251002Preview)
			var opID string
			p.handle("POST /executions", func(w http.ResponseWriter, r *http.Request) {
				opID = r.Header.Get("operation-id")
				h(w, r)
			})
			p.handle("GET /executions/{id}", func(w http.ResponseWriter, r *http.Request) {
				assert.Equal(t, opID, r.PathValue("id"))
				writeJSON(w, http.StatusOK, newResult("Succeeded", "once\n", "", "1"))
			})
			resp, err := p.client.Session(testIdentifier).Execute(context.Background(), "x", nil)
			require.NoError(t, err)
			require.Equal(t, "once\n", resp.Stdout)
			require.Equal(t, 1, p.requestsTo("POST", "/executions"))
		})
	}
}

// TestExecuteLookup404Codes: after an ambiguous failure, only a 404 that says
// the execution is unknown lets Execute send the code again; a 404 for
// another reason (a route the pool does not serve, a full pool) proves
// nothing, so the caller gets ErrExecutionOutcomeUnknown after one POST.
func TestExecuteLookup404Codes(t *testing.T) {
	for _, tt := range []struct {
		name       string
		code       string
		body       string // raw body instead of the error envelope
		recognised bool   // the service's own "no such execution"
	}{
		{"plain string", "", `"No execution available for operation Id"`, true},
		{"NotFound", "NotFound", "", true},
		{"ExecutionNotFound", "ExecutionNotFound", "", true},
		{"OperationIdNotFound", "OperationIdNotFound", "", true},
		{"RouteNotFound", "RouteNotFound", "", false},
		{"NoSessionsAvailable", "NoSessionsAvailable", "", false},
		{"ResourceNotFound", "ResourceNotFound", "", false},
		// issue 12 item 2: a proxy's HTML 404 is not the service's answer
		{"html page", "", "<html><body><h1>404 Not Found</h1></body></html>", false},
		{"empty body", "", " ", false},
	} {
		t.Run("code="+tt.name, func(t *testing.T) {
			p := setup(t, APIVersion20251002Preview)
			posts := 0
			p.handle("POST /executions", func(w http.ResponseWriter, r *http.Request) {
				posts++
				if posts == 1 {
					writeError(w, http.StatusBadGateway, "Gateway", "lost")
					return
				}
				writeJSON(w, http.StatusOK, newResult("Succeeded", "ok\n", "", `""`))
			})
			p.handle("GET /executions/{id}", func(w http.ResponseWriter, r *http.Request) {
				if tt.code == "" {
					w.Header().Set("Content-Type", "text/html")
					w.WriteHeader(http.StatusNotFound)
					_, _ = w.Write([]byte(tt.body))
					return
				}
				writeError(w, http.StatusNotFound, tt.code, "not here")
			})
			_, err := p.client.Session(testIdentifier).Execute(context.Background(), "x", nil)
			require.ErrorIs(t, err, ErrExecutionOutcomeUnknown)
			require.Equal(t, 1, posts, "never sent again")
			if tt.recognised {
				require.ErrorContains(t, err, "no record of the execution yet")
			} else {
				require.ErrorContains(t, err, "looking the execution up")
			}
		})
	}
}

// TestExecuteJupyterFormatSpecExamples sends each spec example that sets
// returnJupyterFormatExecutionResult and checks the request body the client
// writes against the example's codeExecutionRequest, read as data, and the
// decoded result against the example's response.
func TestExecuteJupyterFormatSpecExamples(t *testing.T) {
	for _, name := range []string{"CodeExecution_Execute_Result_StringNaN_JupyterFormat", "CodeExecution_Execute_Result_NaN_JupyterFormat"} {
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join("testdata", "examples", "spec", "2025-10-02-preview", name+".json"))
			require.NoError(t, err)
			var ex struct {
				Parameters struct {
					Request map[string]any `json:"codeExecutionRequest"`
				} `json:"parameters"`
				Responses map[string]struct {
					Body json.RawMessage `json:"body"`
				} `json:"responses"`
			}
			require.NoError(t, json.Unmarshal(raw, &ex))
			p := setup(t, APIVersion20251002Preview)
			p.handle("POST /executions", func(w http.ResponseWriter, r *http.Request) {
				var req map[string]any
				assert.NoError(t, jsonDecode(r.Body, &req))
				// The client spells the enums in lower case; the service
				// reads them case-insensitively (other examples use both).
				for _, k := range []string{"codeInputType", "executionType"} {
					assert.True(t, strings.EqualFold(ex.Parameters.Request[k].(string), req[k].(string)), k)
					delete(req, k)
				}
				want := maps.Clone(ex.Parameters.Request)
				delete(want, "codeInputType")
				delete(want, "executionType")
				assert.Equal(t, want, req)
				writeJSON(w, http.StatusOK, ex.Responses["200"].Body)
			})
			resp, err := p.client.Session(testIdentifier).Execute(context.Background(), ex.Parameters.Request["code"].(string),
				&ExecuteOptions{Timeout: time.Minute, OutputStreamsMaxLength: 4096, ReturnJupyterFormatExecutionResult: true})
			require.NoError(t, err)
			var body struct {
				Result struct {
					ExecutionResult json.RawMessage `json:"executionResult"`
				} `json:"result"`
			}
			require.NoError(t, json.Unmarshal(ex.Responses["200"].Body, &body))
			require.JSONEq(t, string(body.Result.ExecutionResult), string(resp.Result))
		})
	}
}
