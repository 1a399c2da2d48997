// Command azsessions-emulator serves a local emulator of the Azure Container
// Apps dynamic sessions pool management endpoint (the Python code
// interpreter), for every api-version of the data plane.
//
//	go run ./cmd/azsessions-emulator -addr 127.0.0.1:8080
//
// It prints the pool endpoint URL
// (http://127.0.0.1:8080/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/local/sessionPools/emulator)
// as one line on stdout, logs to stderr and shuts down cleanly on SIGINT or
// SIGTERM, killing every sandbox and removing its data.
//
// Code runs in real Python, one interpreter per session, isolated with
// bubblewrap (apt-get install bubblewrap), or with -sandbox=gvisor in a gVisor
// sandbox (apt-get install runsc; as root): a user-space kernel between the
// code and the host, for code not trusted at all, with slower starts (see
// the README's isolation levels). Without bwrap the emulator refuses to start
// unless -sandbox=none, which runs code unisolated as the current user.
//
// Flags:
//
//	-addr                 listen address (default 127.0.0.1:8080; port 0 picks one)
//	-pool-type            PythonLTS, Shell or CustomContainer (default PythonLTS)
//	-container-command    CustomContainer: the command each session runs in its
//	                      sandbox (sh -c, in /mnt/data), an HTTP server
//	-target-port          CustomContainer: the port it listens on
//	-container-dir        CustomContainer: a directory copied into each session's
//	                      /mnt/data first (the image's files, e.g. server.py)
//	-container-start-timeout  CustomContainer: cold start limit (default 1m)
//	-sandbox              bwrap, gvisor or none (default bwrap)
//	-python               Python interpreter (default: the system python3)
//	-cooldown             idle time before a session ends (default 5m)
//	-max-sessions         live sessions in the pool (default 600; without cgroups
//	                      as many sandboxes as fit in -max-memory at -memory-limit each)
//	-max-execution-time   cap on one execution (default 3m40s)
//	-max-upload-bytes     largest upload, e.g. 128MiB (default 128MiB)
//	-output-streams-max-length  stdout/stderr cap in characters (default 4096;
//	                      formerly -output-max-length, still accepted)
//	-memory-limit         memory of one sandbox, e.g. 1GiB (default 1GiB)
//	-cpus                 CPU quota of one sandbox, in cores (default 1)
//	-max-memory           memory all sandboxes use together (default half of RAM;
//	                      as root a parent cgroup's limit)
//	-max-disk             disk all sandboxes' /mnt/data use together (default half
//	                      of the free space of -data-dir)
//	-sandbox-user         unprivileged host account sandboxes run as when the
//	                      emulator runs as root (default nobody; never root)
//	-data-dir             directory for the sessions' data (default: a temporary one)
//	-ready                interpreters kept started (default 2); after a burst of N
//	                      new sessions that they could not serve, N are kept
//	                      started (up to -max-ready) and fall back by one a minute;
//	                      a burst lasts until the ready list is full again, and
//	                      the next one is served from it once that refill ended
//	-max-ready            most interpreters kept started after bursts (default 32,
//	                      at most a quarter of -max-memory at ~64 MiB each, at most
//	                      -max-sessions; -max-ready equal to -ready: no growth)
//	-preload              modules each interpreter imports in the background,
//	                      e.g. numpy,pandas,matplotlib, or none (default numpy)
//	-require-token        answer 401 without "Authorization: Bearer ...";
//	                      with AZSESSIONS_EMULATOR_TOKEN set, only that token passes
//	-tls-cert, -tls-key   serve HTTPS with this certificate and key
//	-log-level            debug, info, warn or error (default info)
//
// Network: the emulator runs whatever code it is sent, so it serves only on
// loopback (127.0.0.1, [::1], localhost) unless -require-token is given and
// AZSESSIONS_EMULATOR_TOKEN holds the one bearer token it accepts (an
// environment variable, so that the token shows in no process list). The
// printed endpoint names the address actually bound.
//
// Timeouts: request headers must arrive within 30 s, keep-alive connections
// idle for 2 min are closed, and a request body (upload or execution) that
// sends nothing for 1 min, or arrives slower than 4 KiB/s on average after
// that minute, fails with 400. Nothing else bounds a whole request, so large
// uploads and downloads and long executions are never cut. Execution bodies
// held in memory are bounded across the pool (128 MiB; beyond, 429 with
// Retry-After).
package main

import (
	"cmp"
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
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/azsessions/azsessions/emulator"
)

func main() {
	// A closed stdout or stderr (e.g. `| head`) must not kill the emulator
	// before it has stopped its sandboxes and removed their data.
	signal.Ignore(syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr, stop)
	stop()
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return // -help printed the usage: success, as the azsessions CLI
		}
		fmt.Fprintln(os.Stderr, "azsessions-emulator:", err)
		os.Exit(1)
	}
}

// config is the parsed command line.
type config struct {
	addr, sandbox, python, dataDir, tlsCert, tlsKey, logLevel string
	poolType                                                  string
	containerCommand, containerDir                            string
	targetPort                                                int
	containerStartTimeout                                     time.Duration
	node                                                      string // -node
	preload                                                   []string
	cooldown, maxExecutionTime                                time.Duration
	maxSessions, outputStreamsMaxLength, ready, maxReady      int
	maxUploadBytes, memoryLimit, maxMemory, maxDisk           byteSize
	cpus                                                      float64
	sandboxUser                                               string
	requireToken                                              bool
	token                                                     string // AZSESSIONS_EMULATOR_TOKEN
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	c := config{maxUploadBytes: emulator.DefaultMaxUploadBytes, memoryLimit: 1 << 30, cpus: 1}
	fs := flag.NewFlagSet("azsessions-emulator", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.addr, "addr", "127.0.0.1:8080", "listen `address` (port 0 picks a free one)")
	fs.StringVar(&c.poolType, "pool-type", emulator.PoolTypePythonLTS, "kind of session pool: PythonLTS (Python code interpreter), NodeLTS (JavaScript code interpreter: Node.js), Shell (shellCommand/execCommandAndArgs in the sandbox, exit code as status) or CustomContainer (every request goes to -container-command, run per session)")
	fs.StringVar(&c.containerCommand, "container-command", "", "CustomContainer: the `command` each session runs in its sandbox (/bin/sh -c, in /mnt/data): an HTTP server listening on -target-port")
	fs.IntVar(&c.targetPort, "target-port", 0, "CustomContainer: the `port` -container-command listens on, inside the sandbox")
	fs.StringVar(&c.containerDir, "container-dir", "", "CustomContainer: a `directory` whose files are copied into each new session's /mnt/data before the command starts (the image's files)")
	fs.DurationVar(&c.containerStartTimeout, "container-start-timeout", emulator.DefaultContainerStartTimeout, "CustomContainer: how long a new session's command may take to listen (then 504)")
	fs.StringVar(&c.sandbox, "sandbox", emulator.SandboxBwrap, "isolation: bwrap, gvisor (gVisor's user-space kernel: needs runsc and root; slower starts), or none (no isolation: only for trusted code)")
	fs.StringVar(&c.python, "python", "", "Python `interpreter` (default: the system python3)")
	fs.StringVar(&c.node, "node", "", "Node.js `executable` of -pool-type NodeLTS (default: /usr/bin/node, else node on PATH)")
	fs.DurationVar(&c.cooldown, "cooldown", emulator.DefaultCooldown, "idle time after which a session, its variables and files end")
	fs.IntVar(&c.maxSessions, "max-sessions", 0, fmt.Sprintf("live sessions in the pool; one more gets 404 (default, or 0: %d, or without cgroups (not root) as many sandboxes as fit in -max-memory at -memory-limit each)", emulator.DefaultMaxSessions))
	fs.DurationVar(&c.maxExecutionTime, "max-execution-time", emulator.DefaultMaxExecutionTime, "cap on one execution")
	fs.Var(&c.maxUploadBytes, "max-upload-bytes", "largest upload, in bytes or with a unit (KiB, MiB, GiB, KB, MB, GB); above it 413")
	fs.IntVar(&c.outputStreamsMaxLength, "output-streams-max-length", emulator.DefaultOutputStreamsMaxLength, "stdout and stderr cap, each, in characters (the pool's default for the request's outputStreamsMaxLength)")
	var oldOutputMax int
	fs.IntVar(&oldOutputMax, "output-max-length", 0, "deprecated: use -output-streams-max-length")
	fs.Usage = func() { usage(fs, "output-max-length") }
	fs.Var(&c.memoryLimit, "memory-limit", "memory of one sandbox, in bytes or with a unit (e.g. 1GiB)")
	fs.Float64Var(&c.cpus, "cpus", 1, "CPU quota of one sandbox, in cores (e.g. 0.5), background processes included")
	fs.Var(&c.maxMemory, "max-memory", "memory all sandboxes use together: as root the limit of a cgroup holding them all (past it sandboxes are killed until the rest fit: on cgroup v1 idle ready ones first, then the one holding the most memory, /tmp included; on v2 the largest process) and new sessions get 404 when what they use leaves no room; without cgroups each counts its -memory-limit; at least -memory-limit (default: half of the host's RAM)")
	fs.Var(&c.maxDisk, "max-disk", "disk all sandboxes' /mnt/data use together, as measured; past it a session that writes more is stopped and new sessions get 404 (default: half of the free space of -data-dir)")
	fs.StringVar(&c.sandboxUser, "sandbox-user", "", "unprivileged host `account` (name, uid or uid:gid) that sandboxes run as when the emulator runs as root (default nobody; root is refused)")
	fs.StringVar(&c.dataDir, "data-dir", "", "`directory` for the sessions' data (default: a temporary one, removed at exit)")
	fs.IntVar(&c.ready, "ready", 2, "interpreters kept started so that new sessions start fast; after a burst of N new sessions that they could not serve, N are kept started (up to -max-ready) and fall back by one a minute without such bursts (a burst lasts until the ready list is full again; the next one is served from it once that refill ended)")
	fs.IntVar(&c.maxReady, "max-ready", 0, fmt.Sprintf("most interpreters kept started after bursts of new sessions (default, or 0: %d), at most a quarter of -max-memory at ~64 MiB each (128 MiB on gvisor) and at most -max-sessions; equal to -ready, the number kept started never grows", emulator.DefaultMaxReady))
	fs.Func("preload", "comma-separated `modules` every interpreter imports in the background once started, e.g. numpy,pandas,matplotlib (matplotlib means matplotlib.pyplot); none for nothing (default numpy: more is faster on first use, ~25 MiB more per interpreter for each of pandas and matplotlib)", func(v string) error {
		c.preload = parsePreload(v)
		return nil
	})
	fs.BoolVar(&c.requireToken, "require-token", false, `answer 401 to requests without "Authorization: Bearer ..."; the token is checked only when the environment variable `+tokenEnv+` holds it, which serving beyond loopback needs`)
	fs.StringVar(&c.tlsCert, "tls-cert", "", "certificate `file` to serve HTTPS (with -tls-key)")
	fs.StringVar(&c.tlsKey, "tls-key", "", "private key `file` to serve HTTPS (with -tls-cert)")
	fs.StringVar(&c.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["output-max-length"] {
		if set["output-streams-max-length"] && oldOutputMax != c.outputStreamsMaxLength {
			return c, fmt.Errorf("-output-max-length (deprecated) and -output-streams-max-length differ (%d, %d): use only -output-streams-max-length", oldOutputMax, c.outputStreamsMaxLength)
		}
		fmt.Fprintln(stderr, "azsessions-emulator: -output-max-length is deprecated: use -output-streams-max-length")
		c.outputStreamsMaxLength = oldOutputMax
	}
	if c.outputStreamsMaxLength < 0 || c.outputStreamsMaxLength > emulator.MaxOutputStreamsMaxLength {
		return c, fmt.Errorf("-output-streams-max-length must be in 0-%d", emulator.MaxOutputStreamsMaxLength)
	}
	if c.sandbox != emulator.SandboxBwrap && c.sandbox != emulator.SandboxGvisor && c.sandbox != emulator.SandboxNone {
		return c, fmt.Errorf("-sandbox must be %s, %s or %s", emulator.SandboxBwrap, emulator.SandboxGvisor, emulator.SandboxNone)
	}
	// The pool type is checked before any sandbox starts; its case does not
	// matter (the Azure resource's containerType is PascalCase).
	for _, t := range []string{emulator.PoolTypePythonLTS, emulator.PoolTypeShell, emulator.PoolTypeCustomContainer, emulator.PoolTypeNodeLTS} {
		if strings.EqualFold(c.poolType, t) {
			c.poolType = t
		}
	}
	switch c.poolType {
	case emulator.PoolTypePythonLTS, emulator.PoolTypeShell, emulator.PoolTypeCustomContainer, emulator.PoolTypeNodeLTS:
	default:
		return c, fmt.Errorf("-pool-type must be %s, %s, %s or %s", emulator.PoolTypePythonLTS, emulator.PoolTypeNodeLTS, emulator.PoolTypeShell, emulator.PoolTypeCustomContainer)
	}
	if c.poolType == emulator.PoolTypeCustomContainer {
		if strings.TrimSpace(c.containerCommand) == "" || c.targetPort < 1 || c.targetPort > 65535 {
			return c, errors.New("-pool-type CustomContainer needs -container-command and -target-port (1-65535)")
		}
		if c.containerStartTimeout <= 0 {
			return c, errors.New("-container-start-timeout must be positive")
		}
		if c.preload == nil {
			c.preload = []string{} // the sandboxes run the container, not Python cells
		}
	} else {
		if c.containerCommand != "" || c.targetPort != 0 || c.containerDir != "" {
			return c, errors.New("-container-command, -target-port and -container-dir need -pool-type CustomContainer")
		}
		c.containerStartTimeout = 0
	}
	if c.requireToken {
		c.token = os.Getenv(tokenEnv)
	}
	if (c.tlsCert == "") != (c.tlsKey == "") {
		return c, errors.New("-tls-cert and -tls-key go together")
	}
	if c.ready < 0 {
		return c, errors.New("-ready must not be negative")
	}
	if c.maxReady < 0 {
		return c, errors.New("-max-ready must not be negative")
	}
	if c.maxSessions < 0 {
		return c, errors.New("-max-sessions must not be negative")
	}
	if c.cpus <= 0 || c.cpus > 1024 {
		return c, errors.New("-cpus must be a positive number of cores")
	}
	return c, nil
}

// usage prints the flags of fs as flag.FlagSet's default usage does, leaving
// out the hidden (deprecated) ones, which stay accepted.
func usage(fs *flag.FlagSet, hidden ...string) {
	shown := flag.NewFlagSet(fs.Name(), flag.ContinueOnError)
	shown.SetOutput(fs.Output())
	fs.VisitAll(func(f *flag.Flag) {
		if !slices.Contains(hidden, f.Name) {
			shown.Var(f.Value, f.Name, f.Usage)
			shown.Lookup(f.Name).DefValue = f.DefValue
		}
	})
	fmt.Fprintf(fs.Output(), "Usage of %s:\n", fs.Name())
	shown.PrintDefaults()
}

// parsePreload turns -preload's value into SandboxOptions.Preload: "" and
// "none" are an empty (non-nil) list, i.e. nothing preloaded.
func parsePreload(v string) []string {
	mods := []string{}
	for _, m := range strings.Split(v, ",") {
		if m = strings.TrimSpace(m); m != "" && m != "none" {
			mods = append(mods, m)
		}
	}
	return mods
}

// run starts the emulator and serves until ctx ends. onSignal, when not nil,
// is called once shutdown starts (so that a second signal kills the process).
func run(ctx context.Context, args []string, stdout, stderr io.Writer, onSignal func()) error {
	c, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.logLevel)); err != nil {
		return fmt.Errorf("-log-level: %w", err)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	if c.sandbox == emulator.SandboxNone {
		if os.Geteuid() == 0 {
			// As root, code runs as -sandbox-user: the owner of the user
			// namespace of every bwrap sandbox run as that account on this
			// host, other emulators' included (red team: it read and wrote
			// their /mnt/data through /proc/<pid>/root and read their
			// drivers' memory).
			log.Warn("-sandbox=none: code runs WITHOUT ANY ISOLATION as -sandbox-user (" + cmp.Or(c.sandboxUser, "nobody") + "), with its network and files, and can enter every bwrap sandbox that runs as that account on this host (other emulators' sessions included); use it only for trusted code, and give sandboxing emulators another -sandbox-user")
		} else {
			log.Warn("-sandbox=none: code runs WITHOUT ANY ISOLATION as the current user, with its network and files; use it only for trusted code")
		}
	}
	// Listen first: a busy or refused address fails at once, before any
	// sandbox starts.
	ln, err := net.Listen("tcp", c.addr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			// Most often an emulator left running (after `go run ... &`,
			// kill $! stops only go run): say what to do.
			return fmt.Errorf("%w (another emulator or program holds it: stop it, or pick another address with -addr; port 0 picks a free one)", err)
		}
		return err
	}
	defer ln.Close()
	if err := emulator.CheckListenAddr(ln.Addr(), emulator.Options{RequireToken: c.requireToken, Token: c.token}); err != nil {
		return err
	}
	if c.requireToken && c.token == "" {
		log.Warn("-require-token without " + tokenEnv + ": any bearer token is accepted")
	}
	runtime := emulator.SandboxRuntimePython
	if c.poolType == emulator.PoolTypeNodeLTS {
		runtime = emulator.SandboxRuntimeNode
	}
	ex, err := emulator.NewSandboxExecutor(emulator.SandboxOptions{
		Python: c.python, Runtime: runtime, Node: c.node, Mode: c.sandbox, DataDir: c.dataDir, Ready: c.ready, MaxReady: readyCap(c),
		MemoryLimitBytes: int64(c.memoryLimit), Preload: c.preload, Logger: log,
		CPUs: c.cpus, MaxTotalMemoryBytes: int64(c.maxMemory), MaxTotalDiskBytes: int64(c.maxDisk), SandboxUser: c.sandboxUser,
	})
	if errors.Is(err, emulator.ErrNoBubblewrap) || errors.Is(err, emulator.ErrNoGvisor) {
		return err // the error names the package to install and another -sandbox
	}
	if err != nil {
		return err
	}
	logInfo(log, ex.Info())
	c.maxSessions = maxSessions(c.maxSessions, ex)
	h, err := emulator.NewHandler(emulator.Options{
		Executor: ex, PoolType: c.poolType, ContainerCommand: c.containerCommand, TargetPort: c.targetPort, ContainerDir: c.containerDir,
		ContainerStartTimeout: c.containerStartTimeout, Cooldown: c.cooldown, MaxSessions: c.maxSessions, MaxExecutionTime: c.maxExecutionTime,
		MaxUploadBytes: int64(c.maxUploadBytes), OutputStreamsMaxLength: c.outputStreamsMaxLength, RequireToken: c.requireToken, Token: c.token, Logger: log,
	})
	if err != nil {
		_ = ex.Close()
		return err
	}
	scheme := "http"
	if c.tlsCert != "" {
		scheme = "https"
	}
	endpoint := scheme + "://" + ln.Addr().String() + h.PoolPath()
	srv := emulator.NewHTTPServer(h, log)
	served := make(chan error, 1)
	go func() {
		if c.tlsCert != "" {
			served <- srv.ServeTLS(ln, c.tlsCert, c.tlsKey)
		} else {
			served <- srv.Serve(ln)
		}
	}()
	fmt.Fprintln(stdout, endpoint)
	serving := []any{"endpoint", endpoint, "pool_type", c.poolType}
	if c.poolType == emulator.PoolTypeCustomContainer {
		serving = append(serving, "container_command", c.containerCommand, "target_port", c.targetPort)
	}
	log.Info("serving", append(serving, "require_token", c.requireToken, "cooldown", c.cooldown, "max_sessions", c.maxSessions)...)

	var serveErr error
	select {
	case <-ctx.Done():
		if onSignal != nil {
			onSignal()
		}
		log.Info("shutting down")
	case serveErr = <-served:
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	shutdownErr := srv.Shutdown(shutdownCtx) // lets short requests finish
	closeErr := h.Close()                    // cancels executions, kills every sandbox, removes data
	if shutdownErr != nil {
		_ = srv.Close()
	}
	if errors.Is(serveErr, http.ErrServerClosed) {
		serveErr = nil
	}
	if closeErr != nil {
		log.Error("closing the sandboxes failed", "err", closeErr)
	}
	return errors.Join(serveErr, closeErr)
}

// maxSessions is -max-sessions, or when it is 0 the default:
// emulator.DefaultMaxSessions, or fewer when the executor counts each
// sandbox at its memory limit (no cgroups: Capacity > 0), so that the pool's
// limit and the sandboxes' pool-wide memory limit agree. With cgroups the
// executor admits by what the sandboxes use and has no count (-1).
func maxSessions(flagValue int, ex emulator.Executor) int {
	if flagValue > 0 {
		return flagValue
	}
	n := emulator.DefaultMaxSessions
	if c, ok := ex.(interface{ Capacity() int }); ok && c.Capacity() > 0 {
		n = min(n, c.Capacity())
	}
	return n
}

// readyCap is SandboxOptions.MaxReady: -max-ready (0: the executor's
// default), at most -max-sessions when it is set, since more ready sandboxes
// than sessions can never be used.
func readyCap(c config) int {
	n := c.maxReady
	if n == 0 {
		n = emulator.DefaultMaxReady
	}
	if c.maxSessions > 0 {
		n = min(n, c.maxSessions)
	}
	return n
}

// tokenEnv is the environment variable holding the one bearer token
// -require-token accepts.
const tokenEnv = "AZSESSIONS_EMULATOR_TOKEN"

// logInfo logs the interpreter and which of the usual packages it has
// (Python), or Node.js's version.
func logInfo(log *slog.Logger, info emulator.Info) {
	if info.NodeVersion != "" {
		log.Info("node", "interpreter", info.Interpreter, "version", info.NodeVersion, "sandbox", info.Sandbox)
		return
	}
	attrs := []any{"interpreter", info.Interpreter, "python", info.PythonVersion, "sandbox", info.Sandbox}
	var missing []string
	for _, p := range []string{"ipython", "numpy", "pandas", "matplotlib"} {
		if v, ok := lookupPackage(info.Packages, p); ok {
			attrs = append(attrs, p, v)
		} else {
			missing = append(missing, p)
		}
	}
	log.Info("python", attrs...)
	if len(missing) > 0 {
		log.Warn("python packages not found; code that imports them fails", "missing", strings.Join(missing, ","))
	}
}

func lookupPackage(pkgs map[string]string, name string) (string, bool) {
	for k, v := range pkgs {
		if strings.EqualFold(k, name) {
			return v, true
		}
	}
	return "", false
}

// byteSize is a flag of a size in bytes with an optional unit.
type byteSize int64

func (b *byteSize) String() string { return strconv.FormatInt(int64(*b), 10) }

func (b *byteSize) Set(s string) error {
	units := []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"B", 1}}
	mult := int64(1)
	num := strings.TrimSpace(s)
	for _, u := range units {
		if strings.HasSuffix(num, u.suffix) {
			num, mult = strings.TrimSpace(strings.TrimSuffix(num, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return fmt.Errorf("invalid size %q (want bytes, or a number with KiB, MiB, GiB, KB, MB or GB)", s)
	}
	*b = byteSize(n * mult)
	return nil
}
