package azsessions

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/azsessions/azsessions/internal/wire"
)

// MaxErrorBodySize is how much of an error answer's body, in bytes (8 KiB),
// the client keeps: in the *azcore.ResponseError (its RawResponse body and
// its Error text) and in azcore's log. The rest is read (up to
// MaxResponseSize, so that a larger body still fails with an error naming
// that limit) and dropped; the kept part ends with a note saying how much
// was dropped. The service's error messages are far shorter.
const MaxErrorBodySize = 8 << 10

// secrets returns what must never leave the client in an error or a log:
// the session identifier of req (its identifier query parameter) and the
// bearer token it carried.
func secrets(req *http.Request) []string {
	if req == nil {
		return nil
	}
	var out []string
	if req.URL != nil {
		if id := req.URL.Query().Get("identifier"); id != "" {
			out = append(out, id)
		}
	}
	if auth := req.Header.Get("Authorization"); auth != "" {
		if i := strings.IndexByte(auth, ' '); i >= 0 {
			auth = auth[i+1:]
		}
		if tok := strings.TrimSpace(auth); len(tok) >= 4 {
			out = append(out, tok)
		}
	}
	return out
}

// secretPattern matches s in every form a body may carry it, each
// character on its own: verbatim, JSON-escaped (\u002B, \u002b, \", \/),
// URL-escaped (%2B, %2b, + for a space) and as an HTML character reference
// (&#43;, &#x2B;, &apos;, &quot;, &amp;, &lt;, &gt;), in any mix. A .NET
// service's System.Text.Json, for example, writes + and ' as \u002B and
// \u0027.
func secretPattern(s string) *regexp.Regexp {
	var b strings.Builder
	for _, r := range s {
		alts := []string{regexp.QuoteMeta(string(r))}
		if r < 0x10000 {
			alts = append(alts, fmt.Sprintf(`\\u(?i:%04x)`, r))
		} else {
			r1, r2 := utf16Pair(r)
			alts = append(alts, fmt.Sprintf(`\\u(?i:%04x)\\u(?i:%04x)`, r1, r2))
		}
		switch r {
		case '"', '\\', '/':
			alts = append(alts, regexp.QuoteMeta(`\`+string(r)))
		case ' ':
			alts = append(alts, `\+`)
		}
		var enc [utf8.UTFMax]byte
		n := utf8.EncodeRune(enc[:], r)
		var pct strings.Builder
		for _, c := range enc[:n] {
			fmt.Fprintf(&pct, `%%(?i:%02x)`, c)
		}
		alts = append(alts, pct.String(), fmt.Sprintf(`&#0*%d;`, r), fmt.Sprintf(`&#[xX]0*(?i:%x);`, r))
		if name, ok := htmlNames[r]; ok {
			alts = append(alts, "&"+name+";")
		}
		b.WriteString("(?:" + strings.Join(alts, "|") + ")")
	}
	return regexp.MustCompile(b.String())
}

var htmlNames = map[rune]string{'\'': "apos", '"': "quot", '&': "amp", '<': "lt", '>': "gt"}

func utf16Pair(r rune) (rune, rune) {
	r -= 0x10000
	return 0xd800 + (r>>10)&0x3ff, 0xdc00 + r&0x3ff
}

// maxEncodedLen bounds the length of any form secretPattern matches.
func maxEncodedLen(s string) int { return 16 * len(s) }

// redactSecrets replaces every form of every secret in body with REDACTED.
func redactSecrets(body []byte, secrets []string) []byte {
	for _, s := range secrets {
		if s == "" {
			continue
		}
		body = secretPattern(s).ReplaceAllLiteral(body, []byte("REDACTED"))
	}
	return body
}

// readErrorBody reads an error answer's body: the first MaxErrorBodySize
// bytes (plus room for a secret that straddles the cut), redacted, are
// kept; the rest is read and dropped. A body over MaxResponseSize (the
// body is a cappedBody) fails with *errResponseTooLarge.
func readErrorBody(body io.Reader, secrets []string) ([]byte, error) {
	slack := 0
	for _, s := range secrets {
		slack = max(slack, maxEncodedLen(s))
	}
	kept, err := io.ReadAll(io.LimitReader(body, int64(MaxErrorBodySize+slack)))
	if err != nil {
		return nil, err
	}
	dropped, err := io.Copy(io.Discard, body)
	if err != nil {
		return nil, err
	}
	kept = redactSecrets(kept, secrets)
	if len(kept) > MaxErrorBodySize {
		dropped += int64(len(kept) - MaxErrorBodySize)
		kept = kept[:MaxErrorBodySize]
	}
	if dropped > 0 {
		kept = fmt.Appendf(bytes.Clone(kept), "… (%d more bytes of the body not kept: MaxErrorBodySize)", dropped)
	}
	return kept, nil
}

// loggedHeaders are the answer's headers that azcore's log shows (the
// client's AllowedHeaders) and that reach errors (x-ms-error-code is an
// *azcore.ResponseError's ErrorCode, in its text).
var loggedHeaders = []string{http.CanonicalHeaderKey("operation-id"), http.CanonicalHeaderKey(wire.ErrorCodeHeader)}

// redactLoggedHeaders redacts the identifier and the token of req (every
// form: secretPattern) in the values of loggedHeaders: a server that echoes
// the identifier in its error code (x-ms-error-code: NotFound-<identifier>)
// must not put it in errors (*azcore.ResponseError's ErrorCode and text,
// whoever makes it: the pagers' azcore.FetcherForNextLink too) and logs
// (red-team finding, redcli). The other headers are REDACTED by azcore's log
// and in no error. It runs in guardTransport, below azcore's log policy and
// above the client's reading of the error code (ranBefore, serviceNotFound),
// so the redacted code keeps what those read in it (redactErrorCode).
func redactLoggedHeaders(h http.Header, req *http.Request) {
	var of []string // req's secrets, found when a header is there
	for _, name := range loggedHeaders {
		vs := h[name]
		if len(vs) > 0 && of == nil {
			of = secrets(req)
		}
		for i, v := range vs {
			if name == loggedHeaders[1] {
				vs[i] = redactErrorCode(v, of)
			} else {
				vs[i] = string(redactSecrets([]byte(v), of))
			}
		}
	}
}

// redactErrorCode is redactSecrets for an x-ms-error-code value, keeping
// what the client reads in it: a code that is one of the fixed words it
// compares with (ExecutionResultForgotten: ranBefore; NotFound:
// serviceNotFound) is public and kept as it is, even when a short
// identifier happens to be part of it; and a code that names an execution
// or an operation (serviceNotFound) still does once redacted, even when the
// identifier overlapped that word.
func redactErrorCode(v string, secrets []string) string {
	if strings.EqualFold(v, codeExecutionResultForgotten) || strings.EqualFold(v, "NotFound") {
		return v
	}
	red := string(redactSecrets([]byte(v), secrets))
	if red == v {
		return v
	}
	lower, redLower := strings.ToLower(v), strings.ToLower(red)
	for _, word := range []string{"execution", "operation"} {
		if strings.Contains(lower, word) && !strings.Contains(redLower, word) {
			red = word + "-" + red
			redLower = word + "-" + redLower
		}
	}
	return red
}

// redactErrorResponse replaces resp's body by readErrorBody's.
func redactErrorResponse(resp *http.Response, req *http.Request) error {
	if resp.Body == nil {
		return nil
	}
	body, err := readErrorBody(resp.Body, secrets(req))
	resp.Body.Close()
	if err != nil {
		return err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	return nil
}
