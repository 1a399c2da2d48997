package azsessions

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path"
	"strings"
	"sync"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"

	"github.com/azsessions/azsessions/internal/wire"
)

// FuzzSplitFileName: a name splitFileName accepts has no "." or ".." or empty
// segment, a non-empty base without "/", and joins back to the name relative
// to /mnt/data; a rejected name wraps ErrInvalidFileName.
func FuzzSplitFileName(f *testing.F) {
	for _, s := range []string{
		"x.csv", "sub/dir/x.csv", "/mnt/data/sub/x.csv", "/mnt/data/x", "", "..", ".", "../x", "a/../b",
		"/etc/passwd", "a//b", "a/", "/mnt/data", "/mnt/data/", "/mnt/database/x", "my file #1 100%.csv",
		"données_温度.csv", "a\x00b", "...", "..a", "a..", "/mnt/data/../etc", "\\..\\x", "/", "//", "mnt/data/x",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		dir, base, err := splitFileName(name)
		if err != nil {
			if !errors.Is(err, ErrInvalidFileName) {
				t.Fatalf("splitFileName(%q): error %v does not wrap ErrInvalidFileName", name, err)
			}
			return
		}
		rel := name
		if strings.HasPrefix(name, "/") {
			rel = strings.TrimPrefix(strings.TrimPrefix(name, wire.DataDir), "/")
		}
		if base == "" || strings.Contains(base, "/") {
			t.Fatalf("splitFileName(%q): bad base %q", name, base)
		}
		joined := path.Join(dir, base)
		if dir == "" {
			joined = base
		}
		if joined != rel {
			t.Fatalf("splitFileName(%q) = %q, %q: joins to %q, want %q", name, dir, base, joined, rel)
		}
		if path.Clean(joined) != joined || strings.HasPrefix(joined, "/") {
			t.Fatalf("splitFileName(%q): %q is not a clean relative path", name, joined)
		}
		for _, seg := range strings.Split(joined, "/") {
			if seg == "" || seg == "." || seg == ".." {
				t.Fatalf("splitFileName(%q): segment %q in %q", name, seg, joined)
			}
		}
		if strings.ContainsRune(joined, 0) {
			t.Fatalf("splitFileName(%q): NUL accepted", name)
		}
		full := path.Join(wire.DataDir, joined)
		if !strings.HasPrefix(full, wire.DataDir+"/") {
			t.Fatalf("splitFileName(%q): %q escapes %s", name, full, wire.DataDir)
		}
	})
}

// decodeAsClient decodes body as the client decodes an execution answer
// (runtime.UnmarshalAsJSON over an *http.Response) and exercises every
// accessor of the result.
func decodeAsClient(t *testing.T, body []byte, legacy bool) {
	resp := &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(bytes.NewReader(body))}
	var e Execution
	if legacy {
		var w wire.LegacyExecuteResponse
		if runtime.UnmarshalAsJSON(resp, &w) != nil {
			return
		}
		e = executionFromWire(legacyState(w, "id"))
	} else {
		var w wire.ExecuteResponse
		if runtime.UnmarshalAsJSON(resp, &w) != nil {
			return
		}
		e = executionFromWire(w)
	}
	_ = e.Err()
	_ = e.Truncated()
	_ = e.Status.Terminal()
	if img, ok := e.Image(); ok && img.Data == nil {
		t.Fatalf("Image ok without data for %q", body)
	}
	if e.Status == ExecutionStatusFailed || e.Status == ExecutionStatusCanceled {
		var ee *ExecutionError
		if !errors.As(e.Err(), &ee) {
			t.Fatalf("Err of a %s execution is %v", e.Status, e.Err())
		}
		if strings.Contains(ee.Message, "\n") {
			t.Fatalf("message %q has a newline", ee.Message)
		}
	} else if e.Err() != nil {
		t.Fatalf("Err of a %s execution is %v", e.Status, e.Err())
	}
}

// FuzzDecodeExecution: decoding arbitrary bytes as a legacy or new execution
// answer never panics, and the accessors stay consistent.
func FuzzDecodeExecution(f *testing.F) {
	seeds := []string{
		`{"$id":"1","properties":{"$id":"2","status":"Success","stdout":"","stderr":"","result":42,"executionTimeInMilliseconds":8}}`,
		`{"properties":{"status":"Failure","stderr":` + jsonString(syntaxErrorStderr) + `,"result":null}}`,
		`{"properties":{"status":"Success","executionResult":{"type":"image","format":"png","base64_data":"iVBORw0KGgo="}}}`,
		`{"id":"a","identifier":"b","executionType":"Synchronous","status":"Succeeded","result":{"stdout":"63/n","stderr":"","executionResult":"","executionTimeInMilliseconds":4}}`,
		`{"id":"a","identifier":"b","status":"0","result":{"stdout":"x\n","stderr":"","executionTimeInMilliseconds":2}}`,
		`{"id":"a","status":"Failed","error":{"error":{"code":"Timeout","message":"m"}}}`,
		`{"id":"a","status":"Running"}`,
		`{"result":{"executionResult":{"type":"image","base64_data":"!!"}}}`,
		`{"properties":{"executionTimeInMilliseconds":-9223372036854775808}}`,
		`{"result":{"executionTimeInMilliseconds":9223372036854775807}}`,
		`null`, `[]`, `""`, `{"properties":null}`, `{"result":null}`, "\xef\xbb\xbf{}", `{`, ``,
		`{"status":"canceled","result":{"stderr":"\n\n  \r\n"}}`,
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		decodeAsClient(t, body, true)
		decodeAsClient(t, body, false)
	})
}

// FuzzIdentifierRoundTrip: any identifier valid on 2025-10-02-preview
// arrives at the server byte-identical (in the identifier query parameter of
// a session-scoped request and of the execution look-up path's query).
func FuzzIdentifierRoundTrip(f *testing.F) {
	for _, s := range []string{
		"abcd", "testSessionIdentifier", "ABCXYZabcxyz0189_|{}[]:\";'<>?/.,@#$%^&*()-+=!~`",
		"a/b?c=d&identifier=e#f", "%41%2F%zz", "+++=", "a;b;c", "....", "////", "%00%", "&&&&", "====",
	} {
		f.Add(s)
	}
	var mu sync.Mutex
	var got string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		got = r.URL.Query().Get("identifier")
		if vs := r.URL.Query()["identifier"]; len(vs) != 1 {
			got = "<" + strings.Join(vs, "|") + ">"
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	opts := &ClientOptions{}
	opts.Transport = srv.Client()
	opts.Retry.MaxRetries = -1
	client, err := NewClientWithNoCredential(srv.URL+"/pool", opts)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, id string) {
		if wire.ValidateIdentifier(APIVersion20251002Preview, id) != nil {
			return
		}
		mu.Lock()
		got = ""
		mu.Unlock()
		if _, err := client.Session(id).Delete(context.Background(), nil); err != nil {
			t.Fatalf("Delete with %q: %v", id, err)
		}
		mu.Lock()
		defer mu.Unlock()
		if got != id {
			t.Fatalf("server saw identifier %q, want %q", got, id)
		}
	})
}
