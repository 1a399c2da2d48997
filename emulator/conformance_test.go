package emulator_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/azsessions/azsessions/emulator"
	"github.com/azsessions/azsessions/internal/specexample"
	"github.com/azsessions/azsessions/internal/wire"
)

// specExample is one example file of the swaggers (testdata/examples/spec),
// read as data: nothing of internal/wire builds the expectations.
type specExample = specexample.Example

func loadSpecExamples(t *testing.T) []specExample {
	t.Helper()
	out, err := specexample.Load(filepath.Join("..", "testdata", "examples", "spec"))
	require.NoError(t, err)
	require.Len(t, out, 45, "every example of the three swaggers found in the public index")
	return out
}

// exampleKernel answers the cells of the spec examples as the sandbox's
// kernel reports them (value JSON plus IPython's text/plain; see
// internal/sandbox's driver tests for the real interpreter). The handler's
// contract mapping is what the conformance test checks. Cells wait while
// hold is set, so that an asynchronous execution is seen Running.
type exampleKernel struct {
	mu   sync.Mutex
	hold chan struct{}
}

func (k *exampleKernel) gate() chan struct{} {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.hold
}

func (k *exampleKernel) run(ctx context.Context, code string) emulator.ExecutionResult {
	if g := k.gate(); g != nil {
		select {
		case <-g:
		case <-ctx.Done():
		}
	}
	text := func(s string) *string { return &s }
	switch code {
	case "print(7*9)":
		return emulator.ExecutionResult{Stdout: "63\n", Value: json.RawMessage(`""`)}
	case "a = float('nan');a":
		return emulator.ExecutionResult{Value: json.RawMessage(`null`), Text: text("nan")}
	case "a = None;a":
		return emulator.ExecutionResult{Value: json.RawMessage(`null`)}
	case `a = "nan";a`:
		return emulator.ExecutionResult{Value: json.RawMessage(`"nan"`), Text: text("'nan'")}
	}
	return emulator.ExecutionResult{Status: emulator.Failed, Stderr: "unknown cell"}
}

// deviation is a documented difference between an example and the emulator.
type deviation struct {
	status int    // the emulator's status
	code   string // its error code, for an error answer
	why    string
}

// deviations lists every example the emulator answers differently, with
// the reason; each is asserted, so that a change shows up.
var deviations = map[string]deviation{
	"2024-10-02-preview/CodeExecution_Execute_Async_Completed.json": {status: http.StatusOK,
		why: "this example (972de790) keeps the old swagger's 202; the regenerated 2024-10-02-preview swagger (1230c993) and the other execute examples of the version answer 200 (internal/wire.Lookup)"},
	"2025-10-02-preview/CodeExecution_Execute_ShellCommand.json": {status: http.StatusBadRequest, code: wire.CodeSessionRequestValidationFailed,
		why: "Shell pools only, and this pool is PythonLTS (the default); TestShellSpecExamples replays them on a Shell pool (Options.PoolType)"},
	"2025-10-02-preview/CodeExecution_Execute_ShellExecCommandAndArgs.json": {status: http.StatusBadRequest, code: wire.CodeSessionRequestValidationFailed,
		why: "Shell pools only, and this pool is PythonLTS (the default); TestShellSpecExamples replays them on a Shell pool (Options.PoolType)"},
}

// TestSpecExamplesConformance replays every example of the three swaggers
// through emulator.Handler and compares the answer with the example: status,
// key set and JSON types of the body (recursively; array items by kind),
// and the header names the example shows. Values that are random or
// time-based are not compared.
func TestSpecExamplesConformance(t *testing.T) {
	examples := loadSpecExamples(t)
	seen := map[string]bool{}
	for _, x := range examples {
		t.Run(x.File, func(t *testing.T) {
			k := &exampleKernel{}
			exec := infoExecutor{emulator.ScriptedExecutor(k.run), emulator.Info{Interpreter: "/usr/bin/python3", PythonVersion: "3.12.3", Sandbox: "scripted",
				Packages: map[string]string{"ipython": "8.20.0", "numpy": "1.26.4"}}}
			h, err := emulator.NewHandler(emulator.Options{Executor: exec, PoolName: "testSessionPool"})
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, h.Close()) })
			c := &conformanceClient{t: t, h: h, x: x}

			var wantStatus int
			for s := range x.Responses {
				_, err := fmt.Sscan(s, &wantStatus)
				require.NoError(t, err)
			}
			want := x.Responses[fmt.Sprint(wantStatus)]
			got := c.replay(k)
			if d, ok := deviations[x.File]; ok {
				seen[x.File] = true
				require.Equal(t, d.status, got.Code, "deviation %q: %s", d.why, got.Body.String())
				if d.code != "" {
					require.Equal(t, d.code, got.Header().Get("x-ms-error-code"))
					return
				}
			} else {
				require.Equal(t, wantStatus, got.Code, "body: %s", got.Body.String())
			}
			for name := range want.Headers {
				require.NotEmpty(t, got.Header().Get(name), "header %s", name)
			}
			if len(want.Body) == 0 {
				require.Empty(t, got.Body.Bytes())
				return
			}
			var wantBody any
			require.NoError(t, json.Unmarshal(want.Body, &wantBody))
			if s, ok := wantBody.(string); ok && !strings.Contains(got.Header().Get("Content-Type"), "json") {
				// A text or byte body (stopSession, file content).
				require.NotEmpty(t, got.Body.String())
				if x.OperationID == "SessionPoolManagement_StopSession" {
					require.Equal(t, s, got.Body.String(), "the message of the example")
				}
				return
			}
			var gotBody any
			require.NoError(t, json.Unmarshal(got.Body.Bytes(), &gotBody), "body: %s", got.Body.String())
			requireSameShape(t, "body", wantBody, gotBody)
		})
	}
	for f := range deviations {
		require.True(t, seen[f], "deviation %s has no example", f)
	}
}

// conformanceClient builds the request of an example and the state it
// needs (files, sessions, executions), then sends it.
type conformanceClient struct {
	t *testing.T
	h *emulator.Handler
	x specExample
}

func (c *conformanceClient) do(method, route string, q url.Values, body []byte, hdr map[string]string) *httptest.ResponseRecorder {
	c.t.Helper()
	u := "http://pool.local" + c.h.PoolPath() + "/" + route
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	r := httptest.NewRequest(method, u, bytes.NewReader(body))
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	c.h.ServeHTTP(w, r)
	return w
}

func (c *conformanceClient) query(names ...string) url.Values {
	q := url.Values{"api-version": {c.x.Version}}
	for _, n := range names {
		if c.x.Has(n) {
			q.Set(n, c.x.Param(n))
		}
	}
	return q
}

func (c *conformanceClient) upload(dir, name, content string) {
	c.t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	pw, err := mw.CreatePart(fileHeader(name))
	require.NoError(c.t, err)
	_, _ = pw.Write([]byte(content))
	require.NoError(c.t, mw.Close())
	q := c.query("identifier")
	if dir != "" {
		q.Set("path", dir)
	}
	w := c.do(http.MethodPost, "files", q, buf.Bytes(), map[string]string{"Content-Type": mw.FormDataContentType()})
	require.Equal(c.t, http.StatusOK, w.Code, w.Body.String())
}

func (c *conformanceClient) execute(body json.RawMessage, opID string) *httptest.ResponseRecorder {
	hdr := map[string]string{"Content-Type": "application/json"}
	if opID != "" {
		hdr["operation-id"] = opID
	}
	return c.do(http.MethodPost, "executions", c.query("identifier"), body, hdr)
}

// replay prepares and sends the example's request.
func (c *conformanceClient) replay(k *exampleKernel) *httptest.ResponseRecorder {
	t, x := c.t, c.x
	body := x.Parameters["codeExecutionRequest"]
	switch x.OperationID {
	case "CodeExecution_Execute":
		var req map[string]any
		require.NoError(t, json.Unmarshal(body, &req))
		async := req["executionType"] == "Asynchronous"
		var status string
		for _, r := range x.Responses {
			var b map[string]any
			require.NoError(t, json.Unmarshal(r.Body, &b))
			status, _ = b["status"].(string)
		}
		if !async || status != "Succeeded" {
			if async {
				k.hold = make(chan struct{})
				defer close(k.hold)
			}
			return c.execute(body, x.Param("operation-id"))
		}
		// An asynchronous execution answered as finished: the emulator
		// answers Running at once (as _Async_Running does); the finished
		// execution is what GET executions/{id} then answers.
		first := c.execute(body, x.Param("operation-id"))
		if first.Code >= 300 {
			return first
		}
		fin := c.waitFinished(x.Param("operation-id"))
		for k, v := range first.Header() {
			fin.Header()[k] = v
		}
		fin.Code = first.Code
		return fin
	case "CodeExecution_Get":
		id := x.Param("executionId")
		var want map[string]any
		for _, r := range x.Responses {
			require.NoError(t, json.Unmarshal(r.Body, &want))
		}
		exec, _ := json.Marshal(map[string]any{"codeInputType": "Inline", "executionType": "Asynchronous", "code": "print(7*9)", "timeoutInSeconds": 60})
		if want["status"] == "Running" {
			k.hold = make(chan struct{})
			defer close(k.hold)
			require.Less(t, c.execute(exec, id).Code, 300)
			return c.do(http.MethodGet, "executions/"+url.PathEscape(id), c.query("identifier"), nil, nil)
		}
		require.Less(t, c.execute(exec, id).Code, 300)
		return c.waitFinished(id)
	case "SessionResourceFiles_Upload":
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		pw, err := mw.CreatePart(fileHeader("testfile.yaml"))
		require.NoError(t, err)
		_, _ = pw.Write([]byte(x.Param("file")))
		require.NoError(t, mw.Close())
		return c.do(http.MethodPost, "files", c.query("identifier", "path"), buf.Bytes(), map[string]string{"Content-Type": mw.FormDataContentType()})
	case "SessionResourceFiles_Get", "SessionResourceFiles_GetContent", "SessionResourceFiles_Delete":
		c.upload(x.Param("path"), x.Param("name"), "test")
		route := "files/" + url.PathEscape(x.Param("name"))
		method := http.MethodGet
		switch x.OperationID {
		case "SessionResourceFiles_GetContent":
			route += "/content"
		case "SessionResourceFiles_Delete":
			method = http.MethodDelete
		}
		return c.do(method, route, c.query("identifier", "path"), nil, nil)
	case "SessionResourceFiles_List":
		// The tree of the example: its files and directories, under path.
		var want struct{ Value []map[string]any }
		for _, r := range x.Responses {
			require.NoError(t, json.Unmarshal(r.Body, &want))
		}
		base := x.Param("path")
		for _, f := range want.Value {
			if strings.EqualFold(f["type"].(string), "file") {
				dir := base
				if d, _ := f["directory"].(string); d != "" && x.Has("recursive") {
					dir += "/" + d
				}
				c.upload(dir, f["name"].(string), "test")
			} else {
				c.upload(base+"/"+f["name"].(string), "keep.txt", "x")
			}
		}
		return c.do(http.MethodGet, "files", c.query("identifier", "path", "recursive"), nil, nil)
	case "ListSessions_Get":
		c.x.Parameters["identifier"] = json.RawMessage(`"testid1"`)
		require.Equal(t, http.StatusOK, c.execute(json.RawMessage(`{"codeInputType":"Inline","executionType":"Synchronous","code":"print(7*9)","timeoutInSeconds":60}`), "").Code)
		return c.do(http.MethodGet, "listSessions", url.Values{"api-version": {x.Version}}, nil, nil)
	case "SessionManagement_Get", "SessionManagement_Delete", "SessionPoolManagement_StopSession":
		require.Equal(t, http.StatusOK, c.execute(json.RawMessage(`{"codeInputType":"Inline","executionType":"Synchronous","code":"print(7*9)","timeoutInSeconds":60}`), "").Code)
		switch x.OperationID {
		case "SessionManagement_Get":
			return c.do(http.MethodGet, "session", c.query("identifier"), nil, nil)
		case "SessionManagement_Delete":
			return c.do(http.MethodDelete, "session", c.query("identifier"), nil, nil)
		}
		return c.do(http.MethodPost, ".management/stopSession", c.query("identifier"), nil, nil)
	case "SessionPoolMetadata_Get":
		return c.do(http.MethodGet, "metadata", url.Values{"api-version": {x.Version}}, nil, nil)
	}
	t.Fatalf("no replay for operation %s", x.OperationID)
	return nil
}

// waitFinished polls GET executions/{id} until the execution is terminal.
func (c *conformanceClient) waitFinished(id string) *httptest.ResponseRecorder {
	var w *httptest.ResponseRecorder
	require.Eventually(c.t, func() bool {
		w = c.do(http.MethodGet, "executions/"+url.PathEscape(id), c.query("identifier"), nil, nil)
		var m map[string]any
		_ = json.Unmarshal(w.Body.Bytes(), &m)
		return m["status"] != "Running" && m["status"] != "NotStarted"
	}, 5*time.Second, 5*time.Millisecond)
	return w
}

// jsonKind names the JSON type of a decoded value.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "boolean"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

// itemKind groups array items for comparison: files and directories of a
// listing differ in shape.
func itemKind(v any) string {
	m, ok := v.(map[string]any)
	if !ok {
		return jsonKind(v)
	}
	if typ, ok := m["type"].(string); ok {
		return "object:" + strings.ToLower(typ)
	}
	return "object"
}

// requireSameShape compares the key sets and JSON types of want and got.
func requireSameShape(t *testing.T, at string, want, got any) {
	t.Helper()
	require.Equal(t, jsonKind(want), jsonKind(got), "%s: want %v, got %v", at, want, got)
	switch w := want.(type) {
	case map[string]any:
		g := got.(map[string]any)
		require.Equal(t, keys(w), keys(g), "%s: key set", at)
		for k := range w {
			requireSameShape(t, at+"."+k, w[k], g[k])
		}
	case []any:
		g := got.([]any)
		byKind := map[string]any{}
		for _, item := range g {
			byKind[itemKind(item)] = item
		}
		var kinds []string
		for _, item := range w {
			kinds = append(kinds, itemKind(item))
			gi, ok := byKind[itemKind(item)]
			require.True(t, ok, "%s: no item of kind %s in %v", at, itemKind(item), got)
			requireSameShape(t, at+"[]", item, gi)
		}
		sort.Strings(kinds)
	}
}
