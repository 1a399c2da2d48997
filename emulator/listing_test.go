package emulator_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/azsessions/azsessions/emulator"
	"github.com/azsessions/azsessions/internal/wire"
)

// treeBuilder answers "chain:N" by building a chain of N nested directories
// "d" (with openat through os.Root: the full path passes PATH_MAX) and a file
// at its bottom, and "files:N" by writing N files.
func treeBuilder(ctx context.Context, code string) emulator.ExecutionResult {
	dir := emulator.DataDirFromContext(ctx)
	cmd, arg, _ := strings.Cut(code, ":")
	n, _ := strconv.Atoi(arg)
	fail := func(err error) emulator.ExecutionResult {
		return emulator.ExecutionResult{Status: emulator.Failed, Stderr: err.Error()}
	}
	switch cmd {
	case "chain":
		r, err := os.OpenRoot(dir)
		if err != nil {
			return fail(err)
		}
		for range n {
			if err := r.Mkdir("d", 0o755); err != nil {
				r.Close()
				return fail(err)
			}
			sub, err := r.OpenRoot("d")
			r.Close()
			if err != nil {
				return fail(err)
			}
			r = sub
		}
		err = r.WriteFile("bottom.txt", []byte("x"), 0o644)
		r.Close()
		if err != nil {
			return fail(err)
		}
	case "files":
		for i := range n {
			if err := os.WriteFile(dir+"/f"+strconv.Itoa(i), nil, 0o644); err != nil {
				return fail(err)
			}
		}
	}
	return emulator.ExecutionResult{}
}

// TestListDeepTreeBounded: a recursive listing of a deep tree is linear and
// bounded; over a bound it is refused with 400 FileListTooLarge. The deep
// chains are 300 levels: past the 256-level bound (a chain of 3,000 proved
// no more and took most of the package's time to build and remove).
func TestListDeepTreeBounded(t *testing.T) {
	tests := []struct {
		name     string
		code     string
		maxList  int
		version  string
		query    []string
		wantCode string // "" means 200
		wantLen  int
	}{
		{"chain under the depth bound", "chain:250", 0, wire.V20251002Preview, []string{"recursive", "true"}, "", 251},
		{"chain under the depth bound, legacy", "chain:250", 0, wire.V20240202Preview, nil, "", 1},
		{"chain over the depth bound", "chain:300", 0, wire.V20251002Preview, []string{"recursive", "true"}, emulator.CodeFileListTooLarge, 0},
		{"chain over the depth bound, legacy", "chain:300", 0, wire.V20240202Preview, nil, emulator.CodeFileListTooLarge, 0},
		{"chain not recursive", "chain:300", 0, wire.V20251002Preview, nil, "", 1},
		{"entries over the bound page", "files:30", 10, wire.V20251002Preview, nil, "", 10},
		{"entries over the bound, legacy", "files:30", 10, wire.V20240802Preview, nil, emulator.CodeFileListTooLarge, 0},
		{"entries at the bound", "files:10", 10, wire.V20251002Preview, nil, "", 10},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, emulator.Options{Executor: emulator.ScriptedExecutor(treeBuilder), MaxListEntries: tc.maxList})
			r := e.exec(tc.version, "sess-tree", tc.code, nil)
			require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
			require.NotContains(t, string(r.body), "Failure")
			l := e.get("files", qv(tc.version, "sess-tree", tc.query...))
			if tc.wantCode != "" {
				requireError(t, l, http.StatusBadRequest, tc.wantCode)
				return
			}
			require.Equal(t, http.StatusOK, l.status, "body: %.300s", l.body)
			require.Len(t, l.json(t)["value"], tc.wantLen)
		})
	}
}

// TestListStopsWhenClientGone: a listing whose request context has ended
// (the client went away) lists nothing.
func TestListStopsWhenClientGone(t *testing.T) {
	e := newEnv(t, emulator.Options{Executor: emulator.ScriptedExecutor(treeBuilder)})
	for _, v := range []string{wire.V20240202Preview, wire.V20251002Preview} {
		t.Run(v, func(t *testing.T) {
			require.Equal(t, http.StatusOK, e.exec(v, "sess-gone", "chain:20", nil).status)
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			req := httptest.NewRequest(http.MethodGet, e.url("files", qv(v, "sess-gone", "recursive", "true")), nil).WithContext(ctx)
			rec := httptest.NewRecorder()
			e.h.ServeHTTP(rec, req)
			require.NotEqual(t, http.StatusOK, rec.Code, "body: %.300s", rec.Body.String())
			require.NotContains(t, rec.Body.String(), "bottom.txt")
			// A live request still lists.
			require.Contains(t, string(e.get("files", qv(v, "sess-gone", "recursive", "true")).body), "bottom.txt")
		})
	}
}
