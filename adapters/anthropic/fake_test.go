package anthropictools_test

import (
	"encoding/json"
	"testing"

	"github.com/azsessions/azsessions/internal/fakemodel"
)

// newFakeModel is a server speaking the Anthropic Messages API wire format
// (POST /v1/messages) that asks for one call of the tool name with input,
// then answers with the text of the tool_result it received.
func newFakeModel(name, input string) *fakemodel.Server {
	return fakemodel.New(func(path string, req map[string]any) any {
		if path != "/v1/messages" {
			return nil
		}
		result := ""
		msgs, _ := req["messages"].([]any)
		if len(msgs) > 0 {
			last, _ := msgs[len(msgs)-1].(map[string]any)
			content, _ := last["content"].([]any)
			for _, b := range content {
				if bm, _ := b.(map[string]any); bm["type"] == "tool_result" {
					parts, _ := bm["content"].([]any)
					for _, p := range parts {
						if pm, _ := p.(map[string]any); pm["type"] == "text" {
							result, _ = pm["text"].(string)
						}
					}
				}
			}
		}
		usage := map[string]any{"input_tokens": 1, "output_tokens": 1}
		if result == "" {
			return map[string]any{
				"id": "msg_1", "type": "message", "role": "assistant", "model": req["model"],
				"content":     []any{map[string]any{"type": "tool_use", "id": "toolu_1", "name": name, "input": json.RawMessage(input)}},
				"stop_reason": "tool_use", "stop_sequence": nil, "usage": usage,
			}
		}
		return map[string]any{
			"id": "msg_2", "type": "message", "role": "assistant", "model": req["model"],
			"content":     []any{map[string]any{"type": "text", "text": "The tool said: " + result}},
			"stop_reason": "end_turn", "stop_sequence": nil, "usage": usage,
		}
	})
}

// startFakeModel is newFakeModel closed at the end of the test.
func startFakeModel(t testing.TB, name, input string) *fakemodel.Server {
	f := newFakeModel(name, input)
	t.Cleanup(f.Close)
	return f
}
