// Command agent is a ReAct-style agent over the azsessions tools: the Go
// version of the LlamaIndex walkthrough "Secure code execution in LlamaIndex
// with Azure Container Apps dynamic sessions". It asks the walkthrough's three
// questions (the time in Seattle; the highest temperature in an uploaded CSV;
// sorting that CSV in place), uploading TemperatureData.csv before the second
// and downloading the sorted file after the third, and prints
// Thought / Action / Action Input / Observation / Answer.
//
// The model:
//
//	OPENAI_API_KEY [OPENAI_BASE_URL] [OPENAI_MODEL, default gpt-4o-mini]      OpenAI (or compatible) chat completions
//	AZURE_OPENAI_ENDPOINT AZURE_OPENAI_API_KEY AZURE_OPENAI_DEPLOYMENT
//	  [AZURE_OPENAI_API_VERSION, default 2024-10-21]                          Azure OpenAI
//	-replay                                                                   no model: replay the walkthrough's turns
//
// With -prompt "…" the agent answers that one question instead of the
// walkthrough's three, with all four tools (code_interpreter, list_files,
// upload_file and download_file inside -local-dir); it needs a model.
//
// The code runs in the session pool named by AZURE_POOL_MANAGEMENT_ENDPOINT
// (DefaultAzureCredential) or, when that is unset or -emulator is given, in
// the embedded emulator (real Python in a bubblewrap sandbox; -sandbox=none
// runs it without isolation).
//
//	go run . -replay
//	OPENAI_API_KEY=sk-... go run .
//	OPENAI_API_KEY=sk-... go run . -prompt "Plot a sine wave and tell me its maximum"
package main

import (
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"

	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/azure"
	"github.com/openai/openai-go/v3/option"

	"github.com/azsessions/azsessions"
	"github.com/azsessions/azsessions/emulator"
	"github.com/azsessions/azsessions/tools"
)

//go:embed sample/TemperatureData.csv
var sampleCSV []byte

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return // -help printed the usage: success, as the azsessions CLI
		}
		fmt.Fprintln(os.Stderr, "agent:", err)
		os.Exit(1)
	}
}

type config struct {
	replay   bool
	emulator bool
	sandbox  string
	python   string
	localDir string
	prompt   string
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	var cfg config
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.BoolVar(&cfg.replay, "replay", false, "replay the walkthrough's model turns instead of asking a model")
	fs.BoolVar(&cfg.emulator, "emulator", false, "use the embedded emulator even when AZURE_POOL_MANAGEMENT_ENDPOINT is set")
	fs.StringVar(&cfg.sandbox, "sandbox", emulator.SandboxBwrap, "emulator isolation: bwrap, gvisor (gVisor's user-space kernel: needs runsc and root) or none (no isolation: trusted code only)")
	fs.StringVar(&cfg.python, "python", "", "emulator Python interpreter (default /usr/bin/python3)")
	fs.StringVar(&cfg.localDir, "local-dir", "", "local directory for the CSV and the downloaded result (default: a new temporary directory)")
	fs.StringVar(&cfg.prompt, "prompt", "", "ask this question instead of the walkthrough's (needs a model; not with -replay)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q (quote the question: -prompt \"...\")", fs.Args())
	}
	if cfg.replay && cfg.prompt != "" {
		return errors.New("-prompt needs a model: it cannot be used with -replay")
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

	var chat func(box *toolbox) (agent, error)
	if cfg.replay {
		chat = func(box *toolbox) (agent, error) { return &replayAgent{box: box, script: seedReplay}, nil }
	} else {
		client, model, err := newModelClient(getenv)
		if err != nil {
			return err
		}
		chat = func(box *toolbox) (agent, error) { return newModelAgent(client, model, box) }
	}

	session, closeBackend, err := newSession(cfg, getenv, logger)
	if err != nil {
		return err
	}
	defer closeBackend()

	if cfg.localDir == "" {
		dir, err := os.MkdirTemp("", "azsessions-agent-")
		if err != nil {
			return err
		}
		cfg.localDir = dir
	}
	if err := ensureSample(cfg.localDir); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Local directory: %s\n", cfg.localDir)
	if cfg.prompt != "" {
		_, err := askOne(ctx, session, cfg.localDir, cfg.prompt, chat, stdout)
		return err
	}
	if cfg.replay {
		fmt.Fprintln(stdout, "*** REPLAY: the model's turns are replayed from the LlamaIndex walkthrough; every tool call runs for real. ***")
	}
	_, err = walkthrough(ctx, session, cfg.localDir, chat, stdout)
	return err
}

// ensureSample writes the walkthrough's TemperatureData.csv into dir unless a
// file of that name is there.
func ensureSample(dir string) error {
	p := filepath.Join(dir, "TemperatureData.csv")
	if _, err := os.Lstat(p); err == nil {
		return nil
	}
	return os.WriteFile(p, sampleCSV, 0o644)
}

// walkthrough runs the three tasks of the seed with the agent made by
// newAgent and returns the tool calls.
func walkthrough(ctx context.Context, session *azsessions.Session, localDir string, newAgent func(*toolbox) (agent, error), out io.Writer) ([]step, error) {
	p := &printer{w: out}
	box := newToolbox(tools.New(session, &tools.Options{LocalDir: localDir}), p)
	// The model sees only the tools of the walkthrough; upload and download
	// are done by the program, as in the walkthrough.
	modelBox := newToolbox(toolsFor(session, localDir), p)
	a, err := newAgent(modelBox)
	if err != nil {
		return nil, err
	}
	ask := func(task int, q string) error {
		p.task = task
		fmt.Fprintf(out, "\n=== Task %d ===\nUser: %s\n", task, q)
		_, err := a.Chat(ctx, q)
		return err
	}
	program := func(task int, name string, args map[string]string) error {
		p.task = task
		obs := box.programCall(ctx, name, marshal(args))
		if p.steps[len(p.steps)-1].Err != nil {
			return fmt.Errorf("%s: %s", name, obs)
		}
		return nil
	}
	if err := ask(1, questionTime); err != nil {
		return p.steps, err
	}
	if err := program(2, tools.NameUploadFile, map[string]string{"local_file_path": "TemperatureData.csv"}); err != nil {
		return p.steps, err
	}
	if err := ask(2, questionHighest); err != nil {
		return p.steps, err
	}
	if err := ask(3, questionSort); err != nil {
		return p.steps, err
	}
	if err := program(3, tools.NameDownloadFile, map[string]string{"remote_file_path": "TemperatureData.csv", "local_file_path": "SortedTemperatureData.csv"}); err != nil {
		return p.steps, err
	}
	return p.steps, nil
}

// askOne asks the agent made by newAgent one question, with all four tools
// (files inside localDir), and returns the tool calls.
func askOne(ctx context.Context, session *azsessions.Session, localDir, question string, newAgent func(*toolbox) (agent, error), out io.Writer) ([]step, error) {
	p := &printer{w: out, task: 1}
	a, err := newAgent(newToolbox(tools.New(session, &tools.Options{LocalDir: localDir}), p))
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "\nUser: %s\n", question)
	_, err = a.Chat(ctx, question)
	return p.steps, err
}

// newModelClient picks Azure OpenAI or OpenAI from the environment.
func newModelClient(getenv func(string) string) (openai.Client, string, error) {
	if ep := getenv("AZURE_OPENAI_ENDPOINT"); ep != "" {
		key, deployment := getenv("AZURE_OPENAI_API_KEY"), getenv("AZURE_OPENAI_DEPLOYMENT")
		if key == "" || deployment == "" {
			return openai.Client{}, "", errors.New("AZURE_OPENAI_ENDPOINT needs AZURE_OPENAI_API_KEY and AZURE_OPENAI_DEPLOYMENT")
		}
		version := getenv("AZURE_OPENAI_API_VERSION")
		if version == "" {
			version = "2024-10-21"
		}
		return openai.NewClient(azure.WithEndpoint(ep, version), azure.WithAPIKey(key)), deployment, nil
	}
	key := getenv("OPENAI_API_KEY")
	if key == "" {
		return openai.Client{}, "", errors.New("set OPENAI_API_KEY (and optionally OPENAI_BASE_URL, OPENAI_MODEL) or AZURE_OPENAI_ENDPOINT, AZURE_OPENAI_API_KEY and AZURE_OPENAI_DEPLOYMENT, or use -replay")
	}
	opts := []option.RequestOption{option.WithAPIKey(key)}
	if base := getenv("OPENAI_BASE_URL"); base != "" {
		opts = append(opts, option.WithBaseURL(base))
	}
	model := getenv("OPENAI_MODEL")
	if model == "" {
		model = "gpt-4o-mini"
	}
	return openai.NewClient(opts...), model, nil
}

// newSession returns a fresh session on the pool or on the embedded emulator.
func newSession(cfg config, getenv func(string) string, logger *slog.Logger) (*azsessions.Session, func(), error) {
	if endpoint := getenv("AZURE_POOL_MANAGEMENT_ENDPOINT"); endpoint != "" && !cfg.emulator {
		cred, err := azidentity.NewDefaultAzureCredential(nil)
		if err != nil {
			return nil, nil, err
		}
		client, err := azsessions.NewClient(endpoint, cred, nil)
		if err != nil {
			return nil, nil, err
		}
		return client.NewSession(), func() {}, nil
	}
	exec, err := emulator.NewSandboxExecutor(emulator.SandboxOptions{Mode: cfg.sandbox, Python: cfg.python, Logger: logger})
	if err != nil {
		return nil, nil, fmt.Errorf("emulator: %w", err)
	}
	endpoint, stop, err := startEmulator(exec, logger)
	if err != nil {
		return nil, nil, err
	}
	client, err := azsessions.NewClientWithNoCredential(endpoint, nil)
	if err != nil {
		stop()
		return nil, nil, err
	}
	return client.NewSession(), stop, nil
}

// startEmulator serves an emulator handler with exec on a loopback port and
// returns the pool endpoint and a function that stops it (and closes exec).
func startEmulator(exec emulator.Executor, logger *slog.Logger) (string, func(), error) {
	srv, err := emulator.Start("127.0.0.1:0", emulator.Options{Executor: exec, Logger: logger})
	if err != nil {
		return "", nil, err
	}
	return srv.Endpoint, func() { _ = srv.Close() }, nil
}

// toolsFor returns the tools the model gets, as in the walkthrough:
// code_interpreter and list_files (upload and download are the program's).
func toolsFor(session *azsessions.Session, localDir string) []tools.Tool {
	var out []tools.Tool
	for _, t := range tools.New(session, &tools.Options{LocalDir: localDir}) {
		if t.Name == tools.NameCodeInterpreter || t.Name == tools.NameListFiles {
			out = append(out, t)
		}
	}
	return out
}
