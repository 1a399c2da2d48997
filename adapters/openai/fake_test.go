package openaitools_test

import (
	"testing"

	"github.com/azsessions/azsessions/internal/fakemodel"
)

// newFakeModel is a server speaking OpenAI's Chat Completions
// (POST /chat/completions) and Responses (POST /responses) wire formats
// that asks for one call of the function name with arguments, then answers
// with the text of the tool output it received.
func newFakeModel(name, arguments string) *fakemodel.Server {
	return fakemodel.New(func(path string, req map[string]any) any {
		switch path {
		case "/chat/completions":
			msgs, _ := req["messages"].([]any)
			result := ""
			for _, m := range msgs {
				if mm, _ := m.(map[string]any); mm["role"] == "tool" {
					result, _ = mm["content"].(string)
				}
			}
			if result == "" {
				return map[string]any{
					"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": req["model"],
					"choices": []any{map[string]any{"index": 0, "finish_reason": "tool_calls", "message": map[string]any{
						"role": "assistant", "content": nil,
						"tool_calls": []any{map[string]any{"id": "call_1", "type": "function", "function": map[string]any{"name": name, "arguments": arguments}}},
					}}},
				}
			}
			return map[string]any{
				"id": "chatcmpl-2", "object": "chat.completion", "created": 2, "model": req["model"],
				"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "message": map[string]any{"role": "assistant", "content": "The tool said: " + result}}},
			}
		case "/responses":
			input, _ := req["input"].([]any)
			result := ""
			for _, it := range input {
				if m, _ := it.(map[string]any); m["type"] == "function_call_output" {
					switch out := m["output"].(type) {
					case string:
						result = out
					case []any: // input_text and input_image parts
						for _, p := range out {
							if pm, _ := p.(map[string]any); pm["type"] == "input_text" {
								result, _ = pm["text"].(string)
							}
						}
					}
				}
			}
			if result == "" {
				return map[string]any{
					"id": "resp_1", "object": "response", "created_at": 1, "status": "completed", "model": req["model"],
					"output": []any{map[string]any{"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": name, "arguments": arguments, "status": "completed"}},
				}
			}
			return map[string]any{
				"id": "resp_2", "object": "response", "created_at": 2, "status": "completed", "model": req["model"],
				"output": []any{map[string]any{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
					"content": []any{map[string]any{"type": "output_text", "text": "The tool said: " + result, "annotations": []any{}}}}},
			}
		}
		return nil
	})
}

// startFakeModel is newFakeModel closed at the end of the test.
func startFakeModel(t testing.TB, name, arguments string) *fakemodel.Server {
	f := newFakeModel(name, arguments)
	t.Cleanup(f.Close)
	return f
}
