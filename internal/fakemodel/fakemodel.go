// Package fakemodel is a stand-in for an LLM provider's HTTP API in the
// tests and examples of the agent SDK adapters (adapters/openai,
// adapters/anthropic, adapters/langchaingo): it records what the SDK sent
// and answers what the test scripts, so that a tool-calling loop runs
// end to end without a network or a model.
package fakemodel

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
)

// badRequest is the error body of a request that is not a POST with a JSON
// object: both the OpenAI ({"error":{"message"}}) and the Anthropic
// ({"type":"error","error":{"type","message"}}) SDKs decode it.
const badRequest = `{"type":"error","error":{"type":"invalid_request_error","message":"bad request"}}`

// Server is an httptest.Server that decodes each POST's JSON body, records
// it, and answers with the JSON encoding of what its reply function returns
// for the request's URL path and decoded body (nil: 404). Anything else is
// answered 400 with an error body the SDKs decode.
type Server struct {
	*httptest.Server
	reply func(path string, req map[string]any) any

	mu       sync.Mutex
	requests []map[string]any
}

// New starts a Server; the caller closes it.
func New(reply func(path string, req map[string]any) any) *Server {
	s := &Server{reply: reply}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// Received returns the decoded bodies of the requests answered so far, in
// order.
func (s *Server) Received() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]map[string]any(nil), s.requests...)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	var req map[string]any
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err != nil || r.Method != http.MethodPost || req == nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, badRequest)
		return
	}
	s.mu.Lock()
	s.requests = append(s.requests, req)
	s.mu.Unlock()
	answer := s.reply(r.URL.Path, req)
	if answer == nil {
		http.NotFound(w, r)
		return
	}
	b, err := json.Marshal(answer)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}
