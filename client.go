package azsessions

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"

	"github.com/azsessions/azsessions/internal/version"
	"github.com/azsessions/azsessions/internal/wire"
)

const (
	moduleName    = "github.com/azsessions/azsessions"
	moduleVersion = version.Module
	// tracingNamespace is the az.namespace attribute of every span.
	tracingNamespace = "Microsoft.App"
)

// The api-versions of the pool management API that the client speaks. Set one
// with ClientOptions.APIVersion.
const (
	// APIVersion20240202Preview is the first legacy version (code/execute,
	// files/upload, files/content/{name}; properties-wrapped bodies).
	APIVersion20240202Preview = "2024-02-02-preview"
	// APIVersion20240802Preview is the second legacy version, same contract.
	APIVersion20240802Preview = "2024-08-02-preview"
	// APIVersion20241002Preview is the first version of the executions contract.
	APIVersion20241002Preview = "2024-10-02-preview"
	// APIVersion20250202Preview adds session management (session, listSessions, metadata).
	APIVersion20250202Preview = "2025-02-02-preview"
	// APIVersion20251002Preview adds .management/stopSession, recursive listing,
	// file directories and outputStreamsMaxLength. It is the default.
	APIVersion20251002Preview = "2025-10-02-preview"
	// DefaultAPIVersion is the api-version used when ClientOptions.APIVersion is empty.
	DefaultAPIVersion = APIVersion20251002Preview
)

// Sentinel errors. Client-side validation errors wrap one of these and are
// returned before any I/O; test them with errors.Is.
var (
	// ErrInvalidIdentifier: a session identifier breaks the rule of the chosen
	// api-version (the error says which rule; it never repeats the identifier).
	ErrInvalidIdentifier = errors.New("azsessions: invalid session identifier")
	// ErrInvalidFileName: a file name is empty, contains "..", or points outside /mnt/data.
	ErrInvalidFileName = errors.New("azsessions: invalid file name")
	// ErrUnsupported: the chosen api-version lacks the operation or option.
	ErrUnsupported = errors.New("azsessions: not supported by this api-version")
	// ErrFileTooLarge: the upload is larger than MaxUploadBytes.
	ErrFileTooLarge = errors.New("azsessions: file too large")
)

// MaxUploadBytes is the service's upload limit in bytes (128 MiB); larger
// uploads are refused before sending when their size is known.
const MaxUploadBytes = 128 << 20

// MaxUploadSize is the former name of MaxUploadBytes.
//
// Deprecated: use MaxUploadBytes (the emulator's Options.MaxUploadBytes and
// -max-upload-bytes use that name too).
const MaxUploadSize = MaxUploadBytes

// ClientOptions contains the optional parameters of NewClient and
// NewClientWithNoCredential.
//
// The embedded azcore.ClientOptions carries the usual pipeline settings
// (Transport, Retry, Logging, Telemetry, TracingProvider, PerCallPolicies,
// PerRetryPolicies, InsecureAllowCredentialWithHTTP) and APIVersion, which
// selects the api-version (DefaultAPIVersion when empty; one of the
// APIVersion* constants, anything else is an error from NewClient).
//
// Logging.IncludeBody makes azcore log every response body as it came. Error
// bodies are redacted before they reach the log (identifier and token, and
// cut at MaxErrorBodySize), but successful answers repeat the session
// identifier (executions, sessions, listings), so with IncludeBody the
// identifier reaches the log listener: leave it off outside debugging.
//
// A Transport that is not an *http.Client (a wrapper around one) may follow
// redirects itself; the client stops such a redirect to another host:port
// before it is sent and refuses an answer for another URL, but it cannot see
// inside the Transporter: prefer an *http.Client, whose redirects it turns off.
type ClientOptions struct {
	azcore.ClientOptions
}

// Client talks to one session pool's management endpoint. It is safe for
// concurrent use. Session-scoped operations hang off *Session values, made
// with Session or NewSession; pool-wide ones (NewListSessionsPager,
// GetMetadata) are methods of Client.
type Client struct {
	internal *azcore.Client
	endpoint string
	version  string
	features wire.Features
	// executeRetry is the retry options of execution requests (each request
	// sets its own ShouldRetry: sendTracker.shouldRetry).
	executeRetry policy.RetryOptions
	// opIDs holds the caller-chosen operation-ids sent (beginExecution).
	opIDs operationIDs
}

// NewClient creates a client for the pool management endpoint (the session
// pool's poolManagementEndpoint, for example
// https://eastus.dynamicsessions.io/subscriptions/<sub>/resourceGroups/<rg>/sessionPools/<pool>)
// that authenticates with credential, asking for DefaultScope.
//
// A credential needs the "Azure ContainerApps Session Executor" role on the
// pool. The endpoint must be https unless options.InsecureAllowCredentialWithHTTP
// is set; trailing slashes are trimmed; a query, a fragment or a user name or password (user:pw@) is an error. An
// unknown options.APIVersion is an error. No I/O happens here.
func NewClient(endpoint string, credential azcore.TokenCredential, options *ClientOptions) (*Client, error) {
	if credential == nil {
		return nil, errors.New("azsessions: credential is nil; use NewClientWithNoCredential for token-less endpoints")
	}
	return newClient(endpoint, credential, options)
}

// NewClientWithNoCredential creates a client that sends no Authorization
// header: for the local emulator (cmd/azsessions-emulator, package
// azsessionstest) and other token-less endpoints. http:// endpoints are allowed.
// Errors are those of NewClient.
func NewClientWithNoCredential(endpoint string, options *ClientOptions) (*Client, error) {
	return newClient(endpoint, nil, options)
}

func newClient(endpoint string, credential azcore.TokenCredential, options *ClientOptions) (*Client, error) {
	if options == nil {
		options = &ClientOptions{}
	}
	ep, err := parseEndpoint(endpoint, credential != nil && !options.InsecureAllowCredentialWithHTTP)
	if err != nil {
		return nil, err
	}
	version := options.APIVersion
	if version == "" {
		version = DefaultAPIVersion
	}
	features, ok := wire.Lookup(version)
	if !ok {
		return nil, fmt.Errorf("azsessions: unknown api-version %q (supported: %s)", version, strings.Join(wire.Versions, ", "))
	}
	opts := options.ClientOptions
	// The client sets api-version itself (newRequest, nextPage); azcore's
	// api-version policy would parse and rewrite every query a second time.
	opts.APIVersion = ""
	// redactErrorsPolicy comes first so that it also sees the errors of the
	// policies after it (it only edits errors).
	perRetry := []policy.Policy{redactErrorsPolicy{}}
	if credential != nil {
		perRetry = append(perRetry, retryUnauthorizedPolicy{}, newBearerTokenPolicy(credential, opts.InsecureAllowCredentialWithHTTP))
	}
	perRetry = append(perRetry, sendCounterPolicy{}, uploadBodyPolicy{}, sendTrackerPolicy{})
	opts.Transport = newGuardTransport(opts.Transport)
	c, err := azcore.NewClient(moduleName, moduleVersion, runtime.PipelineOptions{
		PerRetry: perRetry,
		Tracing:  runtime.TracingOptions{Namespace: tracingNamespace},
		// "identifier" is deliberately not allow-listed: azcore redacts it in
		// logs. Neither is Operation-Location, whose URL repeats the identifier.
		AllowedHeaders: []string{"operation-id", wire.ErrorCodeHeader},
	}, &opts)
	if err != nil {
		return nil, err
	}
	client := &Client{internal: c, endpoint: ep, version: version, features: features}
	client.executeRetry = opts.Retry
	return client, nil
}

func parseEndpoint(endpoint string, requireHTTPS bool) (string, error) {
	endpoint = strings.TrimRight(strings.TrimSpace(endpoint), "/")
	if endpoint == "" {
		return "", errors.New("azsessions: endpoint is empty: pass the session pool's poolManagementEndpoint, such as https://<region>.dynamicsessions.io/subscriptions/<sub>/resourceGroups/<rg>/sessionPools/<pool>")
	}
	u, err := url.Parse(endpoint)
	if err != nil {
		return "", fmt.Errorf("azsessions: invalid endpoint: %w", err)
	}
	switch {
	case u.Scheme != "https" && u.Scheme != "http":
		return "", fmt.Errorf("azsessions: endpoint scheme must be https (or http for the emulator), got %q", u.Scheme)
	case u.Host == "":
		return "", errors.New("azsessions: endpoint has no host")
	case u.User != nil:
		// a password in the URL would reach azcore's log (net/http masks it
		// as ***, so the log's redaction of the URL no longer matches) and
		// every request; the service authenticates by bearer token only
		return "", errors.New("azsessions: endpoint must not carry a user name or password (user:password@); the client authenticates with the credential")
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return "", errors.New("azsessions: endpoint must not have a query or fragment")
	case requireHTTPS && u.Scheme != "https":
		return "", errors.New("azsessions: a credential is only sent over https; use NewClientWithNoCredential or set InsecureAllowCredentialWithHTTP (against azsessionstest, pass its Server.ClientOptions())")
	}
	if err := checkPoolPath(u); err != nil {
		return "", err
	}
	return endpoint, nil
}

// poolPathPattern is the path of a code-interpreter pool's management
// endpoint on *.dynamicsessions.io (api.md §2: the documented format, and
// the one the Azure CLI builds).
var poolPathPattern = regexp.MustCompile(`(?i)^/subscriptions/[^/]+/resourceGroups/[^/]+/sessionPools/[^/]+$`)

// checkPoolPath refuses a *.dynamicsessions.io endpoint whose path is not
// exactly /subscriptions/<sub>/resourceGroups/<rg>/sessionPools/<pool>: the
// service would answer every call with 404. Other hosts (custom-container
// pools on *.azurecontainerapps.io, which have no path, the emulator, a
// proxy) are taken as they are.
func checkPoolPath(u *url.URL) error {
	host := strings.ToLower(u.Hostname())
	if host != "dynamicsessions.io" && !strings.HasSuffix(host, ".dynamicsessions.io") {
		return nil
	}
	if poolPathPattern.MatchString(u.Path) {
		return nil
	}
	hint := ""
	if i := strings.Index(strings.ToLower(u.Path), "/sessionpools/"); i >= 0 {
		rest := u.Path[i+len("/sessionPools/"):]
		if j := strings.IndexByte(rest, '/'); j >= 0 {
			hint = " (drop " + rest[j:] + " after the pool name: the client appends each operation's path itself)"
		}
	}
	return fmt.Errorf("azsessions: endpoint %s://%s%s is not a pool management endpoint: on dynamicsessions.io its path is /subscriptions/<sub>/resourceGroups/<rg>/sessionPools/<pool>%s; copy the pool's properties.poolManagementEndpoint (az containerapp sessionpool show --query properties.poolManagementEndpoint)", u.Scheme, u.Host, u.Path, hint)
}

// Endpoint returns the pool management endpoint the client was made with,
// without trailing slashes.
func (c *Client) Endpoint() string { return c.endpoint }

// APIVersion returns the api-version the client speaks.
func (c *Client) APIVersion() string { return c.version }

// newRequest builds a request for path (already escaped, relative to the
// endpoint) with api-version and, when identifier is not empty, identifier.
func (c *Client) newRequest(ctx context.Context, method, path, identifier string, query url.Values) (*policy.Request, error) {
	// The query is written once, in url.Values.Encode's order (sorted keys),
	// with spaces as %20: azcore does not touch it again.
	var b strings.Builder
	b.Grow(len(c.endpoint) + len(path) + 64 + len(identifier)*3)
	b.WriteString(c.endpoint)
	b.WriteByte('/')
	b.WriteString(path)
	b.WriteByte('?')
	if len(query) == 0 {
		b.WriteString("api-version=")
		b.WriteString(c.version)
		if identifier != "" {
			b.WriteString("&identifier=")
			b.WriteString(queryEscape(identifier))
		}
	} else {
		query.Set("api-version", c.version)
		if identifier != "" {
			query.Set("identifier", identifier)
		}
		b.WriteString(strings.ReplaceAll(query.Encode(), "+", "%20"))
	}
	req, err := runtime.NewRequest(ctx, method, b.String())
	if err != nil {
		return nil, err
	}
	req.Raw().Header["Accept"] = acceptJSON
	return req, nil
}

var acceptJSON = []string{"application/json"}

// queryEscape escapes a query value like url.QueryEscape, with %20 for spaces.
func queryEscape(s string) string {
	e := url.QueryEscape(s)
	if strings.IndexByte(e, '+') < 0 {
		return e
	}
	return strings.ReplaceAll(e, "+", "%20")
}

// nextPageOptions makes pagers request a nextLink with this client's
// api-version and, for session-scoped lists, the identifier, when the link
// the service returned lacks them.
func (c *Client) nextPageOptions(identifier string) *runtime.FetcherForNextLinkOptions {
	return c.nextPageOptionsMethod(http.MethodGet, identifier)
}

// nextPageOptionsMethod is nextPageOptions for lists whose pages are
// requested with method (POST .management/listSessions).
func (c *Client) nextPageOptionsMethod(method, identifier string) *runtime.FetcherForNextLinkOptions {
	return &runtime.FetcherForNextLinkOptions{NextReq: func(ctx context.Context, nextLink string) (*policy.Request, error) {
		u, err := url.Parse(nextLink)
		if err != nil {
			// the error would repeat the link, identifier included
			return nil, errors.New("azsessions: the service returned a nextLink that is not a URL")
		}
		if u.User != nil {
			return nil, errors.New("azsessions: refusing to follow a nextLink that carries a user name or password")
		}
		if !c.sameOrigin(u) {
			return nil, fmt.Errorf("azsessions: refusing to follow a nextLink to another origin (%s://%s, the endpoint is %s): the token and the identifier are only sent to the endpoint", u.Scheme, u.Host, c.origin())
		}
		req, err := runtime.NewRequest(ctx, method, nextLink)
		if err != nil {
			return nil, errors.New("azsessions: the service returned a nextLink that is not a valid request URL")
		}
		q := req.Raw().URL.Query()
		changed := false
		if q.Get("api-version") == "" {
			q.Set("api-version", c.version)
			changed = true
		}
		if identifier != "" && q.Get("identifier") == "" {
			q.Set("identifier", identifier)
			changed = true
		}
		if changed {
			req.Raw().URL.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20")
		}
		req.Raw().Header.Set("Accept", "application/json")
		return req, nil
	}}
}

// MaxPages bounds how many pages one pager fetches (NewListFilesPager,
// NewListSessionsPager, and the iterators over them); a nextLink that
// repeats one already followed by the pager is an error at once: a broken
// service whose nextLink points back would otherwise make the pager and
// the iterators run for ever.
const MaxPages = 100000

// linkGuard refuses, for one pager, a nextLink already followed and more
// than MaxPages pages.
type linkGuard struct {
	mu    sync.Mutex
	seen  map[string]struct{}
	pages int
}

func (g *linkGuard) next(link string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pages++
	if g.pages > MaxPages {
		return fmt.Errorf("azsessions: the listing has more than %d pages (MaxPages); stopping", MaxPages)
	}
	if link == "" {
		return nil
	}
	if _, ok := g.seen[link]; ok {
		return errors.New("azsessions: the service returned a nextLink that was already followed (the listing loops); stopping")
	}
	if g.seen == nil {
		g.seen = map[string]struct{}{}
	}
	g.seen[link] = struct{}{}
	return nil
}

// MaxPageEntries bounds the objects of one listing page (NewListFilesPager,
// NewListSessionsPager): a page with more is refused before it is decoded.
// A page within MaxResponseSize made of empty objects ({},{},... three
// bytes each) would otherwise decode into some 200 bytes of heap per
// entry: gigabytes for one page.
const MaxPageEntries = 10000

// checkPageEntries counts the JSON objects of a listing page (outside
// strings) and refuses more than MaxPageEntries entries.
func checkPageEntries(resp *http.Response) error {
	body, err := runtime.Payload(resp)
	if err != nil {
		return err
	}
	n, inString, escaped := 0, false, false
	for _, c := range body {
		switch {
		case escaped:
			escaped = false
		case inString:
			if c == '\\' {
				escaped = true
			} else if c == '"' {
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{':
			if n++; n > MaxPageEntries+1 { // +1: the page object itself
				return fmt.Errorf("azsessions: the listing page has more than %d entries (MaxPageEntries)", MaxPageEntries)
			}
		}
	}
	return nil
}

// sameOrigin reports whether u has the endpoint's scheme, host and port.
func (c *Client) sameOrigin(u *url.URL) bool {
	ep, err := url.Parse(c.endpoint)
	if err != nil {
		return false
	}
	return strings.EqualFold(u.Scheme, ep.Scheme) && strings.EqualFold(hostPort(u), hostPort(ep))
}

func (c *Client) origin() string {
	ep, _ := url.Parse(c.endpoint)
	return ep.Scheme + "://" + ep.Host
}

// hostPort returns u's host with the scheme's default port made explicit.
func hostPort(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[strings.ToLower(u.Scheme)]
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// do sends req through the pipeline and turns any status outside ok into an
// *azcore.ResponseError.
func (c *Client) do(req *policy.Request, ok ...int) (*http.Response, error) {
	resp, err := c.internal.Pipeline().Do(req)
	if err != nil {
		return nil, err
	}
	if !runtime.HasStatusCode(resp, ok...) {
		return nil, c.responseError(resp)
	}
	return resp, nil
}

// responseError turns a failed answer into an *azcore.ResponseError (an
// *AuthError for 401 and 403). Its text cannot repeat the session
// identifier: guardTransport has redacted the body.
//
// Every answer the caller treats as an error passes here, whatever its
// status (a 201 to a GET is an error too, and guardTransport only edits
// bodies of status 300 and above): its body is redacted (identifier and
// token, in every encoding) and cut at MaxErrorBodySize before azcore reads
// it into the error and logs it.
func (c *Client) responseError(resp *http.Response) error {
	if err := redactErrorResponse(resp, resp.Request); err != nil {
		return err
	}
	return wrapAuthError(runtime.NewResponseError(resp))
}

// MaxResponseSize is the largest response body, in bytes (32 MiB), that the
// client reads for a JSON answer (executions, listings, metadata, sessions)
// or an error. A larger body fails the call with an error saying so, before
// it is read into memory. File downloads are streamed and not capped.
const MaxResponseSize = 32 << 20

// responseLimit is the cap a new client's transport applies:
// MaxResponseSize, lowered only by tests so that the cap on bodies without
// a Content-Length is checked without reading 32 MiB.
var responseLimit int64 = MaxResponseSize

// errResponseTooLarge is the error of a body over the limit (MaxResponseSize).
// It is not retried.
type errResponseTooLarge struct{ size, limit int64 }

func (e *errResponseTooLarge) Error() string {
	if e.size > 0 {
		return fmt.Sprintf("azsessions: the response body is %d bytes, over the client's limit of %d bytes (MaxResponseSize)", e.size, e.limit)
	}
	return fmt.Sprintf("azsessions: the response body is over the client's limit of %d bytes (MaxResponseSize)", e.limit)
}

func (e *errResponseTooLarge) NonRetriable() {}

// streamKey marks, in a request's context, a download whose 2xx body is
// streamed to the caller and so not capped.
type streamKey struct{}

// guardTransport is the client's transport: it follows no redirect (the
// service does not redirect, and a redirect would carry the token and the
// identifier elsewhere or re-send an execution), caps response bodies at
// MaxResponseSize, except the 2xx body of a download, and replaces the
// request's identifier in an error body with REDACTED. It sits below
// azcore's logging policy, so the logs see what the caller sees.
type guardTransport struct {
	next  policy.Transporter
	limit int64 // responseLimit when the client was made
	// watch says next is not an *http.Client whose redirects the client
	// turned off (a user's wrapper around one): doWatched stops a redirect
	// it follows before the redirected request leaves, as far as net/http
	// lets it see one.
	watch bool
}

func newGuardTransport(t policy.Transporter) policy.Transporter {
	watch := false
	switch hc := t.(type) {
	case nil:
		t = &http.Client{Transport: defaultHTTPTransport(), CheckRedirect: noRedirect}
	case *http.Client:
		cp := *hc
		cp.CheckRedirect = noRedirect
		t = &cp
	default:
		watch = true
	}
	return guardTransport{next: t, limit: responseLimit, watch: watch}
}

// defaultHTTPTransport has the settings of azcore's default transport.
func defaultHTTPTransport() *http.Transport {
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		MaxIdleConnsPerHost:   10,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		TLSClientConfig:       &tls.Config{MinVersion: tls.VersionTLS12},
	}
}

func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// errRedirectRefused is the error of a request whose custom Transporter
// followed, or began to follow, a redirect.
var errRedirectRefused = errors.New("azsessions: the Transporter followed a redirect, which this API never sends; refused (pass an *http.Client as ClientOptions.Transport, whose redirects the client turns off)")

// doWatched sends req through a Transporter that may follow redirects (one
// that is not an *http.Client): an httptrace hook sees every connection
// net/http asks for on behalf of req, and a second one to another
// host:port (the redirected request) cancels the request before it is
// written; an answer for another URL than req's is refused too (a redirect
// to the same host:port has then already been sent, to the endpoint's own
// origin).
func (g guardTransport) doWatched(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancelCause(req.Context())
	var mu sync.Mutex
	first := ""
	trace := &httptrace.ClientTrace{GetConn: func(hostPort string) {
		mu.Lock()
		defer mu.Unlock()
		if first == "" {
			first = hostPort
		} else if hostPort != first {
			cancel(errRedirectRefused)
		}
	}}
	sent := req.WithContext(httptrace.WithClientTrace(ctx, trace))
	resp, err := g.next.Do(sent)
	if err != nil {
		refused := errors.Is(context.Cause(ctx), errRedirectRefused)
		cancel(nil)
		if refused {
			return nil, &hopelessError{err: errRedirectRefused, why: "a redirect"}
		}
		return nil, err
	}
	if resp.Request != nil && resp.Request.URL != nil && resp.Request.URL.String() != req.URL.String() {
		resp.Body.Close()
		cancel(nil)
		return nil, &hopelessError{err: errRedirectRefused, why: "a redirect"}
	}
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: func() { cancel(nil) }}
	return resp, nil
}

// cancelOnClose ends a request's context when its body is closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel func()
}

func (c *cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}

func (g guardTransport) Do(req *http.Request) (*http.Response, error) {
	var resp *http.Response
	var err error
	if g.watch {
		resp, err = g.doWatched(req)
	} else {
		resp, err = g.next.Do(req)
	}
	if err != nil {
		return nil, notRetriedIfHopeless(req, err)
	}
	if resp == nil {
		return resp, err
	}
	// before azcore's log policy (above the transport) logs them and
	// azcore.ResponseError takes its ErrorCode from one
	redactLoggedHeaders(resp.Header, req)
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		// a redirect followed by no one: its Location (which may repeat the
		// identifier) is dropped, the status stays an error
		resp.Header.Del("Location")
	}
	if resp.StatusCode < 300 && req.Context().Value(streamKey{}) != nil {
		return resp, nil
	}
	if resp.ContentLength > g.limit {
		resp.Body.Close()
		return nil, &errResponseTooLarge{size: resp.ContentLength, limit: g.limit}
	}
	resp.Body = &cappedBody{r: resp.Body, left: g.limit, limit: g.limit}
	if resp.StatusCode >= 300 {
		// an error body that echoes the identifier or the token (in a
		// message, or in a redirect page's link) must not carry them into
		// errors and logs, and is kept only up to MaxErrorBodySize
		if err := redactErrorResponse(resp, req); err != nil {
			return nil, err
		}
	}
	return resp, nil
}

// cappedBody fails a read past its limit.
type cappedBody struct {
	r           io.ReadCloser
	left, limit int64
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// one more byte tells a body of exactly the limit from a longer one
		var one [1]byte
		if n, _ := b.r.Read(one[:]); n > 0 {
			return 0, &errResponseTooLarge{limit: b.limit}
		}
		return b.r.Read(p)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *cappedBody) Close() error { return b.r.Close() }

// retryUnauthorizedPolicy sends a request answered 401 once more: the
// bearer policy below it has then dropped its cached token, so the second
// try carries a freshly fetched one (a token can expire between the cache's
// check and the service's). A 401 is answered before the request is looked
// at, so this is safe for executions too. A request marked noResend
// (Session.Do of a non-idempotent or unrewindable request) is not sent again:
// a custom container may answer 401 itself after acting on it.
type retryUnauthorizedPolicy struct{}

// At most two tries in all carry a request through a 401: azcore's bearer
// policy itself sends the request again once when a 401 carries a claims
// challenge (CAE), and then this policy does not (sendCounterPolicy,
// below the bearer policy, counts what left). So one Execute POSTs the code
// at most twice for 401s, as documented.
func (retryUnauthorizedPolicy) Do(req *policy.Request) (*http.Response, error) {
	sends := &sendCounter{}
	req = req.WithContext(context.WithValue(req.Raw().Context(), sendCounterKey{}, sends))
	resp, err := req.Next()
	if err != nil || resp.StatusCode != http.StatusUnauthorized || req.Raw().Context().Err() != nil || sends.n.Load() >= 2 || noResend(req.Raw().Context()) {
		return resp, err
	}
	if err := req.RewindBody(); err != nil {
		return resp, nil
	}
	runtime.Drain(resp)
	return req.Next()
}

// sendCounter counts the requests that passed the bearer policy within one
// try of retryUnauthorizedPolicy.
type sendCounter struct{ n atomic.Int32 }

type sendCounterKey struct{}

// sendCounterPolicy sits just below the bearer policy.
type sendCounterPolicy struct{}

func (sendCounterPolicy) Do(req *policy.Request) (*http.Response, error) {
	if c, ok := req.Raw().Context().Value(sendCounterKey{}).(*sendCounter); ok {
		c.n.Add(1)
	}
	return req.Next()
}

// Where each REST operation lives. Most methods are the same four steps:
// startOp (API name and span), xCreateRequest, the pipeline and the status
// check (Client.do; an execution: beginExecution), xHandleResponse. The
// builder, xCreateRequest, makes every check before any I/O: the identifier
// (Session.validate), the arguments, and what the client's api-version
// supports (features; requireSessionManagement, errNeedsExecutions and
// errSubdirectories only word the refusal). The branch between the legacy
// and the executions contract (features.Legacy) is in the builder for the
// request and in the handler for the decoding (and in fileTarget, the
// check the three one-file builders share: the identifier, the name, and
// the legacy contract's refusal of sub-directories), nowhere else but in
// the refusal of the two poller constructors below. The other plain helpers
// builders call check no feature: splitFileName and relativeDir (file names),
// pathEscape, newMultipartBody (the upload's body), shellBody (the Shell
// command), executeTimeout, newOperationID and checkExecutionID
// (operation-ids), newExecuteRequest (the POST of an execution, code or
// Shell) and newRequest. DELETE
// session, DELETE files/{name} and the download have no handler (the status
// is the answer, or the body is streamed to the caller), nor has Session.Do
// (the container's response is returned as it is). A pager's Fetcher calls
// the first page's builder through runtime.FetcherForNextLink, so a check
// fails the first NextPage before any I/O; later pages follow nextLink
// (nextPageOptions), and listFilesHandleResponse gets the listed directory
// that listFilesCreateRequest checked for the first page (the caller may
// change *options between pages).
//
//	POST executions, POST code/execute  execute.go    Execute, BeginExecute: executeCreateRequest (newExecuteRequest),
//	                                                  beginExecution, executeHandleResponse
//	POST executions (Shell pools)       shell.go      ExecuteShell: shellCreateRequest (shellBody, newExecuteRequest);
//	                                    execute.go    beginExecution, executeHandleResponse
//	GET executions/{id}                 execute.go    GetExecution: getExecutionCreateRequest (newGetExecutionRequest),
//	                                                  getExecutionHandleResponse; an execution's own look-up and
//	                                                  polls (lookupExecution, executionPoller.Poll):
//	                                                  newGetExecutionRequest, getExecutionHandleResponse
//	POST files, POST files/upload       files.go      uploadFileCreateRequest, uploadFileHandleResponse
//	GET files                           files.go      NewListFilesPager: listFilesCreateRequest, listFilesHandleResponse
//	GET files/{name}                    files.go      getFileCreateRequest, getFileHandleResponse
//	GET files/{name}/content (legacy
//	    files/content/{name})           files.go      downloadFileCreateRequest (no handler)
//	DELETE files/{name}                 files.go      deleteFileCreateRequest (no handler)
//	GET session                         session.go    getCreateRequest, getHandleResponse
//	DELETE session                      session.go    deleteCreateRequest (no handler)
//	POST .management/stopSession        session.go    stopCreateRequest, stopHandleResponse
//	any method, any path (custom
//	    containers' pass-through)       container.go  Session.Do: doCreateRequest (no handler)
//	POST .management/getSession         container.go  getContainerSessionCreateRequest; session.go getHandleResponse
//	POST .management/listSessions       container.go  NewListContainerSessionsPager: listContainerSessionsCreateRequest;
//	                                    session.go    listSessionsHandleResponse
//	GET listSessions                    session.go    NewListSessionsPager: listSessionsCreateRequest,
//	                                                  listSessionsHandleResponse
//	GET metadata                        session.go    getMetadataCreateRequest, getMetadataHandleResponse
//
// Two constructors of an execution poller send nothing, so they have no
// builder, and make the checks of GET executions/{id} themselves before
// returning (the poller's Poll sends newGetExecutionRequest unchecked):
// ResumeExecution (legacy api-versions, identifier, operation-id,
// OutputStreamsMaxLength) and newPollerFromResumeToken (BeginExecute with a
// ResumeToken: legacy api-versions, identifier, and checkResumeToken: a
// token of the client's own poller, whose operation-id passes
// checkExecutionID).
//
// An execution of code passes through Session.Execute (or BeginExecute),
// startOp, executeCreateRequest (every check; the legacy or executions
// body; newExecuteRequest: the retry options with sendTracker.shouldRetry,
// the sendTracker, the operation-id header), then beginExecution: for a
// caller-chosen operation-id operationIDs.claim and lookupExecution
// (newGetExecutionRequest, getExecutionHandleResponse) before anything is
// sent, then the pipeline, then executeHandleResponse (lookupExecution
// again after a lost answer; outcomeUnknown), then newExecutionPoller, and
// while it runs executionPoller.Poll (newGetExecutionRequest,
// getExecutionHandleResponse) until executionPoller.Result; Execute turns a
// failed PollUntilDone into outcomeUnknown. A Shell execution is the same
// with Session.ExecuteShell and shellCreateRequest (shellBody) in place of
// Execute and executeCreateRequest, and shellResultFrom last.
//
// The pipeline newClient builds is, in order: azcore's
// includeResponsePolicy and telemetry policy, the caller's
// ClientOptions.PerCallPolicies, azcore's retry policy (for an execution
// with sendTracker.shouldRetry), then on every try redactErrorsPolicy,
// retryUnauthorizedPolicy and the bearer policy (with a credential),
// sendCounterPolicy, uploadBodyPolicy, sendTrackerPolicy, the caller's
// ClientOptions.PerRetryPolicies, azcore's httpHeaderPolicy, HTTP-trace,
// log and bodyDownloadPolicy, and the transport guardTransport (around the
// caller's ClientOptions.Transport). ARCHITECTURE.md adds the emulator's
// side of each operation and the rest of an execution's path.

// startOp sets the API name (for fakes) and opens a tracing span.
func (c *Client) startOp(ctx context.Context, name string) (context.Context, func(error)) {
	ctx = context.WithValue(ctx, runtime.CtxAPINameKey{}, name)
	return runtime.StartSpan(ctx, name, c.internal.Tracer(), nil)
}

func (c *Client) requireSessionManagement(op string) error {
	if !c.features.SessionManagement {
		return fmt.Errorf("%w: %s needs api-version %s or later (client uses %s)", ErrUnsupported, op, APIVersion20250202Preview, c.version)
	}
	return nil
}

// redactErrorsPolicy keeps the session identifier, a bearer secret, out of
// transport errors: net/http reports them as *url.Error holding the full
// request URL, query included. The identifier's value is replaced by
// REDACTED (as azcore's logs do); the rest of the error is kept, so errors.Is
// and errors.As see the same chain.
type redactErrorsPolicy struct{}

func (redactErrorsPolicy) Do(req *policy.Request) (*http.Response, error) {
	resp, err := req.Next()
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			ue.URL = redactIdentifier(ue.URL)
		}
	}
	return resp, err
}

// redactIdentifier replaces the value of the identifier query parameter of
// rawURL with REDACTED; a URL it cannot parse loses its whole query.
func redactIdentifier(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		if i := strings.IndexByte(rawURL, '?'); i >= 0 {
			return rawURL[:i]
		}
		return rawURL
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		u.RawQuery = ""
		return u.String()
	}
	if q.Has("identifier") {
		q.Set("identifier", "REDACTED")
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// hopelessError is a transport failure that trying again cannot mend: azcore's
// retry policy returns it at once (NonRetriable) instead of spending its
// retries (about 9 s with the default RetryOptions). Its message adds why;
// errors.Is and errors.As see the original chain.
type hopelessError struct {
	err error
	why string
}

func (e *hopelessError) Error() string { return e.err.Error() + " (not retried: " + e.why + ")" }
func (e *hopelessError) Unwrap() error { return e.err }
func (e *hopelessError) NonRetriable() {}

// notRetriedIfHopeless marks the transport errors no retry can fix: a
// server certificate the client does not trust, and a refused connection
// to a loopback address (nothing listens on that port of this machine: an
// emulator that is not running). Other errors are returned as they are.
func notRetriedIfHopeless(req *http.Request, err error) error {
	var (
		certErr     *tls.CertificateVerificationError
		unknownAuth x509.UnknownAuthorityError
		hostnameErr x509.HostnameError
		invalidCert x509.CertificateInvalidError
	)
	switch {
	case errors.As(err, &certErr), errors.As(err, &unknownAuth), errors.As(err, &hostnameErr), errors.As(err, &invalidCert):
		return &hopelessError{err: err, why: "the server's certificate is not trusted; for azsessionstest use Server.ClientOptions"}
	case errors.Is(err, syscall.ECONNREFUSED) && isLoopback(req.URL.Hostname()):
		return &hopelessError{err: err, why: "nothing listens on " + req.URL.Host + "; is the emulator running?"}
	}
	return err
}

// isLoopback reports whether host is localhost or a loopback IP address.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
