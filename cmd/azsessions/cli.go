package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync/atomic"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"

	"github.com/azsessions/azsessions"
	"github.com/azsessions/azsessions/emulator"
)

// Environment variables.
const (
	envEndpoint = "AZURE_POOL_MANAGEMENT_ENDPOINT"
	envSession  = "AZSESSIONS_SESSION"
)

var errHelp = flag.ErrHelp

// globals are the flags every verb accepts (before or after the verb).
type globals struct {
	endpoint   string
	session    string
	apiVersion string
	emulator   bool
	sandbox    string
	python     string
	json       bool
}

// register adds the global flags to fs with their current values as
// defaults, so that flags given before the verb survive the verb's parse.
func (g *globals) register(fs *flag.FlagSet) {
	fs.StringVar(&g.endpoint, "endpoint", g.endpoint, "pool management `URL` (default $"+envEndpoint+")")
	fs.StringVar(&g.session, "session", g.session, "session `identifier` (default $"+envSession+", else a fresh one, printed on stderr)")
	fs.StringVar(&g.apiVersion, "api-version", g.apiVersion, "pool management api-`version` (default "+azsessions.DefaultAPIVersion+")")
	fs.BoolVar(&g.emulator, "emulator", g.emulator, "use the embedded local emulator (bubblewrap sandbox) instead of a pool")
	fs.StringVar(&g.sandbox, "sandbox", cmpOr(g.sandbox, emulator.SandboxBwrap), "emulator isolation: bwrap, gvisor (gVisor's user-space kernel: needs runsc and root), or none (no isolation: trusted code only)")
	fs.StringVar(&g.python, "python", g.python, "emulator Python `interpreter` (default /usr/bin/python3, else python3 on PATH)")
	fs.BoolVar(&g.json, "json", g.json, "print the service's JSON objects instead of text")
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// cli is one verb's run: the flags, the outside world and the backend.
type cli struct {
	*globals
	*env
	args []string
	// dash is the index in args of the first argument after "--", -1
	// without "--".
	dash int
	verb *verb
	// loop is set for a %verb of the shell loop, whose stdin is the loop's.
	loop bool
	// poolType is the kind of pool the embedded emulator serves
	// (emulator.PoolTypeShell for sh; "" is PythonLTS).
	poolType string

	client  *azsessions.Client
	emu     *emulator.Server
	session *azsessions.Session
	// fresh is set when the session is a new identifier of this command
	// (not the emulator's); announced once it was printed.
	fresh, announced bool
	// answered is set once a request for the session got a successful
	// (2xx) answer (answeredPolicy): the session then exists at the service.
	answered atomic.Bool
}

// announce prints a fresh session's identifier once, so that the next
// command can reuse it.
func (c *cli) announce() {
	if !c.fresh || c.announced {
		return
	}
	c.announced = true
	fmt.Fprintf(c.stderr, "azsessions: new session %s (export %s=%s to reuse it)\n", c.session.Identifier(), envSession, c.session.Identifier())
}

// answeredPolicy sets c.answered when a request for c's session gets a
// successful (2xx) answer, so that a fresh session is announced only when it
// exists at the service: not after a refused connection, nor when its first
// request failed (a wrong endpoint's 404, a missing file). A code that ran
// and failed, or a command's exit code, came in a 2xx answer.
type answeredPolicy struct{ c *cli }

func (p answeredPolicy) Do(req *policy.Request) (*http.Response, error) {
	resp, err := req.Next()
	if err == nil && resp.StatusCode >= 200 && resp.StatusCode < 300 && p.c.session != nil &&
		req.Raw().URL.Query().Get("identifier") == p.c.session.Identifier() {
		p.c.answered.Store(true)
	}
	return resp, err
}

func (c *cli) close() {
	if c.emu != nil {
		_ = c.emu.Close()
		c.emu = nil
	}
}

// getClient makes the client once: the embedded emulator, or the endpoint
// from --endpoint or the environment (DefaultAzureCredential for https, no
// credential for http).
func (c *cli) getClient() (*azsessions.Client, error) {
	if c.client != nil {
		return c.client, nil
	}
	opts := &azsessions.ClientOptions{ClientOptions: azcore.ClientOptions{APIVersion: c.apiVersion, PerCallPolicies: []policy.Policy{answeredPolicy{c}}}}
	if c.emulator {
		if c.endpoint != "" {
			return nil, usageErrorf("--emulator and --endpoint exclude each other")
		}
		if c.apiVersion != "" {
			// check the api-version before starting sandboxes
			if _, err := azsessions.NewClientWithNoCredential("http://127.0.0.1/", opts); err != nil {
				return nil, usageErrorf("%v", err)
			}
		}
		sopts := emulator.SandboxOptions{Mode: c.sandbox, Python: c.python, Ready: 1}
		if c.poolType == emulator.PoolTypeShell {
			sopts.Preload = []string{} // commands, not Python: no numpy import in the background
		}
		exec, err := emulator.NewSandboxExecutor(sopts)
		if err != nil {
			if errors.Is(err, emulator.ErrNoBubblewrap) && !errors.Is(err, errors.ErrUnsupported) { // ErrUnsupported: not Linux
				return nil, fmt.Errorf("emulator: %w (install bubblewrap, or use --sandbox=none for trusted code only)", err)
			}
			return nil, fmt.Errorf("emulator: %w", err)
		}
		if c.sandbox == emulator.SandboxNone {
			fmt.Fprintln(c.stderr, "azsessions: warning: the emulator runs code WITHOUT isolation (--sandbox=none): trusted code only")
			if os.Geteuid() == 0 {
				// As root the code runs as nobody, which owns every bwrap
				// sandbox run as nobody on this host (red team).
				fmt.Fprintln(c.stderr, "azsessions: warning: as root it runs as nobody, and can enter every bwrap sandbox that runs as nobody on this host (other emulators' sessions included)")
			}
		}
		switch {
		case c.verb == nil || c.loop || c.verb.name == "shell" || c.verb.name == "sh":
			// the shell's emulator lasts for the loop; sh's stderr is the
			// command's own
		case c.verb.name == "exec":
			// A second --emulator exec starts a fresh kernel: say so, as its
			// NameError for the first one's variables would puzzle. On
			// stderr: stdout is the code's, which scripts parse.
			fmt.Fprintln(c.stderr, "azsessions: note: --emulator lasts for this command only; its variables and files end with it (to keep them, use 'azsessions --emulator shell', or run azsessions-emulator and set "+envEndpoint+")")
		default:
			// Files and sessions of a one-command emulator are gone when the
			// command ends: say so, as a later ls would find nothing.
			fmt.Fprintln(c.stderr, "azsessions: note: --emulator lasts for this command only; its sessions and files end with it (use 'azsessions --emulator shell', or run azsessions-emulator and set "+envEndpoint+")")
		}
		srv, err := emulator.Start("127.0.0.1:0", emulator.Options{Executor: exec, PoolType: c.poolType})
		if err != nil {
			return nil, fmt.Errorf("emulator: %w", err)
		}
		c.emu = srv
		client, err := azsessions.NewClientWithNoCredential(srv.Endpoint, opts)
		if err != nil {
			return nil, err
		}
		c.client = client
		return client, nil
	}
	endpoint := cmpOr(c.endpoint, c.getenv(envEndpoint))
	if endpoint == "" {
		return nil, usageErrorf("no pool: set --endpoint or %s to the pool management endpoint, or use --emulator", envEndpoint)
	}
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return nil, usageErrorf("the endpoint %q is not a URL", endpoint)
	}
	var client *azsessions.Client
	switch u.Scheme {
	case "https":
		cred, cerr := azidentity.NewDefaultAzureCredential(nil)
		if cerr != nil {
			return nil, &credentialFailure{err: cerr}
		}
		client, err = azsessions.NewClient(endpoint, namedCredential{cred}, opts)
	case "http":
		client, err = azsessions.NewClientWithNoCredential(endpoint, opts)
	default:
		return nil, usageErrorf("the endpoint must be https (a pool) or http (an emulator), not %q", u.Scheme)
	}
	if err != nil {
		return nil, usageErrorf("%v", err)
	}
	c.client = client
	return client, nil
}

// getSession returns the session of --session or AZSESSIONS_SESSION, or a
// fresh one whose identifier is printed on stderr once a request for it got a
// successful answer.
func (c *cli) getSession() (*azsessions.Session, error) {
	if c.session != nil {
		return c.session, nil
	}
	client, err := c.getClient()
	if err != nil {
		return nil, err
	}
	id := cmpOr(c.globals.session, c.getenv(envSession))
	if id != "" {
		c.session = client.Session(id)
	} else {
		c.session = client.NewSession()
		// Printed once a request for it succeeded (runVerb), or now for the
		// shell, which runs until the user ends it.
		c.fresh = !c.emulator
		if c.verb != nil && c.verb.name == "shell" {
			c.announce()
		}
	}
	return c.session, nil
}

// namedCredential marks the errors of DefaultAzureCredential so that they are
// reported as credential failures with what to do.
type namedCredential struct{ azcore.TokenCredential }

func (n namedCredential) GetToken(ctx context.Context, opts policy.TokenRequestOptions) (azcore.AccessToken, error) {
	tok, err := n.TokenCredential.GetToken(ctx, opts)
	if err != nil {
		return tok, &credentialFailure{err: err}
	}
	return tok, nil
}

// credentialFailure is a failure of DefaultAzureCredential to get a token:
// nothing was sent.
type credentialFailure struct{ err error }

func (e *credentialFailure) Error() string {
	return "DefaultAzureCredential could not get a token for " + azsessions.DefaultScope + ": " + e.err.Error() +
		"\nwhat to do: sign in with `az login` (or `azd auth login`), or set AZURE_TENANT_ID, AZURE_CLIENT_ID and AZURE_CLIENT_SECRET" +
		" (or AZURE_FEDERATED_TOKEN_FILE) for a service principal, or run where a managed identity is available;" +
		" the identity needs the \"" + azsessions.RoleSessionExecutor + "\" role on the session pool"
}
func (e *credentialFailure) Unwrap() error { return e.err }

// exitCode maps an error to an exit status.
func exitCode(err error) int {
	var ee *exitError
	var ce *commandExit
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ce):
		return ce.code
	case errors.As(err, &ee):
		return ee.code
	case errors.Is(err, azsessions.ErrInvalidIdentifier), errors.Is(err, azsessions.ErrInvalidFileName),
		errors.Is(err, azsessions.ErrUnsupported), errors.Is(err, azsessions.ErrFileTooLarge):
		return exitUsage // found before any request
	}
	return exitService
}

// describe is the one-paragraph text of err for stderr: the service's status,
// error code and message without the request URL (which carries the session
// identifier).
func describe(err error) string {
	var ce *contextError
	if errors.As(err, &ce) {
		// the SDK's own errors start with its package name: said once
		return ce.context + ": " + strings.TrimPrefix(describe(ce.err), "azsessions: ")
	}
	var cf *credentialFailure
	if errors.As(err, &cf) {
		return cf.Error()
	}
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		msg := fmt.Sprintf("the service answered %d", re.StatusCode)
		if re.StatusCode != 0 {
			msg += " " + http.StatusText(re.StatusCode)
		}
		if re.ErrorCode != "" {
			msg += " (" + re.ErrorCode + ")"
		}
		if m := serviceMessage(re.RawResponse); m != "" {
			msg += ": " + m
		}
		var ae *azsessions.AuthError
		if errors.As(err, &ae) {
			if _, hint, ok := strings.Cut(ae.Error(), "\nhint: "); ok {
				msg += "\nhint: " + hint
			}
		}
		return msg
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		// url.Error's text holds the URL, and so the identifier
		var ne net.Error
		if errors.As(ue.Err, &ne) && ne.Timeout() {
			return "could not reach the service: timed out"
		}
		msg := "could not reach the service: " + redactURL(ue.Err.Error())
		// the SDK's reason for not retrying (such as "nothing listens on
		// 127.0.0.1:8080; is the emulator running?") follows the URL error
		if _, why, ok := strings.Cut(err.Error(), " (not retried: "); ok {
			msg += " (not retried: " + why
		}
		return msg
	}
	if errors.Is(err, context.Canceled) {
		return "canceled"
	}
	return err.Error()
}

// contextError puts what the CLI knows (such as "no directory
// /mnt/data/outputs in the session") before the service's answer.
type contextError struct {
	context string
	err     error
}

func (e *contextError) Error() string { return e.context + ": " + e.err.Error() }
func (e *contextError) Unwrap() error { return e.err }

// isFileNotFound reports whether err is the service's answer for a file or
// directory that does not exist (404 with an error code such as the
// emulator's FileNotFound, DirectoryNotFound or PathNotFound), not for a
// session that does not exist (azsessions.IsSessionNotFound) or a route.
func isFileNotFound(err error) bool {
	var re *azcore.ResponseError
	if !errors.As(err, &re) || re.StatusCode != http.StatusNotFound || azsessions.IsSessionNotFound(err) {
		return false
	}
	code := strings.ToLower(re.ErrorCode)
	return strings.HasSuffix(code, "notfound") &&
		(strings.Contains(code, "file") || strings.Contains(code, "director") || strings.Contains(code, "path"))
}

// mentionsShell reports whether the service's answer in err speaks of shell
// commands (a Shell session pool refusing code: "this is a Shell session
// pool; send shellCommand or execCommandAndArgs").
func mentionsShell(err error) bool {
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		return false
	}
	return strings.Contains(strings.ToLower(re.ErrorCode+" "+serviceMessage(re.RawResponse)), "shell")
}

// azcoreStatus is the HTTP status of the service's answer in err, 0 when err
// is not a service answer.
func azcoreStatus(err error) int {
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		return re.StatusCode
	}
	return 0
}

// redactURL removes query strings from the URLs in s.
func redactURL(s string) string {
	fields := strings.Fields(s)
	for i, f := range fields {
		if strings.Contains(f, "://") {
			if j := strings.IndexByte(f, '?'); j >= 0 {
				fields[i] = f[:j] + "?…"
			}
		}
	}
	return strings.Join(fields, " ")
}

// serviceMessage returns the message of a service error body
// ({"error":{"code","message"}}, {"code","message"} or {"message"}).
func serviceMessage(resp *http.Response) string {
	if resp == nil {
		return ""
	}
	body, err := runtime.Payload(resp)
	if err != nil || len(body) == 0 {
		return ""
	}
	var v struct {
		Error *struct {
			Message string `json:"message"`
		} `json:"error"`
		Message string `json:"message"`
		Detail  string `json:"detail"`
	}
	if json.Unmarshal(body, &v) != nil {
		return ""
	}
	if v.Error != nil && v.Error.Message != "" {
		return v.Error.Message
	}
	return cmpOr(v.Message, v.Detail)
}

// isTerminal reports whether f is a character device (a terminal).
func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	return ok && isTerminalFile(f)
}
