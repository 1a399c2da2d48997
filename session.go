package azsessions

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"

	"github.com/azsessions/azsessions/internal/uuid"
	"github.com/azsessions/azsessions/internal/wire"
)

// Session is one session of the pool, named by its identifier. A session is
// created by the service on the first request that names its identifier and
// ends when it has been idle for the pool's cooldown period (300–3600 s);
// after that the same identifier gets a fresh session without variables or
// files. A Session is a cheap value: it holds no connection and is safe for
// concurrent use (the service queues concurrent executions on one session).
//
// The client does not hide an expiry, nor re-create what was lost: after it,
// code that uses earlier variables fails as data (an Execution with Status
// ExecutionStatusFailed and a NameError in Stderr, not a Go error), and the
// earlier files are gone (404 from DownloadFile and GetFile, missing from
// NewListFilesPager). To find out before relying on a session's state, on
// api-version 2025-02-02-preview and later: note SessionProperties.CreatedAt
// from Get once the state is set up, and call Get again before using it;
// an error for which IsSessionNotFound is true (an *azcore.ResponseError
// with ErrorCode SessionWithIdentifierNotFound), or a later CreatedAt,
// means the session is new and the state must be set up again (upload the
// files, re-run the set-up code); see the example of Session.Get. On older api-versions,
// check for what you need (a file in the listing, a variable's value).
//
// Anyone who knows an identifier can use its session: treat it as a secret.
// The client never logs it nor puts it in an error message.
type Session struct {
	client     *Client
	identifier string

	validateOnce sync.Once
	validateErr  error
}

// Session returns the session named identifier. The identifier is checked
// against the api-version's rule by every operation (errors wrap
// ErrInvalidIdentifier), not here.
func (c *Client) Session(identifier string) *Session {
	return &Session{client: c, identifier: identifier}
}

// NewSession returns a session with a fresh random identifier (a UUIDv4 from
// crypto/rand, valid under every api-version's rule). Nothing is sent: the
// service creates the session on its first use.
func (c *Client) NewSession() *Session {
	return c.Session(uuid.New())
}

// Identifier returns the session's identifier.
func (s *Session) Identifier() string { return s.identifier }

// Client returns the client the session belongs to.
func (s *Session) Client() *Client { return s.client }

// validate checks the identifier against the api-version's rule, once per
// Session (both are fixed).
func (s *Session) validate() error {
	s.validateOnce.Do(func() {
		if err := wire.ValidateIdentifier(s.client.version, s.identifier); err != nil {
			s.validateErr = fmt.Errorf("%w: %v", ErrInvalidIdentifier, err)
		}
	})
	return s.validateErr
}

// SessionProperties describes a session (the Session resource).
type SessionProperties struct {
	// Identifier of the session.
	Identifier string
	// CreatedAt is when the session was allocated.
	CreatedAt time.Time
	// LastAccessedAt is the last call that named the session.
	LastAccessedAt time.Time
	// ExpiresAt is LastAccessedAt plus the pool's cooldown: the session and its
	// files are gone after it unless another call slides it. Read from expireAt
	// (code-interpreter pools) or expiresAt (custom-container pools).
	ExpiresAt time.Time
	// ETag identifies the container behind the session.
	ETag string
}

func sessionFromWire(w wire.Session) SessionProperties {
	p := SessionProperties{Identifier: w.Identifier, ETag: w.ETag}
	if w.CreatedAt != nil {
		p.CreatedAt = *w.CreatedAt
	}
	if w.LastAccessedAt != nil {
		p.LastAccessedAt = *w.LastAccessedAt
	}
	if e := w.Expiry(); e != nil {
		p.ExpiresAt = *e
	}
	return p
}

// GetSessionOptions contains the optional parameters of Session.Get.
type GetSessionOptions struct {
	// for future use
}

// GetSessionResponse is the answer of Session.Get.
type GetSessionResponse struct {
	SessionProperties
}

// Get returns the session's properties: GET {endpoint}/session
// (api-version 2025-02-02-preview and later; earlier versions give an error
// wrapping ErrUnsupported before any I/O). The call slides the session's
// expiry like any other. A session that does not exist (never used, expired
// or deleted) gives an *azcore.ResponseError with ErrorCode
// SessionWithIdentifierNotFound (HTTP 400; some pools answer 404).
func (s *Session) Get(ctx context.Context, options *GetSessionOptions) (GetSessionResponse, error) {
	const op = "Session.Get"
	var err error
	ctx, end := s.client.startOp(ctx, op)
	defer func() { end(err) }()
	req, err := s.getCreateRequest(ctx, op)
	if err != nil {
		return GetSessionResponse{}, err
	}
	resp, err := s.client.do(req, http.StatusOK)
	if err != nil {
		return GetSessionResponse{}, err
	}
	out, err := s.getHandleResponse(resp)
	return out, err
}

// getCreateRequest builds GET {endpoint}/session.
func (s *Session) getCreateRequest(ctx context.Context, op string) (*policy.Request, error) {
	if err := s.client.requireSessionManagement(op); err != nil {
		return nil, err
	}
	if err := s.validate(); err != nil {
		return nil, err
	}
	return s.client.newRequest(ctx, http.MethodGet, "session", s.identifier, nil)
}

// getHandleResponse decodes the Session resource of a 200 answer.
func (s *Session) getHandleResponse(resp *http.Response) (GetSessionResponse, error) {
	var w wire.Session
	if err := runtime.UnmarshalAsJSON(resp, &w); err != nil {
		return GetSessionResponse{}, err
	}
	return GetSessionResponse{SessionProperties: sessionFromWire(w)}, nil
}

// DeleteSessionOptions contains the optional parameters of Session.Delete.
type DeleteSessionOptions struct {
	// for future use
}

// DeleteSessionResponse is the answer of Session.Delete.
type DeleteSessionResponse struct {
	// for future use
}

// Delete ends the session at once, with its variables and files: DELETE
// {endpoint}/session (204; api-version 2025-02-02-preview and later, earlier
// versions give ErrUnsupported before any I/O). Deleting a session that does
// not exist gives an *azcore.ResponseError (SessionWithIdentifierNotFound).
func (s *Session) Delete(ctx context.Context, options *DeleteSessionOptions) (DeleteSessionResponse, error) {
	const op = "Session.Delete"
	var err error
	ctx, end := s.client.startOp(ctx, op)
	defer func() { end(err) }()
	req, err := s.deleteCreateRequest(ctx, op)
	if err != nil {
		return DeleteSessionResponse{}, err
	}
	resp, err := s.client.do(req, http.StatusOK, http.StatusNoContent)
	if err != nil {
		return DeleteSessionResponse{}, err
	}
	runtime.Drain(resp)
	return DeleteSessionResponse{}, nil
}

// deleteCreateRequest builds DELETE {endpoint}/session.
func (s *Session) deleteCreateRequest(ctx context.Context, op string) (*policy.Request, error) {
	if err := s.client.requireSessionManagement(op); err != nil {
		return nil, err
	}
	if err := s.validate(); err != nil {
		return nil, err
	}
	return s.client.newRequest(ctx, http.MethodDelete, "session", s.identifier, nil)
}

// StopSessionOptions contains the optional parameters of Session.Stop.
type StopSessionOptions struct {
	// for future use
}

// StopSessionResponse is the answer of Session.Stop.
type StopSessionResponse struct {
	// Message is the service's text/plain answer (may be empty).
	Message string
}

// Stop stops the session's container: POST {endpoint}/.management/stopSession
// (200 text/plain; api-version 2025-02-02-preview and later, earlier ones
// give ErrUnsupported before any I/O; no swagger of 2025-02-02-preview has
// the route, Learn's custom-container article calls it with that version).
// An unknown session gives an
// *azcore.ResponseError (SessionWithIdentifierNotFound).
func (s *Session) Stop(ctx context.Context, options *StopSessionOptions) (StopSessionResponse, error) {
	const op = "Session.Stop"
	var err error
	ctx, end := s.client.startOp(ctx, op)
	defer func() { end(err) }()
	req, err := s.stopCreateRequest(ctx, op)
	if err != nil {
		return StopSessionResponse{}, err
	}
	resp, err := s.client.do(req, http.StatusOK, http.StatusNoContent)
	if err != nil {
		return StopSessionResponse{}, err
	}
	out, err := s.stopHandleResponse(resp)
	return out, err
}

// stopCreateRequest builds POST {endpoint}/.management/stopSession.
func (s *Session) stopCreateRequest(ctx context.Context, op string) (*policy.Request, error) {
	if !s.client.features.StopSession {
		return nil, fmt.Errorf("%w: %s needs api-version %s or later (client uses %s)", ErrUnsupported, op, APIVersion20250202Preview, s.client.version)
	}
	if err := s.validate(); err != nil {
		return nil, err
	}
	req, err := s.client.newRequest(ctx, http.MethodPost, ".management/stopSession", s.identifier, nil)
	if err != nil {
		return nil, err
	}
	req.Raw().Header.Set("Accept", "text/plain, application/json")
	return req, nil
}

// stopHandleResponse reads the text/plain answer.
func (s *Session) stopHandleResponse(resp *http.Response) (StopSessionResponse, error) {
	body, err := runtime.Payload(resp)
	if err != nil {
		return StopSessionResponse{}, err
	}
	return StopSessionResponse{Message: string(body)}, nil
}

// ListSessionsOptions contains the optional parameters of NewListSessionsPager.
type ListSessionsOptions struct {
	// Skip is the number of sessions to skip before the first page (not
	// negative: the first NextPage refuses it before any I/O).
	Skip int32
}

// ListSessionsResponse is one page of NewListSessionsPager.
type ListSessionsResponse struct {
	// Sessions of this page (read from "sessions", or "value" on custom-container pools).
	Sessions []SessionProperties
	// NextLink is the URL of the next page, or "" on the last page.
	NextLink string
}

// NewListSessionsPager lists the pool's live sessions: GET
// {endpoint}/listSessions[?skip=N] (api-version 2025-02-02-preview and later),
// following nextLink. It does no I/O until NextPage; on an older api-version
// the first NextPage returns an error wrapping ErrUnsupported.
func (c *Client) NewListSessionsPager(options *ListSessionsOptions) *runtime.Pager[ListSessionsResponse] {
	const op = "Client.NewListSessionsPager"
	if options == nil {
		options = &ListSessionsOptions{}
	}
	guard := &linkGuard{}
	return runtime.NewPager(runtime.PagingHandler[ListSessionsResponse]{
		More: func(page ListSessionsResponse) bool { return page.NextLink != "" },
		Fetcher: func(ctx context.Context, page *ListSessionsResponse) (ListSessionsResponse, error) {
			ctx = context.WithValue(ctx, runtime.CtxAPINameKey{}, op)
			var nextLink string
			if page != nil {
				nextLink = page.NextLink
			}
			if err := guard.next(nextLink); err != nil {
				return ListSessionsResponse{}, err
			}
			resp, err := runtime.FetcherForNextLink(ctx, c.internal.Pipeline(), nextLink, func(ctx context.Context) (*policy.Request, error) {
				return c.listSessionsCreateRequest(ctx, op, options)
			}, c.nextPageOptions(""))
			if err != nil {
				return ListSessionsResponse{}, wrapAuthError(err)
			}
			return c.listSessionsHandleResponse(resp)
		},
		Tracer: c.internal.Tracer(),
	})
}

// listSessionsCreateRequest checks the api-version and Skip (before any I/O: the
// first page's Fetcher calls it before sending anything) and builds the
// first page's GET {endpoint}/listSessions[?skip=N].
func (c *Client) listSessionsCreateRequest(ctx context.Context, op string, options *ListSessionsOptions) (*policy.Request, error) {
	if err := c.requireSessionManagement(op); err != nil {
		return nil, err
	}
	if options.Skip < 0 {
		return nil, fmt.Errorf("azsessions: ListSessionsOptions.Skip %d is negative", options.Skip)
	}
	q := url.Values{}
	if options.Skip > 0 {
		q.Set("skip", strconv.Itoa(int(options.Skip)))
	}
	return c.newRequest(ctx, http.MethodGet, "listSessions", "", q)
}

// listSessionsHandleResponse decodes one page ("sessions", or "value" on
// custom-container pools).
func (c *Client) listSessionsHandleResponse(resp *http.Response) (ListSessionsResponse, error) {
	if err := checkPageEntries(resp); err != nil {
		return ListSessionsResponse{}, err
	}
	var w wire.SessionList
	if err := runtime.UnmarshalAsJSON(resp, &w); err != nil {
		return ListSessionsResponse{}, err
	}
	out := ListSessionsResponse{Sessions: make([]SessionProperties, 0, len(w.Items()))}
	for _, s := range w.Items() {
		out.Sessions = append(out.Sessions, sessionFromWire(s))
	}
	if w.NextLink != nil {
		out.NextLink = *w.NextLink
	}
	return out, nil
}

// Sessions returns an iterator over the pool's live sessions, for
// range-over-func (for s, err := range client.Sessions(ctx, nil)). It walks
// NewListSessionsPager (the same REST call, api-versions and errors); a
// failure is yielded once, with a zero SessionProperties, and ends the
// iteration.
func (c *Client) Sessions(ctx context.Context, options *ListSessionsOptions) iter.Seq2[SessionProperties, error] {
	return pagerItems(ctx, c.NewListSessionsPager(options), func(p ListSessionsResponse) []SessionProperties { return p.Sessions })
}

// ErrorCodeSessionNotFound is the service's error code for a session that
// does not exist (never used, expired after its cooldown, or deleted):
// Session.Get, Session.Delete and Session.Stop answer it (HTTP 400).
const ErrorCodeSessionNotFound = "SessionWithIdentifierNotFound"

// IsSessionNotFound reports whether err is the service's answer for a
// session that does not exist: an *azcore.ResponseError (or *AuthError
// wrapping one) whose ErrorCode is ErrorCodeSessionNotFound. Use it with
// Session.Get to learn that a session expired and its state must be set up
// again (see Session).
func IsSessionNotFound(err error) bool {
	var re *azcore.ResponseError
	return errors.As(err, &re) && strings.EqualFold(re.ErrorCode, ErrorCodeSessionNotFound)
}

// GetMetadataOptions contains the optional parameters of Client.GetMetadata.
type GetMetadataOptions struct {
	// for future use
}

// NameVersion is a runtime or package with its version.
type NameVersion struct {
	Name    string
	Version string
}

// Metadata describes what the pool's sessions run.
type Metadata struct {
	// Runtimes such as {python 3.12.4}.
	Runtimes []NameVersion
	// PreInstalledPackages such as {numpy 2.1.0}.
	PreInstalledPackages []NameVersion
	// KernelName, KernelVersion and KernelDescription describe the Jupyter kernel.
	KernelName, KernelVersion, KernelDescription string
	// KernelProjectURL is the kernel's project page (jupyterKernel.projectUrl),
	// such as "https://github.com/n-riesco/ijavascript".
	KernelProjectURL string
	// CreatedAt and LastUpdatedAt of the pool image (zero when not given).
	CreatedAt, LastUpdatedAt time.Time
}

// GetMetadataResponse is the answer of Client.GetMetadata.
type GetMetadataResponse struct {
	Metadata
}

// GetMetadata returns the pool's runtimes, pre-installed packages and kernel:
// GET {endpoint}/metadata (api-version 2025-02-02-preview and later, earlier
// versions give ErrUnsupported before any I/O).
func (c *Client) GetMetadata(ctx context.Context, options *GetMetadataOptions) (GetMetadataResponse, error) {
	const op = "Client.GetMetadata"
	var err error
	ctx, end := c.startOp(ctx, op)
	defer func() { end(err) }()
	req, err := c.getMetadataCreateRequest(ctx, op)
	if err != nil {
		return GetMetadataResponse{}, err
	}
	resp, err := c.do(req, http.StatusOK)
	if err != nil {
		return GetMetadataResponse{}, err
	}
	out, err := c.getMetadataHandleResponse(resp)
	return out, err
}

// getMetadataCreateRequest builds GET {endpoint}/metadata.
func (c *Client) getMetadataCreateRequest(ctx context.Context, op string) (*policy.Request, error) {
	if err := c.requireSessionManagement(op); err != nil {
		return nil, err
	}
	return c.newRequest(ctx, http.MethodGet, "metadata", "", nil)
}

// getMetadataHandleResponse decodes the pool's metadata.
func (c *Client) getMetadataHandleResponse(resp *http.Response) (GetMetadataResponse, error) {
	var w wire.Metadata
	if err := runtime.UnmarshalAsJSON(resp, &w); err != nil {
		return GetMetadataResponse{}, err
	}
	m := Metadata{}
	for _, r := range w.Runtimes {
		m.Runtimes = append(m.Runtimes, NameVersion(r))
	}
	for _, p := range w.PreInstalledPackages {
		m.PreInstalledPackages = append(m.PreInstalledPackages, NameVersion(p))
	}
	if k := w.JupyterKernel; k != nil {
		m.KernelName, m.KernelVersion, m.KernelDescription, m.KernelProjectURL = k.Name, k.Version, k.Description, k.ProjectURL
	}
	if w.CreatedAt != nil {
		m.CreatedAt = *w.CreatedAt
	}
	if w.LastUpdatedAt != nil {
		m.LastUpdatedAt = *w.LastUpdatedAt
	}
	return GetMetadataResponse{Metadata: m}, nil
}
