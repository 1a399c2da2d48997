package tools

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/azsessions/azsessions"
)

// Error is the error a Tool's Call returns when the service could not be
// used. Its Error text is Message: short, meant for the model, and free of
// the session identifier, tokens and URLs. Err is the cause, for the
// program's logs; it may contain the session identifier (azcore response
// errors include the request URL), so do not hand it to the model.
type Error struct {
	// Message is the text for the model, such as
	// "the code interpreter service answered 403 (AuthorizationFailed)".
	Message string
	// Err is the cause.
	Err error
}

// Error returns Message.
func (e *Error) Error() string { return e.Message }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// serviceError turns an error of the azsessions client into an *Error with a
// safe message.
func serviceError(err error) error {
	return &Error{Message: safeMessage(err), Err: err}
}

func safeMessage(err error) string {
	var re *azcore.ResponseError
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "the call to the code interpreter service timed out"
	case errors.Is(err, context.Canceled):
		return "the call to the code interpreter service was canceled"
	case errors.Is(err, azsessions.ErrExecutionOutcomeUnknown):
		return "lost the connection to the code interpreter service: the code may or may not have run"
	case errors.As(err, &re):
		if code := safeCode(re.ErrorCode); code != "" {
			return fmt.Sprintf("the code interpreter service answered %d (%s)", re.StatusCode, code)
		}
		return fmt.Sprintf("the code interpreter service answered %d", re.StatusCode)
	case errors.Is(err, azsessions.ErrInvalidIdentifier):
		return "the code interpreter session is misconfigured (invalid session identifier)"
	case errors.Is(err, azsessions.ErrUnsupported):
		return "the code interpreter client is misconfigured (the operation is not supported by its api-version)"
	}
	var ne net.Error
	var ue *url.Error
	if errors.As(err, &ne) || errors.As(err, &ue) {
		return "could not reach the code interpreter service"
	}
	return "the call to the code interpreter service failed"
}

// safeCode keeps an error code only when it looks like one (letters, digits,
// '.', '_', '-'; at most 64 characters), so that nothing else of the answer
// reaches the model.
func safeCode(code string) string {
	if len(code) == 0 || len(code) > 64 {
		return ""
	}
	for _, r := range code {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return ""
		}
	}
	return code
}

// isNotFound reports a 404 answer (a missing file).
func isNotFound(err error) bool {
	var re *azcore.ResponseError
	return errors.As(err, &re) && re.StatusCode == 404
}
