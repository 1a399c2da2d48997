// Package wire holds the JSON shapes of both generations of the Azure Container
// Apps dynamic sessions pool management API, the api-version table and the
// identifier rules. The client decodes with it and the emulator encodes with
// it, so the two sides cannot disagree on a shape.
package wire

import (
	"fmt"
	"regexp"
	"unicode/utf8"
)

// The api-versions of the pool management data plane.
const (
	V20240202Preview = "2024-02-02-preview"
	V20240802Preview = "2024-08-02-preview"
	V20241002Preview = "2024-10-02-preview"
	V20250202Preview = "2025-02-02-preview"
	V20251002Preview = "2025-10-02-preview"

	// DefaultVersion is the newest api-version.
	DefaultVersion = V20251002Preview
)

// Versions lists every supported api-version, oldest first.
var Versions = []string{V20240202Preview, V20240802Preview, V20241002Preview, V20250202Preview, V20251002Preview}

// Features says what one api-version supports.
type Features struct {
	// Legacy is true for the properties-wrapped contract (code/execute, files/upload,
	// files/content/{name}).
	Legacy bool
	// SessionManagement: GET/DELETE session, listSessions, metadata.
	SessionManagement bool
	// StopSession: POST .management/stopSession.
	StopSession bool
	// Recursive: the recursive flag on file listing and the directory field on files.
	Recursive bool
	// OutputStreamsMaxLength: the request field of the same name.
	OutputStreamsMaxLength bool
	// ExecuteStatus is the status code a synchronous execution answers with.
	ExecuteStatus int
}

// Lookup returns the features of an api-version, and false when it is unknown.
func Lookup(version string) (Features, bool) {
	switch version {
	case V20240202Preview, V20240802Preview:
		return Features{Legacy: true, ExecuteStatus: 200}, true
	case V20241002Preview:
		return Features{ExecuteStatus: 202}, true
	case V20250202Preview:
		return Features{SessionManagement: true, ExecuteStatus: 200}, true
	case V20251002Preview:
		return Features{SessionManagement: true, StopSession: true, Recursive: true, OutputStreamsMaxLength: true, ExecuteStatus: 200}, true
	}
	return Features{}, false
}

// Identifier rules (api.md §10). The legacy versions follow the Learn article
// (4–128 characters of letters, digits and | - & ^ % $ # ( ) { } [ ] ; < >),
// 2024-10-02-preview and 2025-02-02-preview the spec's ^[A-Za-z0-9-_]{1,256}$ and
// 2025-10-02-preview the spec's wider class of 4–128 characters.
var (
	legacyIdentifierChars = regexp.MustCompile(`^[A-Za-z0-9|\-&^%$#(){}\[\];<>]+$`)
	specIdentifierChars   = regexp.MustCompile(`^[A-Za-z0-9_\-]+$`)
	v2510IdentifierChars  = regexp.MustCompile("^[A-Za-z0-9_|{}\\[\\]:\";'<>?/.,@#$%^&*()+=!~`\\-]+$")
)

// IdentifierRule describes the identifier rule of an api-version in words.
func IdentifierRule(version string) string {
	switch version {
	case V20241002Preview, V20250202Preview:
		return "1 to 256 characters from A-Z a-z 0-9 - _"
	case V20251002Preview:
		return "4 to 128 characters from A-Z a-z 0-9 and _ | { } [ ] : \" ; ' < > ? / . , @ # $ % ^ & * ( ) - + = ! ~ `"
	default:
		return "4 to 128 characters from A-Z a-z 0-9 and | - & ^ % $ # ( ) { } [ ] ; < >"
	}
}

// ValidateIdentifier checks a session identifier against the rule of an
// api-version. The error names the rule that failed and never repeats the
// identifier itself (an identifier is a bearer secret for its session).
func ValidateIdentifier(version, id string) error {
	n := utf8.RuneCountInString(id)
	minLen, maxLen, chars := 4, 128, legacyIdentifierChars
	switch version {
	case V20241002Preview, V20250202Preview:
		minLen, maxLen, chars = 1, 256, specIdentifierChars
	case V20251002Preview:
		chars = v2510IdentifierChars
	}
	switch {
	case id == "":
		return fmt.Errorf("identifier is empty (api-version %s allows %s)", version, IdentifierRule(version))
	case n < minLen || n > maxLen:
		return fmt.Errorf("identifier has %d characters, api-version %s allows %d to %d", n, version, minLen, maxLen)
	case !chars.MatchString(id):
		return fmt.Errorf("identifier has a character api-version %s does not allow (allowed: %s)", version, IdentifierRule(version))
	}
	return nil
}
