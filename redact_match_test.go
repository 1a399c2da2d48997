package azsessions

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// secretPatternOracle is the regular expression redaction used before
// secretMatcher (the same alternatives, in the same order): the oracle
// TestSecretMatcherLikeRegexp and FuzzSecretMatcherLikeRegexp compare with.
func secretPatternOracle(s string) *regexp.Regexp {
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

func oracleRedact(body []byte, secrets []string) []byte {
	for _, s := range secrets {
		if s != "" {
			body = secretPatternOracle(s).ReplaceAllLiteral(body, []byte("REDACTED"))
		}
	}
	return body
}

// alphabet holds the characters whose forms overlap (escape starts,
// characters with their own escapes, multi-byte and astral ones).
var alphabet = []rune(`ab0Z9-_.\"/ +%&'<>;#xXué😀`)

// encodeRandomly writes r in one of its forms, chosen by rng, with the
// variations the matcher must accept (hex case, leading zeros).
func encodeRandomly(rng *rand.Rand, r rune) string {
	flip := func(s string) string {
		if rng.IntN(2) == 0 {
			return strings.ToUpper(s)
		}
		return s
	}
	zeros := strings.Repeat("0", rng.IntN(3))
	switch rng.IntN(8) {
	case 0:
		if r < 0x10000 {
			return `\u` + flip(fmt.Sprintf("%04x", r))
		}
		r1, r2 := utf16Pair(r)
		return `\u` + flip(fmt.Sprintf("%04x", r1)) + `\u` + flip(fmt.Sprintf("%04x", r2))
	case 1:
		var enc [utf8.UTFMax]byte
		var b strings.Builder
		for _, c := range enc[:utf8.EncodeRune(enc[:], r)] {
			b.WriteString("%" + flip(fmt.Sprintf("%02x", c)))
		}
		return b.String()
	case 2:
		return fmt.Sprintf("&#%s%d;", zeros, r)
	case 3:
		return "&#" + flip("x") + zeros + flip(fmt.Sprintf("%x", r)) + ";"
	case 4:
		if name, ok := htmlNames[r]; ok {
			return "&" + name + ";"
		}
	case 5:
		switch r {
		case '"', '\\', '/':
			return `\` + string(r)
		case ' ':
			return "+"
		}
	}
	return string(r)
}

// TestSecretMatcherLikeRegexp: redactSecrets finds and replaces exactly
// what the regular expression of the same forms did, on bodies that mix the
// forms of a secret's characters with near misses and the characters that
// start escapes.
func TestSecretMatcherLikeRegexp(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	randomString := func(n int) string {
		var b strings.Builder
		for range n {
			b.WriteRune(alphabet[rng.IntN(len(alphabet))])
		}
		return b.String()
	}
	for i := range 4000 {
		secret := randomString(1 + rng.IntN(5))
		var body strings.Builder
		for range 1 + rng.IntN(4) {
			switch rng.IntN(3) {
			case 0:
				body.WriteString(randomString(rng.IntN(6)))
			case 1: // the secret, each character in a random form
				for _, r := range secret {
					body.WriteString(encodeRandomly(rng, r))
				}
			case 2: // a near miss: the secret cut short
				rs := []rune(secret)
				for _, r := range rs[:rng.IntN(len(rs))] {
					body.WriteString(encodeRandomly(rng, r))
				}
			}
		}
		secrets := []string{secret}
		if rng.IntN(3) == 0 {
			secrets = append(secrets, randomString(1+rng.IntN(3)))
		}
		want := oracleRedact([]byte(body.String()), secrets)
		got := redactSecrets([]byte(body.String()), secrets)
		require.Equal(t, string(want), string(got), "case %d: secrets %q in body %q", i, secrets, body.String())
	}
}

// TestSecretMatcherBranchingBody: a secret whose characters have forms that
// share a first byte (\\ verbatim, or escaped as \\\\), against a body
// that nearly matches everywhere, is searched in polynomial time (the
// failed-state memo): without it every start explores 2^20 ways of reading
// the backslashes and the test does not end within go test's timeout.
func TestSecretMatcherBranchingBody(t *testing.T) {
	t.Parallel()
	secret := strings.Repeat(`\\`, 20) + "Z"
	body := []byte(strings.Repeat(`\\`, 1000) + "Y")
	require.Equal(t, string(oracleRedact(body, []string{secret})), string(redactSecrets(body, []string{secret})))
	body = append(body[:len(body)-1], 'Z')
	got := string(redactSecrets(body, []string{secret}))
	require.Equal(t, string(oracleRedact(body, []string{secret})), got)
	require.Contains(t, got, "REDACTED")
}

func FuzzSecretMatcherLikeRegexp(f *testing.F) {
	f.Add(`\u0041b%2Bc`, "Ab+c")
	f.Add(`&#0039;&apos;&#x27;`, "'")
	f.Add(`\\\u005c\\\\`, `\\`)
	f.Add(`%F0%9F%98%80\ud83d\ude00`, "😀")
	f.Fuzz(func(t *testing.T, body, secret string) {
		if secret == "" || !utf8.ValidString(secret) || len(secret) > 64 {
			t.Skip()
		}
		want := oracleRedact([]byte(body), []string{secret})
		got := redactSecrets([]byte(body), []string{secret})
		require.Equal(t, string(want), string(got))
	})
}

// BenchmarkRedactErrorBody: an error answer's body redacted of a session
// identifier and a 1.4 KB bearer token, as redactErrorResponse does for
// every error answer.
func BenchmarkRedactErrorBody(b *testing.B) {
	tok := strings.Repeat("eyJ0eXAiOiJKV1QiLCJhbGciOiJSUzI1NiJ9", 40)
	id := "3f2a0c1e-9b7d-4f60-8a2b-5c1d9e7f0a11"
	small := []byte(`{"error":{"code":"SessionNotFound","message":"session ` + id + ` not found"}}`)
	// the most readErrorBody keeps: MaxErrorBodySize plus the slack for a
	// secret across the cut
	large := []byte(strings.Repeat(`{"message":"some \u0022text\u0022 %41 &amp; more"}`, (MaxErrorBodySize+maxEncodedLen(tok))/48))
	for _, tc := range []struct {
		name   string
		redact func([]byte, []string) []byte
	}{{"matcher", redactSecrets}, {"regexp", oracleRedact}} {
		for _, body := range []struct {
			name string
			b    []byte
		}{{"small", small}, {"large", large}} {
			b.Run(tc.name+"/"+body.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					_ = tc.redact(body.b, []string{id, tok})
				}
			})
		}
	}
}
