package emulator_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/azsessions/azsessions/emulator"
	"github.com/azsessions/azsessions/internal/wire"
)

func parseTime(t *testing.T, v any) time.Time {
	t.Helper()
	tm, err := time.Parse(time.RFC3339Nano, v.(string))
	require.NoError(t, err)
	return tm
}

func TestSessionGetAndSlidingExpiry(t *testing.T) {
	for _, v := range []string{wire.V20250202Preview, wire.V20251002Preview} {
		t.Run(v, func(t *testing.T) {
			e := newEnv(t, emulator.Options{Cooldown: 5 * time.Minute})
			t0 := e.clock.Now()
			e.stdout(v, "sess-get", "print:x")
			e.clock.Advance(2 * time.Minute)
			r := e.get("session", qv(v, "sess-get"))
			require.Equal(t, http.StatusOK, r.status, "%s", r.body)
			m := r.json(t)
			require.Equal(t, []string{"createdAt", "etag", "expireAt", "identifier", "lastAccessedAt"}, keys(m))
			require.Equal(t, "sess-get", m["identifier"])
			require.Regexp(t, `^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`, m["etag"])
			require.True(t, t0.Equal(parseTime(t, m["createdAt"])))
			last := parseTime(t, m["lastAccessedAt"])
			require.True(t, t0.Add(2*time.Minute).Equal(last))
			require.True(t, last.Add(5*time.Minute).Equal(parseTime(t, m["expireAt"])))

			// Each call slides the expiry: 4 + 4 minutes is past the first expiry.
			e.clock.Advance(4 * time.Minute)
			require.Equal(t, "x\n", e.stdout(v, "sess-get", "print:x"))
			e.clock.Advance(4 * time.Minute)
			m2 := e.get("session", qv(v, "sess-get")).json(t)
			require.Equal(t, m["etag"], m2["etag"], "same container")
		})
	}
}

func TestSessionExpiry(t *testing.T) {
	for _, v := range append(append([]string{}, legacyVersions...), newVersions...) {
		t.Run(v, func(t *testing.T) {
			e := newEnv(t, emulator.Options{Cooldown: 5 * time.Minute})
			e.stdout(v, "sess-exp", "set:a=1\nwrite:f.txt=hello")
			require.Equal(t, "1", e.stdout(v, "sess-exp", "get:a"))
			require.Equal(t, "f.txt\n", e.stdout(v, "sess-exp", "ls"))
			e.clock.Advance(5*time.Minute + time.Second)
			if f, _ := wire.Lookup(v); f.SessionManagement {
				requireError(t, e.get("session", qv(v, "sess-exp")), http.StatusBadRequest, wire.CodeSessionWithIdentifierNotFound)
			}
			// The same identifier gets a fresh session: variables and files gone.
			require.Equal(t, "", e.stdout(v, "sess-exp", "get:a"))
			require.Equal(t, "", e.stdout(v, "sess-exp", "ls"))
		})
	}
	t.Run("janitor", func(t *testing.T) {
		e := newEnv(t, emulator.Options{Cooldown: 5 * time.Minute, SweepInterval: 10 * time.Millisecond})
		e.stdout(wire.V20251002Preview, "sess-jan", "write:f.txt=x")
		require.Equal(t, 1, e.h.Stats().Sessions)
		e.clock.Advance(6 * time.Minute)
		require.Eventually(t, func() bool { return e.h.Stats().Sessions == 0 }, 5*time.Second, 10*time.Millisecond)
	})
	t.Run("Sweep", func(t *testing.T) {
		e := newEnv(t, emulator.Options{Cooldown: 5 * time.Minute, SweepInterval: time.Hour})
		e.stdout(wire.V20251002Preview, "sess-sw1", "print:x")
		e.clock.Advance(3 * time.Minute)
		e.stdout(wire.V20251002Preview, "sess-sw2", "print:x")
		e.clock.Advance(3 * time.Minute)
		require.Equal(t, 1, e.h.Sweep())
		require.Equal(t, 1, e.h.Stats().Sessions)
	})
	t.Run("busy session does not expire", func(t *testing.T) {
		e := newEnv(t, emulator.Options{Cooldown: 5 * time.Minute})
		r := e.postJSON("executions", qv(wire.V20251002Preview, "sess-busy"), map[string]any{"executionType": "Asynchronous", "code": "wait:busy\nprint:ok", "timeoutInSeconds": 60}, map[string]string{"operation-id": "busy"})
		require.Equal(t, http.StatusOK, r.status)
		e.clock.Advance(10 * time.Minute)
		require.Equal(t, 0, e.h.Sweep())
		e.script.release("busy")
		require.Eventually(t, func() bool {
			return e.get("executions/busy", qv(wire.V20251002Preview, "sess-busy")).json(t)["status"] == wire.StatusSucceeded
		}, 5*time.Second, 10*time.Millisecond)
	})
}

func TestPoolFull(t *testing.T) {
	e := newEnv(t, emulator.Options{MaxSessions: 2, Cooldown: 5 * time.Minute})
	v := wire.V20251002Preview
	e.stdout(v, "sess-p1", "print:x")
	e.stdout(v, "sess-p2", "print:x")
	r := e.exec(v, "sess-p3", "print:x", nil)
	requireError(t, r, http.StatusNotFound, emulator.CodePoolFull)
	require.Contains(t, string(r.body), "max 2 sessions")
	requireError(t, e.get("files", qv(v, "sess-p3")), http.StatusNotFound, emulator.CodePoolFull)
	// Existing sessions still work.
	e.stdout(v, "sess-p1", "print:x")
	// Once one expires there is room again.
	e.clock.Advance(4 * time.Minute)
	e.stdout(v, "sess-p1", "print:x")
	e.clock.Advance(2 * time.Minute)
	require.Equal(t, "x\n", e.stdout(v, "sess-p3", "print:x"))
}

func TestManagementUnknownSession(t *testing.T) {
	e := newEnv(t, emulator.Options{})
	tests := []struct {
		method, route string
		versions      []string
	}{
		{http.MethodGet, "session", []string{wire.V20250202Preview, wire.V20251002Preview}},
		{http.MethodDelete, "session", []string{wire.V20250202Preview, wire.V20251002Preview}},
		{http.MethodPost, ".management/stopSession", []string{wire.V20251002Preview}},
	}
	for _, tt := range tests {
		for _, v := range tt.versions {
			t.Run(tt.method+" "+tt.route+" "+v, func(t *testing.T) {
				r := e.do(tt.method, e.url(tt.route, qv(v, "sess-never")), nil, nil)
				requireError(t, r, http.StatusBadRequest, wire.CodeSessionWithIdentifierNotFound)
				require.NotContains(t, string(r.body), "sess-never")
			})
		}
	}
	require.Equal(t, 0, e.h.Stats().Sessions, "management routes must not create sessions")
	r := e.get("listSessions", qv(wire.V20251002Preview, ""))
	require.Equal(t, `{"sessions":[]}`, string(r.body))
}

func TestDeleteAndStopSession(t *testing.T) {
	tests := []struct {
		name, method, route, version string
		status                       int
	}{
		{"delete 2025-02", http.MethodDelete, "session", wire.V20250202Preview, http.StatusNoContent},
		{"delete 2025-10", http.MethodDelete, "session", wire.V20251002Preview, http.StatusNoContent},
		{"stop 2025-10", http.MethodPost, ".management/stopSession", wire.V20251002Preview, http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, emulator.Options{})
			e.stdout(tt.version, "sess-del", "set:a=1\nwrite:f=x")
			r := e.do(tt.method, e.url(tt.route, qv(tt.version, "sess-del")), nil, nil)
			require.Equal(t, tt.status, r.status, "%s", r.body)
			if tt.status == http.StatusNoContent {
				require.Empty(t, r.body)
			} else {
				require.Equal(t, "text/plain; charset=utf-8", r.header.Get("Content-Type"))
				require.Equal(t, "Session sess-del in session pool emulator stopped.", string(r.body))
			}
			requireError(t, e.get("session", qv(tt.version, "sess-del")), http.StatusBadRequest, wire.CodeSessionWithIdentifierNotFound)
			require.Equal(t, "", e.stdout(tt.version, "sess-del", "get:a\nls"))
		})
	}
	t.Run("delete cancels a running execution", func(t *testing.T) {
		e := newEnv(t, emulator.Options{})
		v := wire.V20251002Preview
		r := e.postJSON("executions", qv(v, "sess-cancel"), map[string]any{"executionType": "Asynchronous", "code": "wait:never", "timeoutInSeconds": 60}, map[string]string{"operation-id": "long"})
		require.Equal(t, http.StatusOK, r.status)
		require.Eventually(t, func() bool { return e.h.Stats().Executions == 1 }, 5*time.Second, 5*time.Millisecond)
		require.Equal(t, http.StatusNoContent, e.del("session", qv(v, "sess-cancel")).status)
		require.Eventually(t, func() bool { return e.h.Stats().Sessions == 0 }, 5*time.Second, 5*time.Millisecond)
	})
}

func TestListSessions(t *testing.T) {
	e := newEnv(t, emulator.Options{ListSessionsPageSize: 2})
	v := wire.V20251002Preview
	for i := range 5 {
		e.stdout(v, fmt.Sprintf("sess-l%d", i), "print:x")
		e.clock.Advance(time.Second)
	}
	var got []string
	next := e.url("listSessions", qv(v, ""))
	pages := 0
	for next != "" {
		r := e.do(http.MethodGet, next, nil, nil)
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
		m := r.json(t)
		pages++
		for _, s := range m["sessions"].([]any) {
			sm := s.(map[string]any)
			require.Equal(t, []string{"createdAt", "etag", "expireAt", "identifier", "lastAccessedAt"}, keys(sm))
			got = append(got, sm["identifier"].(string))
		}
		next = ""
		if nl, ok := m["nextLink"].(string); ok {
			u, err := url.Parse(nl)
			require.NoError(t, err)
			require.Equal(t, e.h.PoolPath()+"/listSessions", u.Path)
			next = nl
		}
	}
	require.Equal(t, 3, pages)
	require.Equal(t, []string{"sess-l0", "sess-l1", "sess-l2", "sess-l3", "sess-l4"}, got)
	requireError(t, e.get("listSessions", qv(v, "", "skip", "-1")), http.StatusBadRequest, wire.CodeSessionRequestValidationFailed)
	r := e.get("listSessions", qv(v, "", "skip", "10"))
	require.Equal(t, `{"sessions":[]}`, string(r.body))
}

type infoExecutor struct {
	emulator.Executor
	info emulator.Info
}

func (i infoExecutor) Info() emulator.Info { return i.info }

func TestMetadata(t *testing.T) {
	s := newScript()
	ex := infoExecutor{emulator.ScriptedExecutor(s.run), emulator.Info{Interpreter: "/usr/bin/python3", PythonVersion: "3.12.3", Sandbox: "bubblewrap",
		Packages: map[string]string{"numpy": "1.26.4", "ipython": "8.20.0", "pandas": "2.1.4"}}}
	e := newEnv(t, emulator.Options{Executor: ex})
	for _, v := range []string{wire.V20250202Preview, wire.V20251002Preview} {
		r := e.get("metadata", qv(v, ""))
		require.Equal(t, http.StatusOK, r.status)
		m := r.json(t)
		require.Equal(t, []string{"createdAt", "jupyterKernel", "lastUpdatedAt", "preInstalledPackages", "runtimes"}, keys(m))
		require.Equal(t, []any{map[string]any{"name": "python", "version": "3.12.3"}}, m["runtimes"])
		require.Equal(t, []any{
			map[string]any{"name": "ipython", "version": "8.20.0"},
			map[string]any{"name": "numpy", "version": "1.26.4"},
			map[string]any{"name": "pandas", "version": "2.1.4"},
		}, m["preInstalledPackages"])
		require.Equal(t, "8.20.0", m["jupyterKernel"].(map[string]any)["version"])
	}
	t.Run("scripted", func(t *testing.T) {
		e := newEnv(t, emulator.Options{})
		require.Equal(t, `{"runtimes":[],"preInstalledPackages":[]`, strings.SplitN(string(e.get("metadata", qv(wire.V20251002Preview, "")).body), `,"createdAt"`, 2)[0])
	})
}
