package azsessions_test

// The fault suite: every fault azsessionstest can inject, against the real
// client, on the legacy and the executions contract, each case asserting the
// outcome (what the caller gets, how many requests were sent and how many
// times the code actually ran).

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	azlog "github.com/Azure/azure-sdk-for-go/sdk/azcore/log"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/azsessions/azsessions"
	"github.com/azsessions/azsessions/azsessionstest"
	"github.com/azsessions/azsessions/emulator"
)

var (
	relLegacyVersions = []string{azsessions.APIVersion20240202Preview, azsessions.APIVersion20240802Preview}
	relNewVersions    = []string{azsessions.APIVersion20241002Preview, azsessions.APIVersion20250202Preview, azsessions.APIVersion20251002Preview}
	relEveryVersion   = append(append([]string{}, relLegacyVersions...), relNewVersions...)
	// relOneOfEach is the oldest legacy and the newest version, for the slower cases.
	relOneOfEach = []string{azsessions.APIVersion20240202Preview, azsessions.APIVersion20251002Preview}
)

func relIsLegacy(version string) bool {
	return version == azsessions.APIVersion20240202Preview || version == azsessions.APIVersion20240802Preview
}

// relStart starts the fake for version and returns it with a client whose
// retries honour Retry-After hints of up to 5 s.
func relStart(t *testing.T, version string, opts *azsessionstest.Options) (*azsessionstest.Server, *azsessions.Client) {
	t.Helper()
	var o azsessionstest.Options
	if opts != nil {
		o = *opts
	}
	o.APIVersion = version
	srv := azsessionstest.Start(t, withCells(&o))
	co := &azsessions.ClientOptions{}
	co.Retry.MaxRetryDelay = 5 * time.Second
	c, err := srv.NewClient(co)
	require.NoError(t, err)
	return srv, c
}

// relRetryLog records the retry policy's lines of azcore's log while a test runs.
type relRetryLog struct {
	mu    sync.Mutex
	lines []string
}

func relCaptureRetryLog(t *testing.T) *relRetryLog {
	l := &relRetryLog{}
	azlog.SetListener(func(ev azlog.Event, msg string) {
		if ev != azlog.EventRetryPolicy {
			return
		}
		l.mu.Lock()
		l.lines = append(l.lines, msg)
		l.mu.Unlock()
	})
	t.Cleanup(func() { azlog.SetListener(nil) })
	return l
}

var relEndTryDelay = regexp.MustCompile(`^End Try #1, Delay=(\S+)$`)

// delays returns the delays logged after a first try, and forgets the lines.
func (l *relRetryLog) delays(t *testing.T) []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []time.Duration
	for _, line := range l.lines {
		if m := relEndTryDelay.FindStringSubmatch(line); m != nil {
			d, err := time.ParseDuration(m[1])
			require.NoError(t, err, line)
			out = append(out, d)
		}
	}
	l.lines = nil
	return out
}

// TestFault429RetryAfter: a 429 with each form of retry hint, then success.
// The execution is retried once, after exactly the hinted delay (the fake
// runs in process inside a testing/synctest bubble: fake time, no real
// waiting; azcore's retry log reports the same delay), without a look-up,
// and runs exactly once.
func TestFault429RetryAfter(t *testing.T) {
	log := relCaptureRetryLog(t)
	hints := []struct {
		name  string
		fault func() azsessionstest.Fault // called inside the bubble (fake time)
		want  time.Duration               // the delay azcore waits
	}{
		{"Retry-After seconds", func() azsessionstest.Fault {
			return azsessionstest.Fault{Status: http.StatusTooManyRequests, Code: "TooManyRequests", RetryAfter: "1"}
		}, time.Second},
		{"Retry-After HTTP date", func() azsessionstest.Fault {
			// the bubble's clock is on a whole second: the date is 2 s ahead
			at := time.Now().Add(2 * time.Second).UTC().Format(http.TimeFormat)
			return azsessionstest.Fault{Status: http.StatusTooManyRequests, Code: "TooManyRequests", RetryAfter: at}
		}, 2 * time.Second},
		{"retry-after-ms", func() azsessionstest.Fault {
			return azsessionstest.Fault{Status: http.StatusTooManyRequests, Code: "TooManyRequests", RetryAfterMs: 300}
		}, 300 * time.Millisecond},
		{"retry-after-ms wins over Retry-After", func() azsessionstest.Fault {
			return azsessionstest.Fault{Status: http.StatusTooManyRequests, Code: "TooManyRequests", RetryAfter: "3", RetryAfterMs: 200}
		}, 200 * time.Millisecond},
	}
	for _, h := range hints {
		for _, version := range relOneOfEach {
			t.Run(h.name+"/"+version, func(t *testing.T) {
				log.delays(t) // forget earlier lines
				synctest.Test(t, func(t *testing.T) {
					srv, c := relStart(t, version, &azsessionstest.Options{InProcess: true})
					srv.InjectFault(azsessionstest.RouteExecute, h.fault(), 1)
					sess := c.NewSession()
					start := time.Now()
					resp, err := sess.Execute(context.Background(), "print('once')\n6 * 7", nil)
					require.NoError(t, err)
					require.Equal(t, h.want, time.Since(start), "the wait is the hint's")
					require.Equal(t, "once\n", resp.Stdout)
					require.JSONEq(t, "42", string(resp.Result))
					require.Equal(t, 2, srv.Requests(azsessionstest.RouteExecute), "one 429, one retry")
					require.Zero(t, srv.Requests(azsessionstest.RouteGetExecution), "a 429 proves nothing ran: no look-up")
					require.Equal(t, int64(1), srv.ExecutionsFor(sess.Identifier()))
				})
				require.Equal(t, []time.Duration{h.want}, log.delays(t), "one retry, after the hint")
			})
		}
	}
}

// TestFaultAmbiguousExecute: the request reached the handler (the code ran)
// and the answer was lost. On the executions contract the caller gets the
// result (looked up by operation-id); on the legacy contract an error
// wrapping ErrExecutionOutcomeUnknown. Never more than one run, never a
// second POST. A fault before the handler is shown for contrast: nothing
// ran, the look-up says 404, and the caller gets ErrExecutionOutcomeUnknown
// with the operation-id (the client cannot tell this from a first POST that
// is still on its way, so it does not send again).
func TestFaultAmbiguousExecute(t *testing.T) {
	faults := []struct {
		name  string
		fault azsessionstest.Fault
		ran   bool // the handler ran before the fault
	}{
		{"500 after handler", azsessionstest.Fault{Status: http.StatusInternalServerError, AfterHandler: true}, true},
		{"502 after handler", azsessionstest.Fault{Status: http.StatusBadGateway, AfterHandler: true}, true},
		{"503 after handler", azsessionstest.Fault{Status: http.StatusServiceUnavailable, AfterHandler: true}, true},
		{"504 after handler", azsessionstest.Fault{Status: http.StatusGatewayTimeout, AfterHandler: true}, true},
		{"reset after handler", azsessionstest.Fault{ResetAfterHandler: true}, true},
		{"reset mid body", azsessionstest.Fault{ResetMidBody: true}, true},
		{"503 before handler", azsessionstest.Fault{Status: http.StatusServiceUnavailable}, false},
		{"reset before handler", azsessionstest.Fault{ResetBeforeHandler: true}, false},
	}
	for _, f := range faults {
		for _, version := range relEveryVersion {
			t.Run(f.name+"/"+version, func(t *testing.T) {
				t.Parallel()
				srv, c := relStart(t, version, nil)
				sess := c.NewSession()
				ctx := context.Background()
				srv.InjectFault(azsessionstest.RouteExecute, f.fault, 1)
				resp, err := sess.Execute(ctx, "print('once')\n6 * 7", nil)
				if !f.ran && err == nil {
					// the reset came before the request was written whole:
					// the server never had it, so it was sent again
					require.Equal(t, int64(1), srv.ExecutionsFor(sess.Identifier()), "exactly once")
					require.Equal(t, 2, srv.Requests(azsessionstest.RouteExecute))
					return
				}
				if relIsLegacy(version) {
					require.ErrorIs(t, err, azsessions.ErrExecutionOutcomeUnknown)
					require.ErrorContains(t, err, "may or may not have run")
					if f.fault.Status != 0 {
						var re *azcore.ResponseError
						require.ErrorAs(t, err, &re)
						require.Equal(t, f.fault.Status, re.StatusCode)
					}
					require.Equal(t, 1, srv.Requests(azsessionstest.RouteExecute), "the legacy contract never sends twice")
					want := int64(0)
					if f.ran {
						want = 1
					}
					require.Equal(t, want, srv.ExecutionsFor(sess.Identifier()), "the code ran iff the handler ran")
					return
				}
				require.Equal(t, 1, srv.Requests(azsessionstest.RouteGetExecution), "one look-up by operation-id")
				require.Equal(t, 1, srv.Requests(azsessionstest.RouteExecute), "never sent twice")
				if !f.ran {
					// The look-up said 404, which only means "not recorded
					// yet" while the first POST may be alive: the caller
					// gets the operation-id, and GetExecution says 404.
					require.ErrorIs(t, err, azsessions.ErrExecutionOutcomeUnknown)
					var unknown *azsessions.ExecutionOutcomeUnknownError
					require.ErrorAs(t, err, &unknown)
					require.NotEmpty(t, unknown.OperationID)
					_, gerr := sess.GetExecution(ctx, unknown.OperationID, nil)
					var re *azcore.ResponseError
					require.ErrorAs(t, gerr, &re)
					require.Equal(t, http.StatusNotFound, re.StatusCode)
					require.Zero(t, srv.ExecutionsFor(sess.Identifier()), "nothing ran")
					return
				}
				require.NoError(t, err)
				require.Equal(t, "once\n", resp.Stdout)
				require.JSONEq(t, "42", string(resp.Result))
				require.Equal(t, azsessions.ExecutionStatusSucceeded, resp.Status)
				require.NotEmpty(t, resp.ID)
				require.Equal(t, int64(1), srv.ExecutionsFor(sess.Identifier()), "exactly once")
			})
		}
	}
}

// TestFaultEveryExecutionLosesItsAnswer: every answer of a run of dependent
// executions is lost after the code ran. The session's own state proves
// each ran exactly once: a counter incremented by each execution ends at
// the number of calls.
func TestFaultEveryExecutionLosesItsAnswer(t *testing.T) {
	const n = 8
	for _, version := range relOneOfEach {
		for name, fault := range map[string]azsessionstest.Fault{"reset": {ResetAfterHandler: true}, "502": {Status: http.StatusBadGateway, AfterHandler: true}} {
			t.Run(version+"/"+name, func(t *testing.T) {
				t.Parallel()
				srv, c := relStart(t, version, nil)
				sess := c.NewSession()
				ctx := context.Background()
				_, err := sess.Execute(ctx, "c = 0", nil)
				require.NoError(t, err)
				srv.InjectFault(azsessionstest.RouteExecute, fault, 0) // every request from now on
				for range n {
					resp, err := sess.Execute(ctx, "c = c + 1\nc", nil)
					if relIsLegacy(version) {
						require.ErrorIs(t, err, azsessions.ErrExecutionOutcomeUnknown)
						continue
					}
					require.NoError(t, err)
					require.Equal(t, azsessions.ExecutionStatusSucceeded, resp.Status)
				}
				srv.ClearFaults()
				resp, err := sess.Execute(ctx, "c", nil)
				require.NoError(t, err)
				require.JSONEq(t, "8", string(resp.Result), "each execution ran exactly once")
				require.Equal(t, int64(n+2), srv.ExecutionsFor(sess.Identifier()))
				require.Equal(t, n+2, srv.Requests(azsessionstest.RouteExecute), "never sent twice")
			})
		}
	}
}

// TestFaultSlowHandlerPastDeadline: a handler slower than the caller's
// deadline. Every operation returns promptly with ctx's error; Execute's
// also says the outcome is unknown; nothing ran; no goroutine is left.
// Over real sockets (TestExecuteLongerThanDeadline has the in-process
// counterpart on the fake clock).
func TestFaultSlowHandlerPastDeadline(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) }) // after the servers' Close (cleanups run last-in first-out)
	type op struct {
		name string
		call func(ctx context.Context, s *azsessions.Session) error
	}
	ops := []op{
		{"Execute", func(ctx context.Context, s *azsessions.Session) error {
			_, err := s.Execute(ctx, "print(1)", nil)
			if err != nil && !errors.Is(err, azsessions.ErrExecutionOutcomeUnknown) {
				return errors.New("Execute's error does not wrap ErrExecutionOutcomeUnknown: " + err.Error())
			}
			return err
		}},
		{"UploadFile", func(ctx context.Context, s *azsessions.Session) error {
			_, err := s.UploadFile(ctx, "x.txt", strings.NewReader("x"), nil)
			return err
		}},
		{"ListFiles", func(ctx context.Context, s *azsessions.Session) error {
			_, err := s.NewListFilesPager(nil).NextPage(ctx)
			return err
		}},
		{"DownloadFileToPath", func(ctx context.Context, s *azsessions.Session) error {
			_, err := s.DownloadFileToPath(ctx, "x.txt", filepath.Join(t.TempDir(), "x.txt"), nil)
			return err
		}},
		{"DeleteFile", func(ctx context.Context, s *azsessions.Session) error {
			_, err := s.DeleteFile(ctx, "x.txt", nil)
			return err
		}},
	}
	// Every operation on both versions at once, each with its own
	// deadline: the deadlines pass together instead of one after another.
	// 500 ms (one at a time they had 200 ms) leaves the ten requests ample
	// time to be sent on a loaded machine: Execute's outcome is unknown
	// only once its POST was written.
	type outcome struct {
		err     error
		elapsed time.Duration
	}
	servers := make([]*azsessionstest.Server, len(relOneOfEach))
	outcomes := make([][]outcome, len(relOneOfEach))
	var wg sync.WaitGroup
	for i, version := range relOneOfEach {
		srv, c := relStart(t, version, nil)
		srv.InjectFault(azsessionstest.RouteAny, azsessionstest.Fault{Delay: time.Minute}, 0)
		servers[i] = srv
		sess := c.NewSession()
		outcomes[i] = make([]outcome, len(ops))
		for j, o := range ops {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
				defer cancel()
				start := time.Now()
				err := o.call(ctx, sess)
				outcomes[i][j] = outcome{err, time.Since(start)}
			})
		}
	}
	wg.Wait()
	for i, version := range relOneOfEach {
		for j, o := range ops {
			require.ErrorIs(t, outcomes[i][j].err, context.DeadlineExceeded, "%s %s", version, o.name)
			require.Less(t, outcomes[i][j].elapsed, 5*time.Second, "%s %s returns promptly", version, o.name)
		}
		require.Zero(t, servers[i].Executions(), version)
		require.NoError(t, servers[i].Close())
	}
}

// TestFaultDownloadResetMidBody: the connection breaks halfway through a
// download. DownloadFileToPath fails, leaves no partial or temporary file,
// and keeps the previous content of the target; the next try succeeds.
func TestFaultDownloadResetMidBody(t *testing.T) {
	content := make([]byte, 256<<10)
	_, _ = rand.Read(content)
	for _, version := range relOneOfEach {
		for _, existing := range []bool{true, false} {
			name := version + "/new target"
			if existing {
				name = version + "/existing target"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				srv, c := relStart(t, version, nil)
				sess := c.NewSession()
				ctx := context.Background()
				_, err := sess.UploadFile(ctx, "data.bin", bytes.NewReader(content), nil)
				require.NoError(t, err)
				dir := t.TempDir()
				target := filepath.Join(dir, "data.bin")
				previous := []byte("previous content\n")
				if existing {
					require.NoError(t, os.WriteFile(target, previous, 0o600))
				}
				srv.InjectFault(azsessionstest.RouteDownload, azsessionstest.Fault{ResetMidBody: true}, 1)
				_, err = sess.DownloadFileToPath(ctx, "data.bin", target, &azsessions.DownloadFileToPathOptions{Overwrite: true})
				require.Error(t, err)
				entries, rerr := os.ReadDir(dir)
				require.NoError(t, rerr)
				if existing {
					require.Len(t, entries, 1, "no temporary file is left")
					got, rerr := os.ReadFile(target)
					require.NoError(t, rerr)
					require.Equal(t, previous, got, "the target keeps its previous content")
				} else {
					require.Empty(t, entries, "no partial file")
				}
				require.Equal(t, 1, srv.Requests(azsessionstest.RouteDownload))

				got, err := sess.DownloadFileToPath(ctx, "data.bin", target, &azsessions.DownloadFileToPathOptions{Overwrite: true})
				require.NoError(t, err)
				require.Equal(t, int64(len(content)), got.Size)
				b, err := os.ReadFile(target)
				require.NoError(t, err)
				require.True(t, bytes.Equal(content, b), "the retried download is complete")
			})
		}
	}
}

// TestFaultUploadResetMidRequest: the connection breaks halfway through an
// upload from a seekable file. The upload is retried from the caller's
// offset and the stored file equals the source byte for byte.
func TestFaultUploadResetMidRequest(t *testing.T) {
	content := make([]byte, 1<<20)
	_, _ = rand.Read(content)
	src := filepath.Join(t.TempDir(), "src.bin")
	require.NoError(t, os.WriteFile(src, content, 0o600))
	for _, version := range relEveryVersion {
		for _, offset := range []int64{0, 12345} {
			t.Run(version+"/offset "+map[bool]string{true: "0", false: "12345"}[offset == 0], func(t *testing.T) {
				t.Parallel()
				srv, c := relStart(t, version, nil)
				sess := c.NewSession()
				ctx := context.Background()
				f, err := os.Open(src)
				require.NoError(t, err)
				defer f.Close()
				_, err = f.Seek(offset, io.SeekStart)
				require.NoError(t, err)
				srv.InjectFault(azsessionstest.RouteUpload, azsessionstest.Fault{ResetMidRequest: true}, 1)
				up, err := sess.UploadFile(ctx, "data.bin", f, nil)
				require.NoError(t, err)
				require.Equal(t, int64(len(content))-offset, up.SizeInBytes)
				require.Equal(t, 2, srv.Requests(azsessionstest.RouteUpload), "cut once, retried once")

				dl, err := sess.DownloadFile(ctx, "data.bin", nil)
				require.NoError(t, err)
				defer dl.Body.Close()
				got, err := io.ReadAll(dl.Body)
				require.NoError(t, err)
				require.True(t, bytes.Equal(content[offset:], got), "stored file equals the source byte for byte (got %d bytes)", len(got))
			})
		}
	}
}

// TestFaultSessionExpired: the session expires between two calls (the fake
// clock moves past the cooldown). The next call gets a fresh session: the
// variables are gone (the code fails with NameError, as data), and so are
// the files. On 2025-02-02-preview and later Get exposes it: it fails with
// SessionWithIdentifierNotFound, and after the next call CreatedAt is later
// than before (see the Session documentation for the pattern).
func TestFaultSessionExpired(t *testing.T) {
	for _, version := range relEveryVersion {
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			srv, c := relStart(t, version, &azsessionstest.Options{Options: emulator.Options{Cooldown: 5 * time.Minute}})
			sess := c.NewSession()
			ctx := context.Background()
			_, err := sess.Execute(ctx, "x = 41", nil)
			require.NoError(t, err)
			_, err = sess.UploadFile(ctx, "keep.txt", strings.NewReader("kept"), nil)
			require.NoError(t, err)
			manage := version == azsessions.APIVersion20250202Preview || version == azsessions.APIVersion20251002Preview
			var before azsessions.GetSessionResponse
			if manage {
				before, err = sess.Get(ctx, nil)
				require.NoError(t, err)
				require.False(t, before.CreatedAt.IsZero())
			}

			srv.Advance(6 * time.Minute)

			if manage {
				_, err = sess.Get(ctx, nil)
				var re *azcore.ResponseError
				require.ErrorAs(t, err, &re)
				require.Equal(t, "SessionWithIdentifierNotFound", re.ErrorCode, "Get says the session is gone")
			}
			resp, err := sess.Execute(ctx, "x + 1", nil)
			require.NoError(t, err, "a program error is data")
			require.Equal(t, azsessions.ExecutionStatusFailed, resp.Status)
			require.Contains(t, resp.Stderr, "NameError")
			var ee *azsessions.ExecutionError
			require.ErrorAs(t, resp.Err(), &ee)
			require.Contains(t, ee.Message, "NameError")

			page, err := sess.NewListFilesPager(nil).NextPage(ctx)
			require.NoError(t, err)
			require.Empty(t, page.Files, "the files are gone")
			_, err = sess.DownloadFile(ctx, "keep.txt", nil)
			var re *azcore.ResponseError
			require.ErrorAs(t, err, &re)
			require.Equal(t, http.StatusNotFound, re.StatusCode)

			if manage {
				after, err := sess.Get(ctx, nil)
				require.NoError(t, err)
				require.True(t, after.CreatedAt.After(before.CreatedAt), "a fresh session: CreatedAt %v then %v", before.CreatedAt, after.CreatedAt)
			}
		})
	}
}

// TestUploadRefusesUnsendableHeaders: a file name with a control character
// (which a multipart header cannot carry: the fake, like any Go server,
// would refuse the whole body) or a content type with a line break (header
// injection) is refused before any I/O, and the source is not consumed.
func TestUploadRefusesUnsendableHeaders(t *testing.T) {
	cases := []struct {
		name, file, contentType string
		fileErr                 bool
	}{
		{"control character in the name", "ctl\x01char.txt", "", true},
		{"DEL in the name", "del\x7f.txt", "", true},
		{"escape in a sub-directory's file name", "sub/esc\x1b.txt", "", true},
		{"tab in the name", "tab\tname.txt", "", true},
		{"line break in the name", "line\nbreak.txt", "", true},
		{"line break in the content type", "x.txt", "text/plain\r\nX-Injected: 1", false},
		{"NUL in the content type", "x.txt", "text/plain\x00", false},
	}
	for _, version := range relOneOfEach {
		srv, c := relStart(t, version, nil)
		sess := c.NewSession()
		for _, tc := range cases {
			if relIsLegacy(version) && strings.Contains(tc.file, "/") {
				continue
			}
			src := strings.NewReader("content")
			_, err := sess.UploadFile(context.Background(), tc.file, src, &azsessions.UploadFileOptions{ContentType: tc.contentType})
			require.Error(t, err, "%s %s", version, tc.name)
			if tc.fileErr {
				require.ErrorIs(t, err, azsessions.ErrInvalidFileName, "%s %s", version, tc.name)
			}
			require.Equal(t, int64(len("content")), int64(src.Len()), "the source was not read")
		}
		require.Equal(t, 0, srv.Requests(azsessionstest.RouteAny), version)
	}
}

// TestFaultForgottenRecordNotRunAgain: the emulator has forgotten the result
// of an execution (its per-session record bound). The client, asked to run
// the same code with the same OperationID (a new Client, so that its own
// claim on the id does not refuse it first), gets the emulator's 409
// ExecutionResultForgotten as an error: never a success, and the code is
// not run again. GetExecution of the id is a 404 error.
func TestFaultForgottenRecordNotRunAgain(t *testing.T) {
	srv, c := relStart(t, azsessions.APIVersion20251002Preview, &azsessionstest.Options{Options: emulator.Options{MaxRecordedBytes: 600}})
	sess := c.NewSession()
	ctx := context.Background()
	_, err := sess.Execute(ctx, "c = 1", &azsessions.ExecuteOptions{OperationID: "job-1"})
	require.NoError(t, err)
	_, err = sess.Execute(ctx, "c = c + 1", nil) // two records of 512 bytes pass 600: job-1's result goes
	require.NoError(t, err)
	require.Equal(t, int64(2), srv.ExecutionsFor(sess.Identifier()))

	_, err = sess.GetExecution(ctx, "job-1", nil)
	var re *azcore.ResponseError
	require.ErrorAs(t, err, &re)
	require.Equal(t, http.StatusNotFound, re.StatusCode)

	c2, err := srv.NewClient(nil)
	require.NoError(t, err)
	_, err = c2.Session(sess.Identifier()).Execute(ctx, "c = 1", &azsessions.ExecuteOptions{OperationID: "job-1"})
	// Never a plain 4xx refusal ("nothing ran"): the code ran, its outcome
	// is unknown (red-team finding: a caller resending under a new id).
	require.ErrorIs(t, err, azsessions.ErrExecutionOutcomeUnknown)
	require.Contains(t, err.Error(), "already ran")
	require.ErrorAs(t, err, &re)
	require.Equal(t, http.StatusConflict, re.StatusCode)
	require.Equal(t, emulator.CodeExecutionResultForgotten, re.ErrorCode)
	require.Equal(t, int64(2), srv.ExecutionsFor(sess.Identifier()), "the code did not run again")
	// c2 keeps its claim on the id: asked again it refuses before any I/O.
	posts := srv.Requests(azsessionstest.RouteExecute)
	_, err = c2.Session(sess.Identifier()).Execute(ctx, "c = 1", &azsessions.ExecuteOptions{OperationID: "job-1"})
	require.ErrorIs(t, err, azsessions.ErrOperationIDInUse)
	require.Equal(t, posts, srv.Requests(azsessionstest.RouteExecute))
}

// TestFaultForgottenAsyncResultUnknown: an asynchronous execution finishes
// and the emulator forgets its result (per-session bound) before
// BeginExecute's poller asks for it. PollUntilDone fails with
// ErrExecutionOutcomeUnknown carrying the operation-id (the 404 inside,
// whose message says the result was forgotten): never a success, never a
// plain 404 a caller could take for "did not run", and nothing is sent
// again. It failed with a bare *azcore.ResponseError before.
func TestFaultForgottenAsyncResultUnknown(t *testing.T) {
	gate := make(chan struct{})
	exec := emulator.ScriptedExecutor(func(_ context.Context, code string) emulator.ExecutionResult {
		if code == "slow" {
			<-gate
		}
		return emulator.ExecutionResult{Stdout: "ok"}
	})
	srv, c := relStart(t, azsessions.APIVersion20251002Preview, &azsessionstest.Options{Options: emulator.Options{MaxRecordedBytes: 600, Executor: exec}})
	sess := c.NewSession()
	ctx := context.Background()
	poller, err := sess.BeginExecute(ctx, "slow", &azsessions.BeginExecuteOptions{ExecuteOptions: azsessions.ExecuteOptions{OperationID: "job-async"}})
	require.NoError(t, err)
	close(gate)
	_, err = sess.Execute(ctx, "fast", nil) // queued behind "slow": two records pass 600, job-async's result goes
	require.NoError(t, err)

	_, err = poller.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: time.Second})
	require.ErrorIs(t, err, azsessions.ErrExecutionOutcomeUnknown)
	var unknown *azsessions.ExecutionOutcomeUnknownError
	require.ErrorAs(t, err, &unknown)
	require.Equal(t, "job-async", unknown.OperationID)
	var re *azcore.ResponseError
	require.ErrorAs(t, err, &re)
	require.Equal(t, http.StatusNotFound, re.StatusCode)
	require.Contains(t, err.Error(), "forgotten")
	require.Equal(t, int64(2), srv.ExecutionsFor(sess.Identifier()), "nothing ran again")
	require.Equal(t, 2, srv.Requests(azsessionstest.RouteExecute), "nothing was sent again")
}
