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
	// Recursive: the recursive flag on file listing and the directory field on
	// listed files.
	Recursive bool
	// OutputStreamsMaxLength: the request field of the same name.
	OutputStreamsMaxLength bool
	// ExecutionOptions: the request fields useEmptyKernel,
	// returnJupyterFormatExecutionResult and the Shell-pool fields
	// (shellCommand, execCommandAndArgs, stdin); codeInputType, executionType
	// and code become optional (only timeoutInSeconds is required).
	ExecutionOptions bool
	// ExecuteStatus is the status code of POST executions (synchronous and
	// asynchronous alike) and of the legacy POST code/execute.
	ExecuteStatus int
}

// Lookup returns the features of an api-version, and false when it is unknown.
//
// Status of POST executions: 200 on every version of the executions
// contract. Sources for 2025-02-02-preview and 2025-10-02-preview agree (the
// swaggers preview/2025-02-02-preview/DynamicSessions.json @ ca2bc853 and
// preview/2025-10-02-preview/DynamicSessions.json @ 0c80663a, and every
// execute example of both). For 2024-10-02-preview they conflict: the old
// swagger (specification/app/data-plane/Microsoft.App.DynamicSessions/preview/
// 2024-10-02-preview/DynamicSessions.json @ 16c9ca76), its example
// CodeExecution_Execute_Async_Completed.json @ 972de790 and the JS client
// @azure-rest/microsoft-app-dynamicsessions-rest say 202; the regenerated
// swagger (specification/app/data-plane/DynamicSessions/preview/
// 2024-10-02-preview/DynamicSessions.json @ 1230c993) and the examples
// CodeExecution_Execute_Sync.json @ cd1a17dc and
// CodeExecution_Execute_Async_Running.json @ b16a50a7 say 200. The emulator
// follows the regenerated swagger (200); the client accepts both.
//
// stopSession on 2025-02-02-preview: no swagger of that version has it, but
// Learn's custom-container article (MicrosoftDocs/azure-docs
// articles/container-apps/sessions-custom-container.md, ms.date 2026-03-18)
// calls POST .management/stopSession?api-version=2025-02-02-preview.
func Lookup(version string) (Features, bool) {
	switch version {
	case V20240202Preview, V20240802Preview:
		return Features{Legacy: true, ExecuteStatus: 200}, true
	case V20241002Preview:
		return Features{ExecuteStatus: 200}, true
	case V20250202Preview:
		return Features{SessionManagement: true, StopSession: true, ExecuteStatus: 200}, true
	case V20251002Preview:
		return Features{SessionManagement: true, StopSession: true, Recursive: true, OutputStreamsMaxLength: true, ExecutionOptions: true, ExecuteStatus: 200}, true
	}
	return Features{}, false
}

// IdentifierPattern is the session identifier rule of the service, verbatim
// from the TypeSpec (Azure/azure-rest-api-specs
// specification/app/data-plane/DynamicSessions/models/common.tsp @ 2fc54723,
// model SessionIdentifier) and from the regenerated swaggers of
// 2024-10-02-preview (@ 1230c993), 2025-02-02-preview (@ ca2bc853) and
// 2025-10-02-preview (@ 0c80663a): 4 to 128 characters from letters, digits
// and _ | { } [ ] : " ; ' < > ? / . , @ # $ % ^ & * ( ) - + = ! ~ `. It
// applies to every api-version: the legacy versions have no swagger and are
// served by the same service, and no source gives them another rule.
// testdata/identifiers.json holds the table both the client and the emulator
// are tested with.
const IdentifierPattern = `^[a-zA-Z0-9_|}{\[\]\:\"\";'<>?\/.,@#$%\^&*()_\-+=!~` + "`" + `]{4,128}$`

var identifierRE = regexp.MustCompile(IdentifierPattern)

// IdentifierRule describes the identifier rule in words (the same for every
// api-version).
func IdentifierRule(string) string {
	return "4 to 128 characters from A-Z a-z 0-9 and _ | { } [ ] : \" ; ' < > ? / . , @ # $ % ^ & * ( ) - + = ! ~ `"
}

// ValidateIdentifier checks a session identifier against IdentifierPattern.
// The error says which part of the rule failed and never repeats the
// identifier itself (an identifier is a bearer secret for its session).
func ValidateIdentifier(version, id string) error {
	n := utf8.RuneCountInString(id)
	switch {
	case id == "":
		return fmt.Errorf("identifier is empty (api-version %s allows %s)", version, IdentifierRule(version))
	case n < 4 || n > 128:
		return fmt.Errorf("identifier has %d characters, api-version %s allows 4 to 128", n, version)
	case !identifierRE.MatchString(id):
		return fmt.Errorf("identifier has a character api-version %s does not allow (allowed: %s)", version, IdentifierRule(version))
	}
	return nil
}
