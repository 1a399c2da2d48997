package emulator

import (
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/azsessions/azsessions/internal/wire"
)

// getSession serves GET session: {identifier, createdAt, lastAccessedAt,
// expireAt, etag}. Like every call it slides lastAccessedAt.
func (h *Handler) getSession(c *call) *apiError {
	c.writeJSON(http.StatusOK, h.pool.view(c.sess))
	return nil
}

// endSession removes the call's session; its kernel and files go once the
// last request or execution holding it ends (running executions are canceled).
func (h *Handler) endSession(c *call) { h.pool.end(c.sess) }

// deleteSession serves DELETE session: 204.
func (h *Handler) deleteSession(c *call) *apiError {
	h.endSession(c)
	c.writeHeader(http.StatusNoContent)
	return nil
}

// stopSession serves POST .management/stopSession (2025-02-02-preview and
// later): 200 text/plain "Session {id} in session pool {pool} stopped.".
func (h *Handler) stopSession(c *call) *apiError {
	h.endSession(c)
	c.w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	c.writeHeader(http.StatusOK)
	_, _ = c.w.Write([]byte("Session " + c.ident + " in session pool " + h.opt.PoolName + " stopped."))
	return nil
}

// sessionListBody is the answer of GET listSessions; unlike wire.SessionList
// it always has the sessions array, even when empty.
type sessionListBody struct {
	Sessions []wire.Session `json:"sessions"`
	NextLink *string        `json:"nextLink,omitempty"`
}

// listSessions serves GET listSessions: the live sessions, oldest first,
// ListSessionsPageSize per page from skip, with nextLink (absolute) when more
// follow. It neither needs nor slides an identifier.
func (h *Handler) listSessions(c *call) *apiError {
	page, next, err := h.sessionPage(c, "/listSessions")
	if err != nil {
		return err
	}
	c.writeJSON(http.StatusOK, sessionListBody{Sessions: page, NextLink: next})
	return nil
}

// sessionPage is the page of live sessions, oldest first, that a list
// route (GET listSessions, POST .management/listSessions) answers:
// ListSessionsPageSize sessions from the query's skip (a non-negative
// integer, default 0), never nil, and the absolute link to route's next
// page (nil on the last).
func (h *Handler) sessionPage(c *call, route string) ([]wire.Session, *string, *apiError) {
	skip := 0
	if s := c.r.URL.Query().Get("skip"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return nil, nil, badRequest("skip must be a non-negative integer")
		}
		skip = n
	}
	all := h.pool.list()
	if skip >= len(all) {
		return []wire.Session{}, nil, nil
	}
	end := min(skip+h.opt.ListSessionsPageSize, len(all))
	var next *string
	if end < len(all) {
		q := url.Values{"api-version": {c.version}, "skip": {strconv.Itoa(end)}}
		link := baseURL(c.r) + h.poolPath + route + "?" + q.Encode()
		next = &link
	}
	return all[skip:end], next, nil
}

// baseURL is scheme://host of the request.
func baseURL(r *http.Request) string {
	if r.TLS != nil {
		return "https://" + r.Host
	}
	return "http://" + r.Host
}

// metadata serves GET metadata from Executor.Info: runtimes (python or node
// and its version), preInstalledPackages (the packages found), jupyterKernel (IPython
// when found), createdAt and lastUpdatedAt (when the handler started).
func (h *Handler) metadata(c *call) *apiError {
	info := h.exec.Info()
	md := wire.Metadata{Runtimes: []wire.NameVersion{}, PreInstalledPackages: []wire.NameVersion{}, CreatedAt: &h.started, LastUpdatedAt: &h.started}
	if info.PythonVersion != "" {
		md.Runtimes = append(md.Runtimes, wire.NameVersion{Name: "python", Version: info.PythonVersion})
	}
	if info.NodeVersion != "" {
		// As the spec's SessionPoolMetadata_Get.json example (a Node pool) names it.
		md.Runtimes = append(md.Runtimes, wire.NameVersion{Name: "node", Version: info.NodeVersion})
	}
	for name, v := range info.Packages {
		md.PreInstalledPackages = append(md.PreInstalledPackages, wire.NameVersion{Name: name, Version: v})
	}
	sort.Slice(md.PreInstalledPackages, func(i, j int) bool { return md.PreInstalledPackages[i].Name < md.PreInstalledPackages[j].Name })
	for name, v := range info.Packages {
		if strings.EqualFold(name, "ipython") || strings.EqualFold(name, "ipykernel") {
			md.JupyterKernel = &wire.JupyterKernel{Name: "python3", Version: v, ProjectURL: "https://github.com/ipython/ipython", Description: "IPython kernel for Python code executions"}
			break
		}
	}
	c.writeJSON(http.StatusOK, md)
	return nil
}
