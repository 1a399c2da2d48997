// Command customcontainer talks to a custom-container session pool whose
// container is its own small HTTP server (container/server.py: a JSON notes
// API on Python's standard library), through the azsessions client:
//
//  1. two sessions (one per user) each add a note through POST /notes and
//     read their notes back: each session's container has its own;
//  2. the pool's own view of a session (Session.GetContainerSession) and of
//     its live sessions (Client.NewListContainerSessionsPager);
//  3. Session.Stop ends one session; its next request starts a new
//     container, whose notes are empty.
//
// Backend: a real custom-container pool when AZURE_POOL_MANAGEMENT_ENDPOINT
// is set (authenticated with azidentity.NewDefaultAzureCredential; the pool's
// image must serve container/server.py's API on its target port), otherwise
// the emulator started in-process as a CustomContainer pool that runs
// container/server.py in each session's bubblewrap sandbox.
//
//	go run ./examples/customcontainer
//
// It exits 0 only when every step succeeded.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if _, err := run(ctx, os.Getenv("AZURE_POOL_MANAGEMENT_ENDPOINT"), os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "customcontainer:", err)
		os.Exit(1)
	}
}
