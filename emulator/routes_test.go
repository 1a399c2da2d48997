package emulator_test

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/azsessions/azsessions/emulator"
	"github.com/azsessions/azsessions/internal/wire"
)

// TestRouteTable checks, for every api-version, which routes exist (any
// status but the 404 "no such route") and which answer 404 JSON.
func TestRouteTable(t *testing.T) {
	type rt struct{ method, path string }
	legacy := []rt{{"POST", "code/execute"}, {"POST", "files/upload"}, {"GET", "files"}, {"GET", "files/content/x"}, {"GET", "files/x"}, {"DELETE", "files/x"}}
	modern := []rt{{"POST", "executions"}, {"GET", "executions/x"}, {"POST", "files"}, {"GET", "files"}, {"GET", "files/x"}, {"GET", "files/x/content"}, {"DELETE", "files/x"}}
	mgmt := []rt{{"GET", "session"}, {"DELETE", "session"}, {"GET", "listSessions"}, {"GET", "metadata"}}
	stop := []rt{{"POST", ".management/stopSession"}}
	legacyOnly := []rt{{"POST", "code/execute"}, {"POST", "files/upload"}}
	modernOnly := []rt{{"POST", "executions"}, {"GET", "executions/x"}, {"GET", "files/x/content"}}
	has := map[string][]rt{
		wire.V20240202Preview: legacy, wire.V20240802Preview: legacy,
		wire.V20241002Preview: modern,
		wire.V20250202Preview: append(append(append([]rt{}, modern...), mgmt...), stop...),
		wire.V20251002Preview: append(append(append([]rt{}, modern...), mgmt...), stop...),
	}
	lacks := map[string][]rt{
		wire.V20240202Preview: append(append(append([]rt{}, modernOnly[:2]...), mgmt...), stop...),
		wire.V20240802Preview: append(append(append([]rt{}, modernOnly[:2]...), mgmt...), stop...),
		wire.V20241002Preview: append(append(append([]rt{}, legacyOnly...), mgmt...), stop...),
		wire.V20250202Preview: legacyOnly,
		wire.V20251002Preview: legacyOnly,
	}
	e := newEnv(t, emulator.Options{})
	for _, v := range wire.Versions {
		for _, r := range has[v] {
			t.Run(v+" has "+r.method+" "+r.path, func(t *testing.T) {
				res := e.do(r.method, e.url(r.path, qv(v, "sess-routes")), nil, nil)
				if res.status == http.StatusNotFound {
					require.NotEqual(t, emulator.CodeRouteNotFound, res.header.Get("x-ms-error-code"), "%s", res.body)
				}
			})
		}
		for _, r := range lacks[v] {
			t.Run(v+" lacks "+r.method+" "+r.path, func(t *testing.T) {
				res := e.do(r.method, e.url(r.path, qv(v, "sess-routes")), nil, nil)
				requireError(t, res, http.StatusNotFound, emulator.CodeRouteNotFound)
			})
		}
	}
	t.Run("wrong method", func(t *testing.T) {
		requireError(t, e.do("PUT", e.url("executions", qv(wire.V20251002Preview, "sess-routes")), nil, nil), http.StatusNotFound, emulator.CodeRouteNotFound)
	})
	t.Run("outside the pool path", func(t *testing.T) {
		for _, p := range []string{"/executions", "/", "/subscriptions/x/resourceGroups/local/sessionPools/emulator/executions"} {
			r := e.do("POST", e.srv.URL+p+"?api-version="+wire.V20251002Preview+"&identifier=sess-routes", nil, nil)
			requireError(t, r, http.StatusNotFound, emulator.CodeRouteNotFound)
		}
	})
	t.Run("unknown route", func(t *testing.T) {
		requireError(t, e.get("nothing/here", qv(wire.V20251002Preview, "sess-routes")), http.StatusNotFound, emulator.CodeRouteNotFound)
	})
}

func TestValidation(t *testing.T) {
	e := newEnv(t, emulator.Options{})
	t.Run("api-version", func(t *testing.T) {
		requireError(t, e.get("files", url.Values{"identifier": {"sess-v"}}), http.StatusBadRequest, emulator.CodeInvalidAPIVersion)
		requireError(t, e.get("files", qv("2023-01-01", "sess-v")), http.StatusBadRequest, emulator.CodeInvalidAPIVersion)
		requireError(t, e.get("files", qv("2024-09-01", "sess-v")), http.StatusBadRequest, emulator.CodeInvalidAPIVersion)
	})
	tests := []struct {
		version, ident string
	}{
		{wire.V20240202Preview, ""},
		{wire.V20240202Preview, "abc"}, // too short
		{wire.V20241002Preview, "secret\\backslash"},
		{wire.V20250202Preview, strings.Repeat("s", 257)},
		{wire.V20251002Preview, "secret with space"},
		{wire.V20251002Preview, "sec"},
		{wire.V20251002Preview, strings.Repeat("s", 129)},
	}
	for _, tt := range tests {
		t.Run("identifier "+tt.version+" "+tt.ident[:min(len(tt.ident), 20)], func(t *testing.T) {
			for _, route := range []string{"files", "session"} {
				f, _ := wire.Lookup(tt.version)
				if route == "session" && !f.SessionManagement {
					continue
				}
				r := e.get(route, qv(tt.version, tt.ident))
				requireError(t, r, http.StatusBadRequest, wire.CodeSessionRequestValidationFailed)
				if tt.ident != "" {
					require.NotContains(t, bodyWithoutTraceID(t, r), tt.ident)
				}
			}
		})
	}
	require.Equal(t, 0, e.h.Stats().Sessions)
}

func TestIdentifierRoundTrip(t *testing.T) {
	e := newEnv(t, emulator.Options{})
	v := wire.V20251002Preview
	idents := []string{"a/b/c", "x#frag", "p&q=r", "100%25", "semi;colon", "plus+sign", "mix/#&%;+`~!"}
	for _, id := range idents {
		t.Run(id, func(t *testing.T) {
			r := e.postJSON("executions", qv(v, id), map[string]any{"code": "set:k=" + id, "timeoutInSeconds": 60}, map[string]string{"operation-id": "rt"})
			require.Equal(t, http.StatusOK, r.status, "%s", r.body)
			require.Equal(t, id, r.json(t)["identifier"])
			loc, err := url.Parse(r.header.Get("Operation-Location"))
			require.NoError(t, err)
			require.Equal(t, id, loc.Query().Get("identifier"))
			require.Equal(t, id, e.stdout(v, id, "get:k"))
			require.Equal(t, id, e.get("session", qv(v, id)).json(t)["identifier"])
		})
	}
	// Each identifier is its own session and listSessions shows them decoded.
	body := e.get("listSessions", qv(v, "")).json(t)
	var got []string
	for _, s := range body["sessions"].([]any) {
		got = append(got, s.(map[string]any)["identifier"].(string))
	}
	require.ElementsMatch(t, idents, got)
	// A raw "+" in a query is a space, which 2025-10 does not allow.
	r := e.do(http.MethodGet, e.url("session", nil)+"?api-version="+v+"&identifier=plus+sign", nil, nil)
	requireError(t, r, http.StatusBadRequest, wire.CodeSessionRequestValidationFailed)
}

func TestRequireToken(t *testing.T) {
	e := newEnv(t, emulator.Options{RequireToken: true})
	v := wire.V20251002Preview
	requireError(t, e.get("files", qv(v, "sess-tok")), http.StatusUnauthorized, emulator.CodeUnauthorized)
	requireError(t, e.do("GET", e.url("files", qv(v, "sess-tok")), nil, map[string]string{"Authorization": "Basic abc"}), http.StatusUnauthorized, emulator.CodeUnauthorized)
	r := e.do("GET", e.url("files", qv(v, "sess-tok")), nil, map[string]string{"Authorization": "Bearer secret-token"})
	require.Equal(t, http.StatusOK, r.status)

	// Without RequireToken a token is accepted and not required.
	e2 := newEnv(t, emulator.Options{})
	require.Equal(t, http.StatusOK, e2.do("GET", e2.url("files", qv(v, "sess-tok")), nil, map[string]string{"Authorization": "Bearer secret-token"}).status)
	require.Equal(t, http.StatusOK, e2.get("files", qv(v, "sess-tok")).status)
}

func TestLogsHideSecrets(t *testing.T) {
	e := newEnv(t, emulator.Options{})
	v := wire.V20251002Preview
	hdr := map[string]string{"Authorization": "Bearer tok-SECRET"}
	e.do("GET", e.url("files", qv(v, "ident-SECRET")), nil, hdr)
	e.exec(v, "ident-SECRET", "print:x", hdr)
	e.get("session", qv(v, "ident-NOTFOUND"))
	e.get("files", qv(v, "bad ident-INVALID"))
	e.get("files/x/content", qv(v, "ident-SECRET", "path", "dir-SECRET"))
	logs := e.logs.String()
	require.Contains(t, logs, "route=\"GET files\"")
	require.Contains(t, logs, "route=\"POST executions\"")
	require.Contains(t, logs, "status=404")
	for _, s := range []string{"SECRET", "NOTFOUND", "INVALID", "api-version", "identifier="} {
		require.NotContains(t, logs, s)
	}
}

func TestHandlerRoute(t *testing.T) {
	e := newEnv(t, emulator.Options{})
	tests := []struct{ method, target, op, tpl string }{
		{"POST", "code/execute/?api-version=" + wire.V20240202Preview, emulator.OpExecute, "POST code/execute"},
		{"POST", "executions?api-version=" + wire.V20251002Preview, emulator.OpExecute, "POST executions"},
		{"GET", "files/a/content?api-version=" + wire.V20241002Preview, emulator.OpDownload, "GET files/{name}/content"},
		{"GET", "files/content/a/b?api-version=" + wire.V20240802Preview, emulator.OpDownload, "GET files/content/{name...}"},
		{"POST", ".management/stopSession?api-version=" + wire.V20251002Preview, emulator.OpStopSession, "POST .management/stopSession"},
	}
	for _, tt := range tests {
		req, err := http.NewRequest(tt.method, e.srv.URL+e.h.PoolPath()+"/"+tt.target, nil)
		require.NoError(t, err)
		op, tpl, ok := e.h.Route(req)
		require.True(t, ok, tt.target)
		require.Equal(t, tt.op, op)
		require.Equal(t, tt.tpl, tpl)
	}
	req, _ := http.NewRequest("GET", e.srv.URL+"/elsewhere", nil)
	_, _, ok := e.h.Route(req)
	require.False(t, ok)
}

func TestNewHandlerErrors(t *testing.T) {
	_, err := emulator.NewHandler(emulator.Options{})
	require.Error(t, err)
	ex := emulator.ScriptedExecutor(func(context.Context, string) emulator.ExecutionResult { return emulator.ExecutionResult{} })
	defer ex.Close()
	_, err = emulator.NewHandler(emulator.Options{Executor: ex, Cooldown: -1})
	require.Error(t, err)
	_, err = emulator.NewHandler(emulator.Options{Executor: ex, PoolName: "a/b"})
	require.Error(t, err)
}

func TestCloseRemovesData(t *testing.T) {
	s := newScript()
	var mu sync.Mutex
	var dirs []string
	ran := func() int { mu.Lock(); defer mu.Unlock(); return len(dirs) }
	ex := emulator.ScriptedExecutor(func(ctx context.Context, code string) emulator.ExecutionResult {
		mu.Lock()
		dirs = append(dirs, emulator.DataDirFromContext(ctx))
		mu.Unlock()
		return s.run(ctx, code)
	})
	h, err := emulator.NewHandler(emulator.Options{Executor: ex})
	require.NoError(t, err)
	e := &env{t: t, h: h, script: s}
	e.srv = newServer(h)
	e.stdout(wire.V20251002Preview, "sess-close1", "write:a=b")
	e.stdout(wire.V20251002Preview, "sess-close2", "write:a=b")
	// An async execution still running when Close comes is canceled.
	r := e.postJSON("executions", qv(wire.V20251002Preview, "sess-close2"), map[string]any{"executionType": "Asynchronous", "code": "wait:forever", "timeoutInSeconds": 60}, nil)
	require.Equal(t, http.StatusOK, r.status)
	// The answer comes before the execution starts: wait until it runs.
	require.Eventually(t, func() bool { return ran() == 3 }, time.Minute, time.Millisecond)
	e.srv.Close()
	require.NoError(t, h.Close())
	require.NoError(t, h.Close())
	require.Len(t, dirs, 3)
	for _, d := range dirs {
		_, err := os.Stat(d)
		require.ErrorIs(t, err, os.ErrNotExist)
	}
}
