package main

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"

	"github.com/azsessions/azsessions"
	"github.com/azsessions/azsessions/emulator"
)

// serverPy is the container's program, copied into each session's
// /mnt/data by the emulator (Options.ContainerDir).
//
//go:embed container/server.py
var serverPy []byte

// targetPort is where server.py listens inside the container.
const targetPort = 8080

// note is one note of the container's API.
type note struct {
	ID   int    `json:"id"`
	Text string `json:"text"`
}

// report is what the steps found; the test checks it.
type report struct {
	Backend     string
	Notes       map[string][]note // per user, after step 1
	Session     azsessions.SessionProperties
	Listed      int      // sessions the pool listed
	ListedOurs  []string // which of ours were among them ("alice", "bob")
	AfterStop   []note   // alice's notes after her session was stopped
	StopMessage string
}

// run executes the steps, writing what happens to out; logs go to logw.
func run(ctx context.Context, endpoint string, out, logw io.Writer) (*report, error) {
	rep := &report{Notes: map[string][]note{}}
	client, backend, closeBackend, err := connect(endpoint, logw)
	if err != nil {
		return rep, err
	}
	defer closeBackend()
	rep.Backend = backend
	fmt.Fprintf(out, "Backend: %s\n", backend)

	users := map[string]*azsessions.Session{"alice": client.NewSession(), "bob": client.NewSession()}
	defer func() {
		for _, s := range users {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			_, _ = s.Stop(sctx, nil)
			cancel()
		}
	}()

	fmt.Fprintln(out, "\n== 1. One container per session")
	for _, user := range []string{"alice", "bob"} {
		s := users[user]
		var added note
		if err := call(ctx, s, http.MethodPost, "/notes", map[string]string{"text": user + "'s first note"}, http.StatusCreated, &added); err != nil {
			return rep, fmt.Errorf("%s: %w", user, err)
		}
		fmt.Fprintf(out, "%s: POST /notes -> 201 %+v\n", user, added)
	}
	for _, user := range []string{"alice", "bob"} {
		var got struct{ Notes []note }
		if err := call(ctx, users[user], http.MethodGet, "/notes", nil, http.StatusOK, &got); err != nil {
			return rep, fmt.Errorf("%s: %w", user, err)
		}
		rep.Notes[user] = got.Notes
		fmt.Fprintf(out, "%s: GET /notes -> %+v\n", user, got.Notes)
	}
	var missing map[string]string
	if err := call(ctx, users["bob"], http.MethodGet, "/notes/99", nil, http.StatusNotFound, &missing); err != nil {
		return rep, err
	}
	fmt.Fprintf(out, "bob: GET /notes/99 -> 404 %v (the container's answer, not a Go error)\n", missing)

	fmt.Fprintln(out, "\n== 2. The pool's view of its sessions")
	got, err := users["alice"].GetContainerSession(ctx, nil)
	if err != nil {
		return rep, err
	}
	rep.Session = got.SessionProperties
	fmt.Fprintf(out, "alice's session: created %s, expires %s (the cooldown after its last request)\n",
		got.CreatedAt.Format("15:04:05"), got.ExpiresAt.Format("15:04:05"))
	pager := client.NewListContainerSessionsPager(nil)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return rep, err
		}
		for _, p := range page.Sessions {
			rep.Listed++
			for user, s := range users {
				if p.Identifier == s.Identifier() {
					rep.ListedOurs = append(rep.ListedOurs, user)
				}
			}
		}
	}
	fmt.Fprintf(out, "the pool lists %d live sessions, ours among them: %d\n", rep.Listed, len(rep.ListedOurs))

	fmt.Fprintln(out, "\n== 3. Stop a session")
	stopped, err := users["alice"].Stop(ctx, nil)
	if err != nil {
		return rep, err
	}
	rep.StopMessage = strings.ReplaceAll(stopped.Message, users["alice"].Identifier(), "<identifier>")
	fmt.Fprintf(out, "alice: stopSession -> %q\n", rep.StopMessage)
	var after struct{ Notes []note }
	if err := call(ctx, users["alice"], http.MethodGet, "/notes", nil, http.StatusOK, &after); err != nil {
		return rep, err
	}
	rep.AfterStop = after.Notes
	fmt.Fprintf(out, "alice: GET /notes -> %+v (a new container after a cold start)\n", after.Notes)
	fmt.Fprintln(out, "\nAll steps succeeded.")
	return rep, nil
}

// call sends one request to the session's container with Session.Do and
// decodes its JSON answer into v; a status other than want is an error.
func call(ctx context.Context, s *azsessions.Session, method, path string, body any, want int, v any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := s.Do(ctx, req, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: %w", method, path, runtime.NewResponseError(resp))
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// connect returns a client for the real pool, or for an emulator started in
// this process as a CustomContainer pool running container/server.py.
func connect(endpoint string, logw io.Writer) (*azsessions.Client, string, func(), error) {
	opts := &azsessions.ClientOptions{ClientOptions: azcore.ClientOptions{APIVersion: azsessions.APIVersion20250202Preview}}
	if endpoint != "" {
		cred, err := azidentity.NewDefaultAzureCredential(nil)
		if err != nil {
			return nil, "", nil, fmt.Errorf("credential: %w", err)
		}
		client, err := azsessions.NewClient(endpoint, cred, opts)
		if err != nil {
			return nil, "", nil, err
		}
		return client, "Azure custom-container session pool at " + endpoint, func() {}, nil
	}
	dir, err := os.MkdirTemp("", "customcontainer-")
	if err != nil {
		return nil, "", nil, err
	}
	cleanup := func() { _ = os.RemoveAll(dir) }
	if err := os.WriteFile(filepath.Join(dir, "server.py"), serverPy, 0o644); err != nil {
		cleanup()
		return nil, "", nil, err
	}
	logger := slog.New(slog.NewTextHandler(logw, &slog.HandlerOptions{Level: slog.LevelWarn}))
	executor, err := emulator.NewSandboxExecutor(emulator.SandboxOptions{Logger: logger, Ready: 1, Preload: []string{}})
	if err != nil {
		cleanup()
		return nil, "", nil, fmt.Errorf("start the emulator's sandbox: %w", err)
	}
	srv, err := emulator.Start("127.0.0.1:0", emulator.Options{
		Executor: executor, Logger: logger, PoolType: emulator.PoolTypeCustomContainer,
		ContainerDir: dir, ContainerCommand: fmt.Sprintf("python3 server.py %d", targetPort), TargetPort: targetPort,
	})
	if err != nil {
		cleanup()
		return nil, "", nil, err
	}
	client, err := azsessions.NewClientWithNoCredential(srv.Endpoint, opts)
	if err != nil {
		_ = srv.Close()
		cleanup()
		return nil, "", nil, err
	}
	desc := fmt.Sprintf("local emulator at %s (CustomContainer: python3 server.py in each session's %s sandbox)", srv.Endpoint, executor.Info().Sandbox)
	return client, desc, func() {
		if err := srv.Close(); err != nil {
			fmt.Fprintln(logw, "closing the emulator:", err)
		}
		cleanup()
	}, nil
}
