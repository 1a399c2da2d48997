package azsessions

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strconv"
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

// A secret is found in a body in every form a body may carry it, each
// character on its own: verbatim, JSON-escaped (\u002B, \u002b, \", \/),
// URL-escaped (%2B, %2b, + for a space) and as an HTML character reference
// (&#43;, &#x2B;, &apos;, &quot;, &amp;, &lt;, &gt;), in any mix. A .NET
// service's System.Text.Json, for example, writes + and ' as \u002B and
// \u0027. secretMatcher matches these forms directly: a regular expression
// of the same alternatives (as redaction used before) compiled in ~60 ms and
// 17 MB of allocations for a 1.4 KB bearer token, on every error answer
// (BenchmarkRedactErrorBody).

// secretMatcher finds one secret's forms in a body.
type secretMatcher struct {
	runes []rune
	chars []*charForms // each made when a search first reaches its rune
	// failed memoizes (character index, body offset) pairs from which no
	// match can end, for secrets whose characters have forms that share a
	// first byte (\, %, &, +): without it a hostile body could make the
	// search exponential. nil until a search first branches.
	failed map[[2]int]bool
}

// charForms is what formEnds compares a body with for one character.
type charForms struct {
	r      rune
	enc    []byte // UTF-8
	u      string // \uXXXX (two of them above U+FFFF), hex in lower case
	pct    string // %XX of each UTF-8 byte, hex in lower case
	dec    string // decimal code point
	hex    string // hexadecimal code point, lower case
	entity string // &name; or ""
}

func newSecretMatcher(s string) *secretMatcher {
	runes := []rune(s)
	return &secretMatcher{runes: runes, chars: make([]*charForms, len(runes))}
}

// forms returns the forms of the secret's i-th character.
func (m *secretMatcher) forms(i int) *charForms {
	if c := m.chars[i]; c != nil {
		return c
	}
	r := m.runes[i]
	c := &charForms{r: r, enc: utf8.AppendRune(nil, r), dec: strconv.Itoa(int(r)), hex: strconv.FormatInt(int64(r), 16)}
	if r < 0x10000 {
		c.u = fmt.Sprintf(`\u%04x`, r)
	} else {
		r1, r2 := utf16Pair(r)
		c.u = fmt.Sprintf(`\u%04x\u%04x`, r1, r2)
	}
	for _, b := range c.enc {
		c.pct += fmt.Sprintf("%%%02x", b)
	}
	if name, ok := htmlNames[r]; ok {
		c.entity = "&" + name + ";"
	}
	m.chars[i] = c
	return c
}

// match returns the end of the secret's match starting at body[at:], or -1.
// Among several matches at the same start it returns the one a regular
// expression of the forms, in the order formEnds tries them, prefers
// (leftmost-first: the earliest form of the earliest character that leads
// to a match).
func (m *secretMatcher) match(body []byte, at int) int {
	m.failed = nil
	return m.matchFrom(body, 0, at)
}

func (m *secretMatcher) matchFrom(body []byte, i, at int) int {
	if i == len(m.runes) {
		return at
	}
	key := [2]int{i, at}
	if m.failed[key] {
		return -1
	}
	var buf [8]int
	ends := formEnds(body, at, m.forms(i), buf[:0])
	for _, e := range ends {
		if end := m.matchFrom(body, i+1, e); end >= 0 {
			return end
		}
	}
	if len(ends) > 1 || m.failed != nil {
		if m.failed == nil {
			m.failed = make(map[[2]int]bool)
		}
		m.failed[key] = true
	}
	return -1
}

// formEnds appends to ends the end offset of every form of c that starts at
// body[at:], in order: verbatim, \uXXXX (a UTF-16 surrogate pair above
// U+FFFF; hex digits in either case), \" \\ \/ for those three, + for a
// space, the %XX of each UTF-8 byte (either case), &#D; and &#xH; (any
// leading zeros, x and hex digits in either case), and &apos; &quot; &amp;
// &lt; &gt;.
func formEnds(body []byte, at int, c *charForms, ends []int) []int {
	rest := body[at:]
	if bytes.HasPrefix(rest, c.enc) {
		ends = append(ends, at+len(c.enc))
	}
	if hasPrefixFold(rest, c.u, 2) {
		ends = append(ends, at+len(c.u))
	}
	switch c.r {
	case '"', '\\', '/':
		if len(rest) >= 2 && rest[0] == '\\' && rune(rest[1]) == c.r {
			ends = append(ends, at+2)
		}
	case ' ':
		if len(rest) >= 1 && rest[0] == '+' {
			ends = append(ends, at+1)
		}
	}
	if hasPrefixFold(rest, c.pct, 1) {
		ends = append(ends, at+len(c.pct))
	}
	if e := charRef(rest, "&#", c.dec, false); e > 0 {
		ends = append(ends, at+e)
	}
	if e := charRef(rest, "&#x", c.hex, true); e > 0 {
		ends = append(ends, at+e)
	} else if e := charRef(rest, "&#X", c.hex, true); e > 0 {
		ends = append(ends, at+e)
	}
	if c.entity != "" && bytes.HasPrefix(rest, []byte(c.entity)) {
		ends = append(ends, at+len(c.entity))
	}
	return ends
}

// hasPrefixFold says whether b starts with form, its first n bytes (\u or
// %) exactly and the rest, hex digits, in either case.
func hasPrefixFold(b []byte, form string, n int) bool {
	if len(b) < len(form) {
		return false
	}
	for i := 0; i < len(form); i++ {
		x, y := b[i], form[i]
		if x == y {
			continue
		}
		if i < n || x|0x20 != y || y < 'a' || y > 'f' {
			return false
		}
	}
	return true
}

// charRef returns the length of prefix, any number of zeros, digits
// (compared in either case) and ";" at the start of b, else 0. The digits
// are decimal, or hexadecimal when hex is set.
func charRef(b []byte, prefix, digits string, hex bool) int {
	if !bytes.HasPrefix(b, []byte(prefix)) {
		return 0
	}
	isDigit := func(c byte) bool {
		return '0' <= c && c <= '9' || hex && ('a' <= c && c <= 'f' || 'A' <= c && c <= 'F')
	}
	i := len(prefix)
	j := i
	for j < len(b) && isDigit(b[j]) {
		j++
	}
	run := string(b[i:j])
	if j == len(b) || b[j] != ';' || len(run) < len(digits) ||
		!strings.EqualFold(run[len(run)-len(digits):], digits) ||
		strings.Trim(run[:len(run)-len(digits)], "0") != "" {
		return 0
	}
	return j + 1
}

var htmlNames = map[rune]string{'\'': "apos", '"': "quot", '&': "amp", '<': "lt", '>': "gt"}

func utf16Pair(r rune) (rune, rune) {
	r -= 0x10000
	return 0xd800 + (r>>10)&0x3ff, 0xdc00 + r&0x3ff
}

// maxEncodedLen bounds the length of any form of s that a body may carry.
func maxEncodedLen(s string) int { return 16 * len(s) }

// redactSecrets replaces every form of every secret in body with REDACTED,
// leftmost match first, as regexp's ReplaceAll would.
func redactSecrets(body []byte, secrets []string) []byte {
	for _, s := range secrets {
		if s == "" {
			continue
		}
		m := newSecretMatcher(s)
		var out []byte
		last := 0
		for at := 0; at < len(body); {
			end := m.match(body, at)
			if end < 0 {
				at++
				continue
			}
			out = append(append(out, body[last:at]...), "REDACTED"...)
			last, at = end, end
		}
		if out != nil {
			body = append(out, body[last:]...)
		}
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
