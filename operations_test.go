package azsessions

import (
	"bytes"
	"context"
	"io"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testIdentifier is valid under every api-version's rule.
const testIdentifier = "testSessionIdentifier"

// TestOperations runs every operation against the fake, for every
// api-version, with a token-less client over HTTP and with a fake credential
// over TLS, asserting what the client sends and what it decodes.
func TestOperations(t *testing.T) {
	ops := []struct {
		name string
		run  func(t *testing.T, version string, cred bool)
	}{
		{"Execute", testOpExecute},
		{"UploadFile", testOpUploadFile},
		{"ListFiles", testOpListFiles},
		{"ListFilesRecursive", testOpListFilesRecursive},
		{"GetFile", testOpGetFile},
		{"DownloadFile", testOpDownloadFile},
		{"DownloadFileToPath", testOpDownloadFileToPath},
		{"DeleteFile", testOpDeleteFile},
		{"SessionGet", testOpSessionGet},
		{"SessionDelete", testOpSessionDelete},
		{"SessionStop", testOpSessionStop},
		{"ListSessions", testOpListSessions},
		{"GetMetadata", testOpGetMetadata},
		{"BeginExecute", testOpBeginExecute},
	}
	for _, version := range allVersions {
		for _, cred := range []bool{false, true} {
			mode := "NoCredential"
			if cred {
				mode = "Credential"
			}
			t.Run(version+"/"+mode, func(t *testing.T) {
				for _, op := range ops {
					t.Run(op.name, func(t *testing.T) { op.run(t, version, cred) })
				}
			})
		}
	}
}

func testOpExecute(t *testing.T, version string, cred bool) {
	p := setup(t, version, withCred(cred))
	f := features(t, version)
	ctx := context.Background()
	if f.Legacy {
		p.handle("POST /code/execute", func(w http.ResponseWriter, r *http.Request) {
			wantQuery(t, r, stdQuery(version, testIdentifier))
			assert.Empty(t, r.Header.Get("operation-id"), "legacy requests carry no operation-id")
			wantJSONBody(t, r, `{"properties":{"codeInputType":"inline","executionType":"synchronous","code":"6 * 7","timeoutInSeconds":220}}`)
			writeJSON(w, http.StatusOK, example(t, exLegacyExecute, "response_200_body"))
		})
		resp, err := p.client.Session(testIdentifier).Execute(ctx, "6 * 7", nil)
		require.NoError(t, err)
		require.Equal(t, ExecutionStatusSucceeded, resp.Status)
		require.JSONEq(t, `42`, string(resp.Result))
		require.Equal(t, 8*time.Millisecond, resp.ExecutionTime)
		require.Equal(t, testIdentifier, resp.Identifier)
		require.Empty(t, resp.ID)
		require.Empty(t, resp.Stdout)
		require.NoError(t, resp.Err())
		require.Equal(t, 1, p.requestsTo("POST", "/code/execute"))
		return
	}
	var sentOpID string
	p.handle("POST /executions", func(w http.ResponseWriter, r *http.Request) {
		wantQuery(t, r, stdQuery(version, testIdentifier))
		sentOpID = r.Header.Get("operation-id")
		assert.Regexp(t, uuidV4, sentOpID, "operation-id is a fresh UUIDv4")
		want := `{"codeInputType":"Inline","executionType":"Synchronous","code":"print(7*9)","timeoutInSeconds":60}`
		if f.OutputStreamsMaxLength {
			want = `{"codeInputType":"Inline","executionType":"Synchronous","code":"print(7*9)","timeoutInSeconds":60,"outputStreamsMaxLength":4096}`
		}
		wantJSONBody(t, r, want)
		body := example(t, exSync2510, "responses", "200", "body")
		if version == APIVersion20241002Preview {
			body = example(t, exSK2410, "sessions_python_plugin_code_execution.json@77b2055a")
		}
		writeJSON(w, f.ExecuteStatus, body, "operation-id", sentOpID)
	})
	opts := &ExecuteOptions{Timeout: time.Minute}
	if f.OutputStreamsMaxLength {
		opts.OutputStreamsMaxLength = 4096
	}
	resp, err := p.client.Session(testIdentifier).Execute(ctx, "print(7*9)", opts)
	require.NoError(t, err)
	require.Equal(t, ExecutionStatusSucceeded, resp.Status)
	require.NoError(t, resp.Err())
	require.JSONEq(t, `""`, string(resp.Result))
	if version == APIVersion20241002Preview {
		require.Equal(t, sentOpID, resp.ID, "the service echoes the operation-id as the execution's id")
		require.Equal(t, "93279bd8-d0ac-4fbe-a1a0-3132200cd70e", resp.Identifier)
		require.Equal(t, "Hello World!\n", resp.Stdout)
		require.Equal(t, 7*time.Millisecond, resp.ExecutionTime)
	} else {
		require.Equal(t, sentOpID, resp.ID, "the service echoes the operation-id as the execution's id")
		require.Equal(t, "testSessionIdentifier", resp.Identifier)
		require.Equal(t, "63/n", resp.Stdout)
		require.Equal(t, 4*time.Millisecond, resp.ExecutionTime)
	}
	require.Empty(t, resp.Stderr)
	require.False(t, resp.Truncated())
	require.Equal(t, 1, p.count())

	// A caller-chosen operation-id is first looked up (it must be unused),
	// then sent as is.
	p2 := setup(t, version, withCred(cred))
	p2.handle("GET /executions/{id}", func(w http.ResponseWriter, r *http.Request) {
		assert.Equal(t, "my-operation-1", r.PathValue("id"))
		writeError(w, http.StatusNotFound, "ExecutionNotFound", "no such execution")
	})
	p2.handle("POST /executions", func(w http.ResponseWriter, r *http.Request) {
		assert.Equal(t, "my-operation-1", r.Header.Get("operation-id"))
		writeJSON(w, http.StatusOK, exampleWith(t, map[string]any{"id": "my-operation-1"}, exSync2510, "responses", "200", "body"))
	})
	resp, err = p2.client.Session(testIdentifier).Execute(ctx, "print(7*9)", &ExecuteOptions{OperationID: "my-operation-1"})
	require.NoError(t, err)
	require.Equal(t, "my-operation-1", resp.ID)
}

// checkUpload parses a multipart upload and returns the file part's name and content.
func checkUpload(t testing.TB, r *http.Request) (filename string, content []byte) {
	t.Helper()
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	assert.NoError(t, err)
	assert.Equal(t, "multipart/form-data", mt)
	assert.NotEmpty(t, params["boundary"])
	mr, err := r.MultipartReader()
	if !assert.NoError(t, err) {
		return "", nil
	}
	parts := 0
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if !assert.NoError(t, err) {
			return "", nil
		}
		parts++
		assert.Equal(t, "file", part.FormName())
		assert.Equal(t, "application/octet-stream", part.Header.Get("Content-Type"))
		filename = part.FileName()
		content, err = io.ReadAll(part)
		assert.NoError(t, err)
	}
	assert.Equal(t, 1, parts, "exactly one part")
	return filename, content
}

func testOpUploadFile(t *testing.T, version string, cred bool) {
	p := setup(t, version, withCred(cred))
	f := features(t, version)
	ctx := context.Background()
	const data = "city,temp\nOslo,3\n"
	route := "POST /files"
	if f.Legacy {
		route = "POST /files/upload"
	}
	p.handle(route, func(w http.ResponseWriter, r *http.Request) {
		wantQuery(t, r, stdQuery(version, testIdentifier))
		name, content := checkUpload(t, r)
		assert.Equal(t, "TemperatureData.csv", name)
		assert.Equal(t, data, string(content))
		if f.Legacy {
			writeJSON(w, http.StatusOK, example(t, exLegacySK, "sessions_python_plugin_file_upload.json@a10f7817"))
		} else {
			writeJSON(w, http.StatusOK, example(t, exSK2410, "sessions_python_plugin_file_upload.json@f62757a2"))
		}
	})
	resp, err := p.client.Session(testIdentifier).UploadFile(ctx, "TemperatureData.csv", strings.NewReader(data), nil)
	require.NoError(t, err)
	require.Equal(t, "test-file.txt", resp.Name)
	require.Equal(t, int64(516), resp.SizeInBytes)
	require.Equal(t, FileTypeFile, resp.Type)
	require.Empty(t, resp.Directory)
	require.Equal(t, "/mnt/data/test-file.txt", resp.FullPath())
	if f.Legacy {
		require.Equal(t, mustTime(t, "2024-08-06T14:50:38.4228269Z"), resp.LastModifiedAt)
	} else {
		require.Equal(t, "text/plain; charset=utf-8", resp.ContentType)
		require.Equal(t, mustTime(t, "2024-08-06T14:50:38.4228269Z"), resp.LastModifiedAt)
	}
	require.Equal(t, 1, p.count())

	// Sub-directories: path= on the executions contract, ErrUnsupported before I/O on legacy.
	p2 := setup(t, version, withCred(cred))
	if f.Legacy {
		_, err := p2.client.Session(testIdentifier).UploadFile(ctx, "sub/dir/x.csv", strings.NewReader(data), nil)
		require.ErrorIs(t, err, ErrUnsupported)
		p2.requireNoIO(t)
		return
	}
	p2.handle("POST /files", func(w http.ResponseWriter, r *http.Request) {
		wantQuery(t, r, stdQuery(version, testIdentifier, "path", "sub/dir"))
		name, content := checkUpload(t, r)
		assert.Equal(t, "x.csv", name, "the part's filename is the base name")
		assert.Equal(t, data, string(content))
		writeJSON(w, http.StatusOK, example(t, exBYOC2410, "upload", "response_body"))
	})
	for _, name := range []string{"sub/dir/x.csv", "/mnt/data/sub/dir/x.csv"} {
		resp, err := p2.client.Session(testIdentifier).UploadFile(ctx, name, strings.NewReader(data), nil)
		require.NoError(t, err)
		require.Equal(t, "README2.md", resp.Name)
		require.Equal(t, "sub/dir", resp.Directory)
		require.Equal(t, "/mnt/data/sub/dir/README2.md", resp.FullPath())
		require.Equal(t, int64(133), resp.SizeInBytes)
	}
}

func testOpListFiles(t *testing.T, version string, cred bool) {
	p := setup(t, version, withCred(cred))
	f := features(t, version)
	ctx := context.Background()
	if f.Legacy {
		p.handle("GET /files", func(w http.ResponseWriter, r *http.Request) {
			wantQuery(t, r, stdQuery(version, testIdentifier))
			writeJSON(w, http.StatusOK, example(t, exLegacyFilesList))
		})
		pager := p.client.Session(testIdentifier).NewListFilesPager(nil)
		var files []File
		for pager.More() {
			page, err := pager.NextPage(ctx)
			require.NoError(t, err)
			files = append(files, page.Files...)
		}
		require.Len(t, files, 2)
		require.Equal(t, "test1.txt", files[0].Name)
		require.Equal(t, int64(16), files[0].SizeInBytes)
		require.Equal(t, mustTime(t, "2024-05-02T07:21:07.9922617Z"), files[0].LastModifiedAt)
		require.Equal(t, "test2.txt", files[1].Name)
		require.Equal(t, FileTypeFile, files[1].Type)
		require.Equal(t, 1, p.count())

		// Path needs the executions contract.
		_, err := p.client.Session(testIdentifier).NewListFilesPager(&ListFilesOptions{Path: "sub"}).NextPage(ctx)
		require.ErrorIs(t, err, ErrUnsupported)
		require.Equal(t, 1, p.count())
		return
	}
	// Two pages: the first one's nextLink carries a continuation token but
	// neither api-version nor identifier: the client adds both.
	p.handle("GET /files", func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Query().Get("skiptoken") {
		case "":
			wantQuery(t, r, stdQuery(version, testIdentifier, "path", "data"))
			next := p.url("/files?path=data&skiptoken=page2")
			writeJSON(w, http.StatusOK, exampleWith(t, map[string]any{"nextLink": next}, exSK2410, "sessions_python_plugin_file_list.json@61f4180d"))
		case "page2":
			wantQuery(t, r, stdQuery(version, testIdentifier, "path", "data", "skiptoken", "page2"))
			writeJSON(w, http.StatusOK, example(t, exBYOC2410, "list", "response_body"))
		default:
			t.Errorf("unexpected page %q", r.URL.RawQuery)
		}
	})
	pager := p.client.Session(testIdentifier).NewListFilesPager(&ListFilesOptions{Path: "/mnt/data/data"})
	var pages [][]File
	for pager.More() {
		page, err := pager.NextPage(ctx)
		require.NoError(t, err)
		pages = append(pages, page.Files)
	}
	require.Len(t, pages, 2)
	require.Len(t, pages[0], 2)
	require.Equal(t, "test-file.txt", pages[0][0].Name)
	require.Equal(t, "data", pages[0][0].Directory)
	require.Equal(t, "text/plain; charset=utf-8", pages[0][0].ContentType)
	require.Equal(t, int64(211), pages[0][1].SizeInBytes)
	require.Equal(t, []File{{Name: "README2.md", Directory: "data", Type: FileTypeFile, ContentType: "text/markdown; charset=utf-8", SizeInBytes: 133, LastModifiedAt: mustTime(t, "2024-11-02T12:33:05.677209683Z")}}, pages[1])
	require.Equal(t, 2, p.count())
}

func testOpListFilesRecursive(t *testing.T, version string, cred bool) {
	p := setup(t, version, withCred(cred))
	f := features(t, version)
	ctx := context.Background()
	if !f.Recursive {
		_, err := p.client.Session(testIdentifier).NewListFilesPager(&ListFilesOptions{Recursive: true}).NextPage(ctx)
		require.ErrorIs(t, err, ErrUnsupported)
		p.requireNoIO(t)
		return
	}
	p.handle("GET /files", func(w http.ResponseWriter, r *http.Request) {
		wantQuery(t, r, stdQuery(version, testIdentifier, "path", "test-directory", "recursive", "true"))
		writeJSON(w, http.StatusOK, example(t, exRecursive, "responses", "200", "body"))
	})
	page, err := p.client.Session(testIdentifier).NewListFilesPager(&ListFilesOptions{Path: "test-directory", Recursive: true}).NextPage(ctx)
	require.NoError(t, err)
	require.Empty(t, page.NextLink)
	require.Len(t, page.Files, 4)
	got := make([]string, 0, 4)
	for _, f := range page.Files {
		got = append(got, string(f.Type)+" "+f.FullPath())
	}
	require.Equal(t, []string{
		"directory /mnt/data/test-directory/directory-level1",
		"directory /mnt/data/test-directory/level1/directory-level2",
		"file /mnt/data/test-directory/level1/level2/testfile.yaml",
		"file /mnt/data/test-directory/level1/level2/capps-test-akv-PrivateTest-20250805.pfx",
	}, got)
	require.True(t, page.Files[0].IsDir())
	require.False(t, page.Files[2].IsDir())
	require.Equal(t, "application/yaml", page.Files[2].ContentType)
	require.Equal(t, int64(7988), page.Files[3].SizeInBytes)
}

func testOpGetFile(t *testing.T, version string, cred bool) {
	p := setup(t, version, withCred(cred))
	f := features(t, version)
	ctx := context.Background()
	if f.Legacy {
		p.handle("GET /files/{name}", func(w http.ResponseWriter, r *http.Request) {
			wantQuery(t, r, stdQuery(version, testIdentifier))
			assert.Equal(t, "README.md", r.PathValue("name"))
			writeJSON(w, http.StatusOK, example(t, exLegacyBYOC, "get_file", "response_body"))
		})
		resp, err := p.client.Session(testIdentifier).GetFile(ctx, "README.md", nil)
		require.NoError(t, err)
		require.Equal(t, File{Name: "README.md", Type: FileTypeFile, SizeInBytes: 5045, LastModifiedAt: mustTime(t, "2024-11-02T11:54:35.595707834Z")}, resp.File)
		_, err = p.client.Session(testIdentifier).GetFile(ctx, "level1/README.md", nil)
		require.ErrorIs(t, err, ErrUnsupported)
		require.Equal(t, 1, p.count())
		return
	}
	p.handle("GET /files/{name}", func(w http.ResponseWriter, r *http.Request) {
		assert.Equal(t, "README2.md", r.PathValue("name"))
		if r.URL.Query().Has("path") {
			wantQuery(t, r, stdQuery(version, testIdentifier, "path", "level1/level2"))
		} else {
			wantQuery(t, r, stdQuery(version, testIdentifier))
		}
		writeJSON(w, http.StatusOK, example(t, exBYOC2410, "get_metadata", "response_body"))
	})
	resp, err := p.client.Session(testIdentifier).GetFile(ctx, "README2.md", nil)
	require.NoError(t, err)
	require.Equal(t, File{Name: "README2.md", Type: FileTypeFile, ContentType: "text/markdown; charset=utf-8", SizeInBytes: 133, LastModifiedAt: mustTime(t, "2024-11-02T12:33:05.677209683Z")}, resp.File)
	resp, err = p.client.Session(testIdentifier).GetFile(ctx, "level1/level2/README2.md", nil)
	require.NoError(t, err)
	require.Equal(t, "level1/level2", resp.Directory)
	require.Equal(t, 2, p.count())
}

// downloadRoute returns the download route pattern of a version.
func downloadRoute(legacy bool) string {
	if legacy {
		return "GET /files/content/{name}"
	}
	return "GET /files/{name}/content"
}

func testOpDownloadFile(t *testing.T, version string, cred bool) {
	p := setup(t, version, withCred(cred))
	f := features(t, version)
	ctx := context.Background()
	content := []byte("# README\nhello\n")
	p.handle(downloadRoute(f.Legacy), func(w http.ResponseWriter, r *http.Request) {
		assert.Equal(t, "README.md", r.PathValue("name"))
		if r.URL.Query().Has("path") {
			wantQuery(t, r, stdQuery(version, testIdentifier, "path", "docs"))
		} else {
			wantQuery(t, r, stdQuery(version, testIdentifier))
		}
		w.Header().Set("Content-Type", "text/markdown; charset=utf-8")
		w.Header().Set("Accept-Ranges", "bytes")
		_, _ = w.Write(content)
	})
	resp, err := p.client.Session(testIdentifier).DownloadFile(ctx, "README.md", nil)
	require.NoError(t, err)
	got, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, content, got)
	require.Equal(t, int64(len(content)), resp.ContentLength)
	require.Equal(t, "text/markdown; charset=utf-8", resp.ContentType)
	if f.Legacy {
		_, err = p.client.Session(testIdentifier).DownloadFile(ctx, "docs/README.md", nil)
		require.ErrorIs(t, err, ErrUnsupported)
		require.Equal(t, 1, p.count())
		return
	}
	resp, err = p.client.Session(testIdentifier).DownloadFile(ctx, "/mnt/data/docs/README.md", nil)
	require.NoError(t, err)
	got, err = io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, content, got)
	require.Equal(t, 2, p.count())
}

func testOpDownloadFileToPath(t *testing.T, version string, cred bool) {
	p := setup(t, version, withCred(cred))
	f := features(t, version)
	ctx := context.Background()
	content := []byte("col\n1\n2\n")
	p.handle(downloadRoute(f.Legacy), func(w http.ResponseWriter, r *http.Request) {
		wantQuery(t, r, stdQuery(version, testIdentifier))
		assert.Equal(t, "out.csv", r.PathValue("name"))
		w.Header().Set("Content-Type", "text/csv")
		_, _ = w.Write(content)
	})
	dir := t.TempDir()
	local := filepath.Join(dir, "local.csv")
	resp, err := p.client.Session(testIdentifier).DownloadFileToPath(ctx, "out.csv", local, nil)
	require.NoError(t, err)
	require.Equal(t, DownloadFileToPathResponse{Path: local, Size: int64(len(content)), ContentType: "text/csv"}, resp)
	got, err := os.ReadFile(local)
	require.NoError(t, err)
	require.Equal(t, content, got)
	st, err := os.Stat(local)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o644), st.Mode().Perm())

	// Without Overwrite an existing file is an error before any I/O and stays untouched.
	require.NoError(t, os.WriteFile(local, []byte("keep me"), 0o600))
	_, err = p.client.Session(testIdentifier).DownloadFileToPath(ctx, "out.csv", local, nil)
	require.ErrorIs(t, err, os.ErrExist)
	got, err = os.ReadFile(local)
	require.NoError(t, err)
	require.Equal(t, "keep me", string(got))
	require.Equal(t, 1, p.count())

	// With Overwrite it is replaced, with the requested mode.
	resp, err = p.client.Session(testIdentifier).DownloadFileToPath(ctx, "out.csv", local, &DownloadFileToPathOptions{Overwrite: true, Perm: 0o600})
	require.NoError(t, err)
	require.Equal(t, local, resp.Path)
	got, err = os.ReadFile(local)
	require.NoError(t, err)
	require.Equal(t, content, got)
	st, err = os.Stat(local)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temporary file is left behind")
}

func testOpDeleteFile(t *testing.T, version string, cred bool) {
	p := setup(t, version, withCred(cred))
	f := features(t, version)
	ctx := context.Background()
	p.handle("DELETE /files/{name}", func(w http.ResponseWriter, r *http.Request) {
		assert.Equal(t, "README.md", r.PathValue("name"))
		if r.URL.Query().Has("path") {
			wantQuery(t, r, stdQuery(version, testIdentifier, "path", "a/b"))
		} else {
			wantQuery(t, r, stdQuery(version, testIdentifier))
		}
		if f.Legacy {
			writeJSON(w, http.StatusOK, example(t, exLegacyBYOC, "delete_file", "response_body"))
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	_, err := p.client.Session(testIdentifier).DeleteFile(ctx, "README.md", nil)
	require.NoError(t, err)
	require.Equal(t, 1, p.requestsTo("DELETE", "/files/README.md"))
	_, err = p.client.Session(testIdentifier).DeleteFile(ctx, "a/b/README.md", nil)
	if f.Legacy {
		require.ErrorIs(t, err, ErrUnsupported)
		require.Equal(t, 1, p.count())
	} else {
		require.NoError(t, err)
		require.Equal(t, 2, p.count())
	}
}

func testOpSessionGet(t *testing.T, version string, cred bool) {
	p := setup(t, version, withCred(cred))
	ctx := context.Background()
	if !features(t, version).SessionManagement {
		_, err := p.client.Session(testIdentifier).Get(ctx, nil)
		require.ErrorIs(t, err, ErrUnsupported)
		p.requireNoIO(t)
		return
	}
	p.handle("GET /session", func(w http.ResponseWriter, r *http.Request) {
		wantQuery(t, r, stdQuery(version, "testid1"))
		writeJSON(w, http.StatusOK, example(t, exManagement, "code_interpreter_GET_session_2025-02-02-preview", "response200"))
	})
	resp, err := p.client.Session("testid1").Get(ctx, nil)
	require.NoError(t, err)
	require.Equal(t, SessionProperties{
		Identifier:     "testid1",
		CreatedAt:      mustTime(t, "2025-01-21T03:38:05.232Z"),
		LastAccessedAt: mustTime(t, "2025-01-21T03:38:05.232Z"),
		ExpiresAt:      mustTime(t, "2025-01-05T22:18:41.752Z"),
		ETag:           "9334cb07-aafd-45a0-90bd-448080a91f57",
	}, resp.SessionProperties)

	// The custom-container spelling expiresAt is read too.
	p2 := setup(t, version, withCred(cred))
	p2.handle("GET /session", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, example(t, exManagement, "custom_container_getSession_doc", "response200"))
	})
	resp, err = p2.client.Session("user-123").Get(ctx, nil)
	require.NoError(t, err)
	require.Equal(t, mustTime(t, "2026-04-30T14:30:00Z"), resp.ExpiresAt)
	require.Equal(t, "a1b2c3d4", resp.ETag)
}

func testOpSessionDelete(t *testing.T, version string, cred bool) {
	p := setup(t, version, withCred(cred))
	ctx := context.Background()
	if !features(t, version).SessionManagement {
		_, err := p.client.Session(testIdentifier).Delete(ctx, nil)
		require.ErrorIs(t, err, ErrUnsupported)
		p.requireNoIO(t)
		return
	}
	p.handle("DELETE /session", func(w http.ResponseWriter, r *http.Request) {
		wantQuery(t, r, stdQuery(version, testIdentifier))
		w.WriteHeader(http.StatusNoContent)
	})
	_, err := p.client.Session(testIdentifier).Delete(ctx, nil)
	require.NoError(t, err)
	require.Equal(t, 1, p.count())
}

func testOpSessionStop(t *testing.T, version string, cred bool) {
	p := setup(t, version, withCred(cred))
	ctx := context.Background()
	if !features(t, version).StopSession {
		_, err := p.client.Session(testIdentifier).Stop(ctx, nil)
		require.ErrorIs(t, err, ErrUnsupported)
		p.requireNoIO(t)
		return
	}
	const msg = "Session testSessionIdentifier in session pool testSessionPool stopped."
	p.handle("POST /.management/stopSession", func(w http.ResponseWriter, r *http.Request) {
		wantQuery(t, r, stdQuery(version, testIdentifier))
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, msg)
	})
	resp, err := p.client.Session(testIdentifier).Stop(ctx, nil)
	require.NoError(t, err)
	require.Equal(t, msg, resp.Message)
	require.Equal(t, 1, p.count())
}

func testOpListSessions(t *testing.T, version string, cred bool) {
	p := setup(t, version, withCred(cred))
	ctx := context.Background()
	if !features(t, version).SessionManagement {
		_, err := p.client.NewListSessionsPager(nil).NextPage(ctx)
		require.ErrorIs(t, err, ErrUnsupported)
		p.requireNoIO(t)
		return
	}
	// Page 1 has the code-interpreter shape ("sessions", expireAt), page 2
	// the custom-container shape ("value", "count", expiresAt).
	p.handle("GET /listSessions", func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Query().Get("skip") {
		case "5":
			wantQuery(t, r, map[string]string{"api-version": version, "skip": "5"})
			writeJSON(w, http.StatusOK, exampleWith(t, map[string]any{"nextLink": p.url("/listSessions?skip=300")}, exManagement, "code_interpreter_GET_listSessions_live_sample", "response200"))
		case "300":
			wantQuery(t, r, map[string]string{"api-version": version, "skip": "300"})
			writeJSON(w, http.StatusOK, exampleWith(t, map[string]any{"nextLink": nil}, exManagement, "custom_container_listSessions_doc", "response200"))
		default:
			t.Errorf("unexpected query %q", r.URL.RawQuery)
		}
	})
	pager := p.client.NewListSessionsPager(&ListSessionsOptions{Skip: 5})
	var all []SessionProperties
	pages := 0
	for pager.More() {
		page, err := pager.NextPage(ctx)
		require.NoError(t, err)
		pages++
		all = append(all, page.Sessions...)
	}
	require.Equal(t, 2, pages)
	require.Len(t, all, 3)
	require.Equal(t, SessionProperties{
		Identifier:     "my-session-001",
		CreatedAt:      mustTime(t, "2026-01-30T06:16:17.1402335Z"),
		LastAccessedAt: mustTime(t, "2026-01-30T06:16:17.1402335Z"),
		ExpiresAt:      mustTime(t, "2026-01-30T06:21:17.1400485Z"),
	}, all[0])
	require.Equal(t, "user-123", all[1].Identifier)
	require.Equal(t, mustTime(t, "2026-04-30T14:30:00Z"), all[1].ExpiresAt)
	require.Equal(t, "e5f6a7b8", all[2].ETag)

	// The spec example without Skip: no query but api-version.
	p2 := setup(t, version, withCred(cred))
	p2.handle("GET /listSessions", func(w http.ResponseWriter, r *http.Request) {
		wantQuery(t, r, map[string]string{"api-version": version})
		writeJSON(w, http.StatusOK, example(t, exManagement, "code_interpreter_GET_listSessions_2025-10-02-preview_spec_example", "response200"))
	})
	page, err := p2.client.NewListSessionsPager(nil).NextPage(ctx)
	require.NoError(t, err)
	require.Len(t, page.Sessions, 1)
	require.Equal(t, "testid1", page.Sessions[0].Identifier)
	require.Empty(t, page.NextLink)
}

func testOpGetMetadata(t *testing.T, version string, cred bool) {
	p := setup(t, version, withCred(cred))
	ctx := context.Background()
	if !features(t, version).SessionManagement {
		_, err := p.client.GetMetadata(ctx, nil)
		require.ErrorIs(t, err, ErrUnsupported)
		p.requireNoIO(t)
		return
	}
	p.handle("GET /metadata", func(w http.ResponseWriter, r *http.Request) {
		wantQuery(t, r, map[string]string{"api-version": version})
		writeJSON(w, http.StatusOK, example(t, exManagement, "code_interpreter_GET_metadata_spec_example", "response200"))
	})
	resp, err := p.client.GetMetadata(ctx, nil)
	require.NoError(t, err)
	require.Equal(t, Metadata{
		Runtimes:             []NameVersion{{Name: "node", Version: "20.2.4"}},
		PreInstalledPackages: []NameVersion{{Name: "axios", Version: "1.21.2"}},
		KernelName:           "IJavascript",
		KernelVersion:        "5.2.1",
		KernelDescription:    "Provides sync and async kernel for javascript code executions",
		KernelProjectURL:     "https://github.com/n-riesco/ijavascript",
		CreatedAt:            mustTime(t, "2025-01-05T22:18:41.495Z"),
		LastUpdatedAt:        mustTime(t, "2025-01-05T22:18:41.495Z"),
	}, resp.Metadata)
}

func testOpBeginExecute(t *testing.T, version string, cred bool) {
	p := setup(t, version, withCred(cred))
	ctx := context.Background()
	if features(t, version).Legacy {
		_, err := p.client.Session(testIdentifier).BeginExecute(ctx, "print(7*9)", nil)
		require.ErrorIs(t, err, ErrUnsupported)
		p.requireNoIO(t)
		return
	}
	const opID = "testExecutionId"
	p.handle("POST /executions", func(w http.ResponseWriter, r *http.Request) {
		wantQuery(t, r, stdQuery(version, testIdentifier))
		assert.Equal(t, opID, r.Header.Get("operation-id"))
		wantJSONBody(t, r, `{"codeInputType":"Inline","executionType":"Asynchronous","code":"print(7*9)","timeoutInSeconds":220}`)
		writeJSON(w, http.StatusAccepted, example(t, exAsyncRunning, "responses", "202", "body"),
			"operation-id", opID, "Operation-Location", "/executions/"+opID+"?api-version="+version+"&identifier="+testIdentifier)
	})
	polls := 0
	p.handle("GET /executions/{id}", func(w http.ResponseWriter, r *http.Request) {
		wantQuery(t, r, stdQuery(version, testIdentifier))
		assert.Equal(t, opID, r.PathValue("id"))
		if p.requestsTo("POST", "/executions") == 0 {
			// the look-up of a caller-chosen operation-id before the POST
			writeError(w, http.StatusNotFound, "ExecutionNotFound", "no such execution")
			return
		}
		polls++
		if polls < 3 {
			writeJSON(w, http.StatusOK, example(t, exAsyncRunning, "responses", "202", "body"))
			return
		}
		writeJSON(w, http.StatusOK, exampleWith(t, map[string]any{"id": opID, "identifier": testIdentifier}, exBYOC2410, "async_execute", "poll_response_body"))
	})
	poller, err := p.client.Session(testIdentifier).BeginExecute(ctx, "print(7*9)", &BeginExecuteOptions{ExecuteOptions: ExecuteOptions{OperationID: opID}})
	require.NoError(t, err)
	require.False(t, poller.Done())

	// The resume token round-trips: a poller made from it finishes the execution.
	token, err := poller.ResumeToken()
	require.NoError(t, err)
	require.NotEmpty(t, token)
	resumed, err := p.client.Session(testIdentifier).BeginExecute(ctx, "", &BeginExecuteOptions{ResumeToken: token})
	require.NoError(t, err)
	require.False(t, resumed.Done())

	resp, err := poller.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: time.Millisecond})
	require.NoError(t, err)
	require.Equal(t, ExecutionStatusSucceeded, resp.Status)
	require.Equal(t, opID, resp.ID)
	require.Equal(t, "Hello from async code\n", resp.Stdout)
	require.Equal(t, 380*time.Millisecond, resp.ExecutionTime)
	require.Equal(t, 3, polls)

	resp2, err := resumed.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: time.Millisecond})
	require.NoError(t, err)
	require.Equal(t, resp, resp2)
	require.Equal(t, 4, polls)
	require.Equal(t, 1, p.requestsTo("POST", "/executions"))
}

// TestBeginExecuteGeneratedOperationID checks that the poller polls the id
// the client generated and sent as operation-id.
func TestBeginExecuteGeneratedOperationID(t *testing.T) {
	p := setup(t, APIVersion20251002Preview)
	var opID string
	p.handle("POST /executions", func(w http.ResponseWriter, r *http.Request) {
		opID = r.Header.Get("operation-id")
		assert.Regexp(t, uuidV4, opID)
		writeJSON(w, http.StatusOK, exampleWith(t, map[string]any{"id": opID, "status": "NotStarted"}, exAsyncRunning, "responses", "202", "body"))
	})
	p.handle("GET /executions/{id}", func(w http.ResponseWriter, r *http.Request) {
		assert.Equal(t, opID, r.PathValue("id"))
		writeJSON(w, http.StatusOK, []byte(`{"id":"`+opID+`","identifier":"x","status":"Failed","result":{"stdout":"","stderr":"Traceback\nZeroDivisionError: division by zero\n","executionResult":null,"executionTimeInMilliseconds":3}}`))
	})
	poller, err := p.client.Session(testIdentifier).BeginExecute(context.Background(), "1/0", nil)
	require.NoError(t, err)
	resp, err := poller.PollUntilDone(context.Background(), &runtime.PollUntilDoneOptions{Frequency: time.Millisecond})
	require.NoError(t, err, "a program error is data, not a Go error")
	require.Equal(t, ExecutionStatusFailed, resp.Status)
	var execErr *ExecutionError
	require.ErrorAs(t, resp.Err(), &execErr)
	require.Equal(t, "ZeroDivisionError: division by zero", execErr.Message)
	require.Equal(t, opID, resp.ID)
}

// TestUploadFileNamesRoundTrip uploads names with spaces, '%', '#', quotes and
// non-ASCII characters and checks the multipart filename arrives intact.
func TestUploadFileNamesRoundTrip(t *testing.T) {
	for _, version := range []string{APIVersion20240202Preview, APIVersion20251002Preview} {
		for _, name := range []string{"my file #1 100%.csv", "données_温度.csv", `quote"back\slash.txt`, "a@b$c&d=e;f,g#h%i^j(k)l.txt"} {
			t.Run(version+"/"+name, func(t *testing.T) {
				p := setup(t, version)
				route := "POST /files"
				if features(t, version).Legacy {
					route = "POST /files/upload"
				}
				p.handle(route, func(w http.ResponseWriter, r *http.Request) {
					got, content := checkUpload(t, r)
					assert.Equal(t, name, got)
					assert.Equal(t, "x", string(content))
					if features(t, version).Legacy {
						writeJSON(w, http.StatusOK, example(t, exLegacySK, "sessions_python_plugin_file_upload.json@a10f7817"))
					} else {
						writeJSON(w, http.StatusOK, []byte(`{"type":"file","sizeInBytes":1,"lastModifiedAt":"2024-08-06T14:50:38Z"}`))
					}
				})
				resp, err := p.client.Session(testIdentifier).UploadFile(context.Background(), name, bytes.NewReader([]byte("x")), nil)
				require.NoError(t, err)
				if !features(t, version).Legacy {
					require.Equal(t, name, resp.Name, "a missing name in the answer falls back to the uploaded one")
				}
			})
		}
	}
}

// TestUploadFileContentTypeAndOffset checks that UploadOptions.ContentType is
// the part's type and that the upload starts at the reader's offset.
func TestUploadFileContentTypeAndOffset(t *testing.T) {
	p := setup(t, APIVersion20251002Preview)
	p.handle("POST /files", func(w http.ResponseWriter, r *http.Request) {
		mr, err := r.MultipartReader()
		if !assert.NoError(t, err) {
			return
		}
		part, err := mr.NextPart()
		if !assert.NoError(t, err) {
			return
		}
		assert.Equal(t, "text/csv", part.Header.Get("Content-Type"))
		b, _ := io.ReadAll(part)
		assert.Equal(t, "tail", string(b))
		writeJSON(w, http.StatusOK, example(t, exBYOC2410, "upload", "response_body"))
	})
	rd := strings.NewReader("headtail")
	_, err := rd.Seek(4, io.SeekStart)
	require.NoError(t, err)
	_, err = p.client.Session(testIdentifier).UploadFile(context.Background(), "x.csv", rd, &UploadFileOptions{ContentType: "text/csv"})
	require.NoError(t, err)
}

// TestUnsupportedBeforeIO lists, per api-version, every operation or option
// the version lacks and checks that it fails with ErrUnsupported before any
// request.
func TestUnsupportedBeforeIO(t *testing.T) {
	type call func(ctx context.Context, c *Client) error
	s := func(c *Client) *Session { return c.Session(testIdentifier) }
	calls := map[string]struct {
		call   call
		needed func(f featuresT) bool
	}{
		"Session.Get":                 {func(ctx context.Context, c *Client) error { _, err := s(c).Get(ctx, nil); return err }, func(f featuresT) bool { return f.SessionManagement }},
		"Session.Delete":              {func(ctx context.Context, c *Client) error { _, err := s(c).Delete(ctx, nil); return err }, func(f featuresT) bool { return f.SessionManagement }},
		"Session.Stop":                {func(ctx context.Context, c *Client) error { _, err := s(c).Stop(ctx, nil); return err }, func(f featuresT) bool { return f.StopSession }},
		"GetMetadata":                 {func(ctx context.Context, c *Client) error { _, err := c.GetMetadata(ctx, nil); return err }, func(f featuresT) bool { return f.SessionManagement }},
		"Session.GetContainerSession": {func(ctx context.Context, c *Client) error { _, err := s(c).GetContainerSession(ctx, nil); return err }, func(f featuresT) bool { return f.SessionManagement }},
		"ListContainerSessions": {func(ctx context.Context, c *Client) error {
			_, err := c.NewListContainerSessionsPager(nil).NextPage(ctx)
			return err
		}, func(f featuresT) bool { return f.SessionManagement }},
		"ListSessions": {func(ctx context.Context, c *Client) error {
			_, err := c.NewListSessionsPager(nil).NextPage(ctx)
			return err
		}, func(f featuresT) bool { return f.SessionManagement }},
		"BeginExecute": {func(ctx context.Context, c *Client) error { _, err := s(c).BeginExecute(ctx, "1", nil); return err }, func(f featuresT) bool { return !f.Legacy }},
		"BeginExecute/ResumeToken": {func(ctx context.Context, c *Client) error {
			_, err := s(c).BeginExecute(ctx, "", &BeginExecuteOptions{ResumeToken: "{}"})
			return err
		}, func(f featuresT) bool { return !f.Legacy }},
		"Execute/OutputStreamsMaxLength": {func(ctx context.Context, c *Client) error {
			_, err := s(c).Execute(ctx, "1", &ExecuteOptions{OutputStreamsMaxLength: 10})
			return err
		}, func(f featuresT) bool { return f.OutputStreamsMaxLength }},
		"Execute/ReturnJupyterFormatExecutionResult": {func(ctx context.Context, c *Client) error {
			_, err := s(c).Execute(ctx, "1", &ExecuteOptions{ReturnJupyterFormatExecutionResult: true})
			return err
		}, func(f featuresT) bool { return f.ExecutionOptions }},
		"ListFiles/Recursive": {func(ctx context.Context, c *Client) error {
			_, err := s(c).NewListFilesPager(&ListFilesOptions{Recursive: true}).NextPage(ctx)
			return err
		}, func(f featuresT) bool { return f.Recursive }},
		"ListFiles/Path": {func(ctx context.Context, c *Client) error {
			_, err := s(c).NewListFilesPager(&ListFilesOptions{Path: "sub"}).NextPage(ctx)
			return err
		}, func(f featuresT) bool { return !f.Legacy }},
		"UploadFile/SubDir": {func(ctx context.Context, c *Client) error {
			_, err := s(c).UploadFile(ctx, "sub/x", strings.NewReader("x"), nil)
			return err
		}, func(f featuresT) bool { return !f.Legacy }},
		"GetFile/SubDir":      {func(ctx context.Context, c *Client) error { _, err := s(c).GetFile(ctx, "sub/x", nil); return err }, func(f featuresT) bool { return !f.Legacy }},
		"DownloadFile/SubDir": {func(ctx context.Context, c *Client) error { _, err := s(c).DownloadFile(ctx, "sub/x", nil); return err }, func(f featuresT) bool { return !f.Legacy }},
		"DownloadFileToPath/SubDir": {func(ctx context.Context, c *Client) error {
			_, err := s(c).DownloadFileToPath(ctx, "sub/x", filepath.Join(t.TempDir(), "x"), nil)
			return err
		}, func(f featuresT) bool { return !f.Legacy }},
		"DeleteFile/SubDir": {func(ctx context.Context, c *Client) error { _, err := s(c).DeleteFile(ctx, "sub/x", nil); return err }, func(f featuresT) bool { return !f.Legacy }},
	}
	for _, version := range allVersions {
		f := features(t, version)
		for name, c := range calls {
			if c.needed(f) {
				continue
			}
			t.Run(version+"/"+name, func(t *testing.T) {
				p := setup(t, version, withCredential())
				err := c.call(context.Background(), p.client)
				require.ErrorIs(t, err, ErrUnsupported)
				require.Contains(t, err.Error(), version)
				p.requireNoIO(t)
			})
		}
	}
}

// TestExecuteInvalidArgumentsBeforeIO checks the argument checks of Execute and BeginExecute.
func TestExecuteInvalidArgumentsBeforeIO(t *testing.T) {
	cases := []struct {
		name string
		code string
		opts *ExecuteOptions
	}{
		{"empty code", "", nil},
		{"blank code", " \n\t", nil},
		{"timeout over 220s", "1", &ExecuteOptions{Timeout: 221 * time.Second}},
		{"negative timeout", "1", &ExecuteOptions{Timeout: -time.Second}},
		{"negative OutputStreamsMaxLength", "1", &ExecuteOptions{OutputStreamsMaxLength: -1}},
	}
	for _, version := range allVersions {
		for _, c := range cases {
			t.Run(version+"/"+c.name, func(t *testing.T) {
				p := setup(t, version)
				_, err := p.client.Session(testIdentifier).Execute(context.Background(), c.code, c.opts)
				require.Error(t, err)
				if !features(t, version).Legacy {
					bo := &BeginExecuteOptions{}
					if c.opts != nil {
						bo.ExecuteOptions = *c.opts
					}
					_, err = p.client.Session(testIdentifier).BeginExecute(context.Background(), c.code, bo)
					require.Error(t, err)
				}
				p.requireNoIO(t)
			})
		}
	}
}

// TestExecuteTimeoutRoundsUp checks timeoutInSeconds for sub-second and odd timeouts.
func TestExecuteTimeoutRoundsUp(t *testing.T) {
	for _, c := range []struct {
		timeout time.Duration
		want    float64
	}{{0, 220}, {1500 * time.Millisecond, 2}, {time.Second, 1}, {time.Nanosecond, 1}, {220 * time.Second, 220}} {
		p := setup(t, APIVersion20250202Preview)
		p.handle("POST /executions", func(w http.ResponseWriter, r *http.Request) {
			var body map[string]any
			assert.NoError(t, jsonDecode(r.Body, &body))
			assert.Equal(t, c.want, body["timeoutInSeconds"], "timeout %v", c.timeout)
			writeJSON(w, http.StatusOK, example(t, exSync2510, "responses", "200", "body"))
		})
		_, err := p.client.Session(testIdentifier).Execute(context.Background(), "1", &ExecuteOptions{Timeout: c.timeout})
		require.NoError(t, err)
	}
}
