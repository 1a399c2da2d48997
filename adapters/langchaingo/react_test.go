package langchaingotools_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/agents"
	"github.com/tmc/langchaingo/chains"
	"github.com/tmc/langchaingo/llms/openai"

	langchaingotools "github.com/azsessions/azsessions/adapters/langchaingo"
	"github.com/azsessions/azsessions/internal/emutest"
	"github.com/azsessions/azsessions/tools"
)

// observation finds a tool's answer (a JSON object or array) in a ReAct
// prompt's scratchpad.
var observation = regexp.MustCompile(`\nObservation: ([\[{][^\n]*)`)

// reactModel is a Chat Completions server that answers like a ReAct model
// prompted by langchaingo's one-shot (MRKL) agent: first an Action with a
// plain-text Action Input, then a Final Answer quoting the Observation it
// finds in the prompt.
type reactModel struct {
	action, input string

	mu      sync.Mutex
	prompts []string
}

func (f *reactModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model    string `json:"model"`
		Messages []struct {
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	body, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(body, &req); err != nil || r.URL.Path != "/chat/completions" {
		http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
		return
	}
	var prompt strings.Builder
	for _, m := range req.Messages {
		var s string
		if json.Unmarshal(m.Content, &s) == nil {
			prompt.WriteString(s)
			continue
		}
		var parts []struct {
			Text string `json:"text"`
		}
		_ = json.Unmarshal(m.Content, &parts)
		for _, p := range parts {
			prompt.WriteString(p.Text)
		}
	}
	f.mu.Lock()
	f.prompts = append(f.prompts, prompt.String())
	f.mu.Unlock()
	content := "Thought: I should run Python.\nAction: " + f.action + "\nAction Input: " + f.input
	// the template's own "Observation: the result of the action" is not one
	if m := observation.FindStringSubmatch(prompt.String()); m != nil {
		content = "Thought: I know the answer.\nFinal Answer: The tool said: " + m[1]
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, mustJSON(map[string]any{
		"id": "chatcmpl-r", "object": "chat.completion", "created": 1, "model": req.Model,
		"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "message": map[string]any{"role": "assistant", "content": content}}},
		"usage":   map[string]any{"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
	}))
}

// TestOneShotAgentEmulator drives langchaingo's ReAct (one-shot) agent: the
// model's plain-text Action Input is the code, run in the sandboxed
// emulator, and the Observation in the next prompt is the real output.
func TestOneShotAgentEmulator(t *testing.T) {
	client := emutest.Client(t, "IPython")
	tests := []struct {
		name, action, input string
		want                []string
	}{
		{"plain code", tools.NameCodeInterpreter, "import math; print(math.factorial(20))", []string{`"status":"Succeeded"`, `"stdout":"2432902008176640000\n"`}},
		{"list_files", tools.NameListFiles, "none", []string{`[]`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lc, err := langchaingotools.New(tools.New(client.NewSession(), nil), nil)
			require.NoError(t, err)
			fake := &reactModel{action: tt.action, input: tt.input}
			srv := httptest.NewServer(fake)
			t.Cleanup(srv.Close)
			llm, err := openai.New(openai.WithBaseURL(srv.URL), openai.WithToken("sk-test"), openai.WithModel("gpt-test"), openai.WithHTTPClient(srv.Client()))
			require.NoError(t, err)
			answer, err := chains.Run(t.Context(), agents.NewExecutor(agents.NewOneShotAgent(llm, lc), agents.WithMaxIterations(3)), "compute it")
			require.NoError(t, err)
			fake.mu.Lock()
			prompts := append([]string(nil), fake.prompts...)
			fake.mu.Unlock()
			require.Len(t, prompts, 2)
			// the first prompt describes the tools with their input sentence
			require.Contains(t, prompts[0], tools.NameCodeInterpreter)
			require.Contains(t, prompts[0], "Input: the python_code as plain text.")
			for _, w := range tt.want {
				require.Contains(t, prompts[1], w, "the observation in the second prompt")
				require.Contains(t, answer, w)
			}
		})
	}
}
