package langchaingotools_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// fakeModel is a Chat Completions server (OpenAI's wire format, which
// langchaingo's llms/openai speaks) that asks for one function call and then
// answers with the content of the tool message it received.
type fakeModel struct {
	*httptest.Server
	name, arguments string

	mu       sync.Mutex
	requests []map[string]any
}

func newFakeModel(name, arguments string) *fakeModel {
	f := &fakeModel{name: name, arguments: arguments}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	return f
}

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
	if err != nil || r.Method != http.MethodPost || r.URL.Path != "/chat/completions" {
		http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.requests = append(f.requests, req)
	f.mu.Unlock()
	result := ""
	msgs, _ := req["messages"].([]any)
	for _, m := range msgs {
		if mm, _ := m.(map[string]any); mm["role"] == "tool" {
			result, _ = mm["content"].(string)
		}
	}
	w.Header().Set("Content-Type", "application/json")
	if result == "" {
		_, _ = io.WriteString(w, mustJSON(map[string]any{
			"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": req["model"],
			"choices": []any{map[string]any{"index": 0, "finish_reason": "tool_calls", "message": map[string]any{
				"role": "assistant", "content": "",
				"tool_calls": []any{map[string]any{"id": "call_1", "type": "function", "function": map[string]any{"name": f.name, "arguments": f.arguments}}},
			}}},
			"usage": map[string]any{"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
		}))
		return
	}
	_, _ = io.WriteString(w, mustJSON(map[string]any{
		"id": "chatcmpl-2", "object": "chat.completion", "created": 2, "model": req["model"],
		"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "message": map[string]any{"role": "assistant", "content": "The tool said: " + result}}},
		"usage":   map[string]any{"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
	}))
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
