// Command azsessions runs Python and moves files in Azure Container Apps
// dynamic sessions (the code interpreter) from a terminal or a script: the
// verbs of `az containerapp session code-interpreter` and a few more (sh runs
// commands on Shell pools), on the azsessions client, against a session pool or
// the embedded local emulator.
//
// Usage:
//
//	azsessions [global flags] VERB [flags] [arguments]
//
// Verbs:
//
//	exec      run Python code (from an argument, a file or stdin)
//	sh        run a command on a Shell session pool (exit status: its exit code)
//	upload    upload files and directories to /mnt/data
//	ls        list the files of the session
//	download  download a file (atomically) or write it to stdout
//	rm        delete files
//	sessions  list the pool's sessions; get, delete or stop one
//	metadata  the pool's runtimes, packages and kernel
//	shell     an interactive loop: Python cells and %verbs on one session
//	help      help on a verb
//
// The pool management endpoint comes from --endpoint or
// AZURE_POOL_MANAGEMENT_ENDPOINT; an https endpoint is called with
// azidentity's DefaultAzureCredential (for example after `az login`), an http
// one (a local emulator) without a credential. --emulator starts the embedded
// emulator (bubblewrap sandbox) for the one command, or for the whole `shell`;
// for sh it is a Shell pool, for the other verbs a Python one.
// The session identifier comes from --session or AZSESSIONS_SESSION; when
// neither is set a fresh one is made and printed on stderr so that the next
// command can reuse the session.
//
// Exit status: 0 success, 1 the code ran and failed (status Failed or
// Canceled), 2 usage error (bad flags or arguments, detected before any
// request), 3 the service, the transport, the credential or a local file
// failed. sh exits with the command's own exit code (1 when the execution has
// none); its usage and service errors keep 2 and 3 and print
// "azsessions sh: ..." on stderr.
//
// Every verb has --help with examples; --version prints the version.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/azsessions/azsessions"
	"github.com/azsessions/azsessions/internal/version"
)

// Exit codes.
const (
	exitOK         = 0
	exitCodeFailed = 1
	exitUsage      = 2
	exitService    = 3
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], &env{
		stdin:  os.Stdin,
		stdout: os.Stdout,
		stderr: os.Stderr,
		getenv: os.Getenv,
	})
	stop()
	os.Exit(code)
}

// env is the outside world of one run.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
}

// exitError carries an exit code and a message for stderr.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// commandExit is the exit code of a command that sh ran, passed on as the
// exit status with nothing more printed (its stdout and stderr are there).
type commandExit struct{ code int }

func (e *commandExit) Error() string { return fmt.Sprintf("the command exited with %d", e.code) }

// usageErrorf is an error of the command line: exit status 2.
func usageErrorf(format string, args ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

// run executes one command line and returns the exit status.
func run(ctx context.Context, args []string, e *env) int {
	g := &globals{}
	root := newFlagSet("azsessions", e.stderr)
	g.register(root)
	showVersion := root.Bool("version", false, "print the version and exit")
	root.Usage = func() {}
	if err := root.Parse(args); err != nil {
		if errors.Is(err, errHelp) {
			printOverview(e.stdout)
			return exitOK
		}
		fmt.Fprintln(e.stderr, "Run 'azsessions --help' for usage.")
		return exitUsage
	}
	if *showVersion {
		fmt.Fprintf(e.stdout, "azsessions %s (api-version %s by default)\n", version.Module, azsessions.DefaultAPIVersion)
		return exitOK
	}
	rest := root.Args()
	if len(rest) == 0 {
		printOverview(e.stderr)
		return exitUsage
	}
	name, rest := rest[0], rest[1:]
	if name == "help" {
		return helpVerb(rest, e)
	}
	v, ok := verbByName(name)
	if !ok {
		fmt.Fprintf(e.stderr, "azsessions: unknown verb %q\n\n", name)
		printOverview(e.stderr)
		return exitUsage
	}
	return runVerb(ctx, v, g, rest, e)
}

// runVerb parses the verb's flags (the global flags are accepted there too),
// runs it and maps its error to an exit status.
func runVerb(ctx context.Context, v *verb, g *globals, args []string, e *env) int {
	fs := newFlagSet("azsessions "+v.name, e.stderr)
	g.register(fs)
	run := v.flags(fs)
	fs.Usage = func() {}
	pos, dash, err := parseInterspersed(fs, args)
	if err != nil {
		if errors.Is(err, errHelp) {
			printVerbHelp(e.stdout, v, fs)
			return exitOK
		}
		if v == shVerb && strings.Contains(err.Error(), "flag provided but not defined") {
			fmt.Fprintln(e.stderr, "hint: quote the command line (sh 'ls -a'), or put the program and its arguments after -- (sh -- ls -a)")
		}
		fmt.Fprintf(e.stderr, "Run 'azsessions %s --help' for usage.\n", v.name)
		return exitUsage
	}
	c := &cli{globals: g, env: e, args: pos, dash: dash, verb: v}
	defer c.close()
	err = run(ctx, c)
	if c.answered.Load() {
		c.announce()
	}
	return c.exit(err)
}

// exit prints err (if any) and returns its exit status.
func (c *cli) exit(err error) int {
	if err == nil {
		return exitOK
	}
	code := exitCode(err)
	var ce *commandExit
	if errors.As(err, &ce) {
		return code // the command's own exit status: its output said the rest
	}
	if code != exitCodeFailed { // a failed program already showed its traceback
		msg := describe(err)
		if c.session != nil && c.session.Identifier() != "" {
			// a service message may quote the identifier
			msg = strings.ReplaceAll(msg, c.session.Identifier(), "<identifier>")
		}
		// the SDK's own errors start with its package name: said once
		msg = strings.TrimPrefix(msg, "azsessions: ")
		// in the shell loop, verbs are typed as %ls, not azsessions ls
		ls := "'azsessions ls'"
		if c.loop || c.verb.name == "shell" {
			ls = "%ls"
		}
		// --emulator outside the shell: an emulator of this command alone,
		// whose session is new and cannot have outlived a cooldown
		oneShot := c.emulator && !c.loop && c.verb.name != "shell"
		if azcoreStatus(err) == http.StatusNotFound && oneShot && isFileNotFound(err) {
			msg += "\nhint: no such file or directory in the session; each --emulator command starts an empty emulator, so files of an earlier one are gone: upload and use them in one 'azsessions --emulator shell', or run azsessions-emulator and set " + envEndpoint
		}
		if azcoreStatus(err) == http.StatusNotFound && c.session != nil && !c.fresh && !oneShot && c.verb.name != "sessions" {
			if isFileNotFound(err) {
				// most often the path never existed: say that first
				msg += "\nhint: no such file or directory in the session; if it was there, the session may have ended after its cooldown (idle time), and the same identifier then starts a new, empty session: " + ls + " shows what it holds"
			} else {
				msg += "\nhint: sessions end after their cooldown (idle time); the same identifier then starts a new, empty session: " + ls + " shows what it holds"
			}
		}
		if errors.Is(err, azsessions.ErrInvalidIdentifier) && c.verb.name != "sessions" {
			// the identifier is not printed (it gives access to its session):
			// say where it came from, often an export of an earlier step
			src := "$" + envSession + " (unset it for a fresh session)"
			if c.globals.session != "" {
				src = "--session"
			}
			msg += "\nhint: the session identifier is the one of " + src
		}
		if azcoreStatus(err) == http.StatusBadRequest && c.verb.name == "sh" {
			switch {
			case c.loop && c.emulator:
				// the loop's emulator is a code-interpreter pool: %sh can never work there
				msg += "\nhint: sh needs a Shell session pool (containerType Shell); 'azsessions --emulator shell' starts a code-interpreter pool, whose code runs as typed here: for shell commands use 'azsessions --emulator sh', or an emulator started with -pool-type Shell"
			case c.loop:
				msg += "\nhint: sh needs a Shell session pool (containerType Shell); a code-interpreter pool refuses shell commands: type its code here"
			default:
				msg += "\nhint: sh needs a Shell session pool (containerType Shell); a code-interpreter pool refuses shell commands: run its code with exec"
			}
		}
		if azcoreStatus(err) == http.StatusBadRequest && c.verb.name == "exec" && mentionsShell(err) {
			sh := "`azsessions sh`"
			if c.loop {
				sh = "%sh"
			}
			msg += "\nhint: this pool runs shell commands (a Shell session pool refuses code): use " + sh
		}
		if c.loop {
			// typed as %verb at the shell loop's prompt
			fmt.Fprintf(c.stderr, "%%%s: %s\n", c.verb.name, msg)
		} else {
			fmt.Fprintf(c.stderr, "azsessions %s: %s\n", c.verb.name, msg)
		}
	}
	if code == exitUsage {
		if c.loop {
			fmt.Fprintf(c.stderr, "Run '%%%s --help' for usage.\n", c.verb.name)
		} else {
			fmt.Fprintf(c.stderr, "Run 'azsessions %s --help' for usage.\n", c.verb.name)
		}
	}
	return code
}
