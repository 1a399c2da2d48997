// Command shell runs commands in a session of a Shell session pool
// (containerType Shell, api-version 2025-10-02-preview) with the azsessions
// client:
//
//  1. a command line with a pipe and a variable (ShellCommand);
//  2. a file uploaded with UploadFile, then read by shell tools in the
//     working directory /mnt/data;
//  3. standard input (Stdin);
//  4. a command that fails: its exit code is data, not a Go error;
//  5. a program and its arguments without a shell (ExecCommandAndArgs);
//  6. a file written by a command, downloaded with DownloadFile.
//
// Backend: a real Shell pool when AZURE_POOL_MANAGEMENT_ENDPOINT is set
// (authenticated with azidentity.NewDefaultAzureCredential), otherwise the
// emulator started in-process as a Shell pool, running bash in each
// session's bubblewrap sandbox.
//
//	go run ./examples/shell
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
		fmt.Fprintln(os.Stderr, "shell:", err)
		os.Exit(1)
	}
}
