package azsessions_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/streaming"

	"github.com/azsessions/azsessions"
)

// Talking to a custom container's own JSON API through the pool. Here an
// httptest server stands for the pool and its container: a small to-do API
// that keeps one list per session identifier. Against Azure, use NewClient
// with the pool's management endpoint (https://<pool>.<env>.<region>.azurecontainerapps.io)
// and a credential; the pool forwards each request to the session's
// container on its target port.
func ExampleSession_Do() {
	var mu sync.Mutex
	todos := map[string][]string{} // session identifier -> items
	container := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.URL.Query().Get("identifier") // added by the client; the pool routes by it
		mu.Lock()
		defer mu.Unlock()
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/todos":
			var item struct{ Title string }
			if err := json.NewDecoder(r.Body).Decode(&item); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			todos[id] = append(todos[id], item.Title)
			w.WriteHeader(http.StatusCreated)
		case r.Method == http.MethodGet && r.URL.Path == "/todos":
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"items": todos[id]})
		default:
			http.NotFound(w, r)
		}
	}))
	defer container.Close()

	client, err := azsessions.NewClientWithNoCredential(container.URL, nil)
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	sess := client.NewSession()
	for _, title := range []string{"write the report", "water the plants"} {
		body, _ := json.Marshal(map[string]string{"title": title})
		req, _ := http.NewRequest(http.MethodPost, "/todos", nil)
		req.Header.Set("Content-Type", "application/json")
		// a seekable body lets the client retry; a POST is still sent once
		// unless DoOptions.RetryNonIdempotent says the API allows repeats
		req.Body = streaming.NopCloser(bytes.NewReader(body))
		resp, err := sess.Do(ctx, req, nil)
		if err != nil {
			log.Fatal(err)
		}
		resp.Body.Close()
		fmt.Println("POST /todos:", resp.StatusCode)
	}

	req, _ := http.NewRequest(http.MethodGet, "/todos", nil)
	resp, err := sess.Do(ctx, req, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		log.Fatal(runtime.NewResponseError(resp))
	}
	var list struct{ Items []string }
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		log.Fatal(err)
	}
	fmt.Println("items:", list.Items)

	// another session has its own container, so its own list
	req, _ = http.NewRequest(http.MethodGet, "/todos", nil)
	other, err := client.NewSession().Do(ctx, req, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer other.Body.Close()
	_ = json.NewDecoder(other.Body).Decode(&list)
	fmt.Println("another session's items:", list.Items)
	// Output:
	// POST /todos: 201
	// POST /todos: 201
	// items: [write the report water the plants]
	// another session's items: []
}
