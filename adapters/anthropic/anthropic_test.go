package anthropictools_test

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
	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/stretchr/testify/require"

	"github.com/azsessions/azsessions"
	anthropictools "github.com/azsessions/azsessions/adapters/anthropic"
	"github.com/azsessions/azsessions/internal/emutest"
	"github.com/azsessions/azsessions/internal/fakemodel"
	"github.com/azsessions/azsessions/tools"
)

func newAnthropic(f *fakemodel.Server) anthropic.Client {
	return anthropic.NewClient(option.WithBaseURL(f.URL), option.WithAPIKey("sk-ant-test"), option.WithHTTPClient(f.Client()), option.WithMaxRetries(0))
}

// round drives a whole tool-call round: the model asks for a tool, the
// Toolset runs it, the tool_result goes back, the model answers.
func round(ctx context.Context, t *testing.T, client anthropic.Client, ts *anthropictools.Toolset) (string, error) {
	params := anthropic.MessageNewParams{
		Model:     "claude-test",
		MaxTokens: 1024,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("compute it"))},
		Tools:     ts.Tools(),
	}
	var toolErr error
	for range 3 {
		msg, err := client.Messages.New(ctx, params)
		require.NoError(t, err)
		params.Messages = append(params.Messages, msg.ToParam())
		results, err := ts.ToolResults(ctx, msg.Content)
		toolErr = errors.Join(toolErr, err)
		if len(results) == 0 {
			var text strings.Builder
			for _, b := range msg.Content {
				text.WriteString(b.Text)
			}
			return text.String(), toolErr
		}
		params.Messages = append(params.Messages, anthropic.NewUserMessage(results...))
	}
	t.Fatal("no final answer")
	return "", nil
}

// sentResult is the tool_result the SDK sent back to the model.
type sentResult struct {
	text    string
	isError bool
	images  []map[string]any // the image blocks' sources
}

func toolResultSent(t *testing.T, req map[string]any) sentResult {
	t.Helper()
	msgs := req["messages"].([]any)
	last := msgs[len(msgs)-1].(map[string]any)
	require.Equal(t, "user", last["role"])
	var out sentResult
	for _, b := range last["content"].([]any) {
		bm := b.(map[string]any)
		require.Equal(t, "tool_result", bm["type"])
		require.Equal(t, "toolu_1", bm["tool_use_id"])
		out.isError, _ = bm["is_error"].(bool)
		for _, p := range bm["content"].([]any) {
			pm := p.(map[string]any)
			switch pm["type"] {
			case "text":
				out.text = pm["text"].(string)
			case "image":
				out.images = append(out.images, pm["source"].(map[string]any))
			}
		}
	}
	return out
}

// TestRoundTripEmulator drives whole tool-call rounds through the Anthropic
// SDK, a fake model speaking the Messages API and real Python in the
// sandboxed emulator: the tool_result the SDK sent back must hold the
// execution's output (and the figure as an image block).
func TestRoundTripEmulator(t *testing.T) {
	client := emutest.Client(t, "IPython", "matplotlib")
	tests := []struct {
		name    string
		tool    string
		input   string
		want    []string
		isError bool
		image   bool
	}{
		{"code_interpreter", tools.NameCodeInterpreter, `{"python_code":"import math\nprint(math.factorial(20))"}`, []string{`"status":"Succeeded"`, `"stdout":"2432902008176640000\n"`}, false, false},
		{"traceback is an answer", tools.NameCodeInterpreter, `{"python_code":"1/0"}`, []string{`"status":"Failed"`, "ZeroDivisionError"}, false, false},
		{"image block", tools.NameCodeInterpreter, `{"python_code":"import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.show()"}`, []string{`"type":"image"`, `"format":"png"`, "the image is attached to this answer"}, false, true},
		{"list_files", tools.NameListFiles, `{}`, []string{`[]`}, false, false},
		{"unknown tool", "shell", `{"cmd":"ls"}`, []string{`unknown tool "shell"`}, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts, err := anthropictools.New(tools.New(client.NewSession(), nil))
			require.NoError(t, err)
			model := startFakeModel(t, tt.tool, tt.input)
			answer, err := round(t.Context(), t, newAnthropic(model), ts)
			require.NoError(t, err)
			reqs := model.Received()
			require.Len(t, reqs, 2)
			sent := toolResultSent(t, reqs[1])
			require.Equal(t, tt.isError, sent.isError)
			for _, w := range tt.want {
				require.Contains(t, sent.text, w)
				require.Contains(t, answer, w, "the model's final answer quotes the result it got")
			}
			if tt.image {
				require.Len(t, sent.images, 1)
				src := sent.images[0]
				require.Equal(t, "base64", src["type"])
				require.Equal(t, "image/png", src["media_type"])
				png, err := base64.StdEncoding.DecodeString(src["data"].(string))
				require.NoError(t, err)
				require.True(t, strings.HasPrefix(string(png), "\x89PNG\r\n\x1a\n"))
				require.NotContains(t, sent.text, src["data"].(string)[:64], "the image is never inlined in the text")
			} else {
				require.Empty(t, sent.images)
			}
			// the tools the SDK sent carry the tools' own schemas
			sentTools := reqs[0]["tools"].([]any)
			require.Len(t, sentTools, 2)
			for _, st := range sentTools {
				stm := st.(map[string]any)
				schema, err := json.Marshal(stm["input_schema"])
				require.NoError(t, err)
				var want tools.Tool
				for _, tl := range tools.New(client.NewSession(), nil) {
					if tl.Name == stm["name"] {
						want = tl
					}
				}
				require.JSONEq(t, string(want.Parameters), string(schema))
				require.Equal(t, want.Description, stm["description"])
			}
		})
	}
}

// TestServiceFailure: when the service cannot be used, the tool_result has
// is_error and the short safe text (no identifier), the round still
// completes, and the Go error wraps the *tools.Error.
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
		{"too many requests", http.StatusTooManyRequests, "TooManyRequests", "the code interpreter service answered 429 (TooManyRequests)"},
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
			ts, err := anthropictools.New(tools.New(client.Session(id), nil))
			require.NoError(t, err)
			model := startFakeModel(t, tools.NameListFiles, `{}`)
			_, err = round(t.Context(), t, newAnthropic(model), ts)
			var te *tools.Error
			require.ErrorAs(t, err, &te)
			require.Equal(t, tt.want, te.Message)
			sent := toolResultSent(t, model.Received()[1])
			require.True(t, sent.isError)
			require.Equal(t, tt.want, sent.text)
			require.NotContains(t, sent.text, id)
		})
	}
}

func TestImageBlock(t *testing.T) {
	t.Parallel()
	tests := []struct {
		format string
		want   anthropic.Base64ImageSourceMediaType
		ok     bool
	}{
		{"png", anthropic.Base64ImageSourceMediaTypeImagePNG, true},
		{"jpeg", anthropic.Base64ImageSourceMediaTypeImageJPEG, true},
		{"JPG", anthropic.Base64ImageSourceMediaTypeImageJPEG, true},
		{"gif", anthropic.Base64ImageSourceMediaTypeImageGIF, true},
		{"webp", anthropic.Base64ImageSourceMediaTypeImageWebP, true},
		{"svg", "", false},
		{"", "", false},
	}
	for _, tt := range tests {
		b, ok := anthropictools.ImageBlock(azsessions.Image{Format: tt.format, Data: []byte("abc")})
		require.Equal(t, tt.ok, ok, tt.format)
		if ok {
			require.Equal(t, tt.want, b.Source.OfBase64.MediaType)
			require.Equal(t, "YWJj", b.Source.OfBase64.Data)
		}
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
		{"not JSON", []tools.Tool{{Name: "c", Parameters: json.RawMessage(`{`)}}, "parameters"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := anthropictools.New(tt.tools)
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tt.wantErr)
		})
	}
}
