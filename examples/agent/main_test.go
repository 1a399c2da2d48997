package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/azsessions/azsessions"
	"github.com/azsessions/azsessions/azsessionstest"
	"github.com/azsessions/azsessions/emulator"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// sandboxExecutor returns the bubblewrap executor with Debian's python3, or
// skips the test when this machine lacks them (fails instead when
// AZSESSIONS_REQUIRE_SANDBOX=1, as in CI).
func sandboxExecutor(t *testing.T) emulator.Executor {
	t.Helper()
	missing := func(msg string) {
		t.Helper()
		if os.Getenv("AZSESSIONS_REQUIRE_SANDBOX") == "1" {
			t.Fatal(msg + " (AZSESSIONS_REQUIRE_SANDBOX=1)")
		}
		t.Skip(msg + "; set AZSESSIONS_REQUIRE_SANDBOX=1 to make this a failure")
	}
	if _, err := exec.LookPath("bwrap"); err != nil {
		missing("bwrap is missing (apt-get install bubblewrap)")
	}
	const python = "/usr/bin/python3"
	if err := exec.Command(python, "-c", "import pandas, pytz").Run(); err != nil {
		missing("Debian's python3 with pandas and pytz is missing (apt-get install python3-pandas python3-tz)")
	}
	ex, err := emulator.NewSandboxExecutor(emulator.SandboxOptions{Python: python})
	if errors.Is(err, emulator.ErrNoBubblewrap) {
		missing("bubblewrap cannot create a sandbox here: " + err.Error())
	}
	require.NoError(t, err)
	return ex
}

// emulatorSession serves exec with the emulator and returns a fresh session.
func emulatorSession(t *testing.T, ex emulator.Executor) *azsessions.Session {
	t.Helper()
	endpoint, stop, err := startEmulator(ex, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	t.Cleanup(stop)
	client, err := azsessions.NewClientWithNoCredential(endpoint, nil)
	require.NoError(t, err)
	return client.NewSession()
}

// fakeSession returns a session on the azsessionstest fake with a scripted executor.
func fakeSession(t *testing.T, fn func(context.Context, string) emulator.ExecutionResult) *azsessions.Session {
	t.Helper()
	srv := azsessionstest.Start(t, &azsessionstest.Options{Options: emulator.Options{Executor: emulator.ScriptedExecutor(fn)}})
	return srv.Client().NewSession()
}

func obs(t *testing.T, s step) map[string]any {
	t.Helper()
	require.NoError(t, s.Err)
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(s.Observation), &m), s.Observation)
	return m
}

// TestReplayWalkthrough replays the seed's walkthrough against the emulator
// running real Python in the bubblewrap sandbox.
func TestReplayWalkthrough(t *testing.T) {
	ex := sandboxExecutor(t)
	session := emulatorSession(t, ex)
	dir := t.TempDir()
	require.NoError(t, ensureSample(dir))
	var out bytes.Buffer
	steps, err := walkthrough(t.Context(), session, dir, func(b *toolbox) (agent, error) {
		return &replayAgent{box: b, script: seedReplay}, nil
	}, &out)
	require.NoError(t, err, out.String())
	t.Log("\n" + out.String())

	var actions []string
	for _, s := range steps {
		actions = append(actions, strconv.Itoa(s.Task)+":"+s.Action)
	}
	require.Equal(t, []string{
		"1:code_interpreter",
		"2:upload_file", "2:list_files", "2:code_interpreter",
		"3:list_files", "3:code_interpreter", "3:code_interpreter", "3:download_file",
	}, actions)

	// Task 1: the time in Seattle, from pytz
	m := obs(t, steps[0])
	require.Equal(t, "Succeeded", m["status"], steps[0].Observation)
	require.Regexp(t, regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d P[SD]T-0[78]00$`), m["result"])

	// Task 2: upload, list, max
	require.Equal(t, "/mnt/data/TemperatureData.csv", obs(t, steps[1])["file_full_path"])
	require.Contains(t, steps[2].Observation, `"file_full_path":"/mnt/data/TemperatureData.csv"`)
	m = obs(t, steps[3])
	require.Equal(t, "Succeeded", m["status"])
	require.Equal(t, "12.4\n", m["stdout"])
	require.Contains(t, out.String(), "Answer: The highest temperature in the file is 12.4 degrees.")

	// Task 3: the broken code fails as data, the fixed code succeeds
	m = obs(t, steps[5])
	require.Equal(t, "Failed", m["status"])
	require.Contains(t, m["stderr"], "SyntaxError")
	m = obs(t, steps[6])
	require.Equal(t, "Succeeded", m["status"], steps[6].Observation)

	// The download: sorted descending, same rows
	require.Equal(t, "SortedTemperatureData.csv", obs(t, steps[7])["saved_to"])
	sorted := readTemps(t, filepath.Join(dir, "SortedTemperatureData.csv"))
	orig := readTemps(t, filepath.Join(dir, "TemperatureData.csv"))
	require.Equal(t, 12.4, sorted[0])
	require.True(t, slices.IsSortedFunc(sorted, func(a, b float64) int { return -cmpFloat(a, b) }), "%v", sorted)
	slices.Sort(orig)
	slices.Reverse(orig)
	require.Equal(t, orig, sorted)
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func readTemps(t *testing.T, path string) []float64 {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	require.NoError(t, err)
	require.Equal(t, []string{"Time", "Temperature"}, rows[0])
	var temps []float64
	for _, r := range rows[1:] {
		v, err := strconv.ParseFloat(r[1], 64)
		require.NoError(t, err)
		temps = append(temps, v)
	}
	return temps
}

// fakeChat is a chat completions server that answers with the scripted
// assistant messages in order and records the requests.
type fakeChat struct {
	mu       sync.Mutex
	replies  []string // assistant message JSON
	requests []map[string]any
}

func (f *fakeChat) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/chat/completions" {
		http.NotFound(w, r)
		return
	}
	var req map[string]any
	body, _ := io.ReadAll(r.Body)
	_ = json.Unmarshal(body, &req)
	f.mu.Lock()
	f.requests = append(f.requests, req)
	n := len(f.requests)
	f.mu.Unlock()
	if n > len(f.replies) {
		http.Error(w, `{"error":{"message":"too many requests"}}`, http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"id":"c`+strconv.Itoa(n)+`","object":"chat.completion","created":1,"model":"fake","choices":[{"index":0,"finish_reason":"stop","message":`+f.replies[n-1]+`}]}`)
}

func toolCall(id, name, args string) string {
	a, _ := json.Marshal(args)
	return `{"id":"` + id + `","type":"function","function":{"name":"` + name + `","arguments":` + string(a) + `}}`
}

// TestModelAgent drives the agent with a fake chat completions server and a
// scripted executor (no Python needed).
func TestModelAgent(t *testing.T) {
	var mu sync.Mutex
	var codes []string
	session := fakeSession(t, func(ctx context.Context, code string) emulator.ExecutionResult {
		mu.Lock()
		codes = append(codes, code)
		mu.Unlock()
		if strings.Contains(code, "oops") {
			return emulator.ExecutionResult{Status: emulator.Failed, Stderr: "SyntaxError: invalid syntax\n"}
		}
		return emulator.ExecutionResult{Stdout: "12.4\n"}
	})
	fake := &fakeChat{replies: []string{
		`{"role":"assistant","content":"Let me look.","tool_calls":[` + toolCall("call_1", "list_files", "{}") + `,` + toolCall("call_2", "code_interpreter", `{"python_code":"`+"```python\\noops(\\n```"+`"}`) + `]}`,
		`{"role":"assistant","content":null,"tool_calls":[` + toolCall("call_3", "code_interpreter", `{"python_code": 1}`) + `,` + toolCall("call_4", "rm_rf", `{}`) + `]}`,
		`{"role":"assistant","content":null,"tool_calls":[` + toolCall("call_5", "code_interpreter", `{"python_code":"print(12.4)"}`) + `]}`,
		`{"role":"assistant","content":"The highest temperature is 12.4 degrees."}`,
	}}
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	client := openai.NewClient(option.WithAPIKey("test-key"), option.WithBaseURL(srv.URL), option.WithHTTPClient(srv.Client()), option.WithMaxRetries(0))

	var out bytes.Buffer
	p := &printer{w: &out}
	box := newToolbox(toolsFor(session, t.TempDir()), p)
	a, err := newModelAgent(client, "fake-model", box)
	require.NoError(t, err)
	answer, err := a.Chat(t.Context(), questionHighest)
	require.NoError(t, err)
	require.Equal(t, "The highest temperature is 12.4 degrees.", answer)

	// the tools the model saw
	require.Len(t, fake.requests, 4)
	first := fake.requests[0]
	require.Equal(t, "fake-model", first["model"])
	var names []string
	for _, tl := range first["tools"].([]any) {
		fn := tl.(map[string]any)["function"].(map[string]any)
		names = append(names, fn["name"].(string))
		require.Equal(t, "object", fn["parameters"].(map[string]any)["type"])
	}
	require.Equal(t, []string{"code_interpreter", "list_files"}, names)

	// the observations handed back
	toolMsgs := map[string]string{}
	for _, msg := range fake.requests[3]["messages"].([]any) {
		m := msg.(map[string]any)
		if m["role"] == "tool" {
			toolMsgs[m["tool_call_id"].(string)] = m["content"].(string)
		}
	}
	require.Equal(t, "[]", toolMsgs["call_1"])
	require.Contains(t, toolMsgs["call_2"], `"status":"Failed"`)
	require.Contains(t, toolMsgs["call_3"], "python_code must be a string")
	require.Contains(t, toolMsgs["call_4"], `unknown tool \"rm_rf\"`)
	require.Contains(t, toolMsgs["call_5"], `"stdout":"12.4\n"`)
	mu.Lock()
	require.Equal(t, []string{"oops(", "print(12.4)"}, codes, "the fence was stripped")
	mu.Unlock()

	transcript := out.String()
	for _, want := range []string{"Thought: Let me look.", "Action: list_files", "Action Input: {}", "Observation: []", "Answer: The highest temperature is 12.4 degrees."} {
		require.Contains(t, transcript, want)
	}
}

func TestModelAgentServiceError(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error":{"message":"bad key","type":"invalid_request_error"}}`, http.StatusUnauthorized)
	}))
	t.Cleanup(srv.Close)
	client := openai.NewClient(option.WithAPIKey("k"), option.WithBaseURL(srv.URL), option.WithHTTPClient(srv.Client()), option.WithMaxRetries(0))
	session := fakeSession(t, func(context.Context, string) emulator.ExecutionResult { return emulator.ExecutionResult{} })
	a, err := newModelAgent(client, "m", newToolbox(toolsFor(session, ""), &printer{w: io.Discard}))
	require.NoError(t, err)
	_, err = a.Chat(t.Context(), "hi")
	require.ErrorContains(t, err, "401")
}

func TestRunConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"no model", nil, "set OPENAI_API_KEY"},
		{"azure incomplete", map[string]string{"AZURE_OPENAI_ENDPOINT": "https://x.openai.azure.com"}, "needs AZURE_OPENAI_API_KEY and AZURE_OPENAI_DEPLOYMENT"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := run(t.Context(), nil, io.Discard, io.Discard, func(k string) string { return tt.env[k] })
			require.ErrorContains(t, err, tt.want)
		})
	}
	_, model, err := newModelClient(func(k string) string {
		return map[string]string{"AZURE_OPENAI_ENDPOINT": "https://x.openai.azure.com", "AZURE_OPENAI_API_KEY": "k", "AZURE_OPENAI_DEPLOYMENT": "gpt4o"}[k]
	})
	require.NoError(t, err)
	require.Equal(t, "gpt4o", model)
	_, model, err = newModelClient(func(k string) string { return map[string]string{"OPENAI_API_KEY": "k"}[k] })
	require.NoError(t, err)
	require.Equal(t, "gpt-4o-mini", model)
}

// TestRunPrompt runs the command with -prompt against a fake chat
// completions server and real Python in the sandboxed emulator.
func TestRunPrompt(t *testing.T) {
	require.NoError(t, sandboxExecutor(t).Close()) // skips (or fails in CI) without the sandbox
	fake := &fakeChat{replies: []string{
		`{"role":"assistant","content":null,"tool_calls":[` + toolCall("call_1", "code_interpreter", `{"python_code":"import math\nprint(math.factorial(12))"}`) + `]}`,
		`{"role":"assistant","content":"12! is 479001600."}`,
	}}
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	env := map[string]string{"OPENAI_API_KEY": "test-key", "OPENAI_BASE_URL": srv.URL}
	var stdout, stderr bytes.Buffer
	err := run(t.Context(), []string{"-prompt", "What is 12 factorial?", "-python", "/usr/bin/python3", "-local-dir", t.TempDir()}, &stdout, &stderr, func(k string) string { return env[k] })
	require.NoError(t, err, stderr.String())
	out := stdout.String()
	for _, want := range []string{"User: What is 12 factorial?", "Action: code_interpreter", `Observation: {"status":"Succeeded","stdout":"479001600\n"`, "Answer: 12! is 479001600."} {
		require.Contains(t, out, want)
	}
	require.NotContains(t, out, "Task 2", "only the prompt is asked")
	fake.mu.Lock()
	defer fake.mu.Unlock()
	require.Len(t, fake.requests, 2)
	var names []string
	for _, tl := range fake.requests[0]["tools"].([]any) {
		names = append(names, tl.(map[string]any)["function"].(map[string]any)["name"].(string))
	}
	require.Equal(t, []string{"code_interpreter", "list_files", "upload_file", "download_file"}, names)
}

func TestRunPromptUsage(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"with replay", []string{"-replay", "-prompt", "hi"}, "-prompt needs a model"},
		{"unquoted", []string{"-prompt", "what", "is", "it"}, "unexpected arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := run(t.Context(), tt.args, io.Discard, io.Discard, func(string) string { return "" })
			require.ErrorContains(t, err, tt.want)
		})
	}
}
