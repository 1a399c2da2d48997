package emulator_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/azsessions/azsessions/emulator"
	"github.com/azsessions/azsessions/internal/wire"
)

// TestIdentifierTable checks the emulator against testdata/identifiers.json,
// the table the client's TestInvalidIdentifierBeforeIO and
// TestIdentifierRoundTrip use too: on every api-version a valid identifier
// reaches its session and an invalid one is 400
// SessionRequestValidationFailed that does not repeat it, with no session
// made.
func TestIdentifierTable(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "testdata", "identifiers.json"))
	require.NoError(t, err)
	var tab struct {
		Pattern        string
		Valid, Invalid []string
	}
	require.NoError(t, json.Unmarshal(b, &tab))
	require.Equal(t, wire.IdentifierPattern, tab.Pattern)
	e := newEnv(t, emulator.Options{})
	for _, v := range wire.Versions {
		for _, id := range tab.Valid {
			r := e.exec(v, id, "print:ok", nil)
			require.Equal(t, http.StatusOK, r.status, "%s %q: %s", v, id, r.body)
			if !isLegacy(v) {
				require.Equal(t, id, r.json(t)["identifier"])
			}
		}
		before := e.h.Stats().Sessions
		for _, id := range tab.Invalid {
			r := e.exec(v, id, "print:ok", nil)
			requireError(t, r, http.StatusBadRequest, wire.CodeSessionRequestValidationFailed)
			if len(id) >= 3 {
				require.NotContains(t, bodyWithoutTraceID(t, r), id)
			}
		}
		require.Equal(t, before, e.h.Stats().Sessions, "%s: an invalid identifier made a session", v)
	}
}
