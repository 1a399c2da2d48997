package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
)

var shellVerb = &verb{
	name:    "shell",
	usage:   "shell [flags]",
	summary: "an interactive loop: Python cells and %verbs on one session",
	details: `Reads Python from stdin and runs each cell in one session, printing what exec
prints. A line ending in ":" or "\", or with an open bracket, starts a block
that runs at the first empty line. Lines starting with % run a verb on the same
session: %ls, %upload, %download, %rm, %exec, %metadata, %sessions (with their
flags, such as %ls --recursive). %help lists them; %exit, %quit or end of input
(Ctrl-D) ends the loop. With --emulator one embedded emulator serves the whole
loop, so variables and files persist until the shell ends.`,
	examples: `azsessions --emulator shell
azsessions shell --session demo-1 --save-images plots
printf 'x = 6*7\nprint(x)\n%%ls\n' | azsessions --emulator shell`,
	flags: func(fs *flag.FlagSet) func(context.Context, *cli) error {
		saveImages := fs.String("save-images", "", "save image results in `DIR`")
		return func(ctx context.Context, c *cli) error {
			if len(c.args) > 0 {
				return usageErrorf("shell takes no arguments")
			}
			return c.shell(ctx, *saveImages)
		}
	},
}

func (c *cli) shell(ctx context.Context, saveImages string) error {
	session, err := c.getSession()
	if err != nil {
		return err
	}
	interactive := isTerminal(c.stdin)
	if interactive {
		fmt.Fprintf(c.stderr, "azsessions shell on %s (api-version %s). %%help for verbs, Ctrl-D to end.\n", redactEndpoint(session.Client().Endpoint()), session.Client().APIVersion())
	}
	prompt := func(s string) {
		if interactive {
			fmt.Fprint(c.stderr, s)
		}
	}
	sc := bufio.NewScanner(c.stdin)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var block []string
	runBlock := func() {
		code := strings.Join(block, "\n")
		block = block[:0]
		if strings.TrimSpace(code) == "" {
			return
		}
		if err := c.execute(ctx, code, 0, saveImages); err != nil && err != errCodeFailed {
			c.exit(err)
		}
	}
	prompt(">>> ")
	for sc.Scan() {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		line := sc.Text()
		switch {
		case len(block) > 0:
			if strings.TrimSpace(line) == "" {
				runBlock()
			} else {
				block = append(block, line)
			}
		case strings.HasPrefix(strings.TrimSpace(line), "%"):
			words, err := splitWords(strings.TrimPrefix(strings.TrimSpace(line), "%"))
			if err != nil {
				fmt.Fprintf(c.stderr, "azsessions: %v\n", err)
			} else if quit := c.shellVerb(ctx, words); quit {
				return nil
			}
		default:
			block = append(block, line)
			if !opensBlock(line) {
				runBlock()
			}
		}
		if len(block) > 0 {
			prompt("... ")
		} else {
			prompt(">>> ")
		}
	}
	if len(block) > 0 {
		runBlock()
	}
	if interactive {
		fmt.Fprintln(c.stderr)
	}
	return sc.Err()
}

// shellVerb runs one %verb line on the shell's session; it reports whether
// the shell should end.
func (c *cli) shellVerb(ctx context.Context, words []string) (quit bool) {
	if len(words) == 0 {
		return false
	}
	switch words[0] {
	case "exit", "quit":
		return true
	case "help":
		fmt.Fprintln(c.stdout, "Python lines run in the session. Verbs (with their flags, see 'azsessions VERB --help'):")
		for _, v := range verbs {
			if v.name != "shell" {
				fmt.Fprintf(c.stdout, "  %%%-9s %s\n", v.name, v.summary)
			}
		}
		io.WriteString(c.stdout, "  %exit      end the shell\n")
		return false
	}
	v, ok := verbByName(words[0])
	if !ok || v.name == "shell" {
		fmt.Fprintf(c.stderr, "azsessions: unknown verb %%%s (%%help lists them)\n", words[0])
		return false
	}
	saved := *c.globals
	defer func() { *c.globals = saved }() // a verb's --json is for that verb only
	fs := newFlagSet(v.name, c.stderr)
	fs.BoolVar(&c.json, "json", c.json, "print the service's JSON objects")
	run := v.flags(fs)
	fs.Usage = func() {}
	pos, dash, err := parseInterspersed(fs, words[1:])
	if err != nil {
		if err == errHelp {
			printVerbHelp(c.stdout, v, fs)
		}
		return false
	}
	sub := &cli{globals: c.globals, env: c.env, args: pos, dash: dash, loop: true, verb: v, client: c.client, session: c.session}
	sub.exit(run(ctx, sub))
	return false
}

// opensBlock reports whether a Python line continues on the next: it ends in
// ":" or "\", or leaves a bracket open (strings and comments ignored).
func opensBlock(line string) bool {
	depth := 0
	var quote rune
	s := strings.TrimRight(line, " \t")
	for i, r := range s {
		switch {
		case quote != 0:
			if r == quote && (i == 0 || s[i-1] != '\\') {
				quote = 0
			}
		case r == '#':
			s = strings.TrimRight(s[:i], " \t")
			return depth > 0 || strings.HasSuffix(s, ":") || strings.HasSuffix(s, "\\")
		case r == '"' || r == '\'':
			quote = r
		case r == '(' || r == '[' || r == '{':
			depth++
		case r == ')' || r == ']' || r == '}':
			depth--
		}
	}
	return depth > 0 || strings.HasSuffix(s, ":") || strings.HasSuffix(s, "\\")
}

// redactEndpoint returns the endpoint's scheme and host only.
func redactEndpoint(endpoint string) string {
	if i := strings.Index(endpoint, "://"); i >= 0 {
		if j := strings.IndexByte(endpoint[i+3:], '/'); j >= 0 {
			return endpoint[:i+3+j]
		}
	}
	return endpoint
}

// splitWords splits a %verb line into words like a POSIX shell does for
// plain words, '...' and "..." (with \ escapes outside single quotes).
func splitWords(line string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	var quote rune
	escaped := false
	for _, r := range line {
		switch {
		case escaped:
			cur.WriteRune(r)
			escaped = false
		case r == '\\' && quote != '\'':
			escaped, inWord = true, true
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 || escaped {
		return nil, fmt.Errorf("unterminated quote or escape in %q", line)
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}
