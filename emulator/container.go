package emulator

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/azsessions/azsessions/internal/kernel"
	"github.com/azsessions/azsessions/internal/wire"
)

// PoolTypeCustomContainer is a custom-container session pool: each session
// runs Options.ContainerCommand in its sandbox, and every request that is
// not a .management route is forwarded to it (see "Custom containers" in
// the package documentation).
const PoolTypeCustomContainer = "CustomContainer"

// DefaultContainerStartTimeout is the default of Options.ContainerStartTimeout.
const DefaultContainerStartTimeout = time.Minute

// Error codes of custom-container pools (emulator-specific: no public source
// shows what the service answers when the container fails).
const (
	// CodeContainerStartFailed (502, or 504 when it did not listen in time):
	// a new session's command exited before it listened on the target port,
	// or did not listen within Options.ContainerStartTimeout.
	CodeContainerStartFailed = "ContainerStartFailed"
	// CodeContainerUnreachable (502): the request could not be forwarded to
	// the session's container (its command exited, or the connection broke
	// before an answer came). A session whose command exited is ended.
	CodeContainerUnreachable = "ContainerUnreachable"
)

// OpProxy is the operation of a request a custom-container pool forwards to
// the session's container (Handler.Route; any method and path).
const OpProxy = "proxy"

// proxyRoute serves every request of a custom-container pool outside
// .management/: any method, any path, no api-version.
var proxyRoute = route{op: OpProxy, method: "*", path: "{path...}", scope: scopeCreate, handle: (*Handler).proxy}

// containerRoutes are the .management routes of a custom-container pool
// (Learn, articles/container-apps/sessions-custom-container.md, ms.date
// 2026-03-18: all POST, with api-version=2025-02-02-preview).
var containerRoutes = []route{
	{op: OpStopSession, method: http.MethodPost, path: ".management/stopSession", need: stopSession, scope: scopeExisting, handle: (*Handler).stopSession},
	{op: OpGetSession, method: http.MethodPost, path: ".management/getSession", need: sessionManagement, scope: scopeExisting, handle: (*Handler).getContainerSession},
	{op: OpListSessions, method: http.MethodPost, path: ".management/listSessions", need: sessionManagement, scope: scopePool, handle: (*Handler).listContainerSessions},
}

// checkContainerOptions validates the custom-container fields of opt.
func checkContainerOptions(opt *Options) error {
	if opt.PoolType != PoolTypeCustomContainer {
		if opt.ContainerCommand != "" || opt.TargetPort != 0 || opt.ContainerDir != "" {
			return errors.New("emulator: Options.ContainerCommand, TargetPort and ContainerDir need PoolType CustomContainer")
		}
		return nil
	}
	if strings.TrimSpace(opt.ContainerCommand) == "" {
		return errors.New("emulator: a CustomContainer pool needs Options.ContainerCommand (the command that starts the container's HTTP server)")
	}
	if opt.TargetPort < 1 || opt.TargetPort > 65535 {
		return errors.New("emulator: a CustomContainer pool needs Options.TargetPort, the port its command listens on (1-65535)")
	}
	if opt.ContainerStartTimeout < 0 {
		return errors.New("emulator: negative Options.ContainerStartTimeout")
	}
	if opt.ContainerDir != "" {
		if fi, err := os.Stat(opt.ContainerDir); err != nil || !fi.IsDir() {
			return fmt.Errorf("emulator: Options.ContainerDir %s is not a directory", opt.ContainerDir)
		}
	}
	if opt.ContainerStartTimeout == 0 {
		opt.ContainerStartTimeout = DefaultContainerStartTimeout
	}
	return nil
}

// startContainer is the pool's start hook on custom-container pools: it
// starts the command in the new session's kernel (the cold start).
func (h *Handler) startContainer(ctx context.Context, k Kernel) error {
	ck, ok := k.(kernel.Container)
	if !ok {
		return errNoContainers
	}
	return ck.StartContainer(ctx, kernel.ContainerSpec{Command: h.opt.ContainerCommand, Port: h.opt.TargetPort, StartTimeout: h.opt.ContainerStartTimeout, Dir: h.opt.ContainerDir})
}

// errNoContainers: the Executor's kernels cannot run a container.
var errNoContainers = errors.New("emulator: the executor's kernels cannot run a custom container (use NewSandboxExecutor)")

// containerStartError is the answer to a session whose container did not
// start, or nil when err is something else.
func containerStartError(err error) *apiError {
	var msg string
	status := http.StatusBadGateway
	switch {
	case errors.Is(err, kernel.ErrContainerStartTimeout):
		status = http.StatusGatewayTimeout
	case errors.Is(err, kernel.ErrContainerExited):
	case errors.Is(err, errNoContainers):
		return internal("%s", errNoContainers.Error())
	default:
		return nil
	}
	// The kernel's error says what the command wrote to stderr: it ran
	// before any request reached it, so it has seen no identifier.
	msg = err.Error()
	if i := strings.Index(msg, "sandbox: "); i >= 0 {
		msg = msg[i+len("sandbox: "):]
	}
	return errorf(status, CodeContainerStartFailed, "the session's container did not start: %s", msg)
}

// matchContainer finds the route of a request to a custom-container pool:
// a .management route (which needs an api-version) or the proxy (which
// does not). rest is the escaped path below the pool path, without its
// leading slash.
func (h *Handler) matchContainer(r *http.Request, rest string) (*route, map[string]string, string, *apiError) {
	first, _, _ := strings.Cut(rest, "/")
	if first != ".management" {
		return &proxyRoute, map[string]string{"path": "/" + rest}, r.URL.Query().Get("api-version"), nil
	}
	version := r.URL.Query().Get("api-version")
	feat, ok := wire.Lookup(version)
	if !ok {
		if version == "" {
			return nil, nil, "", errorf(http.StatusBadRequest, CodeInvalidAPIVersion, "the api-version query parameter is required; supported: %s", strings.Join(wire.Versions, ", "))
		}
		return nil, nil, "", errorf(http.StatusBadRequest, CodeInvalidAPIVersion, "unsupported api-version; supported: %s", strings.Join(wire.Versions, ", "))
	}
	segs := strings.Split(strings.TrimSuffix(rest, "/"), "/")
	for i := range containerRoutes {
		rt := &containerRoutes[i]
		if rt.method != r.Method || (rt.need != nil && !rt.need(feat)) {
			continue
		}
		if params, ok := rt.matchPath(segs); ok {
			return rt, params, version, nil
		}
	}
	return nil, nil, version, errorf(http.StatusNotFound, CodeRouteNotFound, "api-version %s has no %s route at this path (a custom-container pool has POST .management/stopSession, POST .management/getSession and POST .management/listSessions on 2025-02-02-preview and later; every other path goes to the container)", version, r.Method)
}

// getContainerSession serves POST .management/getSession: the SessionView
// {identifier, etag, expiresAt, createdAt, lastAccessedAt} (expiresAt, not
// the code-interpreter pools' expireAt).
func (h *Handler) getContainerSession(c *call) *apiError {
	v := h.pool.view(c.sess)
	v.ExpiresAt, v.ExpireAt = v.ExpireAt, nil
	c.writeJSON(http.StatusOK, v)
	return nil
}

// containerSessionList is the answer of POST .management/listSessions:
// value, count (of this page) and nextLink (null on the last page).
type containerSessionList struct {
	Value    []wire.Session `json:"value"`
	Count    int            `json:"count"`
	NextLink *string        `json:"nextLink"`
}

// listContainerSessions serves POST .management/listSessions?skip=N:
// ListSessionsPageSize sessions a page, oldest first.
func (h *Handler) listContainerSessions(c *call) *apiError {
	page, next, err := h.sessionPage(c, "/.management/listSessions")
	if err != nil {
		return err
	}
	for i := range page {
		v := &page[i]
		v.ExpiresAt, v.ExpireAt = v.ExpireAt, nil
	}
	c.writeJSON(http.StatusOK, containerSessionList{Value: page, Count: len(page), NextLink: next})
	return nil
}

// transport is the session's HTTP transport to its container: every
// connection is a DialContainer of the session's kernel. Idle connections
// are kept for the next request (closed with the session).
func (s *session) containerTransport() (*http.Transport, error) {
	s.proxyMu.Lock()
	defer s.proxyMu.Unlock()
	if s.proxyClosed {
		return nil, kernel.ErrContainerExited
	}
	if s.transport == nil {
		ck, ok := s.kernel.(kernel.Container)
		if !ok {
			return nil, errNoContainers
		}
		s.transport = &http.Transport{
			DialContext:         func(ctx context.Context, _, _ string) (net.Conn, error) { return ck.DialContainer(ctx) },
			MaxIdleConnsPerHost: 16,
			IdleConnTimeout:     90 * time.Second,
			// The caller's Accept-Encoding and the container's
			// Content-Encoding pass through untouched.
			DisableCompression: true,
			// A container's answer headers are held in memory while they
			// are read: the same bound as the emulator's own request
			// headers, not the Transport's 10 MiB per request.
			MaxResponseHeaderBytes: http.DefaultMaxHeaderBytes,
		}
	}
	return s.transport, nil
}

// closeTransport closes the session's idle connections to its container
// (the session ended).
func (s *session) closeTransport() {
	s.proxyMu.Lock()
	defer s.proxyMu.Unlock()
	s.proxyClosed = true
	if s.transport != nil {
		s.transport.CloseIdleConnections()
	}
}

// discardLog is the ReverseProxy's error log: errors are answered (and
// logged without the URL, which carries the identifier) by proxyError.
var discardLog = log.New(discardWriter{}, "", 0)

type discardWriter struct{}

func (discardWriter) Write(p []byte) (int, error) { return len(p), nil }

// proxy serves every request of a custom-container pool outside
// .management/: it is forwarded to the session's container at
// http://127.0.0.1:{TargetPort}{path}?{query} with the caller's method,
// headers (less Authorization and the hop-by-hop ones) and body, both bodies
// streamed; the container's answer goes back as it is.
func (h *Handler) proxy(c *call) *apiError {
	tr, err := c.sess.containerTransport()
	if err != nil {
		h.pool.end(c.sess)
		return errorf(http.StatusBadGateway, CodeContainerUnreachable, "the session's container is gone (%v); the next request with this identifier starts a new session", err)
	}
	path := c.params["path"]
	host := "127.0.0.1:" + strconv.Itoa(h.opt.TargetPort)
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			u := *pr.In.URL
			u.Scheme, u.Host, u.User = "http", host, nil
			u.RawPath = path
			u.Path, _ = url.PathUnescape(path) // already checked by matchContainer's caller
			pr.Out.URL = &u
			pr.Out.Host = ""
			// The caller's token is for the pool, not for the code in it.
			pr.Out.Header.Del("Authorization")
		},
		Transport:     tr,
		FlushInterval: -1, // stream the answer as it comes
		ErrorLog:      discardLog,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			h.proxyError(c, w, r, err)
		},
	}
	// Full duplex: the container may answer while the request body still
	// streams in (net/http's HTTP/1 server would otherwise end the body at
	// the first byte of the answer).
	_ = http.NewResponseController(c.w).EnableFullDuplex()
	// The request ends with its session (stopSession, the emulator's
	// shutdown): its held reference would otherwise keep the stopped
	// session's container running, unlisted, for as long as the caller
	// keeps the connection (a never-ending answer, an upgraded connection).
	ctx, cancel := context.WithCancel(c.r.Context())
	defer cancel()
	defer context.AfterFunc(c.sess.ctx, cancel)()
	rp.ServeHTTP(c.w, c.r.WithContext(ctx))
	return nil
}

// proxyError answers a request that could not be forwarded, or whose
// answer broke before its headers came.
func (h *Handler) proxyError(c *call, w http.ResponseWriter, r *http.Request, err error) {
	if c.sess.ctx.Err() != nil && c.r.Context().Err() == nil {
		writeError(w, errorf(http.StatusBadGateway, CodeContainerUnreachable, "the session was stopped while its request was in flight"))
		return
	}
	if r.Context().Err() != nil {
		// The caller went away: no one reads an answer.
		w.WriteHeader(http.StatusBadGateway)
		return
	}
	if errors.Is(err, kernel.ErrContainerExited) {
		h.pool.end(c.sess)
		writeError(w, errorf(http.StatusBadGateway, CodeContainerUnreachable, "the session's container has exited; the session is ended and the next request with its identifier starts a new one"))
		return
	}
	// Transport errors may quote the URL, whose query holds the identifier:
	// neither the log nor the answer repeats them.
	h.log.Warn("forwarding a request to a container failed", "port", h.opt.TargetPort, "err", redactContainerError(err, c.ident))
	writeError(w, errorf(http.StatusBadGateway, CodeContainerUnreachable, "the request could not be forwarded to the session's container on port %d (it closed the connection or did not answer)", h.opt.TargetPort))
}

// quotedText is a Go-quoted string in an error's text.
var quotedText = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

// redactContainerError is err's text for the log without what the
// container wrote: net/http's errors quote the bytes of a malformed answer,
// which the container controls (it may echo the identifier it was sent), so
// quoted text is dropped and any remaining identifier replaced.
func redactContainerError(err error, ident string) string {
	s := quotedText.ReplaceAllString(redactURLError(err), `"…"`)
	if ident != "" {
		s = strings.ReplaceAll(s, ident, "<identifier>")
	}
	return s
}

// redactURLError drops the URL of a *url.Error.
func redactURLError(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Op + ": " + ue.Err.Error()
	}
	return err.Error()
}
