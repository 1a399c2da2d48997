package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"

	"github.com/azsessions/azsessions"
	"github.com/azsessions/azsessions/emulator"
)

// config is what the flags and the environment say.
type config struct {
	Endpoint string // AZURE_POOL_MANAGEMENT_ENDPOINT; empty = embedded emulator
	Data     string // CSV to upload
	Out      string // where the sorted CSV goes
	Plot     string // where the temperature curve goes
}

// report is what the tasks found; the test checks it.
type report struct {
	Backend      string
	SeattleTime  string
	Files        []azsessions.File
	Highest      float64
	SyntaxError  string
	SortedPath   string
	PlotPath     string // empty when the pool has no matplotlib
	PlotSkipped  string
	TaskDuration map[string]time.Duration
}

// run executes the tasks and writes what happens to out; logs go to logw.
func run(ctx context.Context, cfg config, out, logw io.Writer) (*report, error) {
	rep := &report{TaskDuration: map[string]time.Duration{}}
	client, backend, closeBackend, err := connect(ctx, cfg.Endpoint, logw)
	if err != nil {
		return rep, err
	}
	defer closeBackend()
	rep.Backend = backend
	fmt.Fprintf(out, "Backend: %s (api-version %s)\n", backend, client.APIVersion())

	session := client.NewSession()
	defer func() {
		// Free the session at once where the api-version allows it; otherwise
		// it expires after the pool's cooldown.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_, _ = session.Delete(dctx, nil)
	}()

	for _, t := range []struct {
		name string
		fn   func(context.Context, *azsessions.Session, config, io.Writer, *report) error
	}{
		{"1. The current time in Seattle", seattleTime},
		{"2. The highest temperature", highestTemperature},
		{"3. Sort in descending order and download", sortAndDownload},
		{"4. Plot the temperature curve", plotCurve},
	} {
		fmt.Fprintf(out, "\n== Task %s\n", t.name)
		start := time.Now()
		if err := t.fn(ctx, session, cfg, out, rep); err != nil {
			return rep, fmt.Errorf("task %s: %w", t.name, err)
		}
		rep.TaskDuration[t.name] = time.Since(start)
	}
	fmt.Fprintln(out, "\nAll tasks succeeded.")
	return rep, nil
}

// connect returns a client for the real pool, or for an emulator started in
// this process with real Python in a bubblewrap sandbox.
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
	executor, err := emulator.NewSandboxExecutor(emulator.SandboxOptions{Logger: logger, Ready: 1})
	if err != nil {
		return nil, "", nil, fmt.Errorf("start the emulator's sandbox: %w", err)
	}
	srv, err := emulator.Start("127.0.0.1:0", emulator.Options{Executor: executor, Logger: logger})
	if err != nil {
		return nil, "", nil, err
	}
	endpoint = srv.Endpoint
	client, err := azsessions.NewClientWithNoCredential(endpoint, nil)
	if err != nil {
		srv.Close()
		return nil, "", nil, err
	}
	info := executor.Info()
	desc := fmt.Sprintf("local emulator at %s (Python %s at %s, sandbox %s)", endpoint, info.PythonVersion, info.Interpreter, info.Sandbox)
	return client, desc, func() { _ = srv.Close() }, nil
}

// printExecution shows an execution the way the walkthrough's observations do.
func printExecution(out io.Writer, code string, resp azsessions.ExecuteResponse) {
	fmt.Fprintf(out, "Code:\n%s\n", indent(code))
	result := string(resp.Result)
	if _, ok := resp.Image(); ok {
		result = "<image>"
	}
	fmt.Fprintf(out, "Status: %s  Execution time: %v\n", resp.Status, resp.ExecutionTime)
	if resp.Stdout != "" {
		fmt.Fprintf(out, "Stdout:\n%s", indent(resp.Stdout))
	}
	if resp.Stderr != "" {
		fmt.Fprintf(out, "Stderr:\n%s", indent(resp.Stderr))
	}
	fmt.Fprintf(out, "Result: %s\n", result)
}

func indent(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return "    " + strings.Join(lines, "\n    ") + "\n"
}

// execute runs code, prints it and its outcome, and turns a failed execution
// into an error.
func execute(ctx context.Context, s *azsessions.Session, out io.Writer, code string) (azsessions.ExecuteResponse, error) {
	resp, err := s.Execute(ctx, code, nil)
	if err != nil {
		return resp, err
	}
	printExecution(out, code, resp)
	return resp, resp.Err()
}

const seattleCode = `from datetime import datetime
import pytz
utc_now = datetime.now(pytz.utc)
seattle_time = utc_now.astimezone(pytz.timezone('America/Los_Angeles'))
seattle_time.strftime('%Y-%m-%d %H:%M:%S %Z%z')`

func seattleTime(ctx context.Context, s *azsessions.Session, _ config, out io.Writer, rep *report) error {
	resp, err := execute(ctx, s, out, seattleCode)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(resp.Result, &rep.SeattleTime); err != nil || rep.SeattleTime == "" {
		return fmt.Errorf("the result %s is not a time", resp.Result)
	}
	fmt.Fprintf(out, "Answer: the current time in Seattle is %s.\n", rep.SeattleTime)
	return nil
}

// pyString quotes s as a Python string literal (JSON strings are valid Python).
func pyString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func highestTemperature(ctx context.Context, s *azsessions.Session, cfg config, out io.Writer, rep *report) error {
	f, err := os.Open(cfg.Data)
	if err != nil {
		return err
	}
	defer f.Close()
	name := filepath.Base(cfg.Data)
	up, err := s.UploadFile(ctx, name, f, nil)
	if err != nil {
		return fmt.Errorf("upload: %w", err)
	}
	fmt.Fprintf(out, "Uploaded %s (%d bytes) to %s\n", cfg.Data, up.SizeInBytes, up.FullPath())

	pager := s.NewListFilesPager(nil)
	rep.Files = nil
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("list files: %w", err)
		}
		rep.Files = append(rep.Files, page.Files...)
	}
	fmt.Fprintln(out, "Files in the session:")
	for _, file := range rep.Files {
		fmt.Fprintf(out, "    %-28s %8d bytes  %s\n", file.Name, file.SizeInBytes, file.FullPath())
	}

	code := `import csv

with open(` + pyString(up.FullPath()) + `, 'r') as f:
    reader = csv.reader(f)
    column = next(reader).index('Temperature')
    highest_temp = float('-inf')
    for row in reader:
        temp = float(row[column])
        if temp > highest_temp:
            highest_temp = temp
print(highest_temp)`
	resp, err := execute(ctx, s, out, code)
	if err != nil {
		return err
	}
	rep.Highest, err = strconv.ParseFloat(strings.TrimSpace(resp.Stdout), 64)
	if err != nil {
		return fmt.Errorf("the output %q is not a number", resp.Stdout)
	}
	fmt.Fprintf(out, "Answer: the highest temperature in the file is %g degrees.\n", rep.Highest)
	return nil
}

func sortCode(remote string, withSyntaxError bool) string {
	code := `import pandas as pd

df = pd.read_csv(` + pyString(remote) + `)
df_sorted = df.sort_values(by='Temperature', ascending=False)
df_sorted.to_csv(` + pyString(remote) + `, index=False)`
	if withSyntaxError {
		// The stray line the walkthrough's model wrote.
		code += "\n'filename': " + pyString(filepath.Base(remote))
	}
	return code
}

func sortAndDownload(ctx context.Context, s *azsessions.Session, cfg config, out io.Writer, rep *report) error {
	remote := azsessions.DataDir + "/" + filepath.Base(cfg.Data)

	fmt.Fprintln(out, "First attempt (with the walkthrough's syntax error):")
	bad := sortCode(remote, true)
	resp, err := s.Execute(ctx, bad, nil)
	if err != nil {
		return err
	}
	printExecution(out, bad, resp)
	if resp.Status != azsessions.ExecutionStatusFailed || !strings.Contains(resp.Stderr, "SyntaxError") {
		return fmt.Errorf("expected the broken code to fail with a SyntaxError, got status %s", resp.Status)
	}
	rep.SyntaxError = resp.Err().Error()
	fmt.Fprintf(out, "The failure came back as data (%s); an agent reads it and fixes its code.\n\n", rep.SyntaxError)

	fmt.Fprintln(out, "Second attempt (corrected):")
	if _, err := execute(ctx, s, out, sortCode(remote, false)); err != nil {
		return err
	}
	dl, err := s.DownloadFileToPath(ctx, remote, cfg.Out, &azsessions.DownloadFileToPathOptions{Overwrite: true})
	if err != nil {
		return fmt.Errorf("download: %w", err)
	}
	rep.SortedPath = dl.Path
	fmt.Fprintf(out, "Downloaded %s (%d bytes) to %s\n", remote, dl.Size, dl.Path)
	return nil
}

func plotCurve(ctx context.Context, s *azsessions.Session, cfg config, out io.Writer, rep *report) error {
	probe, err := s.Execute(ctx, "import importlib.util\nimportlib.util.find_spec('matplotlib') is not None", nil)
	if err != nil {
		return err
	}
	if string(probe.Result) != "true" && string(probe.Result) != "True" {
		rep.PlotSkipped = "matplotlib is not installed in the pool"
		fmt.Fprintln(out, "Skipped: "+rep.PlotSkipped)
		return nil
	}
	code := `import pandas as pd
import matplotlib.pyplot as plt

df = pd.read_csv(` + pyString(azsessions.DataDir+"/"+filepath.Base(cfg.Data)) + `).sort_values(by='Time')
fig, ax = plt.subplots(figsize=(8, 4))
ax.plot(pd.to_datetime(df['Time']), df['Temperature'], marker='o')
ax.set_title('Temperature')
ax.set_xlabel('Time')
ax.set_ylabel('Temperature')
fig.autofmt_xdate()
fig`
	resp, err := execute(ctx, s, out, code)
	if err != nil {
		return err
	}
	img, ok := resp.Image()
	if !ok {
		return fmt.Errorf("the result is not an image: %.80s", resp.Result)
	}
	if err := writeFileAtomic(cfg.Plot, img.Data); err != nil {
		return err
	}
	rep.PlotPath = cfg.Plot
	fmt.Fprintf(out, "Saved the %s image (%d bytes) to %s\n", img.Format, len(img.Data), cfg.Plot)
	return nil
}

// writeFileAtomic writes data to a temporary file beside path and renames it.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.part")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
