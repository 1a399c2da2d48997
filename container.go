package azsessions

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
)

// DoOptions contains the optional parameters of Session.Do.
type DoOptions struct {
	// RetryNonIdempotent lets the client send a POST, PATCH or other
	// non-idempotent request again after a failure azcore's retry policy
	// retries (a transport error, 408, 429, 500, 502, 503, 504) and after a
	// 401 (once, with a fresh token). Off by default: the container may
	// have acted on the first request. Set it only when the container's API
	// makes repeats harmless. A body that is not an io.ReadSeekCloser is
	// never sent twice, whatever this says.
	RetryNonIdempotent bool
}

// idempotentMethods are the methods RFC 9110 §9.2.2 calls idempotent.
var idempotentMethods = map[string]bool{
	http.MethodGet: true, http.MethodHead: true, http.MethodOptions: true,
	http.MethodTrace: true, http.MethodPut: true, http.MethodDelete: true,
}

// noResendKey marks, in a request's context, a request that must not be sent
// a second time (retryUnauthorizedPolicy honours it; azcore's retries are
// turned off with MaxRetries).
type noResendKey struct{}

func noResend(ctx context.Context) bool { return ctx.Value(noResendKey{}) != nil }

// Do sends req to the session's container in a custom-container session
// pool (containerType CustomContainer): {endpoint}{req.URL.Path}?{req.URL.RawQuery}&identifier=ID.
// The pool allocates the session when the identifier has none and forwards
// the request to the container's target port (api.md §6.3; the request
// carries no api-version, as in the documentation's sample).
//
// req.URL must be relative ("/api/items?limit=5"): its path is appended to
// the pool management endpoint. The method, the path, the query, the
// headers and the body (streamed, not buffered) are the caller's; the
// client adds identifier to the query, the bearer token for DefaultScope
// (Authorization, replacing any the caller set), User-Agent and
// x-ms-client-request-id. req's own context is replaced by ctx.
//
// Do returns the response whatever its status, like http.Client.Do: a 4xx
// or 5xx from the container is not a Go error (runtime.NewResponseError
// turns it into one). The caller must close the body. A 2xx body is
// streamed and not capped; other bodies are capped at MaxResponseSize and
// have the identifier replaced by REDACTED. A redirect is returned, never
// followed (the token and the identifier stay with the endpoint); its
// Location header is removed, since it may repeat the identifier. The
// identifier is REDACTED in the x-ms-error-code and operation-id headers
// too (azcore's log shows them).
//
// Retries: an idempotent request (GET, HEAD, OPTIONS, TRACE, PUT, DELETE)
// is retried as azcore's RetryOptions say when its body is empty or an
// io.ReadSeekCloser (for example streaming.NopCloser(bytes.NewReader(b)));
// any other request is sent once unless options.RetryNonIdempotent, and a
// body of another type is always sent once.
//
// Errors (before any I/O): a nil req, an absolute req.URL, an identifier
// already in the query, ErrInvalidIdentifier. Transport failures are
// returned with the identifier redacted from the URL they carry.
func (s *Session) Do(ctx context.Context, req *http.Request, options *DoOptions) (*http.Response, error) {
	const op = "Session.Do"
	var err error
	if options == nil {
		options = &DoOptions{}
	}
	preq, retryable, err := s.doCreateRequest(ctx, req, options)
	if err != nil {
		return nil, err
	}
	ctx, end := s.client.startOp(preq.Raw().Context(), op)
	defer func() { end(err) }()
	preq = preq.WithContext(ctx)
	if !retryable {
		preq = preq.WithContext(policy.WithRetryOptions(context.WithValue(ctx, noResendKey{}, true), policy.RetryOptions{MaxRetries: -1}))
	}
	resp, err := s.client.internal.Pipeline().Do(preq)
	return resp, err
}

// doCreateRequest builds the pass-through request of Session.Do and says
// whether it may be sent more than once.
func (s *Session) doCreateRequest(ctx context.Context, req *http.Request, options *DoOptions) (*policy.Request, bool, error) {
	if req == nil || req.URL == nil {
		return nil, false, errors.New("azsessions: the request is nil")
	}
	if err := s.validate(); err != nil {
		return nil, false, err
	}
	if req.URL.Scheme != "" || req.URL.Host != "" || req.URL.Opaque != "" || req.URL.User != nil {
		// never repeat the URL: its query may hold secrets
		return nil, false, errors.New("azsessions: Session.Do takes a request whose URL is a path relative to the pool management endpoint (such as /api/items?limit=5), not an absolute URL")
	}
	q, err := url.ParseQuery(req.URL.RawQuery)
	if err != nil {
		return nil, false, fmt.Errorf("azsessions: the request's query does not parse: %w", err)
	}
	if q.Has("identifier") {
		return nil, false, errors.New("azsessions: the request's query already has an identifier; the session adds its own")
	}
	path := req.URL.EscapedPath()
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	rawQuery := req.URL.RawQuery
	if rawQuery != "" {
		rawQuery += "&"
	}
	rawQuery += "identifier=" + queryEscape(s.identifier)
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	// the stream key: a 2xx body goes to the caller uncapped
	ctx = context.WithValue(ctx, streamKey{}, true)
	preq, err := runtime.NewRequest(ctx, method, s.client.endpoint+path+"?"+rawQuery)
	if err != nil {
		return nil, false, errors.New("azsessions: the request's path and method do not make a valid request")
	}
	runtime.SkipBodyDownload(preq)
	raw := preq.Raw()
	for k, vs := range req.Header {
		raw.Header[k] = append([]string(nil), vs...)
	}
	retryable := idempotentMethods[method] || options.RetryNonIdempotent
	switch body := req.Body; {
	case body == nil || body == http.NoBody:
	case isReadSeekCloser(body):
		if err := preq.SetBody(body.(io.ReadSeekCloser), req.Header.Get("Content-Type")); err != nil {
			return nil, false, err
		}
	default:
		// streamed as it is: it cannot be rewound, so it is sent once
		raw.Body, raw.ContentLength, raw.GetBody = body, req.ContentLength, nil
		raw.TransferEncoding = req.TransferEncoding
		retryable = false
	}
	if !retryable {
		// nor may net/http's HTTP/2 transport replay it on a new connection
		raw.GetBody = nil
	}
	return preq, retryable, nil
}

func isReadSeekCloser(r io.ReadCloser) bool {
	_, ok := r.(io.ReadSeekCloser)
	return ok
}

// GetContainerSessionOptions contains the optional parameters of
// Session.GetContainerSession.
type GetContainerSessionOptions struct {
	// for future use
}

// GetContainerSessionResponse is the answer of Session.GetContainerSession.
type GetContainerSessionResponse struct {
	SessionProperties
}

// GetContainerSession returns the properties of a session of a
// custom-container pool: POST {endpoint}/.management/getSession?identifier=ID
// (api-version 2025-02-02-preview and later, as Learn's
// sessions-custom-container.md shows; earlier versions give an error
// wrapping ErrUnsupported before any I/O). The pool answers a SessionView:
// identifier, etag, expiresAt (SessionProperties.ExpiresAt), and
// createdAt and lastAccessedAt when it has them. On a custom-container pool
// Session.Get's GET session goes to the container, not to the pool. A
// session that does not exist gives an *azcore.ResponseError for which
// IsSessionNotFound is true (HTTP 400 SessionWithIdentifierNotFound).
func (s *Session) GetContainerSession(ctx context.Context, options *GetContainerSessionOptions) (GetContainerSessionResponse, error) {
	const op = "Session.GetContainerSession"
	var err error
	ctx, end := s.client.startOp(ctx, op)
	defer func() { end(err) }()
	req, err := s.getContainerSessionCreateRequest(ctx, op)
	if err != nil {
		return GetContainerSessionResponse{}, err
	}
	resp, err := s.client.do(req, http.StatusOK)
	if err != nil {
		return GetContainerSessionResponse{}, err
	}
	got, err := s.getHandleResponse(resp)
	return GetContainerSessionResponse(got), err
}

// getContainerSessionCreateRequest builds POST {endpoint}/.management/getSession.
func (s *Session) getContainerSessionCreateRequest(ctx context.Context, op string) (*policy.Request, error) {
	if err := s.client.requireSessionManagement(op); err != nil {
		return nil, err
	}
	if err := s.validate(); err != nil {
		return nil, err
	}
	return s.client.newRequest(ctx, http.MethodPost, ".management/getSession", s.identifier, nil)
}

// ListContainerSessionsOptions contains the optional parameters of
// Client.NewListContainerSessionsPager.
type ListContainerSessionsOptions struct {
	// Skip is the number of sessions to skip before the first page (not
	// negative: the first NextPage refuses it before any I/O).
	Skip int32
}

// ListContainerSessionsResponse is one page of
// Client.NewListContainerSessionsPager.
type ListContainerSessionsResponse struct {
	// Sessions of this page (the answer's value).
	Sessions []SessionProperties
	// NextLink is the URL of the next page, or "" on the last page.
	NextLink string
}

// NewListContainerSessionsPager lists the live sessions of a
// custom-container pool: POST {endpoint}/.management/listSessions?skip=N
// (api-version 2025-02-02-preview and later; on older ones the first
// NextPage returns an error wrapping ErrUnsupported), following nextLink
// (with POST; the pool pages 300 sessions at a time). The answer is
// {"value": [SessionView...], "count": N, "nextLink": "..."|null}. On a
// custom-container pool NewListSessionsPager's GET listSessions goes to the
// container. It does no I/O until NextPage.
func (c *Client) NewListContainerSessionsPager(options *ListContainerSessionsOptions) *runtime.Pager[ListContainerSessionsResponse] {
	const op = "Client.NewListContainerSessionsPager"
	if options == nil {
		options = &ListContainerSessionsOptions{}
	}
	guard := &linkGuard{}
	return runtime.NewPager(runtime.PagingHandler[ListContainerSessionsResponse]{
		More: func(page ListContainerSessionsResponse) bool { return page.NextLink != "" },
		Fetcher: func(ctx context.Context, page *ListContainerSessionsResponse) (ListContainerSessionsResponse, error) {
			ctx = context.WithValue(ctx, runtime.CtxAPINameKey{}, op)
			var nextLink string
			if page != nil {
				nextLink = page.NextLink
			}
			if err := guard.next(nextLink); err != nil {
				return ListContainerSessionsResponse{}, err
			}
			resp, err := runtime.FetcherForNextLink(ctx, c.internal.Pipeline(), nextLink, func(ctx context.Context) (*policy.Request, error) {
				return c.listContainerSessionsCreateRequest(ctx, op, options)
			}, c.nextPageOptionsMethod(http.MethodPost, ""))
			if err != nil {
				return ListContainerSessionsResponse{}, wrapAuthError(err)
			}
			got, err := c.listSessionsHandleResponse(resp)
			return ListContainerSessionsResponse(got), err
		},
		Tracer: c.internal.Tracer(),
	})
}

// listContainerSessionsCreateRequest checks the api-version and Skip (before any
// I/O: the first page's Fetcher calls it before sending anything) and builds
// the first page's POST {endpoint}/.management/listSessions?skip=N.
func (c *Client) listContainerSessionsCreateRequest(ctx context.Context, op string, options *ListContainerSessionsOptions) (*policy.Request, error) {
	if err := c.requireSessionManagement(op); err != nil {
		return nil, err
	}
	if options.Skip < 0 {
		return nil, fmt.Errorf("azsessions: ListContainerSessionsOptions.Skip %d is negative", options.Skip)
	}
	q := url.Values{"skip": {strconv.Itoa(int(options.Skip))}}
	return c.newRequest(ctx, http.MethodPost, ".management/listSessions", "", q)
}
