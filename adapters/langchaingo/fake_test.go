package langchaingotools_test

import (
	"encoding/json"
	"testing"

	"github.com/azsessions/azsessions/internal/fakemodel"
)

// newFakeModel is a Chat Completions server (POST /chat/completions,
// OpenAI's wire format, which langchaingo's llms/openai speaks) that asks
// for one call of the function name with arguments, then answers with the
// content of the tool message it received.
func newFakeModel(name, arguments string) *fakemodel.Server {
	return fakemodel.New(func(path string, req map[string]any) any {
		if path != "/chat/completions" {
			return nil
		}
		result := ""
		msgs, _ := req["messages"].([]any)
		for _, m := range msgs {
			if mm, _ := m.(map[string]any); mm["role"] == "tool" {
				result, _ = mm["content"].(string)
			}
		}
		usage := map[string]any{"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
		if result == "" {
			return map[string]any{
				"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": req["model"],
				"choices": []any{map[string]any{"index": 0, "finish_reason": "tool_calls", "message": map[string]any{
					"role": "assistant", "content": "",
					"tool_calls": []any{map[string]any{"id": "call_1", "type": "function", "function": map[string]any{"name": name, "arguments": arguments}}},
				}}},
				"usage": usage,
			}
		}
		return map[string]any{
			"id": "chatcmpl-2", "object": "chat.completion", "created": 2, "model": req["model"],
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "message": map[string]any{"role": "assistant", "content": "The tool said: " + result}}},
			"usage":   usage,
		}
	})
}

// startFakeModel is newFakeModel closed at the end of the test.
func startFakeModel(t testing.TB, name, arguments string) *fakemodel.Server {
	f := newFakeModel(name, arguments)
	t.Cleanup(f.Close)
	return f
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
