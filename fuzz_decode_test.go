package azsessions

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
)

// bodyTransport answers every request with 200 and the same JSON body.
type bodyTransport struct{ body []byte }

func (b bodyTransport) Do(req *http.Request) (*http.Response, error) {
	return &http.Response{
		StatusCode:    http.StatusOK,
		Header:        http.Header{"Content-Type": {"application/json; charset=utf-8"}},
		Body:          io.NopCloser(bytes.NewReader(b.body)),
		ContentLength: int64(len(b.body)),
		Request:       req,
	}, nil
}

// FuzzDecodeResponses feeds arbitrary bytes, as the answer of every
// decoding operation (file list, file, upload answer, session, session
// list, metadata, stop), to the client of a legacy and of the newest
// api-versions: decoding never panics and what it returns is consistent.
// (Executions are fuzzed by FuzzDecodeExecution.)
func FuzzDecodeResponses(f *testing.F) {
	for _, s := range []string{
		// new file list, file and upload answer
		`{"value":[{"name":"a.csv","type":"File","contentType":"text/csv","sizeInBytes":3,"lastModifiedAt":"2025-01-02T03:04:05Z"},{"name":"sub","type":"directory","directory":"x"}],"nextLink":"https://h/p/files?skip=1"}`,
		`{"value":[{"name":"..","type":"directory","directory":"../.."}]}`,
		`{"name":"a.csv","type":"file","sizeInBytes":-1,"lastModifiedAt":"not a time"}`,
		// legacy file list and upload answer
		`{"$id":"1","value":[{"$id":"2","properties":{"$id":"3","filename":"/mnt/data/sub/x.csv","size":12,"lastModifiedTime":"2024-08-06T14:50:38.6431849Z"}}]}`,
		`{"value":[{"properties":{"filename":"/mnt/data"}}]}`,
		`{"value":[]}`,
		// session, session lists (code interpreter and custom container pools)
		`{"identifier":"abc","createdAt":"2025-01-02T03:04:05Z","lastAccessedAt":"2025-01-02T03:05:05Z","expireAt":"2025-01-02T03:10:05Z","etag":"e"}`,
		`{"identifier":"abc","expiresAt":"2025-01-02T03:10:05Z"}`,
		`{"sessions":[{"identifier":"a"},{"identifier":"b","expireAt":"2025-01-02T03:10:05Z"}],"nextLink":"n"}`,
		`{"value":[{"identifier":"a"}],"sessions":null}`,
		// metadata
		`{"runtimes":[{"name":"python","version":"3.12.4"}],"preInstalledPackages":[{"name":"numpy","version":"2.1.0"}],"jupyterKernel":{"name":"python3","version":"6.29","description":"IPython"},"createdAt":"2025-01-02T03:04:05Z"}`,
		`{"jupyterKernel":null,"runtimes":null}`,
		`null`, `[]`, `""`, `{}`, `{`, ``, "\xef\xbb\xbf{}", `{"value":null}`, `{"value":[null]}`, `{"value":{}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, version := range []string{APIVersion20240202Preview, APIVersion20241002Preview, APIVersion20251002Preview} {
			opts := &ClientOptions{}
			opts.APIVersion = version
			opts.Transport = bodyTransport{body}
			opts.Retry.MaxRetries = -1
			c, err := NewClientWithNoCredential("https://h.example/p", opts)
			if err != nil {
				t.Fatal(err)
			}
			legacy := c.features.Legacy
			sess := c.Session("abcd")
			ctx := context.Background()
			checkFile := func(what string, f File) {
				if f.Type != FileTypeFile && f.Type != FileTypeDirectory {
					t.Fatalf("%s %s: type %q", version, what, f.Type)
				}
				if !strings.HasPrefix(f.FullPath(), "/") {
					t.Fatalf("%s %s: FullPath %q is not absolute", version, what, f.FullPath())
				}
				if legacy && f.IsDir() {
					t.Fatalf("%s %s: a legacy listing has no directories", version, what)
				}
			}
			if page, err := sess.NewListFilesPager(nil).NextPage(ctx); err == nil {
				for _, f := range page.Files {
					checkFile("ListFiles", f)
				}
				if legacy && page.NextLink != "" {
					t.Fatalf("legacy listings have no nextLink")
				}
			}
			name := "sub/x.csv"
			if legacy {
				name = "x.csv"
			}
			if r, err := sess.GetFile(ctx, name, nil); err == nil {
				checkFile("GetFile", r.File)
			}
			if r, err := sess.UploadFile(ctx, "x.csv", strings.NewReader("x"), nil); err == nil {
				checkFile("UploadFile", r.File)
				if !legacy && r.Name == "" {
					t.Fatalf("%s: UploadFile answer without a name", version)
				}
			}
			if legacy {
				continue
			}
			if c.features.SessionManagement {
				_, _ = sess.Get(ctx, nil)
				if page, err := c.NewListSessionsPager(nil).NextPage(ctx); err == nil {
					for _, s := range page.Sessions {
						_ = s.ExpiresAt
					}
				}
				if m, err := c.GetMetadata(ctx, nil); err == nil {
					_ = m.KernelName
				}
			}
			if c.features.StopSession {
				if r, err := sess.Stop(ctx, nil); err == nil && r.Message != string(body) {
					t.Fatalf("Stop message %q, want the body", r.Message)
				}
			}
		}
	})
}
