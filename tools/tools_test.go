package tools_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/stretchr/testify/require"

	"github.com/azsessions/azsessions"
	"github.com/azsessions/azsessions/azsessionstest"
	"github.com/azsessions/azsessions/emulator"
	"github.com/azsessions/azsessions/tools"
)

// pngBytes stands for an image; its base64 must never reach the model.
var pngBytes = []byte("\x89PNG\r\n\x1a\n-fake-image-bytes-that-are-long-enough-to-notice-0123456789")

// recorder is a scripted executor that records the code it receives.
//
//	"1+1"               result 2
//	"none"              result null
//	"fail..."           status Failed with a SyntaxError traceback
//	"image"             an image result
//	"big"               5000 characters of stdout
//	"write NAME TEXT"   writes NAME in /mnt/data
//	anything else       stdout "ok\n"
type recorder struct {
	mu    sync.Mutex
	codes []string
}

func (r *recorder) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.codes...)
}

func (r *recorder) run(ctx context.Context, code string) emulator.ExecutionResult {
	r.mu.Lock()
	r.codes = append(r.codes, code)
	r.mu.Unlock()
	switch {
	case code == "1+1":
		return emulator.ExecutionResult{Value: json.RawMessage(`2`)}
	case code == "none":
		return emulator.ExecutionResult{Value: json.RawMessage(`null`)}
	case strings.HasPrefix(code, "fail"):
		return emulator.ExecutionResult{Status: emulator.Failed, Stderr: "  Cell In[2], line 6\n    'filename': 'TemperatureData.csv'\n    ^\nSyntaxError: illegal target for annotation\n"}
	case code == "image":
		v, _ := json.Marshal(map[string]string{"type": "image", "format": "png", "base64_data": base64.StdEncoding.EncodeToString(pngBytes)})
		return emulator.ExecutionResult{Value: v}
	case code == "big":
		return emulator.ExecutionResult{Stdout: strings.Repeat("x", 5000)}
	case code == "long traceback":
		return emulator.ExecutionResult{Status: emulator.Failed, Stderr: "Traceback (most recent call last):\n" + strings.Repeat("  File \"x.py\", line 1, in f\n", 300)}
	case code == "slow":
		return emulator.ExecutionResult{Status: emulator.Failed, TimedOut: true, Stderr: "TimeoutError: the execution timed out\n"}
	case strings.HasPrefix(code, "write "):
		f := strings.SplitN(code, " ", 3)
		if err := os.WriteFile(filepath.Join(emulator.DataDirFromContext(ctx), f[1]), []byte(f[2]), 0o644); err != nil {
			return emulator.ExecutionResult{Status: emulator.Failed, Stderr: err.Error()}
		}
		return emulator.ExecutionResult{}
	}
	return emulator.ExecutionResult{Stdout: "ok\n"}
}

type env struct {
	rec      *recorder
	session  *azsessions.Session
	localDir string
	tools    map[string]tools.Tool
}

// newEnv starts the emulator with the recorder and returns the tools for a
// fresh session. opts.LocalDir, when "-", becomes a new temporary directory.
func newEnv(t *testing.T, opts *tools.Options) *env {
	t.Helper()
	rec := &recorder{}
	srv := azsessionstest.Start(t, &azsessionstest.Options{Options: emulator.Options{Executor: emulator.ScriptedExecutor(rec.run)}})
	client := srv.Client()
	e := &env{rec: rec, session: client.NewSession()}
	if opts == nil {
		opts = &tools.Options{}
	}
	if opts.LocalDir == "-" {
		opts.LocalDir = t.TempDir()
	}
	e.localDir = opts.LocalDir
	e.tools = toolMap(tools.New(e.session, opts))
	return e
}

func toolMap(ts []tools.Tool) map[string]tools.Tool {
	m := map[string]tools.Tool{}
	for _, t := range ts {
		m[t.Name] = t
	}
	return m
}

// call runs a tool and requires a nil error.
func (e *env) call(t *testing.T, name, args string) string {
	t.Helper()
	tool, ok := e.tools[name]
	require.True(t, ok, "tool %s", name)
	out, err := tool.Call(t.Context(), args)
	require.NoError(t, err)
	require.True(t, json.Valid([]byte(out)), "answer is not JSON: %s", out)
	return out
}

func decode(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(s), &m), s)
	return m
}

func TestNewToolsAndSchemas(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		localDir string
		want     []string
	}{
		{"without local dir", "", []string{"code_interpreter", "list_files"}},
		{"with local dir", "-", []string{"code_interpreter", "list_files", "upload_file", "download_file"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, &tools.Options{LocalDir: tt.localDir})
			ts := tools.New(e.session, &tools.Options{LocalDir: e.localDir})
			var names []string
			for _, tool := range ts {
				names = append(names, tool.Name)
				require.NotEmpty(t, tool.Description)
				require.NotNil(t, tool.Call)
				var schema struct {
					Type       string                     `json:"type"`
					Properties map[string]json.RawMessage `json:"properties"`
					Required   []string                   `json:"required"`
				}
				require.NoError(t, json.Unmarshal(tool.Parameters, &schema))
				require.Equal(t, "object", schema.Type)
				require.NotNil(t, schema.Properties)
				for _, r := range schema.Required {
					require.Contains(t, schema.Properties, r)
				}
			}
			require.Equal(t, tt.want, names)
		})
	}
	require.Panics(t, func() { tools.New(nil, nil) })
}

func TestSchemasGolden(t *testing.T) {
	t.Parallel()
	e := newEnv(t, &tools.Options{LocalDir: "-"})
	want := map[string]string{
		"code_interpreter": `{"type":"object","properties":{"python_code":{"type":"string"}},"required":["python_code"]}`,
		"list_files":       `{"type":"object","properties":{}}`,
		"upload_file":      `{"type":"object","properties":{"local_file_path":{"type":"string"},"remote_file_name":{"type":"string"}},"required":["local_file_path"]}`,
		"download_file":    `{"type":"object","properties":{"remote_file_path":{"type":"string"},"local_file_path":{"type":"string"}},"required":["remote_file_path"]}`,
	}
	for name, w := range want {
		var got map[string]any
		require.NoError(t, json.Unmarshal(e.tools[name].Parameters, &got))
		// compare without descriptions
		props := got["properties"].(map[string]any)
		for _, p := range props {
			delete(p.(map[string]any), "description")
		}
		delete(got, "additionalProperties")
		gotJSON, _ := json.Marshal(got)
		require.JSONEq(t, w, string(gotJSON), name)
	}
}

func TestCodeInterpreter(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		args       string
		wantCode   string // what reached the service
		wantStatus string
		wantStdout string
		wantResult any
	}{
		{"result value", `{"python_code":"1+1"}`, "1+1", "Succeeded", "", 2.0},
		{"none is empty", `{"python_code":"none"}`, "none", "Succeeded", "", ""}, // None is "" (spec example CodeExecution_Execute_Result_None.json)
		{"no last expression", `{"python_code":"print('x')"}`, "print('x')", "Succeeded", "ok\n", ""},
		{"fenced", `{"python_code":"` + "```python\\n1+1\\n```" + `"}`, "1+1", "Succeeded", "", 2.0},
		{"tag line", `{"python_code":"python\n1+1"}`, "1+1", "Succeeded", "", 2.0},
		{"byte identical", `{"python_code":"python_var = 1\n  print(python_var)  # ` + "```" + `"}`, "python_var = 1\n  print(python_var)  # ```", "Succeeded", "ok\n", ""},
		{"unknown fields ignored", `{"python_code":"1+1","other":3}`, "1+1", "Succeeded", "", 2.0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, nil)
			out := e.call(t, "code_interpreter", tt.args)
			require.True(t, strings.HasPrefix(out, `{"status":"`), out)
			m := decode(t, out)
			require.Equal(t, tt.wantStatus, m["status"])
			require.Equal(t, tt.wantStdout, m["stdout"])
			require.Equal(t, "", m["stderr"])
			require.Equal(t, tt.wantResult, m["result"])
			require.Contains(t, m, "executionTimeInMilliseconds")
			require.NotContains(t, m, "note")
			require.Equal(t, []string{tt.wantCode}, e.rec.all())
		})
	}
}

func TestCodeInterpreterKeyOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	out := e.call(t, "code_interpreter", `{"python_code":"1+1"}`)
	keys := []string{`"status"`, `"stdout"`, `"stderr"`, `"result"`, `"executionTimeInMilliseconds"`}
	last := -1
	for _, k := range keys {
		i := strings.Index(out, k)
		require.Greater(t, i, last, "key %s out of order in %s", k, out)
		last = i
	}
}

func TestCodeInterpreterDisableSanitize(t *testing.T) {
	t.Parallel()
	e := newEnv(t, &tools.Options{DisableSanitize: true})
	code := "```python\n1+1\n```"
	args, _ := json.Marshal(map[string]string{"python_code": code})
	e.call(t, "code_interpreter", string(args))
	require.Equal(t, []string{code}, e.rec.all())
}

func TestCodeInterpreterFailedIsData(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	out, err := e.tools["code_interpreter"].Call(t.Context(), `{"python_code":"fail here"}`)
	require.NoError(t, err)
	m := decode(t, out)
	require.Equal(t, "Failed", m["status"])
	require.Contains(t, m["stderr"], "SyntaxError: illegal target for annotation")
}

func TestInvalidArguments(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, tool, args, want string
	}{
		{"not JSON", "code_interpreter", `print(1)`, "invalid arguments: the arguments must be a JSON object"},
		{"truncated JSON", "code_interpreter", `{"python_code": "x`, "invalid arguments: the arguments must be a JSON object"},
		{"array", "code_interpreter", `["1+1"]`, "invalid arguments: the arguments must be a JSON object"},
		{"JSON null", "code_interpreter", `null`, "invalid arguments: the arguments must be a JSON object"},
		{"empty object", "code_interpreter", `{}`, "invalid arguments: python_code is required (a string)"},
		{"empty arguments", "code_interpreter", ``, "invalid arguments: python_code is required (a string)"},
		{"null field", "code_interpreter", `{"python_code":null}`, "invalid arguments: python_code is required (a string)"},
		{"wrong name", "code_interpreter", `{"code":"1+1"}`, "invalid arguments: python_code is required (a string)"},
		{"wrong type", "code_interpreter", `{"python_code":42}`, "invalid arguments: python_code must be a string"},
		{"empty code", "code_interpreter", `{"python_code":"  "}`, "invalid arguments: python_code is empty"},
		{"only a fence", "code_interpreter", `{"python_code":"` + "```python\\n```" + `"}`, "invalid arguments: python_code is empty"},
		{"list_files not an object", "list_files", `[]`, "invalid arguments: the arguments must be a JSON object ({})"},
		{"upload missing path", "upload_file", `{}`, "invalid arguments: local_file_path is required (a string)"},
		{"upload wrong type", "upload_file", `{"local_file_path":"a","remote_file_name":1}`, "invalid arguments: remote_file_name must be a string"},
		{"download missing path", "download_file", `{"local_file_path":"a"}`, "invalid arguments: remote_file_path is required (a string)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, &tools.Options{LocalDir: "-"})
			out := e.call(t, tt.tool, tt.args)
			m := decode(t, out)
			require.Contains(t, m["error"], tt.want)
			require.Empty(t, e.rec.all(), "nothing may run")
		})
	}
}

func TestImageNotInlined(t *testing.T) {
	t.Parallel()
	b64 := base64.StdEncoding.EncodeToString(pngBytes)
	t.Run("without local dir", func(t *testing.T) {
		t.Parallel()
		var got []azsessions.Image
		e := newEnv(t, &tools.Options{OnImage: func(img azsessions.Image) { got = append(got, img) }})
		out := e.call(t, "code_interpreter", `{"python_code":"image"}`)
		require.NotContains(t, out, b64)
		require.NotContains(t, out, "base64")
		res := decode(t, out)["result"].(map[string]any)
		require.Equal(t, "image", res["type"])
		require.Equal(t, "png", res["format"])
		require.Equal(t, float64(len(pngBytes)), res["size_in_bytes"])
		require.NotContains(t, res, "saved_to")
		require.Equal(t, []azsessions.Image{{Format: "png", Data: pngBytes}}, got)
	})
	t.Run("saved collision-free in local dir", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, &tools.Options{LocalDir: "-"})
		require.NoError(t, os.WriteFile(filepath.Join(e.localDir, "image-1.png"), []byte("mine"), 0o644))
		for _, want := range []string{"image-2.png", "image-3.png"} {
			out := e.call(t, "code_interpreter", `{"python_code":"image"}`)
			require.NotContains(t, out, b64)
			res := decode(t, out)["result"].(map[string]any)
			require.Equal(t, want, res["saved_to"])
			data, err := os.ReadFile(filepath.Join(e.localDir, want))
			require.NoError(t, err)
			require.Equal(t, pngBytes, data)
		}
		data, err := os.ReadFile(filepath.Join(e.localDir, "image-1.png"))
		require.NoError(t, err)
		require.Equal(t, "mine", string(data), "an existing file is never overwritten")
	})
}

func TestTruncatedOutput(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, localDir, wantHint string
	}{
		{"without local dir", "", "write large output to a file under /mnt/data (the user can download it)"},
		{"with local dir", "-", "write large output to a file under /mnt/data and download it with download_file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, &tools.Options{LocalDir: tt.localDir})
			m := decode(t, e.call(t, "code_interpreter", `{"python_code":"big"}`))
			require.Len(t, m["stdout"], azsessions.DefaultOutputStreamsMaxLength)
			require.Contains(t, m["note"], "the output was truncated at 4096 characters")
			require.Contains(t, m["note"], tt.wantHint)
		})
	}
}

// TestExecutionNotes (issue 12 item 13): a timed-out cell and a cut
// traceback are said in the answer's note, so the model need not guess
// from stderr.
func TestExecutionNotes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, code string
		want       []string
	}{
		{"timed out", "slow", []string{"stopped at its timeout"}},
		{"traceback cut", "long traceback", []string{"stderr (the traceback) was cut at the output cap", `the last complete line is: File "x.py", line 1, in f`, "the output was truncated at 4096 characters"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, nil)
			m := decode(t, e.call(t, "code_interpreter", `{"python_code":"`+tt.code+`"}`))
			require.Equal(t, "Failed", m["status"])
			for _, w := range tt.want {
				require.Contains(t, m["note"], w)
			}
		})
	}
}

func TestListFiles(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	require.JSONEq(t, `[]`, e.call(t, "list_files", `{}`))
	require.JSONEq(t, `[]`, e.call(t, "list_files", ``))
	e.call(t, "code_interpreter", `{"python_code":"write TemperatureData.csv 0123456789"}`)
	require.JSONEq(t, `[{"filename":"TemperatureData.csv","size_in_bytes":10,"file_full_path":"/mnt/data/TemperatureData.csv"}]`,
		e.call(t, "list_files", `{}`))
}

// copySample copies the seed's CSV into dir.
func copySample(t *testing.T, dir, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "testdata", "TemperatureData.csv"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), data, 0o644))
	return data
}

func TestUploadAndDownload(t *testing.T) {
	t.Parallel()
	e := newEnv(t, &tools.Options{LocalDir: "-"})
	data := copySample(t, e.localDir, "TemperatureData.csv")

	out := e.call(t, "upload_file", `{"local_file_path":"TemperatureData.csv"}`)
	require.JSONEq(t, `{"filename":"TemperatureData.csv","size_in_bytes":`+itoa(len(data))+`,"file_full_path":"/mnt/data/TemperatureData.csv"}`, out)
	// an absolute path inside the local directory works too, and a new remote name
	out = e.call(t, "upload_file", `{"local_file_path":`+quote(filepath.Join(e.localDir, "TemperatureData.csv"))+`,"remote_file_name":"copy.csv"}`)
	require.Equal(t, "/mnt/data/copy.csv", decode(t, out)["file_full_path"])
	require.JSONEq(t, `[{"filename":"TemperatureData.csv","size_in_bytes":`+itoa(len(data))+`,"file_full_path":"/mnt/data/TemperatureData.csv"},
		{"filename":"copy.csv","size_in_bytes":`+itoa(len(data))+`,"file_full_path":"/mnt/data/copy.csv"}]`, e.call(t, "list_files", `{}`))

	// to a new local name
	out = e.call(t, "download_file", `{"remote_file_path":"/mnt/data/TemperatureData.csv","local_file_path":"SortedTemperatureData.csv"}`)
	require.JSONEq(t, `{"remote_file_path":"/mnt/data/TemperatureData.csv","saved_to":"SortedTemperatureData.csv","size_in_bytes":`+itoa(len(data))+`}`, out)
	got, err := os.ReadFile(filepath.Join(e.localDir, "SortedTemperatureData.csv"))
	require.NoError(t, err)
	require.Equal(t, data, got)

	// into a new sub-directory
	out = e.call(t, "download_file", `{"remote_file_path":"copy.csv","local_file_path":"out/sub/c.csv"}`)
	require.Equal(t, "out/sub/c.csv", decode(t, out)["saved_to"])

	// into an existing directory: keeps the remote name
	out = e.call(t, "download_file", `{"remote_file_path":"copy.csv","local_file_path":"out"}`)
	require.Equal(t, "out/copy.csv", decode(t, out)["saved_to"])

	// missing remote file: a message for the model
	out = e.call(t, "download_file", `{"remote_file_path":"nope.csv"}`)
	require.Contains(t, decode(t, out)["error"], `remote file "nope.csv" not found`)
	out = e.call(t, "download_file", `{"remote_file_path":"../etc/passwd"}`)
	require.Contains(t, decode(t, out)["error"], "invalid remote_file_path")

	// missing local file, invalid remote name
	out = e.call(t, "upload_file", `{"local_file_path":"missing.csv"}`)
	require.Contains(t, decode(t, out)["error"], `local file "missing.csv" not found`)
	out = e.call(t, "upload_file", `{"local_file_path":"TemperatureData.csv","remote_file_name":"/etc/x"}`)
	require.Contains(t, decode(t, out)["error"], "invalid remote_file_name")
	out = e.call(t, "upload_file", `{"local_file_path":"out"}`)
	require.Contains(t, decode(t, out)["error"], "not a regular file")
}

func TestDownloadNeverOverwrites(t *testing.T) {
	t.Parallel()
	e := newEnv(t, &tools.Options{LocalDir: "-"})
	e.call(t, "code_interpreter", `{"python_code":"write TemperatureData.csv remote"}`)
	require.NoError(t, os.WriteFile(filepath.Join(e.localDir, "TemperatureData.csv"), []byte("local"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(e.localDir, "TemperatureData-1.csv"), []byte("local1"), 0o644))
	require.NoError(t, os.Symlink("/nonexistent/dangling", filepath.Join(e.localDir, "TemperatureData-2.csv")))

	out := e.call(t, "download_file", `{"remote_file_path":"TemperatureData.csv"}`)
	m := decode(t, out)
	require.Equal(t, "TemperatureData-3.csv", m["saved_to"])
	require.Contains(t, m["note"], "TemperatureData.csv already existed in the local directory, so the file was saved as TemperatureData-3.csv instead (nothing was overwritten)")
	for name, want := range map[string]string{"TemperatureData.csv": "local", "TemperatureData-1.csv": "local1", "TemperatureData-3.csv": "remote"} {
		got, err := os.ReadFile(filepath.Join(e.localDir, name))
		require.NoError(t, err)
		require.Equal(t, want, string(got), name)
	}
	entries, err := os.ReadDir(e.localDir)
	require.NoError(t, err)
	require.Len(t, entries, 4, "no temporary file is left")
}

func TestLocalPathEscapes(t *testing.T) {
	t.Parallel()
	outside := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("secret"), 0o644))
	tests := []struct {
		name, tool, args, want string
	}{
		{"upload dot-dot", "upload_file", `{"local_file_path":"../secret.txt"}`, `".." is not allowed`},
		{"upload inner dot-dot", "upload_file", `{"local_file_path":"a/../../secret.txt"}`, `".." is not allowed`},
		{"upload absolute elsewhere", "upload_file", `{"local_file_path":"/etc/passwd"}`, "outside the local directory"},
		{"upload absolute outside dir", "upload_file", `{"local_file_path":` + quote(filepath.Join(outside, "secret.txt")) + `}`, "outside the local directory"},
		{"upload symlink out", "upload_file", `{"local_file_path":"link.txt"}`, "a symbolic link leads outside the local directory"},
		{"upload through symlinked dir", "upload_file", `{"local_file_path":"linkdir/secret.txt"}`, "a symbolic link leads outside the local directory"},
		{"upload the directory itself", "upload_file", `{"local_file_path":"."}`, "names the local directory itself"},
		{"download dot-dot", "download_file", `{"remote_file_path":"x.csv","local_file_path":"../x.csv"}`, `".." is not allowed`},
		{"download absolute elsewhere", "download_file", `{"remote_file_path":"x.csv","local_file_path":"/tmp/x.csv"}`, "outside the local directory"},
		{"download through symlinked dir", "download_file", `{"remote_file_path":"x.csv","local_file_path":"linkdir/x.csv"}`, "a symbolic link leads outside the local directory"},
		{"download remote dot-dot default name", "download_file", `{"remote_file_path":"sub/.."}`, `".." is not allowed`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, &tools.Options{LocalDir: "-"})
			e.call(t, "code_interpreter", `{"python_code":"write x.csv remote"}`)
			require.NoError(t, os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(e.localDir, "link.txt")))
			require.NoError(t, os.Symlink(outside, filepath.Join(e.localDir, "linkdir")))
			out := e.call(t, tt.tool, tt.args)
			require.Contains(t, decode(t, out)["error"], tt.want)
			// nothing reached the session, nothing was written outside
			require.JSONEq(t, `[{"filename":"x.csv","size_in_bytes":6,"file_full_path":"/mnt/data/x.csv"}]`, e.call(t, "list_files", `{}`))
			entries, err := os.ReadDir(outside)
			require.NoError(t, err)
			require.Len(t, entries, 1)
		})
	}
}

// fakeService answers every request with status and the x-ms-error-code code.
type fakeService struct {
	status int
	code   string
}

func (f fakeService) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("x-ms-error-code", f.code)
	w.WriteHeader(f.status)
	_, _ = w.Write([]byte(`{"error":{"code":"` + f.code + `","message":"denied for ` + r.URL.String() + `"}}`))
}

type staticToken string

func (s staticToken) GetToken(context.Context, policy.TokenRequestOptions) (azcore.AccessToken, error) {
	return azcore.AccessToken{Token: string(s)}, nil
}

const (
	secretID    = "secret-session-identifier-42"
	secretToken = "secret-token-value-xyz"
)

func TestErrorsAreShortAndSafe(t *testing.T) {
	t.Parallel()
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close()
	tests := []struct {
		name     string
		handler  http.Handler // nil: unreachable endpoint
		wantText string
	}{
		{"403", fakeService{http.StatusForbidden, "AuthorizationFailed"}, "the code interpreter service answered 403 (AuthorizationFailed)"},
		{"401", fakeService{http.StatusUnauthorized, "InvalidAuthenticationToken"}, "the code interpreter service answered 401 (InvalidAuthenticationToken)"},
		{"500 odd code", fakeService{http.StatusBadRequest, "bad code with spaces " + secretID}, "the code interpreter service answered 400"},
		{"unreachable", nil, "could not reach the code interpreter service"},
	}
	calls := []struct{ tool, args string }{
		{"code_interpreter", `{"python_code":"1+1"}`},
		{"list_files", `{}`},
		{"upload_file", `{"local_file_path":"a.csv"}`},
		{"download_file", `{"remote_file_path":"a.csv"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			endpoint := closedURL
			transport := http.DefaultClient
			if tt.handler != nil {
				srv := httptest.NewServer(tt.handler)
				t.Cleanup(srv.Close)
				endpoint, transport = srv.URL, srv.Client()
			}
			client, err := azsessions.NewClient(endpoint, staticToken(secretToken), &azsessions.ClientOptions{ClientOptions: azcore.ClientOptions{
				Transport:                       transport,
				InsecureAllowCredentialWithHTTP: true,
				Retry:                           policy.RetryOptions{MaxRetries: -1},
			}})
			require.NoError(t, err)
			dir := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(dir, "a.csv"), []byte("a,b\n"), 0o644))
			ts := toolMap(tools.New(client.Session(secretID), &tools.Options{LocalDir: dir}))
			for _, c := range calls {
				if tt.name == "500 odd code" && c.tool == "download_file" {
					continue // 400 on a download is the service's answer too, checked below
				}
				out, err := ts[c.tool].Call(t.Context(), c.args)
				require.Error(t, err, c.tool)
				require.Empty(t, out)
				var te *tools.Error
				require.ErrorAs(t, err, &te)
				require.Equal(t, tt.wantText, err.Error(), c.tool)
				for _, secret := range []string{secretID, secretToken, "http", "identifier"} {
					require.NotContains(t, err.Error(), secret)
				}
				require.NotNil(t, errors.Unwrap(err), "the cause stays available")
			}
			entries, err := os.ReadDir(dir)
			require.NoError(t, err)
			require.Len(t, entries, 1, "no partial download is left")
		})
	}
}

func TestContextCanceled(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := e.tools["code_interpreter"].Call(ctx, `{"python_code":"1+1"}`)
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, "the call to the code interpreter service was canceled", err.Error())
}

// TestDownloadInterrupted checks that a body cut short leaves no file.
func TestDownloadInterrupted(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1000")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("only a part"))
	}))
	t.Cleanup(srv.Close)
	client, err := azsessions.NewClientWithNoCredential(srv.URL, &azsessions.ClientOptions{ClientOptions: azcore.ClientOptions{
		Transport: srv.Client(), Retry: policy.RetryOptions{MaxRetries: -1},
	}})
	require.NoError(t, err)
	dir := t.TempDir()
	ts := toolMap(tools.New(client.NewSession(), &tools.Options{LocalDir: dir}))
	out, err := ts["download_file"].Call(t.Context(), `{"remote_file_path":"a.csv"}`)
	require.Error(t, err)
	require.Empty(t, out)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries)
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func quote(s string) string { b, _ := json.Marshal(s); return string(b) }

// TestListFilesPages checks that list_files follows nextLink over every page.
func TestListFilesPages(t *testing.T) {
	t.Parallel()
	var srvURL string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Query().Get("page") == "2" {
			_, _ = w.Write([]byte(`{"value":[{"name":"b.csv","type":"File","sizeInBytes":2,"lastModifiedAt":"2024-05-04T00:00:00Z"},{"name":"sub","type":"directory","sizeInBytes":0,"lastModifiedAt":"2024-05-04T00:00:00Z"}]}`))
			return
		}
		next := srvURL + "/files?page=2&api-version=" + r.URL.Query().Get("api-version") + "&identifier=" + r.URL.Query().Get("identifier")
		_, _ = w.Write([]byte(`{"value":[{"name":"a.csv","type":"File","sizeInBytes":1,"lastModifiedAt":"2024-05-04T00:00:00Z"}],"nextLink":` + quote(next) + `}`))
	}))
	t.Cleanup(srv.Close)
	srvURL = srv.URL
	client, err := azsessions.NewClientWithNoCredential(srv.URL, &azsessions.ClientOptions{ClientOptions: azcore.ClientOptions{Transport: srv.Client()}})
	require.NoError(t, err)
	ts := toolMap(tools.New(client.NewSession(), nil))
	out, err := ts["list_files"].Call(t.Context(), `{}`)
	require.NoError(t, err)
	require.JSONEq(t, `[
		{"filename":"a.csv","size_in_bytes":1,"file_full_path":"/mnt/data/a.csv"},
		{"filename":"b.csv","size_in_bytes":2,"file_full_path":"/mnt/data/b.csv"},
		{"filename":"sub","size_in_bytes":0,"file_full_path":"/mnt/data/sub","is_directory":true}]`, out)
}

// TestInjectedFaults uses the fake's fault injection: a body cut mid-way
// leaves no local file; a 503 on every listing is a short Go error; a
// connection reset after the code ran returns the recorded result, run once.
func TestInjectedFaults(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	srv := azsessionstest.Start(t, &azsessionstest.Options{Options: emulator.Options{Executor: emulator.ScriptedExecutor(rec.run)}})
	dir := t.TempDir()
	ts := toolMap(tools.New(srv.Client().NewSession(), &tools.Options{LocalDir: dir}))

	out, err := ts["code_interpreter"].Call(t.Context(), `{"python_code":"write a.csv 0123456789abcdef"}`)
	require.NoError(t, err, out)

	srv.InjectFault("GET files/{name}/content", azsessionstest.Fault{ResetMidBody: true}, 0)
	out, err = ts["download_file"].Call(t.Context(), `{"remote_file_path":"a.csv"}`)
	require.Error(t, err)
	require.Empty(t, out)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries, "no partial file")

	srv.InjectFault("GET files", azsessionstest.Fault{Status: http.StatusServiceUnavailable, Code: "Busy"}, 0)
	_, err = ts["list_files"].Call(t.Context(), `{}`)
	require.EqualError(t, err, "the code interpreter service answered 503 (Busy)")
	srv.ClearFaults()

	srv.InjectFault("POST executions", azsessionstest.Fault{ResetAfterHandler: true}, 1)
	out, err = ts["code_interpreter"].Call(t.Context(), `{"python_code":"1+1"}`)
	require.NoError(t, err)
	require.Equal(t, 2.0, decode(t, out)["result"])
	require.Equal(t, []string{"write a.csv 0123456789abcdef", "1+1"}, rec.all(), "the code ran once")
}
