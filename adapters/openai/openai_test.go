package openaitools_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/require"

	"github.com/azsessions/azsessions"
	openaitools "github.com/azsessions/azsessions/adapters/openai"
	"github.com/azsessions/azsessions/internal/emutest"
	"github.com/azsessions/azsessions/internal/fakemodel"
	"github.com/azsessions/azsessions/tools"
)

// newOpenAI returns an openai-go client for the fake model.
func newOpenAI(f *fakemodel.Server) openai.Client {
	return openai.NewClient(option.WithBaseURL(f.URL), option.WithAPIKey("sk-test"), option.WithHTTPClient(f.Client()), option.WithMaxRetries(0))
}

// chatRound drives a whole Chat Completions tool-call round: the model
// calls a tool, the Toolset runs it, the result goes back, the model answers.
func chatRound(ctx context.Context, t *testing.T, client openai.Client, ts *openaitools.Toolset) (string, error) {
	params := openai.ChatCompletionNewParams{
		Model:    "gpt-test",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("compute it")},
		Tools:    ts.ChatCompletionTools(),
	}
	var toolErr error
	for range 3 {
		completion, err := client.Chat.Completions.New(ctx, params)
		require.NoError(t, err)
		msg := completion.Choices[0].Message
		if len(msg.ToolCalls) == 0 {
			return msg.Content, toolErr
		}
		params.Messages = append(params.Messages, msg.ToParam())
		results, err := ts.ChatCompletionToolMessages(ctx, msg.ToolCalls)
		toolErr = errors.Join(toolErr, err)
		require.Len(t, results, len(msg.ToolCalls), "one tool message per call, even on errors")
		params.Messages = append(params.Messages, results...)
	}
	t.Fatal("no final answer")
	return "", nil
}

// responsesRound is chatRound on the Responses API.
func responsesRound(ctx context.Context, t *testing.T, client openai.Client, ts *openaitools.Toolset) (string, error) {
	params := responses.ResponseNewParams{
		Model: "gpt-test",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("compute it")},
		Tools: ts.ResponseTools(),
	}
	var toolErr error
	for range 3 {
		resp, err := client.Responses.New(ctx, params)
		require.NoError(t, err)
		outputs, err := ts.ResponseFunctionCallOutputs(ctx, resp.Output)
		toolErr = errors.Join(toolErr, err)
		if len(outputs) == 0 {
			return resp.OutputText(), toolErr
		}
		params.PreviousResponseID = openai.String(resp.ID)
		params.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: outputs}
	}
	t.Fatal("no final answer")
	return "", nil
}

// TestRoundTripEmulator drives whole tool-call rounds through openai-go, a
// fake model speaking OpenAI's wire format and real Python in the sandboxed
// emulator: the result the SDK sent back must hold the execution's output.
func TestRoundTripEmulator(t *testing.T) {
	client := emutest.Client(t, "IPython", "matplotlib")
	tests := []struct {
		name      string
		api       string // "chat" or "responses"
		tool      string
		arguments string
		want      []string // in the tool result the SDK sent
		image     bool     // an input_image is attached (Responses only)
	}{
		{"chat code_interpreter", "chat", tools.NameCodeInterpreter, `{"python_code":"import math\nprint(math.factorial(20))"}`, []string{`"status":"Succeeded"`, `"stdout":"2432902008176640000\n"`}, false},
		{"chat traceback", "chat", tools.NameCodeInterpreter, `{"python_code":"1/0"}`, []string{`"status":"Failed"`, "ZeroDivisionError"}, false},
		{"chat unknown tool", "chat", "shell", `{}`, []string{`unknown tool \"shell\"`}, false},
		{"responses code_interpreter", "responses", tools.NameCodeInterpreter, `{"python_code":"sum(range(101))"}`, []string{`"status":"Succeeded"`, `"result":5050`}, false},
		{"responses image", "responses", tools.NameCodeInterpreter, `{"python_code":"import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.show()"}`, []string{`"type":"image"`, `"format":"png"`, "the image is attached to this answer"}, true},
		{"responses list_files", "responses", tools.NameListFiles, `{}`, []string{`[]`}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts, err := openaitools.New(tools.New(client.NewSession(), nil))
			require.NoError(t, err)
			model := startFakeModel(t, tt.tool, tt.arguments)
			var answer string
			if tt.api == "chat" {
				answer, err = chatRound(t.Context(), t, newOpenAI(model), ts)
			} else {
				answer, err = responsesRound(t.Context(), t, newOpenAI(model), ts)
			}
			require.NoError(t, err)
			reqs := model.Received()
			require.Len(t, reqs, 2)
			sent := toolResultSent(t, tt.api, reqs[1])
			for _, w := range tt.want {
				require.Contains(t, sent.text, w)
				require.Contains(t, answer, w, "the model's final answer quotes the result it got")
			}
			if tt.image {
				require.Len(t, sent.images, 1)
				data, ok := strings.CutPrefix(sent.images[0], "data:image/png;base64,")
				require.True(t, ok, sent.images[0][:min(40, len(sent.images[0]))])
				png, err := base64.StdEncoding.DecodeString(data)
				require.NoError(t, err)
				require.True(t, strings.HasPrefix(string(png), "\x89PNG\r\n\x1a\n"))
				require.NotContains(t, sent.text, data[:64], "the image is never inlined in the text")
			} else {
				require.Empty(t, sent.images)
			}
			// the tools the SDK sent are the strict definitions
			first := reqs[0]["tools"].([]any)
			require.Len(t, first, 2)
			for _, tool := range first {
				tm := tool.(map[string]any)
				if tt.api == "chat" {
					tm = tm["function"].(map[string]any)
				}
				require.Equal(t, true, tm["strict"])
				require.Equal(t, false, tm["parameters"].(map[string]any)["additionalProperties"])
			}
		})
	}
}

// sentResult is the tool result the SDK sent back to the model.
type sentResult struct {
	text   string
	images []string
}

func toolResultSent(t *testing.T, api string, req map[string]any) sentResult {
	t.Helper()
	var out sentResult
	if api == "chat" {
		for _, m := range req["messages"].([]any) {
			if mm := m.(map[string]any); mm["role"] == "tool" {
				require.Equal(t, "call_1", mm["tool_call_id"])
				out.text = mm["content"].(string)
			}
		}
		return out
	}
	require.Equal(t, "resp_1", req["previous_response_id"])
	for _, it := range req["input"].([]any) {
		m := it.(map[string]any)
		require.Equal(t, "function_call_output", m["type"])
		require.Equal(t, "call_1", m["call_id"])
		switch o := m["output"].(type) {
		case string:
			out.text = o
		case []any:
			for _, p := range o {
				pm := p.(map[string]any)
				switch pm["type"] {
				case "input_text":
					out.text = pm["text"].(string)
				case "input_image":
					out.images = append(out.images, pm["image_url"].(string))
				}
			}
		}
	}
	return out
}

// TestServiceFailure: when the service cannot be used, the tool result holds
// the short safe text (no identifier), the round still completes, and the Go
// error wraps the *tools.Error.
func TestServiceFailure(t *testing.T) {
	t.Parallel()
	const id = "secret-session-identifier"
	tests := []struct {
		name   string
		status int
		code   string
		want   string
	}{
		{"forbidden", http.StatusForbidden, "AuthorizationFailed", "the code interpreter service answered 403 (AuthorizationFailed)"},
		// a 503 to an execution may come after the code ran (exactly-once client)
		{"unavailable", http.StatusServiceUnavailable, "ServiceUnavailable", "lost the connection to the code interpreter service: the code may or may not have run"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			pool := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("x-ms-error-code", tt.code)
				w.WriteHeader(tt.status)
				_, _ = w.Write([]byte(`{"error":{"code":"` + tt.code + `","message":"no for ` + id + `"}}`))
			}))
			t.Cleanup(pool.Close)
			client, err := azsessions.NewClientWithNoCredential(pool.URL, &azsessions.ClientOptions{ClientOptions: azcore.ClientOptions{Retry: policy.RetryOptions{MaxRetries: -1}}})
			require.NoError(t, err)
			ts, err := openaitools.New(tools.New(client.Session(id), nil))
			require.NoError(t, err)
			for _, api := range []string{"chat", "responses"} {
				model := startFakeModel(t, tools.NameCodeInterpreter, `{"python_code":"print(1)"}`)
				if api == "chat" {
					_, err = chatRound(t.Context(), t, newOpenAI(model), ts)
				} else {
					_, err = responsesRound(t.Context(), t, newOpenAI(model), ts)
				}
				var te *tools.Error
				require.ErrorAs(t, err, &te, api)
				require.Equal(t, tt.want, te.Message)
				sent := toolResultSent(t, api, model.Received()[1])
				require.JSONEq(t, `{"error":"`+tt.want+`"}`, sent.text)
				require.NotContains(t, sent.text, id)
			}
		})
	}
}

func TestNew(t *testing.T) {
	t.Parallel()
	good := tools.Tool{Name: "a", Parameters: json.RawMessage(`{"type":"object","properties":{}}`)}
	tests := []struct {
		name    string
		tools   []tools.Tool
		wantErr string
	}{
		{"ok", []tools.Tool{good}, ""},
		{"duplicate", []tools.Tool{good, good}, `two tools named "a"`},
		{"not an object", []tools.Tool{{Name: "b", Parameters: json.RawMessage(`{"type":"string"}`)}}, "not an object schema"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := openaitools.New(tt.tools)
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tt.wantErr)
		})
	}
}
