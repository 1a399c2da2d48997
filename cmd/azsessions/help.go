package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
)

// verb is one subcommand.
type verb struct {
	name     string
	usage    string // the synopsis after "azsessions "
	summary  string // one line for the overview
	details  string // paragraphs for --help
	examples string // shell lines for --help
	// flags registers the verb's own flags and returns its run function.
	flags func(fs *flag.FlagSet) func(context.Context, *cli) error
}

// verbs in the order of the overview.
var verbs []*verb

func verbByName(name string) (*verb, bool) {
	i := slices.IndexFunc(verbs, func(v *verb) bool { return v.name == name })
	if i < 0 {
		return nil, false
	}
	return verbs[i], true
}

func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// parseInterspersed parses flags anywhere among the arguments (flag stops
// at the first argument that is not a flag) and returns the others in order.
// Everything after "--" is an argument; dash is the index in pos where those
// start, or -1 when there was no "--" (sh tells its two forms apart by it).
func parseInterspersed(fs *flag.FlagSet, args []string) (pos []string, dash int, err error) {
	for {
		if err := fs.Parse(args); err != nil {
			return nil, -1, err
		}
		consumed := len(args) - fs.NArg()
		if consumed > 0 && args[consumed-1] == "--" {
			return append(pos, fs.Args()...), len(pos), nil
		}
		if fs.NArg() == 0 {
			return pos, -1, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

const overview = `azsessions runs Python and moves files in Azure Container Apps dynamic sessions
(the code interpreter), and commands on Shell pools (sh), against a session pool or
the embedded local emulator.

Usage:
  azsessions [global flags] VERB [flags] [arguments]

Verbs:
%s
Global flags (also accepted after the verb):
  --endpoint URL      pool management endpoint (default $AZURE_POOL_MANAGEMENT_ENDPOINT);
                      https uses DefaultAzureCredential (az login, environment, managed
                      identity), http (an emulator) sends no credential
  --session ID        session identifier (default $AZSESSIONS_SESSION, else a fresh one,
                      printed on stderr)
  --api-version V     pool management api-version (default 2025-10-02-preview)
  --emulator          start the embedded emulator (bubblewrap sandbox) for this command
  --sandbox MODE      emulator isolation: bwrap (default), gvisor (needs runsc
                      and root) or none (trusted code only)
  --python PATH       emulator interpreter (default /usr/bin/python3)
  --json              print the service's JSON objects (for scripts)

Exit status: 0 success, 1 the code failed (status Failed or Canceled),
2 usage error, 3 service, transport, credential or local file error;
sh exits with the command's own exit code (see 'azsessions sh --help').

Run 'azsessions VERB --help' for a verb's flags and examples.
`

func printOverview(w io.Writer) {
	var b strings.Builder
	for _, v := range verbs {
		fmt.Fprintf(&b, "  %-9s %s\n", v.name, v.summary)
	}
	fmt.Fprintf(w, overview, b.String())
}

func helpVerb(args []string, e *env) int {
	if len(args) == 0 {
		printOverview(e.stdout)
		return exitOK
	}
	v, ok := verbByName(args[0])
	if !ok {
		fmt.Fprintf(e.stderr, "azsessions: unknown verb %q\n", args[0])
		return exitUsage
	}
	fs := newFlagSet("azsessions "+v.name, e.stderr)
	(&globals{}).register(fs)
	v.flags(fs)
	printVerbHelp(e.stdout, v, fs)
	return exitOK
}

// globalFlag reports the flags of globals, which the verb help leaves out.
var globalFlag = map[string]bool{"endpoint": true, "session": true, "api-version": true, "emulator": true, "sandbox": true, "python": true, "json": true}

func printVerbHelp(w io.Writer, v *verb, fs *flag.FlagSet) {
	fmt.Fprintf(w, "Usage: azsessions %s\n\n%s\n", v.usage, strings.TrimSpace(v.details))
	var own []*flag.Flag
	fs.VisitAll(func(f *flag.Flag) {
		if !globalFlag[f.Name] {
			own = append(own, f)
		}
	})
	if len(own) > 0 {
		fmt.Fprintf(w, "\nFlags:\n")
		for _, f := range own {
			name, usage := flag.UnquoteUsage(f)
			arg := "--" + f.Name
			if len(f.Name) == 1 {
				arg = "-" + f.Name
			}
			if name != "" {
				arg += " " + name
			}
			def := ""
			if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" && f.DefValue != "0s" {
				def = " (default " + f.DefValue + ")"
			}
			fmt.Fprintf(w, "  %-22s %s%s\n", arg, usage, def)
		}
	}
	fmt.Fprintf(w, "\nGlobal flags: --endpoint, --session, --api-version, --emulator, --sandbox, --python, --json (see 'azsessions --help').\n")
	if v.examples != "" {
		fmt.Fprintf(w, "\nExamples:\n")
		for _, line := range strings.Split(strings.TrimSpace(v.examples), "\n") {
			fmt.Fprintf(w, "  %s\n", line)
		}
	}
}
