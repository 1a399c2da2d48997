package azsessions

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// happyRoutes registers a successful answer for every route of the fake's
// api-version. check, when not nil, sees every request first.
func happyRoutes(t testing.TB, p *fakePool, check func(r *http.Request)) {
	f := features(t, p.version)
	h := func(pattern string, answer http.HandlerFunc) {
		p.handle(pattern, func(w http.ResponseWriter, r *http.Request) {
			if check != nil {
				check(r)
			}
			answer(w, r)
		})
	}
	if f.Legacy {
		h("POST /code/execute", func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusOK, example(t, exLegacyExecute, "response_200_body"))
		})
		h("POST /files/upload", func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			writeJSON(w, http.StatusOK, example(t, exLegacySK, "sessions_python_plugin_file_upload.json@a10f7817"))
		})
		h("GET /files", func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusOK, example(t, exLegacyFilesList))
		})
		h("GET /files/{name}", func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusOK, example(t, exLegacyBYOC, "get_file", "response_body"))
		})
		h("GET /files/content/{name}", func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, "content")
		})
		h("DELETE /files/{name}", func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusOK, example(t, exLegacyBYOC, "delete_file", "response_body"))
		})
		return
	}
	h("POST /executions", func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		_ = jsonDecode(r.Body, &body)
		opID := r.Header.Get("operation-id")
		loc := []string{"operation-id", opID, "Operation-Location", "/executions/" + opID + "?" + r.URL.RawQuery}
		if body["executionType"] == "Asynchronous" {
			writeJSON(w, http.StatusAccepted, []byte(`{"id":"`+opID+`","identifier":"x","executionType":"Asynchronous","status":"Running"}`), loc...)
			return
		}
		writeJSON(w, http.StatusOK, newResult("Succeeded", "63\n", "", `""`), loc...)
	})
	h("GET /executions/{id}", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, newResult("Succeeded", "63\n", "", `""`))
	})
	h("POST /files", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		writeJSON(w, http.StatusOK, example(t, exSK2410, "sessions_python_plugin_file_upload.json@f62757a2"))
	})
	h("GET /files", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, example(t, exSK2410, "sessions_python_plugin_file_list.json@61f4180d"))
	})
	h("GET /files/{name}", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, example(t, exBYOC2410, "get_metadata", "response_body"))
	})
	h("GET /files/{name}/content", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "content")
	})
	h("DELETE /files/{name}", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	})
	if f.SessionManagement {
		h("GET /session", func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusOK, example(t, exManagement, "code_interpreter_GET_session_2025-02-02-preview", "response200"))
		})
		h("DELETE /session", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
		h("GET /listSessions", func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusOK, example(t, exManagement, "code_interpreter_GET_listSessions_2025-10-02-preview_spec_example", "response200"))
		})
		h("GET /metadata", func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusOK, example(t, exManagement, "code_interpreter_GET_metadata_spec_example", "response200"))
		})
		h("POST /.management/getSession", func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusOK, example(t, exManagement, "custom_container_getSession_doc", "response200"))
		})
		h("POST /.management/listSessions", func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusOK, exampleWith(t, map[string]any{"nextLink": nil}, exManagement, "custom_container_listSessions_doc", "response200"))
		})
	}
	if f.StopSession {
		h("POST /.management/stopSession", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			_, _ = io.WriteString(w, "stopped")
		})
	}
}

// namedOp is one client operation.
type namedOp struct {
	name string
	// sessionScoped operations send the identifier
	sessionScoped bool
	call          func(ctx context.Context, s *Session) error
}

// allOps returns every operation the version supports, each calling the
// client once. fileName is the name used by the file operations; localDir
// receives downloads.
func allOps(t testing.TB, version, fileName, localDir string) []namedOp {
	f := features(t, version)
	ops := []namedOp{
		{"Execute", true, func(ctx context.Context, s *Session) error {
			_, err := s.Execute(ctx, "print(7*9)", nil)
			return err
		}},
		{"UploadFile", true, func(ctx context.Context, s *Session) error {
			_, err := s.UploadFile(ctx, fileName, strings.NewReader("data"), nil)
			return err
		}},
		{"ListFiles", true, func(ctx context.Context, s *Session) error {
			_, err := s.NewListFilesPager(nil).NextPage(ctx)
			return err
		}},
		{"GetFile", true, func(ctx context.Context, s *Session) error { _, err := s.GetFile(ctx, fileName, nil); return err }},
		{"DownloadFile", true, func(ctx context.Context, s *Session) error {
			resp, err := s.DownloadFile(ctx, fileName, nil)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			_, err = io.ReadAll(resp.Body)
			return err
		}},
		{"DownloadFileToPath", true, func(ctx context.Context, s *Session) error {
			_, err := s.DownloadFileToPath(ctx, fileName, filepath.Join(localDir, "download.bin"), &DownloadFileToPathOptions{Overwrite: true})
			return err
		}},
		{"DeleteFile", true, func(ctx context.Context, s *Session) error { _, err := s.DeleteFile(ctx, fileName, nil); return err }},
	}
	if !f.Legacy {
		ops = append(ops, namedOp{"BeginExecute", true, func(ctx context.Context, s *Session) error {
			poller, err := s.BeginExecute(ctx, "print(7*9)", nil)
			if err != nil {
				return err
			}
			_, err = poller.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: time.Millisecond})
			return err
		}})
	}
	if f.SessionManagement {
		ops = append(ops,
			namedOp{"Session.Get", true, func(ctx context.Context, s *Session) error { _, err := s.Get(ctx, nil); return err }},
			namedOp{"Session.Delete", true, func(ctx context.Context, s *Session) error { _, err := s.Delete(ctx, nil); return err }},
			namedOp{"ListSessions", false, func(ctx context.Context, s *Session) error {
				_, err := s.Client().NewListSessionsPager(nil).NextPage(ctx)
				return err
			}},
			namedOp{"GetMetadata", false, func(ctx context.Context, s *Session) error {
				_, err := s.Client().GetMetadata(ctx, nil)
				return err
			}},
			namedOp{"Session.GetContainerSession", true, func(ctx context.Context, s *Session) error { _, err := s.GetContainerSession(ctx, nil); return err }},
			namedOp{"ListContainerSessions", false, func(ctx context.Context, s *Session) error {
				_, err := s.Client().NewListContainerSessionsPager(nil).NextPage(ctx)
				return err
			}},
		)
	}
	if f.StopSession {
		ops = append(ops, namedOp{"Session.Stop", true, func(ctx context.Context, s *Session) error { _, err := s.Stop(ctx, nil); return err }})
	}
	return ops
}

// TestAllOpsHappyPath is a smoke test of happyRoutes and allOps.
func TestAllOpsHappyPath(t *testing.T) {
	for _, version := range allVersions {
		p := setup(t, version)
		happyRoutes(t, p, nil)
		for _, op := range allOps(t, version, "x.txt", t.TempDir()) {
			require.NoError(t, op.call(context.Background(), p.client.Session(testIdentifier)), "%s %s", version, op.name)
		}
		assert.NotZero(t, p.count())
	}
}
