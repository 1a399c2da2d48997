package azsessions

import (
	"context"
	"errors"
	"net/http"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
)

// DefaultScope is the OAuth2 scope of the dynamic sessions data plane. Tokens
// must carry the audience https://dynamicsessions.io; a token for another
// audience is answered with 401.
const DefaultScope = "https://dynamicsessions.io/.default"

// RoleSessionExecutor is the Azure built-in role a caller needs on the session
// pool to use its management endpoint (role definition id
// 0fb8eba5-a2bb-4abe-b1c1-49dfad359bb0). Without it the service answers 403.
const RoleSessionExecutor = "Azure ContainerApps Session Executor"

// newBearerTokenPolicy is azcore's bearer-token policy for DefaultScope: it
// caches the token, refreshes it before expiry, lets concurrent callers share
// one refresh and handles CAE claims challenges.
func newBearerTokenPolicy(credential azcore.TokenCredential, allowHTTP bool) policy.Policy {
	return runtime.NewBearerTokenPolicy(nonEmptyTokenCredential{credential}, []string{DefaultScope}, &policy.BearerTokenOptions{
		InsecureAllowCredentialWithHTTP: allowHTTP,
	})
}

// nonEmptyTokenCredential refuses an empty token before anything is sent:
// azcore would otherwise send "Authorization: Bearer " and the service would
// answer an unhelpful 401.
type nonEmptyTokenCredential struct{ azcore.TokenCredential }

func (c nonEmptyTokenCredential) GetToken(ctx context.Context, options policy.TokenRequestOptions) (azcore.AccessToken, error) {
	tok, err := c.TokenCredential.GetToken(ctx, options)
	if err != nil {
		return tok, &credentialError{err}
	}
	if tok.Token == "" {
		return azcore.AccessToken{}, &credentialError{errors.New("azsessions: the credential returned an empty token")}
	}
	return tok, nil
}

// credentialError marks a failure of the credential: the request it was for
// was not sent (or, on a claims challenge, was answered 401), so an execution
// it carried did not run. Its message and chain are the credential's error.
type credentialError struct{ err error }

func (e *credentialError) Error() string { return e.err.Error() }
func (e *credentialError) Unwrap() error { return e.err }

// AuthError is returned for 401 and 403 answers. It wraps the
// *azcore.ResponseError (errors.As finds both) and adds what usually causes
// them: a token for the wrong audience (401) or a missing role assignment (403).
type AuthError struct {
	// ResponseError holds the status code, error code and raw response.
	*azcore.ResponseError
}

// Error returns the service error and the hint.
func (e *AuthError) Error() string {
	hint := "the token must be for the audience https://dynamicsessions.io (scope " + DefaultScope + ") and valid now"
	if e.StatusCode == http.StatusForbidden {
		hint = "the caller needs the role \"" + RoleSessionExecutor + "\" on the session pool (a new assignment can take minutes to apply)"
	}
	return e.ResponseError.Error() + "\nhint: " + hint
}

// Unwrap returns the *azcore.ResponseError.
func (e *AuthError) Unwrap() error { return e.ResponseError }

// wrapAuthError turns a 401/403 *azcore.ResponseError into an *AuthError.
func wrapAuthError(err error) error {
	var re *azcore.ResponseError
	if errors.As(err, &re) && (re.StatusCode == http.StatusUnauthorized || re.StatusCode == http.StatusForbidden) {
		return &AuthError{ResponseError: re}
	}
	return err
}
