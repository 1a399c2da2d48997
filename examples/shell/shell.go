package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"

	"github.com/azsessions/azsessions"
	"github.com/azsessions/azsessions/emulator"
)

// readings is the file step 2 uploads.
const readings = "city,celsius\nOslo,4\nLisbon,19\nCairo,31\nQuito,14\n"

// report is what the steps found; the test checks it.
type report struct {
	Backend  string
	Results  map[string]azsessions.ShellResult // per step
	Download string                            // step 6's file, downloaded
}

// step is one command of the example.
type step struct {
	name string
	cmd  azsessions.ShellExecution
}

var steps = []step{
	{"1. pipe and variable", azsessions.ShellExecution{ShellCommand: `GREETING=hello; echo "$GREETING from $(pwd)" | tr a-z A-Z`}},
	{"2. the uploaded file", azsessions.ShellExecution{ShellCommand: `tail -n +2 readings.csv | sort -t, -k2 -n | tail -n 1 | cut -d, -f1; wc -l < readings.csv`}},
	{"3. standard input", azsessions.ShellExecution{ShellCommand: `while read -r line; do echo "got: $line"; done`, Stdin: "first\nsecond\n"}},
	{"4. a failing command", azsessions.ShellExecution{ShellCommand: `grep -q Paris readings.csv || { echo "no Paris in the file" >&2; exit 3; }`}},
	{"5. no shell", azsessions.ShellExecution{ExecCommandAndArgs: []string{"printf", "%s|", "$HOME", "a b", "*"}}},
	{"6. write a file", azsessions.ShellExecution{ShellCommand: `{ head -n 1 readings.csv; tail -n +2 readings.csv | sort -t, -k2 -nr; } > sorted.csv && echo done`}},
}

// run executes the steps, writing what happens to out; logs go to logw.
func run(ctx context.Context, endpoint string, out, logw io.Writer) (*report, error) {
	rep := &report{Results: map[string]azsessions.ShellResult{}}
	client, backend, closeBackend, err := connect(endpoint, logw)
	if err != nil {
		return rep, err
	}
	defer closeBackend()
	rep.Backend = backend
	fmt.Fprintf(out, "Backend: %s\n", backend)

	s := client.NewSession()
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_, _ = s.Delete(dctx, nil)
	}()
	if _, err := s.UploadFile(ctx, "readings.csv", strings.NewReader(readings), nil); err != nil {
		return rep, fmt.Errorf("upload: %w", err)
	}
	for _, st := range steps {
		fmt.Fprintf(out, "\n== %s\n", st.name)
		if st.cmd.ShellCommand != "" {
			fmt.Fprintf(out, "$ %s\n", st.cmd.ShellCommand)
		} else {
			fmt.Fprintf(out, "exec %q\n", st.cmd.ExecCommandAndArgs)
		}
		resp, err := s.ExecuteShell(ctx, st.cmd, &azsessions.ExecuteShellOptions{Timeout: time.Minute})
		if err != nil {
			return rep, fmt.Errorf("%s: %w", st.name, err)
		}
		rep.Results[st.name] = resp.ShellResult
		fmt.Fprintf(out, "exit code %d\n", resp.ExitCode)
		if resp.Stdout != "" {
			fmt.Fprintf(out, "stdout:\n%s", withNewline(resp.Stdout))
		}
		if resp.Stderr != "" {
			fmt.Fprintf(out, "stderr:\n%s", withNewline(resp.Stderr))
		}
	}
	dl, err := s.DownloadFile(ctx, "sorted.csv", nil)
	if err != nil {
		return rep, fmt.Errorf("download: %w", err)
	}
	defer dl.Body.Close()
	b, err := io.ReadAll(dl.Body)
	if err != nil {
		return rep, fmt.Errorf("download: %w", err)
	}
	rep.Download = string(b)
	fmt.Fprintf(out, "\nsorted.csv, downloaded:\n%s", rep.Download)
	fmt.Fprintln(out, "\nAll steps succeeded.")
	return rep, nil
}

// connect returns a client for the real pool, or for an emulator started in
// this process as a Shell pool.
func connect(endpoint string, logw io.Writer) (*azsessions.Client, string, func(), error) {
	if endpoint != "" {
		cred, err := azidentity.NewDefaultAzureCredential(nil)
		if err != nil {
			return nil, "", nil, fmt.Errorf("credential: %w", err)
		}
		client, err := azsessions.NewClient(endpoint, cred, nil)
		if err != nil {
			return nil, "", nil, err
		}
		return client, "Azure Shell session pool at " + endpoint, func() {}, nil
	}
	logger := slog.New(slog.NewTextHandler(logw, &slog.HandlerOptions{Level: slog.LevelWarn}))
	executor, err := emulator.NewSandboxExecutor(emulator.SandboxOptions{Logger: logger, Ready: 1, Preload: []string{}})
	if err != nil {
		return nil, "", nil, fmt.Errorf("start the emulator's sandbox: %w", err)
	}
	srv, err := emulator.Start("127.0.0.1:0", emulator.Options{Executor: executor, Logger: logger, PoolType: emulator.PoolTypeShell})
	if err != nil {
		return nil, "", nil, err
	}
	client, err := azsessions.NewClientWithNoCredential(srv.Endpoint, nil)
	if err != nil {
		_ = srv.Close()
		return nil, "", nil, err
	}
	desc := fmt.Sprintf("local emulator at %s (Shell: bash in each session's %s sandbox)", srv.Endpoint, executor.Info().Sandbox)
	return client, desc, func() { _ = srv.Close() }, nil
}

// withNewline ends s with a newline, so that the next step's heading starts
// its own line even after output such as printf's.
func withNewline(s string) string {
	if strings.HasSuffix(s, "\n") {
		return s
	}
	return s + "\n"
}
