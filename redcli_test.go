package azsessions

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/stretchr/testify/require"
)

// forgedToken is a resume token of BeginExecute's type whose inner token is
// inner (JSON).
func forgedToken(inner string) string {
	return `{"type":"ExecuteResponse","token":` + inner + `}`
}

// TestRedResumeTokenForged (red-team, redcli): a resume token is data that
// is stored and passed around, so a forged one must not steer the client.
// azcore's NewPollerFromResumeToken picks its own fake poller instead of the
// client's handler for any token with a "fakeURL" key; that poller GETs the
// token's URL through the client's pipeline, bearer token included. Such a
// token, and one whose operation-id the client would refuse from the caller,
// fail BeginExecute before any I/O: nothing reaches the pool nor another
// host, and no token is asked for.
func TestRedResumeTokenForged(t *testing.T) {
	var stolen atomic.Int64
	thief := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		stolen.Add(1)
		w.Header().Set("Fake-Poller-Status", "Succeeded")
		writeJSON(w, http.StatusOK, []byte(`{"id":"x","status":"Succeeded","result":{"stdout":"forged\n"}}`))
	}))
	thief.TLS = &tls.Config{Certificates: []tls.Certificate{testCert()}}
	thief.StartTLS()
	t.Cleanup(thief.Close)
	cases := map[string]string{
		"fakeURL other host":  `{"fakeURL":"` + thief.URL + `/steal","fakeStatus":"InProgress","apiName":"x"}`,
		"fakeURL and id":      `{"fakeURL":"` + thief.URL + `/steal","fakeStatus":"InProgress","operationId":"op1","state":{"status":"Running"}}`,
		"empty operationId":   `{"operationId":"","state":{"status":"Running"}}`,
		"no operationId":      `{"state":{"status":"Running"}}`,
		"dot-dot operationId": `{"operationId":"..","state":{"status":"Running"}}`,
		"CRLF operationId":    `{"operationId":"a\r\nX-Evil: 1","state":{"status":"Running"}}`,
		"not an object":       `"op1"`,
	}
	for name, inner := range cases {
		t.Run(name, func(t *testing.T) {
			p := setup(t, APIVersion20251002Preview, withCredential(), withFallback(func(w http.ResponseWriter, r *http.Request) {
				writeJSON(w, http.StatusOK, []byte(`{"id":"x","status":"Succeeded"}`))
			}))
			tok := forgedToken(inner)
			require.True(t, json.Valid([]byte(tok)), tok)
			before := stolen.Load()
			poller, err := p.client.Session(testIdentifier).BeginExecute(context.Background(), "", &BeginExecuteOptions{ResumeToken: tok})
			if err == nil {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				_, _ = poller.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: time.Millisecond})
			}
			require.Equal(t, before, stolen.Load(), "the client sent a request (with its bearer token) to the token's URL")
			p.requireNoIO(t)
			require.Error(t, err, "a forged resume token was accepted")
			require.NotContains(t, err.Error(), testIdentifier)
		})
	}
}

// TestRedBadInputNoIO (red-team, redcli): every operation's bad input, on
// every api-version of the client, fails with an error before any request
// (the checks moved into the builders): the fake pool counts zero
// requests, and no error names the session identifier.
func TestRedBadInputNoIO(t *testing.T) {
	cases := redBadInputCases()
	// every session-scoped operation with an identifier the api-version
	// refuses (it holds a space, a marker for "it leaked")
	const badID = "leak MARKER identifier"
	badIdentifier := map[string]redCall{
		"Execute": func(ctx context.Context, c *Client, s *Session) error { _, err := s.Execute(ctx, "1", nil); return err },
		"BeginExecute": func(ctx context.Context, c *Client, s *Session) error {
			_, err := s.BeginExecute(ctx, "1", nil)
			return err
		},
		"ExecuteShell": func(ctx context.Context, c *Client, s *Session) error {
			_, err := s.ExecuteShell(ctx, ShellExecution{ShellCommand: "ls"}, nil)
			return err
		},
		"GetExecution": func(ctx context.Context, c *Client, s *Session) error {
			_, err := s.GetExecution(ctx, "op", nil)
			return err
		},
		"ResumeExecution": func(ctx context.Context, c *Client, s *Session) error {
			_, err := s.ResumeExecution("op", nil)
			return err
		},
		"ResumeToken": func(ctx context.Context, c *Client, s *Session) error {
			_, err := s.BeginExecute(ctx, "", &BeginExecuteOptions{ResumeToken: forgedToken(`{"operationId":"op"}`)})
			return err
		},
		"UploadFile": func(ctx context.Context, c *Client, s *Session) error {
			_, err := s.UploadFile(ctx, "x", strings.NewReader("x"), nil)
			return err
		},
		"GetFile": func(ctx context.Context, c *Client, s *Session) error { _, err := s.GetFile(ctx, "x", nil); return err },
		"DownloadFile": func(ctx context.Context, c *Client, s *Session) error {
			_, err := s.DownloadFile(ctx, "x", nil)
			return err
		},
		"DeleteFile": func(ctx context.Context, c *Client, s *Session) error {
			_, err := s.DeleteFile(ctx, "x", nil)
			return err
		},
		"ListFiles": func(ctx context.Context, c *Client, s *Session) error {
			_, err := s.NewListFilesPager(nil).NextPage(ctx)
			return err
		},
		"Get":    func(ctx context.Context, c *Client, s *Session) error { _, err := s.Get(ctx, nil); return err },
		"Delete": func(ctx context.Context, c *Client, s *Session) error { _, err := s.Delete(ctx, nil); return err },
		"Stop":   func(ctx context.Context, c *Client, s *Session) error { _, err := s.Stop(ctx, nil); return err },
		"GetContainerSession": func(ctx context.Context, c *Client, s *Session) error {
			_, err := s.GetContainerSession(ctx, nil)
			return err
		},
	}
	n := 0
	for _, version := range allVersions {
		for name, c := range cases {
			t.Run(version+"/"+name, func(t *testing.T) {
				p := setup(t, version, withCredential())
				err := c(context.Background(), p.client, p.client.Session(testIdentifier))
				require.Error(t, err)
				require.NotContains(t, err.Error(), testIdentifier)
				p.requireNoIO(t)
			})
			n++
		}
		for name, c := range badIdentifier {
			t.Run(version+"/bad identifier/"+name, func(t *testing.T) {
				p := setup(t, version, withCredential())
				err := c(context.Background(), p.client, p.client.Session(badID))
				require.Error(t, err)
				require.NotContains(t, err.Error(), "MARKER")
				p.requireNoIO(t)
			})
			n++
		}
	}
	t.Logf("%d bad-input calls, none sent a request", n)
}

// TestRedListFilesOptionsChangedBetweenPages (red-team, redcli): the later
// pages of NewListFilesPager follow nextLink, which lists the directory the
// first page asked for; the caller changing *options between pages (the
// pager keeps the pointer) must not relabel those files with another
// directory, nor silently with none when the new Path is invalid.
func TestRedListFilesOptionsChangedBetweenPages(t *testing.T) {
	for name, newPath := range map[string]string{"valid": "other", "invalid": "../etc", "root": ""} {
		t.Run(name, func(t *testing.T) {
			version := APIVersion20251002Preview
			p := setup(t, version)
			p.handle("GET /files", func(w http.ResponseWriter, r *http.Request) {
				switch r.URL.Query().Get("skiptoken") {
				case "":
					writeJSON(w, http.StatusOK, exampleWith(t, map[string]any{"nextLink": p.url("/files?path=data&skiptoken=page2")}, exSK2410, "sessions_python_plugin_file_list.json@61f4180d"))
				default:
					writeJSON(w, http.StatusOK, example(t, exBYOC2410, "list", "response_body"))
				}
			})
			opts := &ListFilesOptions{Path: "data"}
			pager := p.client.Session(testIdentifier).NewListFilesPager(opts)
			first, err := pager.NextPage(context.Background())
			require.NoError(t, err)
			require.Equal(t, "data", first.Files[0].Directory)
			opts.Path = newPath
			require.True(t, pager.More())
			second, err := pager.NextPage(context.Background())
			require.NoError(t, err)
			require.NotEmpty(t, second.Files)
			for _, f := range second.Files {
				require.Equal(t, "data", f.Directory, "page 2 lists data (its nextLink), not %q", newPath)
			}
			require.Equal(t, 2, p.count())
		})
	}
}

// TestRedExecutionTriesIdentical (red-team, redcli): the execution request
// is now built (and its operation-id chosen) before the claim and the
// look-up of a caller's OperationID; every try that the client sends again
// (a 429, then a 401 answered before the code is looked at) must be the
// same request: the same operation-id header, the same body, and the
// look-up of a caller's id before the first POST only. A bad-input call
// with the id first must not have claimed it.
func TestRedExecutionTriesIdentical(t *testing.T) {
	type run func(ctx context.Context, s *Session, opID string) error
	runs := map[string]run{
		"Execute": func(ctx context.Context, s *Session, opID string) error {
			_, err := s.Execute(ctx, "print('é')", &ExecuteOptions{OperationID: opID, Timeout: 3 * time.Second})
			return err
		},
		"BeginExecute": func(ctx context.Context, s *Session, opID string) error {
			_, err := s.BeginExecute(ctx, "print('é')", &BeginExecuteOptions{ExecuteOptions: ExecuteOptions{OperationID: opID}})
			return err
		},
		"ExecuteShell": func(ctx context.Context, s *Session, opID string) error {
			_, err := s.ExecuteShell(ctx, ShellExecution{ExecCommandAndArgs: []string{"echo", "é"}, Stdin: "in"}, &ExecuteShellOptions{OperationID: opID, OutputStreamsMaxLength: 9})
			return err
		},
	}
	badFirst := map[string]run{
		"Execute": func(ctx context.Context, s *Session, opID string) error {
			_, err := s.Execute(ctx, "  ", &ExecuteOptions{OperationID: opID})
			return err
		},
		"BeginExecute": func(ctx context.Context, s *Session, opID string) error {
			_, err := s.BeginExecute(ctx, "1", &BeginExecuteOptions{ExecuteOptions: ExecuteOptions{OperationID: opID, Timeout: time.Hour}})
			return err
		},
		"ExecuteShell": func(ctx context.Context, s *Session, opID string) error {
			_, err := s.ExecuteShell(ctx, ShellExecution{}, &ExecuteShellOptions{OperationID: opID})
			return err
		},
	}
	for _, version := range allVersions {
		f := features(t, version)
		if f.Legacy {
			continue
		}
		for name, r := range runs {
			if name == "ExecuteShell" && !f.ExecutionOptions {
				continue
			}
			for _, userID := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%s/userID=%v", version, name, userID), func(t *testing.T) {
					p := setup(t, version, withCredential())
					var mu sync.Mutex
					var seq []string // "GET" or "POST <operation-id> <body>"
					var posts atomic.Int32
					recorded := ""
					p.handle("POST /executions", func(w http.ResponseWriter, r *http.Request) {
						b, _ := io.ReadAll(r.Body)
						id := r.Header.Get("operation-id")
						mu.Lock()
						seq = append(seq, "POST "+id+" "+string(b))
						mu.Unlock()
						switch posts.Add(1) {
						case 1:
							writeError(w, http.StatusTooManyRequests, "TooManyRequests", "slow down")
						case 2:
							writeError(w, http.StatusUnauthorized, "Unauthorized", "expired")
						default:
							mu.Lock()
							recorded = id
							mu.Unlock()
							writeJSON(w, http.StatusOK, []byte(`{"id":"`+id+`","status":"Succeeded","result":{"stdout":"","stderr":"","executionResult":""}}`))
						}
					})
					p.handle("GET /executions/{id}", func(w http.ResponseWriter, r *http.Request) {
						mu.Lock()
						seq = append(seq, "GET")
						rec := recorded == r.PathValue("id")
						mu.Unlock()
						if !rec {
							writeError(w, http.StatusNotFound, "ExecutionNotFound", "none")
							return
						}
						writeJSON(w, http.StatusOK, []byte(`{"id":"`+r.PathValue("id")+`","status":"Succeeded"}`))
					})
					s := p.client.Session(testIdentifier)
					opID := ""
					if userID {
						opID = "red-op-" + name
						require.Error(t, badFirst[name](context.Background(), s, opID))
						p.requireNoIO(t)
					}
					require.NoError(t, r(context.Background(), s, opID))
					require.Equal(t, int32(3), posts.Load())
					mu.Lock()
					defer mu.Unlock()
					i := 0
					if userID {
						require.Equal(t, "GET", seq[0], "a caller's id is looked up first: %q", seq)
						i = 1
					}
					require.Len(t, seq, i+3, "%q", seq)
					for _, s := range seq[i+1:] {
						require.Equal(t, seq[i], s, "a try sent again differs from the first")
					}
					if userID {
						require.True(t, strings.HasPrefix(seq[i], "POST "+opID+" "), seq[i])
					}
				})
			}
		}
	}
}

// TestRedErrorCodeHeaderEcho (red-team, redcli): a server that echoes the
// session identifier in its x-ms-error-code header (allow-listed in azcore's
// log, and an *azcore.ResponseError's ErrorCode and text) must not put it in
// an error, the error's ErrorCode, or the log; nor in the operation-id
// header (allow-listed too). The body was redacted already; the headers
// were not.
func TestRedErrorCodeHeaderEcho(t *testing.T) {
	logged := captureLog(t)
	for name, code := range map[string]string{
		"verbatim":    "SessionNotFound:" + secretIdentifier,
		"URL-escaped": "NotFound-" + url.QueryEscape(secretIdentifier+"/"),
	} {
		t.Run(name, func(t *testing.T) {
			p := setup(t, APIVersion20251002Preview, withCredential(), withFallback(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("x-ms-error-code", code)
				w.Header().Set("operation-id", secretIdentifier)
				writeJSON(w, http.StatusBadRequest, []byte(`{}`))
			}))
			s := p.client.Session(secretIdentifier)
			ctx := context.Background()
			calls := map[string]func() error{
				"GetFile":      func() error { _, err := s.GetFile(ctx, "x", nil); return err },
				"Execute":      func() error { _, err := s.Execute(ctx, "1", nil); return err },
				"GetExecution": func() error { _, err := s.GetExecution(ctx, "op", nil); return err },
				"ListFiles":    func() error { _, err := s.NewListFilesPager(nil).NextPage(ctx); return err },
				"Get":          func() error { _, err := s.Get(ctx, nil); return err },
				"Delete":       func() error { _, err := s.Delete(ctx, nil); return err },
			}
			for op, call := range calls {
				err := call()
				require.Error(t, err, op)
				requireNoSecret(t, err.Error(), op)
				var re *azcore.ResponseError
				require.ErrorAs(t, err, &re, op)
				requireNoSecret(t, re.ErrorCode, op+" ErrorCode")
				require.NotEmpty(t, re.ErrorCode, op)
			}
		})
	}
	requireNoSecret(t, logged(), "azcore log")
}

// TestRedErrorCodeRedactionKeepsMeaning: the header's redaction keeps what
// the client reads in the error code when the identifier happens to be part
// of it: a 409 ExecutionResultForgotten still says the code ran (never a
// plain refusal that a caller could send again), and a 404
// ExecutionNotFound on a poll still says the outcome is unknown.
func TestRedErrorCodeRedactionKeepsMeaning(t *testing.T) {
	t.Run("ExecutionResultForgotten", func(t *testing.T) {
		p := setup(t, APIVersion20251002Preview)
		p.handle("POST /executions", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("x-ms-error-code", "ExecutionResultForgotten")
			writeJSON(w, http.StatusConflict, []byte(`{}`))
		})
		_, err := p.client.Session("Forgotten").Execute(context.Background(), "1", nil)
		require.ErrorIs(t, err, ErrExecutionOutcomeUnknown)
	})
	t.Run("ExecutionNotFound", func(t *testing.T) {
		p := setup(t, APIVersion20251002Preview)
		p.handle("POST /executions", func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusAccepted, []byte(`{"id":"`+r.Header.Get("operation-id")+`","status":"Running"}`))
		})
		p.handle("GET /executions/{id}", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("x-ms-error-code", "ExecutionNotFound")
			writeJSON(w, http.StatusNotFound, []byte(`{}`))
		})
		poller, err := p.client.Session("cution").BeginExecute(context.Background(), "1", nil)
		require.NoError(t, err)
		_, err = poller.PollUntilDone(context.Background(), &runtime.PollUntilDoneOptions{Frequency: time.Millisecond})
		require.ErrorIs(t, err, ErrExecutionOutcomeUnknown)
	})
}

// TestRedLocalPathsBeforeIO (red-team, redcli): the local side of the
// path-based transfers is bad input as well: a download to a directory that
// does not exist or onto a directory, and an upload of a missing file or a
// directory, fail before any request, on every api-version. Before, the
// download was asked for first and the local file made afterwards.
func TestRedLocalPathsBeforeIO(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	require.NoError(t, os.WriteFile(file, []byte("x"), 0o600))
	cases := map[string]func(ctx context.Context, s *Session) error{
		"DownloadFileToPath/no such directory": func(ctx context.Context, s *Session) error {
			_, err := s.DownloadFileToPath(ctx, "x", filepath.Join(dir, "nodir", "g"), nil)
			return err
		},
		"DownloadFileToPath/onto a directory": func(ctx context.Context, s *Session) error {
			_, err := s.DownloadFileToPath(ctx, "x", dir, &DownloadFileToPathOptions{Overwrite: true})
			return err
		},
		"DownloadFileToPath/existing file": func(ctx context.Context, s *Session) error {
			_, err := s.DownloadFileToPath(ctx, "x", file, nil)
			return err
		},
		"DownloadFileToPath/empty": func(ctx context.Context, s *Session) error {
			_, err := s.DownloadFileToPath(ctx, "x", "", nil)
			return err
		},
		"DownloadFileToPath/bad remote name": func(ctx context.Context, s *Session) error {
			_, err := s.DownloadFileToPath(ctx, "../x", filepath.Join(dir, "h"), nil)
			return err
		},
		"UploadFileFromPath/missing": func(ctx context.Context, s *Session) error {
			_, err := s.UploadFileFromPath(ctx, "x", filepath.Join(dir, "missing"), nil)
			return err
		},
		"UploadFileFromPath/directory": func(ctx context.Context, s *Session) error {
			_, err := s.UploadFileFromPath(ctx, "x", dir, nil)
			return err
		},
	}
	for _, version := range allVersions {
		for name, c := range cases {
			t.Run(version+"/"+name, func(t *testing.T) {
				p := setup(t, version)
				require.Error(t, c(context.Background(), p.client.Session(testIdentifier)))
				p.requireNoIO(t)
			})
		}
	}
	left, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, left, 1, "no temporary file is left: %v", left)
}

// TestRedLegacyNonFinalAnswer (red-team, redcli): on the legacy contract
// (POST code/execute, answered when the code has finished; no GET
// executions/{id}), an answer whose status is Running or NotStarted made
// the poller GET executions/ (no operation-id, a route the legacy
// api-versions do not have) and return whatever record came back as the
// execution's result. It is now ErrExecutionOutcomeUnknown, with no other
// request.
func TestRedLegacyNonFinalAnswer(t *testing.T) {
	for _, version := range allVersions {
		if !features(t, version).Legacy {
			continue
		}
		for _, status := range []string{"Running", "NotStarted", "running"} {
			t.Run(version+"/"+status, func(t *testing.T) {
				p := setup(t, version, withFallback(func(w http.ResponseWriter, r *http.Request) {
					writeJSON(w, http.StatusOK, []byte(`{"status":"Succeeded","result":{"stdout":"forged\n"}}`))
				}))
				p.handle("POST /code/execute", func(w http.ResponseWriter, r *http.Request) {
					writeJSON(w, http.StatusOK, []byte(`{"properties":{"status":"`+status+`","stdout":"","stderr":"","result":""}}`))
				})
				resp, err := p.client.Session(testIdentifier).Execute(context.Background(), "1", nil)
				require.ErrorIs(t, err, ErrExecutionOutcomeUnknown)
				require.Empty(t, resp.Stdout)
				require.Equal(t, 1, p.count(), "%v", p.seen)
			})
		}
	}
}

// redCall is one operation called with bad input.
type redCall func(ctx context.Context, c *Client, s *Session) error

// redBadInputCases are calls with bad input (on a valid identifier) that
// every api-version refuses before any I/O.
func redBadInputCases() map[string]redCall {
	bad := "ok\xffcode"
	return map[string]redCall{
		"Execute/invalid UTF-8": func(ctx context.Context, c *Client, s *Session) error {
			_, err := s.Execute(ctx, "print(1)#"+bad, nil)
			return err
		},
		"Execute/empty": func(ctx context.Context, c *Client, s *Session) error {
			_, err := s.Execute(ctx, "\n", &ExecuteOptions{OperationID: "red-op"})
			return err
		},
		"Execute/timeout": func(ctx context.Context, c *Client, s *Session) error {
			_, err := s.Execute(ctx, "1", &ExecuteOptions{Timeout: DefaultExecutionTimeout + time.Nanosecond, OperationID: "red-op"})
			return err
		},
		"Execute/negative OutputStreamsMaxLength": func(ctx context.Context, c *Client, s *Session) error {
			_, err := s.Execute(ctx, "1", &ExecuteOptions{OutputStreamsMaxLength: -1, OperationID: "red-op"})
			return err
		},
		"BeginExecute/invalid UTF-8": func(ctx context.Context, c *Client, s *Session) error {
			_, err := s.BeginExecute(ctx, bad, nil)
			return err
		},
		"BeginExecute/timeout": func(ctx context.Context, c *Client, s *Session) error {
			_, err := s.BeginExecute(ctx, "1", &BeginExecuteOptions{ExecuteOptions: ExecuteOptions{Timeout: -1}})
			return err
		},
		"BeginExecute/bad ResumeToken": func(ctx context.Context, c *Client, s *Session) error {
			_, err := s.BeginExecute(ctx, "", &BeginExecuteOptions{ResumeToken: "not json"})
			return err
		},
		"ExecuteShell/empty": func(ctx context.Context, c *Client, s *Session) error {
			_, err := s.ExecuteShell(ctx, ShellExecution{}, &ExecuteShellOptions{OperationID: "red-op"})
			return err
		},
		"ExecuteShell/both": func(ctx context.Context, c *Client, s *Session) error {
			_, err := s.ExecuteShell(ctx, ShellExecution{ShellCommand: "ls", ExecCommandAndArgs: []string{"ls"}}, nil)
			return err
		},
		"ExecuteShell/empty program": func(ctx context.Context, c *Client, s *Session) error {
			_, err := s.ExecuteShell(ctx, ShellExecution{ExecCommandAndArgs: []string{"", "x"}}, nil)
			return err
		},
		"ExecuteShell/negative timeout": func(ctx context.Context, c *Client, s *Session) error {
			_, err := s.ExecuteShell(ctx, ShellExecution{ShellCommand: "ls"}, &ExecuteShellOptions{Timeout: -time.Second})
			return err
		},
		"ExecuteShell/negative OutputStreamsMaxLength": func(ctx context.Context, c *Client, s *Session) error {
			_, err := s.ExecuteShell(ctx, ShellExecution{ShellCommand: "ls"}, &ExecuteShellOptions{OutputStreamsMaxLength: -1})
			return err
		},
		"ExecuteShell/bad OperationID": func(ctx context.Context, c *Client, s *Session) error {
			_, err := s.ExecuteShell(ctx, ShellExecution{ShellCommand: "ls"}, &ExecuteShellOptions{OperationID: "a b"})
			return err
		},
		"ExecuteShell/ShellCommand not UTF-8": func(ctx context.Context, c *Client, s *Session) error {
			_, err := s.ExecuteShell(ctx, ShellExecution{ShellCommand: "rm /tmp/" + bad}, nil)
			return err
		},
		"ExecuteShell/argument not UTF-8": func(ctx context.Context, c *Client, s *Session) error {
			_, err := s.ExecuteShell(ctx, ShellExecution{ExecCommandAndArgs: []string{"rm", bad}}, nil)
			return err
		},
		"ExecuteShell/Stdin not UTF-8": func(ctx context.Context, c *Client, s *Session) error {
			_, err := s.ExecuteShell(ctx, ShellExecution{ShellCommand: "cat", Stdin: bad}, nil)
			return err
		},
		"GetExecution/empty": func(ctx context.Context, c *Client, s *Session) error {
			_, err := s.GetExecution(ctx, "", nil)
			return err
		},
		"GetExecution/dot-dot": func(ctx context.Context, c *Client, s *Session) error {
			_, err := s.GetExecution(ctx, "..", nil)
			return err
		},
		"ResumeExecution/CRLF": func(ctx context.Context, c *Client, s *Session) error {
			_, err := s.ResumeExecution("a\r\nb", nil)
			return err
		},
		"ResumeExecution/negative OutputStreamsMaxLength": func(ctx context.Context, c *Client, s *Session) error {
			_, err := s.ResumeExecution("op", &ResumeExecutionOptions{OutputStreamsMaxLength: -1})
			return err
		},
		"UploadFile/name not UTF-8": func(ctx context.Context, c *Client, s *Session) error {
			_, err := s.UploadFile(ctx, "r\xe9sum\xe9.txt", strings.NewReader("x"), nil)
			return err
		},
		"GetFile/name not UTF-8": func(ctx context.Context, c *Client, s *Session) error {
			_, err := s.GetFile(ctx, bad, nil)
			return err
		},
		"ListFiles/Path not UTF-8": func(ctx context.Context, c *Client, s *Session) error {
			_, err := s.NewListFilesPager(&ListFilesOptions{Path: bad}).NextPage(ctx)
			return err
		},
		"UploadFile/dot-dot": func(ctx context.Context, c *Client, s *Session) error {
			_, err := s.UploadFile(ctx, "../x", strings.NewReader("x"), nil)
			return err
		},
		"UploadFile/empty": func(ctx context.Context, c *Client, s *Session) error {
			_, err := s.UploadFile(ctx, "", strings.NewReader("x"), nil)
			return err
		},
		"GetFile/outside": func(ctx context.Context, c *Client, s *Session) error {
			_, err := s.GetFile(ctx, "/etc/passwd", nil)
			return err
		},
		"GetFile/NUL": func(ctx context.Context, c *Client, s *Session) error {
			_, err := s.GetFile(ctx, "a\x00b", nil)
			return err
		},
		"DownloadFile/dot": func(ctx context.Context, c *Client, s *Session) error {
			_, err := s.DownloadFile(ctx, "a/./b", nil)
			return err
		},
		"DownloadFile/trailing slash": func(ctx context.Context, c *Client, s *Session) error {
			_, err := s.DownloadFile(ctx, "a/", nil)
			return err
		},
		"DeleteFile/empty segment": func(ctx context.Context, c *Client, s *Session) error {
			_, err := s.DeleteFile(ctx, "a//b", nil)
			return err
		},
		"DeleteFile/dot-dot": func(ctx context.Context, c *Client, s *Session) error {
			_, err := s.DeleteFile(ctx, "..", nil)
			return err
		},
		"ListFiles/dot-dot": func(ctx context.Context, c *Client, s *Session) error {
			_, err := s.NewListFilesPager(&ListFilesOptions{Path: "../etc"}).NextPage(ctx)
			return err
		},
		"ListFiles/outside": func(ctx context.Context, c *Client, s *Session) error {
			_, err := s.NewListFilesPager(&ListFilesOptions{Path: "/etc"}).NextPage(ctx)
			return err
		},
		"ListSessions/negative Skip": func(ctx context.Context, c *Client, s *Session) error {
			_, err := c.NewListSessionsPager(&ListSessionsOptions{Skip: -5}).NextPage(ctx)
			return err
		},
		"ListContainerSessions/negative Skip": func(ctx context.Context, c *Client, s *Session) error {
			_, err := c.NewListContainerSessionsPager(&ListContainerSessionsOptions{Skip: -5}).NextPage(ctx)
			return err
		},
	}
}

// countingCredential counts the tokens asked for.
type countingCredential struct{ n atomic.Int32 }

func (c *countingCredential) GetToken(context.Context, policy.TokenRequestOptions) (azcore.AccessToken, error) {
	c.n.Add(1)
	return azcore.AccessToken{Token: fakeToken, ExpiresOn: time.Now().Add(time.Hour)}, nil
}

// TestRedBadInputNoToken: bad input asks for no token either (a token is
// I/O to Microsoft Entra ID, and a credential that fails would hide the
// input's own error), on every api-version.
func TestRedBadInputNoToken(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		http.NotFound(w, r)
	}))
	t.Cleanup(srv.Close)
	for _, version := range allVersions {
		cred := &countingCredential{}
		co := &ClientOptions{}
		co.APIVersion, co.InsecureAllowCredentialWithHTTP = version, true
		c, err := NewClient(srv.URL+poolPath, cred, co)
		require.NoError(t, err)
		for name, call := range redBadInputCases() {
			require.Error(t, call(context.Background(), c, c.Session(testIdentifier)), "%s %s", version, name)
			require.Zero(t, cred.n.Load(), "%s %s asked for a token", version, name)
		}
	}
	require.Zero(t, requests.Load())
}
