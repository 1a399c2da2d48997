// Command azsessions-mcp is a Model Context Protocol server that gives MCP
// clients (Claude Desktop, VS Code, agent frameworks) a sandboxed Python code
// interpreter backed by Azure Container Apps dynamic sessions, or by the
// embedded local emulator.
//
// Tools: code_interpreter and list_files, plus upload_file and download_file
// with -local-dir (see package github.com/azsessions/azsessions/tools for what
// they answer). Each MCP connection gets its own session with a fresh random
// identifier unless -session-id names one.
//
// Usage:
//
//	AZURE_POOL_MANAGEMENT_ENDPOINT=https://... azsessions-mcp [flags]   # real pool, DefaultAzureCredential
//	azsessions-mcp --emulator [flags]                                   # embedded emulator (bubblewrap sandbox)
//
// Flags (Go accepts one or two dashes; write two: MCP clients such as
// `npx @modelcontextprotocol/inspector --cli` take a single-dash "-emulator"
// for their own "-e" option):
//
//	--emulator           run code in the embedded emulator instead of a pool
//	--sandbox MODE       emulator isolation: bwrap (default), gvisor (gVisor's user-space
//	                     kernel: needs runsc and root) or none (no isolation: trusted code only)
//	--python PATH        emulator interpreter (default /usr/bin/python3, else python3 on PATH)
//	--session-id ID      use this session for every connection
//	--local-dir DIR      enable upload_file/download_file inside DIR
//	--http ADDR          serve streamable HTTP on ADDR (for example 127.0.0.1:8080) instead of stdio
//	--api-version V      pool management api-version (default: the client's)
//	--log-level LEVEL    debug, info (default), warn or error
//
// Images that code_interpreter returns (matplotlib figures) come back as MCP
// image content (base64 data and MIME type) after the text answer, and are
// also saved under --local-dir when it is set.
//
// The protocol runs on stdin/stdout (or HTTP); logs go to stderr only. A
// failed tool call is logged at error level with its cause (credential,
// transport or service status), with the session identifier and tokens
// redacted; logs never contain code. When the credential fails, the tool
// result and the log say which credential failed and what to do.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/azsessions/azsessions"
	"github.com/azsessions/azsessions/emulator"
	moduleversion "github.com/azsessions/azsessions/internal/version"
	"github.com/azsessions/azsessions/tools"
)

// version is the MCP server's serverInfo.version: the module's.
const version = moduleversion.Module

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return // -help printed the usage: success, as the azsessions CLI
		}
		fmt.Fprintln(os.Stderr, "azsessions-mcp:", err)
		os.Exit(2)
	}
}

// config is the parsed command line.
type config struct {
	emulator   bool
	sandbox    string
	python     string
	sessionID  string
	localDir   string
	httpAddr   string
	apiVersion string
	logLevel   slog.Level
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("azsessions-mcp", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.BoolVar(&c.emulator, "emulator", false, "run code in the embedded local emulator instead of AZURE_POOL_MANAGEMENT_ENDPOINT")
	fs.StringVar(&c.sandbox, "sandbox", emulator.SandboxBwrap, "emulator isolation: bwrap, gvisor (gVisor's user-space kernel: needs runsc and root) or none (no isolation: trusted code only)")
	fs.StringVar(&c.python, "python", "", "emulator Python interpreter (default /usr/bin/python3, else python3 on PATH)")
	fs.StringVar(&c.sessionID, "session-id", "", "session identifier used by every connection (default: a fresh one per connection)")
	fs.StringVar(&c.localDir, "local-dir", "", "local directory for upload_file and download_file (default: those tools are off)")
	fs.StringVar(&c.httpAddr, "http", "", "serve streamable HTTP on this address instead of stdio")
	fs.StringVar(&c.apiVersion, "api-version", "", "pool management api-version (default "+azsessions.DefaultAPIVersion+")")
	level := fs.String("log-level", "info", "log level: debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	l, err := parseLevel(*level)
	if err != nil {
		return c, err
	}
	c.logLevel = l
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if c.localDir != "" {
		fi, err := os.Stat(c.localDir)
		if err != nil || !fi.IsDir() {
			return c, fmt.Errorf("--local-dir %q is not a directory", c.localDir)
		}
	}
	return c, nil
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) error {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: cfg.logLevel}))
	client, closeBackend, err := newBackend(cfg, getenv, logger)
	if err != nil {
		return err
	}
	defer closeBackend()
	server := newServer(client, serverConfig{SessionID: cfg.sessionID, Tools: tools.Options{LocalDir: cfg.localDir}, Version: version}, logger)

	if cfg.httpAddr == "" {
		logger.Info("serving MCP on stdio")
		err := server.Run(ctx, &mcp.IOTransport{Reader: io.NopCloser(stdin), Writer: nopWriteCloser{stdout}})
		if ctx.Err() != nil || errors.Is(err, io.EOF) {
			return nil
		}
		return err
	}
	ln, err := net.Listen("tcp", cfg.httpAddr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{Logger: logger}), ReadHeaderTimeout: 10 * time.Second}
	logger.Info("serving MCP over streamable HTTP", "url", "http://"+ln.Addr().String())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdownCtx)
		return nil
	}
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// newBackend returns the client for the pool (AZURE_POOL_MANAGEMENT_ENDPOINT,
// DefaultAzureCredential) or for the embedded emulator, and a function that
// releases it.
func newBackend(cfg config, getenv func(string) string, logger *slog.Logger) (*azsessions.Client, func(), error) {
	opts := &azsessions.ClientOptions{ClientOptions: azcore.ClientOptions{APIVersion: cfg.apiVersion}}
	if cfg.emulator {
		exec, err := emulator.NewSandboxExecutor(emulator.SandboxOptions{Mode: cfg.sandbox, Python: cfg.python, Ready: 1, Logger: logger})
		if err != nil {
			return nil, nil, fmt.Errorf("emulator: %w", err)
		}
		if cfg.sandbox == emulator.SandboxNone {
			logger.Warn("the emulator runs code WITHOUT isolation (--sandbox=none): only for trusted code")
		}
		endpoint, closeEmu, err := startEmulator(exec, logger)
		if err != nil {
			return nil, nil, err
		}
		client, err := azsessions.NewClientWithNoCredential(endpoint, opts)
		if err != nil {
			closeEmu()
			return nil, nil, err
		}
		logger.Info("using the embedded emulator", "sandbox", exec.Info().Sandbox, "python", exec.Info().PythonVersion)
		return client, closeEmu, nil
	}
	endpoint := getenv("AZURE_POOL_MANAGEMENT_ENDPOINT")
	if endpoint == "" {
		return nil, nil, errors.New("set AZURE_POOL_MANAGEMENT_ENDPOINT to the session pool's management endpoint, or use --emulator")
	}
	cred, err := azidentity.NewDefaultAzureCredential(nil)
	if err != nil {
		return nil, nil, fmt.Errorf("credential: DefaultAzureCredential: %w", err)
	}
	client, err := azsessions.NewClient(endpoint, namedCredential{name: "DefaultAzureCredential", cred: cred}, opts)
	if err != nil {
		return nil, nil, err
	}
	logger.Info("using the session pool", "endpoint", client.Endpoint(), "api-version", client.APIVersion())
	return client, func() {}, nil
}

// startEmulator serves an emulator handler with exec on a loopback port and
// returns the pool endpoint and a function that stops it (and closes exec).
func startEmulator(exec emulator.Executor, logger *slog.Logger) (string, func(), error) {
	srv, err := emulator.Start("127.0.0.1:0", emulator.Options{Executor: exec, Logger: logger.With("component", "emulator")})
	if err != nil {
		return "", nil, err
	}
	return srv.Endpoint, func() { _ = srv.Close() }, nil
}
