package azsessions

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azsessions/azsessions/internal/wire"
)

// identifierTable is testdata/identifiers.json: the service's identifier
// rule (the spec's pattern, one for every api-version) as valid and invalid
// examples. The emulator's tests use the same table.
type identifierTable struct {
	Pattern string   `json:"pattern"`
	Valid   []string `json:"valid"`
	Invalid []string `json:"invalid"`
}

func loadIdentifierTable(t *testing.T) identifierTable {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "identifiers.json"))
	require.NoError(t, err)
	var tab identifierTable
	require.NoError(t, json.Unmarshal(b, &tab))
	require.Equal(t, wire.IdentifierPattern, tab.Pattern, "the table and internal/wire must state the same rule")
	return tab
}

// allowedIdentifiers returns the valid identifiers of the shared table
// (every api-version has the same rule).
func allowedIdentifiers(t *testing.T, _ string) []string { return loadIdentifierTable(t).Valid }

// TestIdentifierRoundTrip sends every operation with identifiers made of
// every allowed character and checks the server sees them exactly. One fake
// pool (TLS, credential) per api-version serves its identifiers one after
// another: a TLS server and handshake per identifier cost more than the
// operations.
func TestIdentifierRoundTrip(t *testing.T) {
	for _, version := range allVersions {
		t.Run(version, func(t *testing.T) {
			p := setup(t, version, withCredential())
			var mu sync.Mutex
			var cur *testing.T // the identifier's subtest
			var id string
			seen := map[string]int{}
			happyRoutes(t, p, func(r *http.Request) {
				mu.Lock()
				defer mu.Unlock()
				q := r.URL.Query()
				if r.URL.Path == "/listSessions" || r.URL.Path == "/metadata" || r.URL.Path == "/.management/listSessions" {
					assert.False(cur, q.Has("identifier"), "pool-wide %s carries no identifier", r.URL.Path)
					return
				}
				assert.Equal(cur, []string{id}, q["identifier"], "%s %s (raw query %q)", r.Method, r.URL.Path, r.URL.RawQuery)
				seen[r.Method+" "+r.URL.Path]++
			})
			for _, ident := range allowedIdentifiers(t, version) {
				require.NoError(t, wire.ValidateIdentifier(version, ident), "%s %q", version, ident)
				t.Run(ident, func(t *testing.T) {
					mu.Lock()
					cur, id = t, ident
					clear(seen)
					mu.Unlock()
					for _, op := range allOps(t, version, "x.txt", t.TempDir()) {
						require.NoError(t, op.call(context.Background(), p.client.Session(ident)), op.name)
					}
					mu.Lock()
					defer mu.Unlock()
					require.NotEmpty(t, seen)
				})
			}
		})
	}
}

// TestInvalidIdentifierBeforeIO checks every session-scoped operation
// rejects identifiers outside the version's rule before any I/O, with an
// error that does not repeat the identifier.
func TestInvalidIdentifierBeforeIO(t *testing.T) {
	invalid := loadIdentifierTable(t).Invalid
	for _, version := range allVersions {
		for _, id := range invalid {
			require.Error(t, wire.ValidateIdentifier(version, id), "%s %q", version, id)
			t.Run(version+"/"+id, func(t *testing.T) {
				p := setup(t, version)
				for _, op := range allOps(t, version, "x.txt", t.TempDir()) {
					if !op.sessionScoped {
						continue
					}
					err := op.call(context.Background(), p.client.Session(id))
					require.ErrorIs(t, err, ErrInvalidIdentifier, op.name)
					if id != "" {
						require.NotContains(t, err.Error(), id, op.name)
					}
				}
				if !features(t, version).Legacy {
					_, err := p.client.Session(id).BeginExecute(context.Background(), "", &BeginExecuteOptions{ResumeToken: "x"})
					require.ErrorIs(t, err, ErrInvalidIdentifier)
				}
				p.requireNoIO(t)
			})
		}
	}
}

// TestNewSessionIdentifiers: NewSession makes unique UUIDv4 identifiers
// that every version accepts, without I/O.
func TestNewSessionIdentifiers(t *testing.T) {
	for _, version := range allVersions {
		p := setup(t, version)
		seen := map[string]bool{}
		for range 1000 {
			s := p.client.NewSession()
			id := s.Identifier()
			require.Regexp(t, uuidV4, id)
			require.False(t, seen[id], "duplicate %s", id)
			seen[id] = true
			require.NoError(t, s.validate())
			require.Same(t, p.client, s.Client())
		}
		p.requireNoIO(t)
	}
}

// TestFileNamesRoundTrip sends file names with spaces, '#', '%', non-ASCII
// and sub-directories and checks the server sees the exact name (path
// segment, decoded) and directory (path=).
func TestFileNamesRoundTrip(t *testing.T) {
	cases := []struct {
		name     string
		wantName string
		wantPath string // "" means no path parameter
	}{
		{"my file #1 100%.csv", "my file #1 100%.csv", ""},
		{"données_温度.csv", "données_温度.csv", ""},
		{"a-b_c (1).@$&=;,#%^.txt", "a-b_c (1).@$&=;,#%^.txt", ""},
		{"question?mark+plus.txt", "question?mark+plus.txt", ""},
		{"%2F%2e%2e.txt", "%2F%2e%2e.txt", ""},
		{"sub/my file #1 100%.csv", "my file #1 100%.csv", "sub"},
		{"level1/level2/données_温度.csv", "données_温度.csv", "level1/level2"},
		{"/mnt/data/level 1/x&y.csv", "x&y.csv", "level 1"},
		{"/mnt/data/x.csv", "x.csv", ""},
		{"dir #1/100%/a.txt", "a.txt", "dir #1/100%"},
	}
	for _, version := range allVersions {
		legacy := features(t, version).Legacy
		for _, c := range cases {
			if legacy && c.wantPath != "" {
				continue // sub-directories are ErrUnsupported there (TestUnsupportedBeforeIO)
			}
			t.Run(version+"/"+c.name, func(t *testing.T) {
				p := setup(t, version)
				check := func(r *http.Request) {
					want := stdQuery(version, testIdentifier)
					if c.wantPath != "" {
						want["path"] = c.wantPath
					}
					wantQuery(t, r, want)
				}
				answerFile := func(w http.ResponseWriter) {
					if legacy {
						writeJSON(w, http.StatusOK, example(t, exLegacyBYOC, "get_file", "response_body"))
					} else {
						writeJSON(w, http.StatusOK, example(t, exBYOC2410, "get_metadata", "response_body"))
					}
				}
				uploadRoute, downloadRoute := "POST /files", "GET /files/{name}/content"
				if legacy {
					uploadRoute, downloadRoute = "POST /files/upload", "GET /files/content/{name}"
				}
				p.handle(uploadRoute, func(w http.ResponseWriter, r *http.Request) {
					check(r)
					name, _ := checkUpload(t, r)
					assert.Equal(t, c.wantName, name)
					answerFile(w)
				})
				p.handle("GET /files/{name}", func(w http.ResponseWriter, r *http.Request) {
					check(r)
					assert.Equal(t, c.wantName, r.PathValue("name"))
					answerFile(w)
				})
				p.handle(downloadRoute, func(w http.ResponseWriter, r *http.Request) {
					check(r)
					assert.Equal(t, c.wantName, r.PathValue("name"))
					_, _ = w.Write([]byte("x"))
				})
				p.handle("DELETE /files/{name}", func(w http.ResponseWriter, r *http.Request) {
					check(r)
					assert.Equal(t, c.wantName, r.PathValue("name"))
					w.WriteHeader(http.StatusNoContent)
				})
				for _, op := range allOps(t, version, c.name, t.TempDir()) {
					switch op.name {
					case "UploadFile", "GetFile", "DownloadFile", "DownloadFileToPath", "DeleteFile":
						require.NoError(t, op.call(context.Background(), p.client.Session(testIdentifier)), op.name)
					}
				}
				require.Equal(t, 5, p.count())
			})
		}
	}
}

// TestInvalidFileNamesBeforeIO: names with "..", empty segments or outside
// /mnt/data fail with ErrInvalidFileName before any I/O.
func TestInvalidFileNamesBeforeIO(t *testing.T) {
	names := []string{"", "..", ".", "../x", "a/../b", "a/..", "./a", "a/./b", "/etc/passwd", "/mnt/data", "/mnt/data/", "/mnt/database/x", "/mnt/data/../etc/passwd", "a//b", "a/", "/", "x\x00y", "/mnt/data//x"}
	for _, version := range allVersions {
		for _, name := range names {
			t.Run(version+"/"+name, func(t *testing.T) {
				p := setup(t, version)
				for _, op := range allOps(t, version, name, t.TempDir()) {
					switch op.name {
					case "UploadFile", "GetFile", "DownloadFile", "DownloadFileToPath", "DeleteFile":
						err := op.call(context.Background(), p.client.Session(testIdentifier))
						require.ErrorIs(t, err, ErrInvalidFileName, op.name)
						require.NotContains(t, err.Error(), testIdentifier)
					}
				}
				p.requireNoIO(t)
			})
		}
	}
	// ListFilesOptions.Path follows the same rules (an empty path is /mnt/data).
	for _, dir := range []string{"..", "a/../b", "/etc", "a//b", "/mnt/data/.."} {
		p := setup(t, APIVersion20251002Preview)
		_, err := p.client.Session(testIdentifier).NewListFilesPager(&ListFilesOptions{Path: dir}).NextPage(context.Background())
		require.ErrorIs(t, err, ErrInvalidFileName, dir)
		p.requireNoIO(t)
	}
}
