package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"

	"github.com/azsessions/azsessions/tools"
)

// credentialError is the error of a credential that could not get a token:
// Credential names it (such as "DefaultAzureCredential").
type credentialError struct {
	Credential string
	Err        error
}

func (e *credentialError) Error() string {
	if msg := e.Err.Error(); strings.HasPrefix(msg, e.Credential+":") {
		return msg // azidentity's errors name their credential
	}
	return e.Credential + ": " + e.Err.Error()
}
func (e *credentialError) Unwrap() error { return e.Err }

// namedCredential marks the errors of cred with its name, so that a failed
// tool call can say which credential failed.
type namedCredential struct {
	name string
	cred azcore.TokenCredential
}

// GetToken gets a token from the wrapped credential; its error is a
// *credentialError.
func (n namedCredential) GetToken(ctx context.Context, opts policy.TokenRequestOptions) (azcore.AccessToken, error) {
	tok, err := n.cred.GetToken(ctx, opts)
	if err != nil {
		return tok, &credentialError{Credential: n.name, Err: err}
	}
	return tok, nil
}

// credentialAdvice is what to do when the credential fails.
const credentialAdvice = "Sign in on the machine that runs azsessions-mcp (`az login`), or set AZURE_TENANT_ID, AZURE_CLIENT_ID and AZURE_CLIENT_SECRET for a service principal (a managed identity or workload identity works too); " +
	"the identity needs the \"Azure ContainerApps Session Executor\" role on the session pool. Then restart azsessions-mcp if its environment changed, and call the tool again."

var credentialName = regexp.MustCompile(`\b([A-Z][A-Za-z]*Credential):`)

// failure describes a failed tool call: text for the tool result (safe to
// show the model: no identifier, no token) and the log record's attributes.
func failure(err error, secrets ...string) (text string, attrs []any) {
	text = err.Error() // a *tools.Error's short, safe text
	kind := "other"
	var ce *credentialError
	var re *azcore.ResponseError
	var ne net.Error
	var ue *url.Error
	switch {
	case errors.As(err, &ce):
		kind = "credential"
		var tried []string
		for _, m := range credentialName.FindAllStringSubmatch(ce.Err.Error(), -1) {
			if m[1] != ce.Credential && m[1] != "ChainedTokenCredential" && !slices.Contains(tried, m[1]) {
				tried = append(tried, m[1])
			}
		}
		t := ""
		if len(tried) > 0 {
			t = " (it tried " + strings.Join(tried, ", ") + ")"
		}
		text = fmt.Sprintf("authentication failed: %s could not get a token for the session pool%s. %s", ce.Credential, t, credentialAdvice)
		attrs = append(attrs, "credential", ce.Credential)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		kind = "context"
	case errors.As(err, &re):
		kind = "service"
		attrs = append(attrs, "status", re.StatusCode, "error_code", re.ErrorCode)
	case errors.As(err, &ne), errors.As(err, &ue):
		kind = "transport"
	}
	cause := err
	var te *tools.Error
	if errors.As(err, &te) && te.Err != nil {
		cause = te.Err
	}
	attrs = append([]any{"cause_kind", kind}, attrs...)
	attrs = append(attrs, "cause", redact(cause.Error(), secrets...))
	return text, attrs
}

var (
	identifierParam = regexp.MustCompile(`(?i)(identifier=)[^&\s"'<>]+`)
	bearerToken     = regexp.MustCompile(`(?i)(bearer\s+)[A-Za-z0-9._~+/=-]+`)
	jwt             = regexp.MustCompile(`eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*`)
)

// redact removes secrets from s: the given strings (such as the session
// identifier), identifier= query values, bearer tokens and JWTs.
func redact(s string, secrets ...string) string {
	for _, sec := range secrets {
		if sec != "" {
			s = strings.ReplaceAll(s, sec, "REDACTED")
			if q := url.QueryEscape(sec); q != sec {
				s = strings.ReplaceAll(s, q, "REDACTED")
			}
		}
	}
	s = identifierParam.ReplaceAllString(s, "${1}REDACTED")
	s = bearerToken.ReplaceAllString(s, "${1}REDACTED")
	return jwt.ReplaceAllString(s, "REDACTED")
}

// parseLevel parses a -log-level value.
func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("--log-level %q: use debug, info, warn or error", s)
	}
	return l, nil
}

// logFailure logs a failed tool call at error level (warn for a call that
// the client canceled).
func logFailure(ctx context.Context, logger *slog.Logger, tool string, err error, secrets ...string) string {
	text, attrs := failure(err, secrets...)
	level := slog.LevelError
	if errors.Is(err, context.Canceled) {
		level = slog.LevelWarn
	}
	logger.Log(ctx, level, "tool call failed", append([]any{"tool", tool, "result", text}, attrs...)...)
	return text
}
