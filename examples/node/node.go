package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"

	"github.com/azsessions/azsessions"
	"github.com/azsessions/azsessions/emulator"
)

// config is what the flags and the environment say.
type config struct {
	Endpoint string // AZURE_POOL_MANAGEMENT_ENDPOINT; empty = embedded emulator
	Data     string // CSV to upload
	Out      string // where the summary goes
}

// summary is what the JavaScript code computes from the CSV.
type summary struct {
	Readings int     `json:"readings"`
	Min      float64 `json:"min"`
	Max      float64 `json:"max"`
	Mean     float64 `json:"mean"`
	Warmest  string  `json:"warmest"`
}

// report is what the steps found; the test checks it.
type report struct {
	Backend string
	Hello   string  // stdout of the tutorial cell
	Answer  int     // the value of the second execution
	Summary summary // the downloaded summary
	Error   string  // stderr of the failing cell
}

// The JavaScript of the steps.
const (
	helloCode  = `console.log("hello-world")`
	defineCode = `function fahrenheit(c) { return c * 9 / 5 + 32 }
let calls = 0
console.log("defined fahrenheit()")`
	callCode = `calls++
Math.round(fahrenheit(21.5)) + calls` // 71 + 1
	summaryCode = `const fs = require('fs/promises')
const text = await fs.readFile('/mnt/data/temperatures.csv', 'utf8')
const [header, ...rows] = text.trim().split('\n').map((line) => line.split(','))
const col = header.indexOf('Temperature')
const temps = rows.map((r) => Number(r[col]))
const max = Math.max(...temps)
const summary = {
  readings: temps.length,
  min: Math.min(...temps),
  max,
  mean: temps.reduce((a, b) => a + b, 0) / temps.length,
  warmest: rows[temps.indexOf(max)][0],
}
await fs.writeFile('/mnt/data/summary.json', JSON.stringify(summary))
summary`
	failingCode = `JSON.parse('{"unterminated": ')`
)

// run executes the steps and writes what happens to out; logs go to logw.
func run(ctx context.Context, cfg config, out, logw io.Writer) (*report, error) {
	rep := &report{}
	client, backend, closeBackend, err := connect(ctx, cfg.Endpoint, logw)
	if err != nil {
		return rep, err
	}
	defer closeBackend()
	rep.Backend = backend
	fmt.Fprintf(out, "Backend: %s (api-version %s)\n", backend, client.APIVersion())

	session := client.NewSession()
	defer func() {
		// Free the session at once; otherwise it expires after the pool's cooldown.
		_, _ = session.Delete(context.WithoutCancel(ctx), nil)
	}()

	fmt.Fprintln(out, "\n== 1. Learn's tutorial cell")
	resp, err := execute(ctx, session, out, helloCode)
	if err != nil {
		return rep, err
	}
	rep.Hello = resp.Stdout

	fmt.Fprintln(out, "\n== 2. State across executions")
	if _, err := execute(ctx, session, out, defineCode); err != nil {
		return rep, err
	}
	resp, err = execute(ctx, session, out, callCode)
	if err != nil {
		return rep, err
	}
	if err := json.Unmarshal(resp.Result, &rep.Answer); err != nil {
		return rep, fmt.Errorf("the result %s is not a number: %w", resp.Result, err)
	}

	fmt.Fprintln(out, "\n== 3. Files: summarise a CSV with Node.js")
	f, err := os.Open(cfg.Data)
	if err != nil {
		return rep, err
	}
	defer f.Close()
	if _, err := session.UploadFile(ctx, "temperatures.csv", f, nil); err != nil {
		return rep, fmt.Errorf("upload: %w", err)
	}
	if _, err := execute(ctx, session, out, summaryCode); err != nil {
		return rep, err
	}
	if _, err := session.DownloadFileToPath(ctx, "summary.json", cfg.Out, &azsessions.DownloadFileToPathOptions{Overwrite: true}); err != nil {
		return rep, fmt.Errorf("download: %w", err)
	}
	b, err := os.ReadFile(cfg.Out)
	if err != nil {
		return rep, err
	}
	if err := json.Unmarshal(b, &rep.Summary); err != nil {
		return rep, fmt.Errorf("summary.json: %w", err)
	}
	fmt.Fprintf(out, "Saved %s: %s\n", cfg.Out, b)

	fmt.Fprintln(out, "\n== 4. An error is data")
	resp, err = session.Execute(ctx, failingCode, nil)
	if err != nil {
		return rep, err
	}
	printExecution(out, failingCode, resp)
	if resp.Status != azsessions.ExecutionStatusFailed {
		return rep, fmt.Errorf("the failing cell answered %s", resp.Status)
	}
	rep.Error = resp.Stderr
	fmt.Fprintln(out, "\nAll steps succeeded.")
	return rep, nil
}

// connect returns a client of the pool at endpoint, or of an emulator it
// starts (NodeLTS, Node.js in bubblewrap) when endpoint is empty.
func connect(ctx context.Context, endpoint string, logw io.Writer) (*azsessions.Client, string, func(), error) {
	if endpoint != "" {
		cred, err := azidentity.NewDefaultAzureCredential(nil)
		if err != nil {
			return nil, "", nil, fmt.Errorf("credential: %w", err)
		}
		client, err := azsessions.NewClient(endpoint, cred, nil)
		if err != nil {
			return nil, "", nil, err
		}
		return client, "Azure session pool at " + endpoint, func() {}, nil
	}
	logger := slog.New(slog.NewTextHandler(logw, &slog.HandlerOptions{Level: slog.LevelWarn}))
	executor, err := emulator.NewSandboxExecutor(emulator.SandboxOptions{Runtime: emulator.SandboxRuntimeNode, Logger: logger, Ready: 1})
	if err != nil {
		return nil, "", nil, fmt.Errorf("start the emulator's sandbox: %w", err)
	}
	srv, err := emulator.Start("127.0.0.1:0", emulator.Options{Executor: executor, PoolType: emulator.PoolTypeNodeLTS, Logger: logger})
	if err != nil {
		return nil, "", nil, err
	}
	client, err := azsessions.NewClientWithNoCredential(srv.Endpoint, nil)
	if err != nil {
		_ = srv.Close()
		return nil, "", nil, err
	}
	info := executor.Info()
	desc := fmt.Sprintf("local emulator at %s (NodeLTS: Node.js %s at %s, sandbox %s)", srv.Endpoint, info.NodeVersion, info.Interpreter, info.Sandbox)
	return client, desc, func() { _ = srv.Close() }, nil
}

// execute runs code, prints it and its outcome, and turns a failed
// execution into an error.
func execute(ctx context.Context, s *azsessions.Session, out io.Writer, code string) (azsessions.ExecuteResponse, error) {
	resp, err := s.Execute(ctx, code, nil)
	if err != nil {
		return resp, err
	}
	printExecution(out, code, resp)
	if resp.Status != azsessions.ExecutionStatusSucceeded {
		return resp, errors.New("the execution failed: " + strings.TrimSpace(resp.Stderr))
	}
	return resp, nil
}

// printExecution shows an execution: code, status, streams and result.
func printExecution(out io.Writer, code string, resp azsessions.ExecuteResponse) {
	fmt.Fprintf(out, "Code:\n%s\n", indent(code))
	fmt.Fprintf(out, "Status: %s  Execution time: %v\n", resp.Status, resp.ExecutionTime)
	if resp.Stdout != "" {
		fmt.Fprintf(out, "Stdout:\n%s", indent(resp.Stdout))
	}
	if resp.Stderr != "" {
		fmt.Fprintf(out, "Stderr:\n%s", indent(resp.Stderr))
	}
	fmt.Fprintf(out, "Result: %s\n", resp.Result)
}

func indent(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return "    " + strings.Join(lines, "\n    ") + "\n"
}
