package langchaingotools_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/agents"
	"github.com/tmc/langchaingo/chains"
	"github.com/tmc/langchaingo/llms/openai"
	lctools "github.com/tmc/langchaingo/tools"

	"github.com/azsessions/azsessions"
	langchaingotools "github.com/azsessions/azsessions/adapters/langchaingo"
	"github.com/azsessions/azsessions/internal/emutest"
	"github.com/azsessions/azsessions/internal/fakemodel"
	"github.com/azsessions/azsessions/tools"
)

// runAgent runs langchaingo's OpenAI functions agent, its LLM pointed at
// the fake model, with the tools.
func runAgent(ctx context.Context, t *testing.T, model *fakemodel.Server, lc []lctools.Tool) (string, error) {
	t.Helper()
	llm, err := openai.New(openai.WithBaseURL(model.URL), openai.WithToken("sk-test"), openai.WithModel("gpt-test"), openai.WithHTTPClient(model.Client()))
	require.NoError(t, err)
	agent := agents.NewOpenAIFunctionsAgent(llm, lc)
	return chains.Run(ctx, agents.NewExecutor(agent, agents.WithMaxIterations(3)), "compute it")
}

// toolMessageSent returns the content of the tool message of the request.
func toolMessageSent(t *testing.T, req map[string]any) string {
	t.Helper()
	for _, m := range req["messages"].([]any) {
		if mm := m.(map[string]any); mm["role"] == "tool" {
			require.Equal(t, "call_1", mm["tool_call_id"])
			return mm["content"].(string)
		}
	}
	t.Fatal("no tool message sent")
	return ""
}

// TestRoundTripEmulator drives whole tool-call rounds through langchaingo's
// OpenAI functions agent and executor, a fake model speaking OpenAI's wire
// format and real Python in the sandboxed emulator: the tool message the
// agent sent back must hold the execution's output.
func TestRoundTripEmulator(t *testing.T) {
	client := emutest.Client(t, "IPython")
	tests := []struct {
		name      string
		tool      string
		arguments string // what the model sends: langchaingo's {"__arg1": input}
		want      []string
	}{
		{"plain code", tools.NameCodeInterpreter, `{"__arg1":"import math\nprint(math.factorial(20))"}`, []string{`"status":"Succeeded"`, `"stdout":"2432902008176640000\n"`}},
		{"JSON arguments", tools.NameCodeInterpreter, `{"__arg1":"{\"python_code\": \"sum(range(101))\"}"}`, []string{`"result":5050`}},
		{"a dict literal is code", tools.NameCodeInterpreter, `{"__arg1":"{\"a\": 1}"}`, []string{`"status":"Succeeded"`, `"result":"{'a': 1}"`}},
		{"fenced code", tools.NameCodeInterpreter, `{"__arg1":"` + "```python\\nprint(6 * 7)\\n```" + `"}`, []string{`"stdout":"42\n"`}},
		{"traceback is an answer", tools.NameCodeInterpreter, `{"__arg1":"1/0"}`, []string{`"status":"Failed"`, "ZeroDivisionError"}},
		{"list_files", tools.NameListFiles, `{"__arg1":""}`, []string{`[]`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lc, err := langchaingotools.New(tools.New(client.NewSession(), nil), nil)
			require.NoError(t, err)
			model := startFakeModel(t, tt.tool, tt.arguments)
			answer, err := runAgent(t.Context(), t, model, lc)
			require.NoError(t, err)
			reqs := model.Received()
			require.Len(t, reqs, 2)
			sent := toolMessageSent(t, reqs[1])
			for _, w := range tt.want {
				require.Contains(t, sent, w)
				require.Contains(t, answer, w, "the agent's final answer quotes the result it got")
			}
			// the functions the model saw: the tools' names and descriptions
			var names []string
			for _, tl := range reqs[0]["tools"].([]any) {
				fn := tl.(map[string]any)["function"].(map[string]any)
				names = append(names, fn["name"].(string))
				require.Contains(t, fn["description"], "Input: ")
			}
			require.Equal(t, []string{tools.NameCodeInterpreter, tools.NameListFiles}, names)
		})
	}
}

// TestServiceFailure: by default a service failure stops the executor with
// the *tools.Error; with ErrorsToModel the model gets the short safe text
// (no identifier) and the run completes; OnError sees it either way.
func TestServiceFailure(t *testing.T) {
	t.Parallel()
	const id = "secret-session-identifier"
	const want = "the code interpreter service answered 403 (AuthorizationFailed)"
	pool := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("x-ms-error-code", "AuthorizationFailed")
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`{"error":{"code":"AuthorizationFailed","message":"no for ` + id + `"}}`))
	}))
	t.Cleanup(pool.Close)
	client, err := azsessions.NewClientWithNoCredential(pool.URL, &azsessions.ClientOptions{ClientOptions: azcore.ClientOptions{Retry: policy.RetryOptions{MaxRetries: -1}}})
	require.NoError(t, err)
	tests := []struct {
		name          string
		errorsToModel bool
	}{
		{"stops the run", false},
		{"errors to model", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var logged []string
			lc, err := langchaingotools.New(tools.New(client.Session(id), nil), &langchaingotools.Options{
				ErrorsToModel: tt.errorsToModel,
				OnError:       func(tool string, err error) { logged = append(logged, tool+": "+err.Error()) },
			})
			require.NoError(t, err)
			model := startFakeModel(t, tools.NameListFiles, `{"__arg1":""}`)
			answer, err := runAgent(t.Context(), t, model, lc)
			require.Equal(t, []string{"list_files: " + want}, logged)
			if !tt.errorsToModel {
				var te *tools.Error
				require.ErrorAs(t, err, &te)
				require.Equal(t, want, te.Message)
				require.Len(t, model.Received(), 1)
				return
			}
			require.NoError(t, err)
			sent := toolMessageSent(t, model.Received()[1])
			require.JSONEq(t, `{"error":"`+want+`"}`, sent)
			require.NotContains(t, sent, id)
			require.Contains(t, answer, want)
		})
	}
}

// TestInput covers how the agent's input string becomes the tool's
// arguments, with a tool that echoes them.
func TestInput(t *testing.T) {
	t.Parallel()
	echo := func(name, schema string) tools.Tool {
		return tools.Tool{Name: name, Description: "d.", Parameters: json.RawMessage(schema), Call: func(_ context.Context, args string) (string, error) { return args, nil }}
	}
	code := echo("code", `{"type":"object","properties":{"python_code":{"type":"string"}},"required":["python_code"]}`)
	none := echo("none", `{"type":"object","properties":{}}`)
	two := echo("two", `{"type":"object","properties":{"local_file_path":{"type":"string"},"remote_file_name":{"type":"string"}},"required":["local_file_path"]}`)
	tests := []struct {
		name     string
		tool     tools.Tool
		input    string
		want     string
		wantDesc string
	}{
		{"plain code", code, "print(1)", `{"python_code":"print(1)"}`, "d. Input: the python_code as plain text."},
		{"JSON object of arguments", code, ` {"python_code": "x"} `, `{"python_code": "x"}`, ""},
		{"dict literal", code, `{"a": 1}`, `{"python_code":"{\"a\": 1}"}`, ""},
		{"no arguments", none, "anything", `{}`, "d. Input: none (send an empty string)."},
		{"two arguments, plain", two, "data.csv", `{"local_file_path":"data.csv"}`, `d. Input: a JSON object {"local_file_path": string, "remote_file_name": string (optional)}, or just the local_file_path as plain text.`},
		{"two arguments, JSON", two, `{"local_file_path":"a.csv","remote_file_name":"b.csv"}`, `{"local_file_path":"a.csv","remote_file_name":"b.csv"}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			lc, err := langchaingotools.New([]tools.Tool{tt.tool}, nil)
			require.NoError(t, err)
			got, err := lc[0].Call(t.Context(), tt.input)
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
			require.Equal(t, tt.tool.Name, lc[0].Name())
			if tt.wantDesc != "" {
				require.Equal(t, tt.wantDesc, lc[0].Description())
			}
		})
	}
	_, err := langchaingotools.New([]tools.Tool{echo("bad", `{"type":"string"}`)}, nil)
	require.ErrorContains(t, err, "not an object schema")
}
