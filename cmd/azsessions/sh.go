package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/azsessions/azsessions"
	"github.com/azsessions/azsessions/emulator"
)

// maxShellTimeout is the longest --timeout timeoutInSeconds (int32) carries.
const maxShellTimeout = time.Duration(math.MaxInt32) * time.Second

var shVerb = &verb{
	name:    "sh",
	usage:   "sh [flags] 'COMMAND LINE'  |  sh [flags] -- PROGRAM [ARG...]",
	summary: "run a command on a Shell session pool; exits with its exit code",
	details: `Runs a command in the session of a Shell session pool (containerType Shell,
api-version 2025-10-02-preview), in its working directory /mnt/data, where the
files of upload, ls and download are.

  sh 'COMMAND LINE'        one argument (quote it): the pool's shell interprets it,
                           with pipes, redirections and variables (shellCommand)
  sh -- PROGRAM [ARG...]   everything after -- is the program and its arguments,
                           run without a shell: no quoting, globbing or $VARS
                           (execCommandAndArgs); flags go before the --

The command gets no standard input unless --stdin says where it comes from:
--stdin FILE sends the file, --stdin - this command's own stdin (read to the
end before the command is sent: the service takes stdin as one UTF-8 string,
not a stream; binary input goes through upload and a redirection).

The command's stdout and stderr are printed as they are, on stdout and stderr;
the service cuts each at 4096 characters (a note says so): write large output
to a file under /mnt/data and download it. --json prints the service's answer
instead (its "status" is the exit code as a string).

Exit status: the command's exit code (0-255, so that scripts can test it as
with ssh), 1 when the execution has none (it was stopped at its timeout or could
not start: the status and error code are on stderr). Errors of azsessions
itself keep their statuses, 2 for usage and 3 for the service, and print
"azsessions sh: ..." on stderr; a command's own exit code 2 or 3 prints nothing
more, so test stderr (or use --json) when the difference matters.

With --emulator the embedded emulator is a Shell pool (bash in the bubblewrap
sandbox) for this one command; in 'azsessions shell', %sh needs the pool to be a
Shell pool (the --emulator one of the shell runs Python).`,
	examples: `azsessions --emulator sh 'ls -a | wc -l'
azsessions --emulator sh -- ls -a
echo hi | azsessions --emulator sh --stdin - 'read L; echo got:$L'
azsessions sh --stdin input.txt --timeout 2m 'sort | uniq -c > counts.txt' && azsessions download counts.txt
azsessions sh --json -- uname -a | jq -r .status`,
	flags: func(fs *flag.FlagSet) func(context.Context, *cli) error {
		stdin := fs.String("stdin", "", "send `FILE` as the command's standard input (- for this command's stdin; default none)")
		timeout := new(time.Duration)
		fs.Var((*secondsFlag)(timeout), "timeout", "how long the command may run: seconds (30) or a duration (30s, 2m); default 600s (the emulator stops commands at 220s)")
		return func(ctx context.Context, c *cli) error {
			cmd, err := c.shellExecution()
			if err != nil {
				return err
			}
			if *timeout < 0 || *timeout%time.Second != 0 {
				return usageErrorf("--timeout must be a positive whole number of seconds, such as 30, 30s or 2m")
			}
			if *timeout > maxShellTimeout {
				return usageErrorf("--timeout %v is more than timeoutInSeconds carries (%ds)", *timeout, math.MaxInt32)
			}
			if *stdin == "-" && c.loop {
				return usageErrorf("--stdin - would read the shell's own input: use --stdin FILE")
			}
			if err := c.checkShellAPIVersion(); err != nil {
				return err
			}
			if cmd.Stdin, err = c.readShellStdin(*stdin); err != nil {
				return err
			}
			c.poolType = emulator.PoolTypeShell
			return c.runShell(ctx, cmd, *timeout)
		}
	},
}

// shellExecution is the command of the arguments: one argument before "--"
// is a command line, the arguments after "--" a program and its arguments.
func (c *cli) shellExecution() (azsessions.ShellExecution, error) {
	before, after := c.args, []string(nil)
	if c.dash >= 0 {
		before, after = c.args[:c.dash], c.args[c.dash:]
	}
	switch {
	case c.dash >= 0 && len(before) > 0:
		return azsessions.ShellExecution{}, usageErrorf("give a command line (one quoted argument) or a program and its arguments after --, not both")
	case len(before) > 1:
		return azsessions.ShellExecution{}, usageErrorf("give the command line as one argument (quote it: sh 'ls -a | wc -l'), or the program and its arguments after -- (sh -- ls -a)")
	case c.dash >= 0 && len(after) == 0:
		return azsessions.ShellExecution{}, usageErrorf("nothing after --: name the program to run")
	case c.dash >= 0 && after[0] == "":
		return azsessions.ShellExecution{}, usageErrorf("the program, the first argument after --, is empty")
	case c.dash >= 0:
		return azsessions.ShellExecution{ExecCommandAndArgs: after}, nil
	case len(before) == 0:
		return azsessions.ShellExecution{}, usageErrorf("no command: give a command line (quoted) or a program and its arguments after --")
	case strings.TrimSpace(before[0]) == "":
		return azsessions.ShellExecution{}, usageErrorf("the command line is empty")
	}
	return azsessions.ShellExecution{ShellCommand: before[0]}, nil
}

// checkShellAPIVersion refuses an --api-version without Shell executions
// before anything starts (the embedded emulator's sandboxes, a connection):
// the client says so for an empty command, without I/O.
func (c *cli) checkShellAPIVersion() error {
	if c.apiVersion == "" || c.client != nil {
		return nil
	}
	probe, err := azsessions.NewClientWithNoCredential("http://127.0.0.1/", &azsessions.ClientOptions{ClientOptions: azcore.ClientOptions{APIVersion: c.apiVersion}})
	if err != nil {
		return usageErrorf("%v", err)
	}
	_, err = probe.Session("probe-session").ExecuteShell(context.Background(), azsessions.ShellExecution{}, nil)
	if errors.Is(err, azsessions.ErrUnsupported) {
		return err
	}
	return nil
}

// readShellStdin returns the command's stdin: none, a file, or ours (-).
func (c *cli) readShellStdin(src string) (string, error) {
	if src == "" {
		return "", nil
	}
	var b []byte
	var err error
	if src == "-" {
		if isTerminal(c.stdin) {
			fmt.Fprintln(c.stderr, "azsessions: reading the command's stdin; end it with Ctrl-D")
		}
		b, err = io.ReadAll(c.stdin)
	} else {
		b, err = os.ReadFile(src)
	}
	if err != nil {
		return "", err
	}
	if !utf8.Valid(b) {
		return "", usageErrorf("--stdin %s is not UTF-8 text, which the service's stdin (a JSON string) needs: upload the file and redirect it in the command ('cmd < file')", src)
	}
	return string(b), nil
}

// runShell runs cmd and prints the outcome; it returns the command's exit
// code as a *commandExit, or errCodeFailed when the execution has none.
func (c *cli) runShell(ctx context.Context, cmd azsessions.ShellExecution, timeout time.Duration) error {
	session, err := c.getSession()
	if err != nil {
		return err
	}
	cctx, raw := capture(ctx)
	resp, err := session.ExecuteShell(cctx, cmd, &azsessions.ExecuteShellOptions{Timeout: timeout})
	if err != nil {
		return err
	}
	if c.json {
		if err := c.printRawAnswer(*raw); err != nil {
			return err
		}
	} else {
		io.WriteString(c.stdout, resp.Stdout)
		io.WriteString(c.stderr, resp.Stderr)
		if resp.Truncated() {
			if !strings.HasSuffix(resp.Stdout, "\n") && !strings.HasSuffix(resp.Stderr, "\n") {
				io.WriteString(c.stderr, "\n") // the cut output ends mid-line
			}
			fmt.Fprintf(c.stderr, "azsessions: note: the output reached the service's cap (%d characters) and was cut; write large output to a file under /mnt/data and download it\n", azsessions.DefaultOutputStreamsMaxLength)
		}
	}
	switch {
	case resp.ExitCode == 0 || resp.Status == string(azsessions.ExecutionStatusSucceeded):
		return nil
	case resp.ExitCode > 0 && resp.ExitCode <= 255:
		return &commandExit{code: resp.ExitCode}
	}
	if !c.json {
		msg := fmt.Sprintf("azsessions: the execution ended with status %q, not an exit code 0-255", resp.Status)
		if resp.ErrorCode != "" {
			msg += " (error code " + resp.ErrorCode + ")"
		}
		if resp.Status == string(azsessions.ExecutionStatusCanceled) || resp.ErrorCode == emulator.CodeExecutionTimeout {
			msg += "; did its --timeout pass?"
		}
		fmt.Fprintln(c.stderr, msg)
	}
	return errCodeFailed
}
