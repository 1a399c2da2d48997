package emulator

import (
	"net/http"
	"strings"

	"github.com/azsessions/azsessions/internal/wire"
)

// Operation names of the routes, the same across api-versions. Handler.Route
// returns them and the azsessionstest fault injection matches on them.
const (
	OpExecute       = "execute"       // POST code/execute, POST executions
	OpGetExecution  = "getExecution"  // GET executions/{id}
	OpUpload        = "upload"        // POST files/upload, POST files
	OpListFiles     = "listFiles"     // GET files
	OpGetFile       = "getFile"       // GET files/{name}
	OpDownload      = "download"      // GET files/content/{name}, GET files/{name}/content
	OpDeleteFile    = "deleteFile"    // DELETE files/{name}
	OpGetSession    = "getSession"    // GET session
	OpDeleteSession = "deleteSession" // DELETE session
	OpListSessions  = "listSessions"  // GET listSessions
	OpMetadata      = "metadata"      // GET metadata
	OpStopSession   = "stopSession"   // POST .management/stopSession
)

// scope says how a route uses the session identifier.
type scope int

const (
	scopeCreate   scope = iota // identifier required; the session is created on first use
	scopeExisting              // identifier required; an unknown session is an error
	scopePool                  // no identifier
)

// route is one entry of the routing table: the single place that says which
// method and path serve which operation on which api-versions.
type route struct {
	op     string
	method string
	// path is the template relative to the pool path; "{x}" matches one
	// segment and "{x...}" the rest of the path.
	path   string
	legacy bool                     // served on the legacy versions (else on the new ones)
	need   func(wire.Features) bool // extra feature the version must have
	scope  scope
	// missing replaces SessionWithIdentifierNotFound for scopeExisting routes.
	missing *apiError
	handle  func(h *Handler, c *call) *apiError
}

func (rt *route) template() string { return rt.method + " " + rt.path }

func (rt *route) matchPath(segs []string) (map[string]string, bool) {
	tpl := strings.Split(rt.path, "/")
	params := map[string]string{}
	for i, t := range tpl {
		if strings.HasPrefix(t, "{") && strings.HasSuffix(t, "...}") {
			if i >= len(segs) {
				return nil, false
			}
			params[strings.TrimSuffix(t[1:], "...}")] = strings.Join(segs[i:], "/")
			return params, true
		}
		if i >= len(segs) {
			return nil, false
		}
		if strings.HasPrefix(t, "{") {
			if segs[i] == "" {
				return nil, false
			}
			params[t[1:len(t)-1]] = segs[i]
			continue
		}
		if t != segs[i] {
			return nil, false
		}
	}
	return params, len(segs) == len(tpl)
}

func sessionManagement(f wire.Features) bool { return f.SessionManagement }
func stopSession(f wire.Features) bool       { return f.StopSession }

// routes is tried in order; more specific paths come first.
var routes = []route{
	// Legacy contract.
	{op: OpExecute, method: http.MethodPost, path: "code/execute", legacy: true, handle: (*Handler).execute},
	{op: OpUpload, method: http.MethodPost, path: "files/upload", legacy: true, handle: (*Handler).upload},
	{op: OpListFiles, method: http.MethodGet, path: "files", legacy: true, handle: (*Handler).listFiles},
	{op: OpDownload, method: http.MethodGet, path: "files/content/{name...}", legacy: true, handle: (*Handler).download},
	{op: OpGetFile, method: http.MethodGet, path: "files/{name...}", legacy: true, handle: (*Handler).getFile},
	{op: OpDeleteFile, method: http.MethodDelete, path: "files/{name...}", legacy: true, handle: (*Handler).deleteFile},

	// New contract.
	{op: OpExecute, method: http.MethodPost, path: "executions", handle: (*Handler).execute},
	{op: OpGetExecution, method: http.MethodGet, path: "executions/{id}", scope: scopeExisting,
		missing: errExecutionNotFound, handle: (*Handler).getExecution},
	{op: OpUpload, method: http.MethodPost, path: "files", handle: (*Handler).upload},
	{op: OpListFiles, method: http.MethodGet, path: "files", handle: (*Handler).listFiles},
	{op: OpDownload, method: http.MethodGet, path: "files/{name}/content", handle: (*Handler).download},
	{op: OpGetFile, method: http.MethodGet, path: "files/{name}", handle: (*Handler).getFile},
	{op: OpDeleteFile, method: http.MethodDelete, path: "files/{name}", handle: (*Handler).deleteFile},
	{op: OpGetSession, method: http.MethodGet, path: "session", need: sessionManagement, scope: scopeExisting, handle: (*Handler).getSession},
	{op: OpDeleteSession, method: http.MethodDelete, path: "session", need: sessionManagement, scope: scopeExisting, handle: (*Handler).deleteSession},
	{op: OpListSessions, method: http.MethodGet, path: "listSessions", need: sessionManagement, scope: scopePool, handle: (*Handler).listSessions},
	{op: OpMetadata, method: http.MethodGet, path: "metadata", need: sessionManagement, scope: scopePool, handle: (*Handler).metadata},
	{op: OpStopSession, method: http.MethodPost, path: ".management/stopSession", need: stopSession, scope: scopeExisting, handle: (*Handler).stopSession},
}

var errExecutionNotFound = errorf(http.StatusNotFound, CodeExecutionNotFound, "no execution with this id in this session")
