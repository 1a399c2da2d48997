package azsessions

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"unicode/utf8"
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
