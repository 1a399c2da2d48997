package openaitools_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// fakeModel is an OpenAI-compatible server (Chat Completions and Responses
// wire format) that asks for one function call and then answers with the
// text of the function's result it received.
type fakeModel struct {
	*httptest.Server
	name, arguments string // the call the model makes

	mu       sync.Mutex
	requests []map[string]any // the bodies received, decoded
}

func newFakeModel(name, arguments string) *fakeModel {
	f := &fakeModel{name: name, arguments: arguments}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	return f
}

// startFakeModel is newFakeModel closed at the end of the test.
func startFakeModel(t testing.TB, name, arguments string) *fakeModel {
	f := newFakeModel(name, arguments)
	t.Cleanup(f.Close)
	return f
}

func (f *fakeModel) received() []map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]map[string]any(nil), f.requests...)
}

func (f *fakeModel) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	var req map[string]any
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err != nil || r.Method != http.MethodPost {
		http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.requests = append(f.requests, req)
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/chat/completions":
		msgs, _ := req["messages"].([]any)
		result := ""
		for _, m := range msgs {
			if mm, _ := m.(map[string]any); mm["role"] == "tool" {
				result, _ = mm["content"].(string)
			}
		}
		if result == "" {
			_, _ = io.WriteString(w, mustJSON(map[string]any{
				"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": req["model"],
				"choices": []any{map[string]any{"index": 0, "finish_reason": "tool_calls", "message": map[string]any{
					"role": "assistant", "content": nil,
					"tool_calls": []any{map[string]any{"id": "call_1", "type": "function", "function": map[string]any{"name": f.name, "arguments": f.arguments}}},
				}}},
			}))
			return
		}
		_, _ = io.WriteString(w, mustJSON(map[string]any{
			"id": "chatcmpl-2", "object": "chat.completion", "created": 2, "model": req["model"],
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "message": map[string]any{"role": "assistant", "content": "The tool said: " + result}}},
		}))
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
			_, _ = io.WriteString(w, mustJSON(map[string]any{
				"id": "resp_1", "object": "response", "created_at": 1, "status": "completed", "model": req["model"],
				"output": []any{map[string]any{"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": f.name, "arguments": f.arguments, "status": "completed"}},
			}))
			return
		}
		_, _ = io.WriteString(w, mustJSON(map[string]any{
			"id": "resp_2", "object": "response", "created_at": 2, "status": "completed", "model": req["model"],
			"output": []any{map[string]any{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
				"content": []any{map[string]any{"type": "output_text", "text": "The tool said: " + result, "annotations": []any{}}}}},
		}))
	default:
		http.NotFound(w, r)
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
