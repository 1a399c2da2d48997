package anthropictools_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// fakeModel is a server speaking the Anthropic Messages API wire format
// that asks for one tool call and then answers with the text of the
// tool_result it received.
type fakeModel struct {
	*httptest.Server
	name  string
	input json.RawMessage // the tool_use input

	mu       sync.Mutex
	requests []map[string]any
}

func newFakeModel(name, input string) *fakeModel {
	f := &fakeModel{name: name, input: json.RawMessage(input)}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	return f
}

func startFakeModel(t testing.TB, name, input string) *fakeModel {
	f := newFakeModel(name, input)
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
	if err != nil || r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"type":"error","error":{"type":"invalid_request_error","message":"bad request"}}`)
		return
	}
	f.mu.Lock()
	f.requests = append(f.requests, req)
	f.mu.Unlock()
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
	w.Header().Set("Content-Type", "application/json")
	usage := map[string]any{"input_tokens": 1, "output_tokens": 1}
	if result == "" {
		_, _ = io.WriteString(w, mustJSON(map[string]any{
			"id": "msg_1", "type": "message", "role": "assistant", "model": req["model"],
			"content":     []any{map[string]any{"type": "tool_use", "id": "toolu_1", "name": f.name, "input": f.input}},
			"stop_reason": "tool_use", "stop_sequence": nil, "usage": usage,
		}))
		return
	}
	_, _ = io.WriteString(w, mustJSON(map[string]any{
		"id": "msg_2", "type": "message", "role": "assistant", "model": req["model"],
		"content":     []any{map[string]any{"type": "text", "text": "The tool said: " + result}},
		"stop_reason": "end_turn", "stop_sequence": nil, "usage": usage,
	}))
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
