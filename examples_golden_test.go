package azsessions_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/stretchr/testify/require"

	"github.com/azsessions/azsessions"
	"github.com/azsessions/azsessions/internal/specexample"
)

// goldenNotExposed are the response fields the client's public types do not
// carry, each with the reason it is not a loss.
var goldenNotExposed = map[string]string{
	// The caller chose it: Execute sends Synchronous, BeginExecute
	// Asynchronous (and 2025-02-02-preview CodeExecution_Execute_Sync.json
	// echoes Asynchronous for a synchronous request).
	"executionType": "echo of the request's executionType",
}

// goldenServer answers every request with the current example's response and
// records the request.
type goldenServer struct {
	mu      sync.Mutex
	status  int
	headers map[string]string
	body    []byte
	ctype   string
	reqs    []*http.Request
}

func (g *goldenServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	g.mu.Lock()
	g.reqs = append(g.reqs, r)
	status, headers, body, ctype := g.status, g.headers, g.body, g.ctype
	g.mu.Unlock()
	for k, v := range headers {
		w.Header().Set(k, v)
	}
	if ctype != "" && status != http.StatusNoContent {
		w.Header().Set("Content-Type", ctype)
	}
	if id := r.Header.Get("operation-id"); r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/executions") && id != "" {
		// The service answers POST executions with the execution's id = the
		// operation-id sent (the examples use a fixed testExecutionId for
		// both); the client refuses another execution's answer.
		var m map[string]json.RawMessage
		if json.Unmarshal(body, &m) == nil && m["id"] != nil {
			m["id"], _ = json.Marshal(id)
			body, _ = json.Marshal(m)
			w.Header().Set("operation-id", id)
		}
	}
	w.WriteHeader(status)
	if status != http.StatusNoContent {
		_, _ = w.Write(body)
	}
}

func (g *goldenServer) serve(status int, headers map[string]string, body []byte, ctype string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.status, g.headers, g.body, g.ctype, g.reqs = status, headers, body, ctype, nil
}

func (g *goldenServer) requests() []*http.Request {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]*http.Request(nil), g.reqs...)
}

// leaves returns the path of every leaf of a JSON value ("a.b", "v[].c").
func leaves(v any, prefix string, out map[string]bool) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			leaves(e, p, out)
		}
	case []any:
		for _, e := range x {
			leaves(e, prefix+"[]", out)
		}
	default:
		out[prefix] = true
	}
}

// checker compares a decoded public value with the example's JSON field by
// field and records which fields it compared.
type checker struct {
	t    *testing.T
	seen map[string]bool
}

func (c *checker) mark(p string) { c.seen[p] = true }

// str returns m[k] as a string and marks path p.
func (c *checker) str(m map[string]any, k, p string) (string, bool) {
	c.t.Helper()
	v, ok := m[k]
	if !ok {
		return "", false
	}
	c.mark(p)
	if v == nil {
		return "", true
	}
	s, isStr := v.(string)
	require.True(c.t, isStr, "%s is %T", p, v)
	return s, true
}

func (c *checker) time(m map[string]any, k, p string, got time.Time) {
	c.t.Helper()
	s, ok := c.str(m, k, p)
	if !ok {
		require.True(c.t, got.IsZero(), "%s absent but decoded as %v", p, got)
		return
	}
	want, err := time.Parse(time.RFC3339Nano, s)
	require.NoError(c.t, err, p)
	require.True(c.t, want.Equal(got), "%s: want %v, got %v", p, want, got)
}

func (c *checker) equal(m map[string]any, k, p string, got string) {
	c.t.Helper()
	want, ok := c.str(m, k, p)
	if !ok {
		require.Empty(c.t, got, "%s absent", p)
		return
	}
	require.Equal(c.t, want, got, p)
}

func (c *checker) number(m map[string]any, k, p string, got int64) {
	c.t.Helper()
	v, ok := m[k]
	if !ok {
		require.Zero(c.t, got, "%s absent", p)
		return
	}
	c.mark(p)
	f, isNum := v.(float64)
	require.True(c.t, isNum, "%s is %T", p, v)
	require.Equal(c.t, int64(f), got, p)
}

func (c *checker) execution(m map[string]any, e azsessions.Execution, sentID string) {
	c.t.Helper()
	id, _ := c.str(m, "id", "id")
	if id == "" || sentID != "" {
		// CodeExecution_Execute_Result_NaN.json answers "id": ""; through
		// Execute the id is the operation-id sent (echoed by goldenServer)
		id = sentID
	}
	require.Equal(c.t, id, e.ID)
	c.equal(m, "identifier", "identifier", e.Identifier)
	status, _ := c.str(m, "status", "status")
	require.Equal(c.t, azsessions.ExecutionStatus(status), e.Status)
	r, ok := m["result"].(map[string]any)
	if !ok {
		require.Nil(c.t, e.Result, "no result while %s", status)
		require.Empty(c.t, e.Stdout)
		require.Zero(c.t, e.ExecutionTime)
		return
	}
	c.equal(r, "stdout", "result.stdout", e.Stdout)
	c.equal(r, "stderr", "result.stderr", e.Stderr)
	if raw, ok := r["executionResult"]; ok {
		c.mark("result.executionResult")
		want, err := json.Marshal(raw)
		require.NoError(c.t, err)
		require.JSONEq(c.t, string(want), string(e.Result), "executionResult")
	} else {
		require.Empty(c.t, e.Result, "executionResult absent")
	}
	var ms int64
	if v, ok := r["executionTimeInMilliseconds"].(float64); ok {
		ms = int64(v)
		c.mark("result.executionTimeInMilliseconds")
	}
	require.Equal(c.t, time.Duration(ms)*time.Millisecond, e.ExecutionTime)
}

func (c *checker) file(m map[string]any, prefix, listed string, f azsessions.File) {
	c.t.Helper()
	c.equal(m, "name", prefix+"name", f.Name)
	typ, _ := c.str(m, "type", prefix+"type")
	require.Equal(c.t, strings.EqualFold(typ, "directory"), f.IsDir(), "type %q", typ)
	c.equal(m, "contentType", prefix+"contentType", f.ContentType)
	c.number(m, "sizeInBytes", prefix+"sizeInBytes", f.SizeInBytes)
	c.time(m, "lastModifiedAt", prefix+"lastModifiedAt", f.LastModifiedAt)
	dir, _ := c.str(m, "directory", prefix+"directory")
	want := path.Join(listed, dir)
	if want == "." {
		want = ""
	}
	require.Equal(c.t, want, f.Directory, "Directory: the listed path %q joined with the entry's directory %q", listed, dir)
}

func (c *checker) session(m map[string]any, prefix string, s azsessions.SessionProperties) {
	c.t.Helper()
	c.equal(m, "identifier", prefix+"identifier", s.Identifier)
	c.time(m, "createdAt", prefix+"createdAt", s.CreatedAt)
	c.time(m, "lastAccessedAt", prefix+"lastAccessedAt", s.LastAccessedAt)
	c.time(m, "expireAt", prefix+"expireAt", s.ExpiresAt)
	c.equal(m, "etag", prefix+"etag", s.ETag)
}

func (c *checker) nameVersions(list any, prefix string, got []azsessions.NameVersion) {
	c.t.Helper()
	items, _ := list.([]any)
	require.Len(c.t, got, len(items), prefix)
	for i, it := range items {
		m := it.(map[string]any)
		c.equal(m, "name", prefix+"[].name", got[i].Name)
		c.equal(m, "version", prefix+"[].version", got[i].Version)
	}
}

// TestSpecExamplesDecode is the client's golden test: every response of the
// three swaggers' examples (testdata/examples/spec, 45 files) is served by a
// fake as written, the client's public method for the operation decodes it,
// and every field of the example's JSON is compared with the public value
// (or is listed in goldenNotExposed with its reason): nothing is lost.
func TestSpecExamplesDecode(t *testing.T) {
	examples, err := specexample.Load(filepath.Join("testdata", "examples", "spec"))
	require.NoError(t, err)
	require.Len(t, examples, 45)
	g := &goldenServer{}
	srv := httptest.NewServer(g)
	defer srv.Close()
	ops := map[string]int{}
	for _, x := range examples {
		t.Run(x.File, func(t *testing.T) {
			ops[x.OperationID]++
			goldenCheck(t, srv, g, x)
		})
	}
	keys := make([]string, 0, len(ops))
	for k := range ops {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	require.Equal(t, []string{
		"CodeExecution_Execute", "CodeExecution_Get", "ListSessions_Get", "SessionManagement_Delete",
		"SessionManagement_Get", "SessionPoolManagement_StopSession", "SessionPoolMetadata_Get",
		"SessionResourceFiles_Delete", "SessionResourceFiles_Get", "SessionResourceFiles_GetContent",
		"SessionResourceFiles_List", "SessionResourceFiles_Upload",
	}, keys, "every operation of the examples is decoded")
}

func goldenCheck(t *testing.T, srv *httptest.Server, g *goldenServer, x specexample.Example) {
	var status int
	var resp struct {
		Headers map[string]string `json:"headers"`
		Body    json.RawMessage   `json:"body"`
	}
	for s, r := range x.Responses {
		_, err := fmt.Sscan(s, &status)
		require.NoError(t, err)
		resp = r
	}
	client, err := azsessions.NewClientWithNoCredential(srv.URL, &azsessions.ClientOptions{
		ClientOptions: azcore.ClientOptions{APIVersion: x.Version, Transport: srv.Client()},
	})
	require.NoError(t, err)
	ident := x.Param("identifier")
	if ident == "" {
		ident = "testSessionIdentifier"
	}
	sess := client.Session(ident)
	ctx := context.Background()

	// The body as data: a JSON object, a JSON string (file content, the
	// stopSession text) or nothing.
	var body any
	var raw []byte
	ctype := "application/json"
	if len(resp.Body) > 0 {
		require.NoError(t, json.Unmarshal(resp.Body, &body))
		if s, ok := body.(string); ok {
			raw = []byte(s)
			ctype = "text/plain; charset=utf-8"
			if x.OperationID == "SessionResourceFiles_GetContent" {
				ctype = "application/octet-stream"
			}
		} else {
			raw = resp.Body
		}
	}
	obj, _ := body.(map[string]any)
	all := map[string]bool{}
	if obj != nil {
		leaves(obj, "", all)
	}
	c := &checker{t: t, seen: map[string]bool{}}
	serve := func(st int) { g.serve(st, resp.Headers, raw, ctype) }
	// The directory the example names; "/" in the 2025-02-02-preview upload
	// example is the data directory, which the client names "".
	listed := strings.TrimPrefix(x.Param("path"), "/")

	switch x.OperationID {
	case "CodeExecution_Execute", "CodeExecution_Get":
		// GET executions/{id} decodes every execution body, the running
		// ones and a Shell pool's too.
		opID := x.Param("executionId")
		if opID == "" {
			opID = "testExecutionId"
		}
		serve(http.StatusOK)
		got, err := sess.GetExecution(ctx, opID, nil)
		require.NoError(t, err)
		c.execution(obj, got.Execution, opID)
		reqs := g.requests()
		require.Equal(t, http.MethodGet, reqs[len(reqs)-1].Method)
		require.True(t, strings.HasSuffix(reqs[len(reqs)-1].URL.Path, "/executions/"+opID), reqs[len(reqs)-1].URL.Path)

		// A finished synchronous execution also through Execute, with the
		// example's own status code (200, or 202 in one 2024-10 example).
		var req struct {
			Code             string `json:"code"`
			TimeoutInSeconds int    `json:"timeoutInSeconds"`
		}
		if x.OperationID == "CodeExecution_Execute" {
			require.NoError(t, json.Unmarshal(x.Parameters["codeExecutionRequest"], &req))
		}
		if st, _ := obj["status"].(string); req.Code != "" && st != "Running" {
			serve(status)
			got, err := sess.Execute(ctx, req.Code, &azsessions.ExecuteOptions{Timeout: time.Duration(req.TimeoutInSeconds) * time.Second})
			require.NoError(t, err)
			reqs := g.requests()
			post := reqs[len(reqs)-1]
			require.Equal(t, http.MethodPost, post.Method)
			require.True(t, strings.HasSuffix(post.URL.Path, "/executions"), post.URL.Path)
			c.execution(obj, got.Execution, post.Header.Get("operation-id"))
		}
	case "SessionResourceFiles_List":
		serve(status)
		page, err := sess.NewListFilesPager(&azsessions.ListFilesOptions{Path: listed, Recursive: x.Param("recursive") == "true"}).NextPage(ctx)
		require.NoError(t, err)
		items, _ := obj["value"].([]any)
		require.Len(t, page.Files, len(items))
		for i, it := range items {
			c.file(it.(map[string]any), "value[].", listed, page.Files[i])
		}
		c.equal(obj, "nextLink", "nextLink", page.NextLink)
	case "SessionResourceFiles_Get":
		serve(status)
		got, err := sess.GetFile(ctx, path.Join(listed, x.Param("name")), nil)
		require.NoError(t, err)
		c.file(obj, "", listed, got.File)
	case "SessionResourceFiles_Upload":
		serve(status)
		got, err := sess.UploadFile(ctx, path.Join(listed, "testfile.yaml"), bytes.NewReader([]byte(x.Param("file"))), nil)
		require.NoError(t, err)
		c.file(obj, "", listed, got.File)
	case "SessionResourceFiles_GetContent":
		serve(status)
		got, err := sess.DownloadFile(ctx, path.Join(listed, x.Param("name")), nil)
		require.NoError(t, err)
		content, err := io.ReadAll(got.Body)
		require.NoError(t, err)
		require.NoError(t, got.Body.Close())
		require.Equal(t, raw, content)
	case "SessionResourceFiles_Delete":
		serve(status)
		_, err := sess.DeleteFile(ctx, path.Join(listed, x.Param("name")), nil)
		require.NoError(t, err)
		require.Equal(t, http.MethodDelete, g.requests()[0].Method)
	case "SessionManagement_Get":
		serve(status)
		got, err := sess.Get(ctx, nil)
		require.NoError(t, err)
		c.session(obj, "", got.SessionProperties)
	case "SessionManagement_Delete":
		serve(status)
		_, err := sess.Delete(ctx, nil)
		require.NoError(t, err)
	case "SessionPoolManagement_StopSession":
		serve(status)
		got, err := sess.Stop(ctx, nil)
		require.NoError(t, err)
		require.Equal(t, string(raw), got.Message)
	case "ListSessions_Get":
		serve(status)
		page, err := client.NewListSessionsPager(nil).NextPage(ctx)
		require.NoError(t, err)
		items, _ := obj["sessions"].([]any)
		require.Len(t, page.Sessions, len(items))
		for i, it := range items {
			c.session(it.(map[string]any), "sessions[].", page.Sessions[i])
		}
		c.equal(obj, "nextLink", "nextLink", page.NextLink)
	case "SessionPoolMetadata_Get":
		serve(status)
		got, err := client.GetMetadata(ctx, nil)
		require.NoError(t, err)
		c.nameVersions(obj["runtimes"], "runtimes", got.Runtimes)
		c.nameVersions(obj["preInstalledPackages"], "preInstalledPackages", got.PreInstalledPackages)
		c.time(obj, "createdAt", "createdAt", got.CreatedAt)
		c.time(obj, "lastUpdatedAt", "lastUpdatedAt", got.LastUpdatedAt)
		k, _ := obj["jupyterKernel"].(map[string]any)
		c.equal(k, "name", "jupyterKernel.name", got.KernelName)
		c.equal(k, "version", "jupyterKernel.version", got.KernelVersion)
		c.equal(k, "description", "jupyterKernel.description", got.KernelDescription)
		c.equal(k, "projectUrl", "jupyterKernel.projectUrl", got.KernelProjectURL)
	default:
		t.Fatalf("no client call for operation %s", x.OperationID)
	}

	// Every request named the session (when the operation has one) and the
	// example's api-version.
	for _, r := range g.requests() {
		require.Equal(t, x.Version, r.URL.Query().Get("api-version"), r.URL.String())
		if x.Param("identifier") != "" {
			require.Equal(t, ident, r.URL.Query().Get("identifier"))
		}
	}
	var lost []string
	for p := range all {
		if !c.seen[p] && goldenNotExposed[p] == "" {
			lost = append(lost, p)
		}
	}
	sort.Strings(lost)
	require.Empty(t, lost, "fields of the example that no public value carries")
}
