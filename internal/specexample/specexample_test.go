package specexample

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLoad(t *testing.T) {
	for _, tt := range []struct {
		name, dir, body, err string
	}{
		{name: "ok", dir: "2025-10-02-preview", body: `{"operationId":"X","parameters":{"api-version":"2025-10-02-preview","n":3},"responses":{"200":{"body":{}}}}`},
		{name: "not JSON", dir: "v", body: `{`, err: "unexpected end of JSON"},
		{name: "api-version not the directory", dir: "2024-10-02-preview", body: `{"parameters":{"api-version":"2025-10-02-preview"},"responses":{"200":{}}}`, err: "is not its directory's"},
		{name: "two responses", dir: "v", body: `{"parameters":{"api-version":"v"},"responses":{"200":{},"202":{}}}`, err: "2 responses"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			require.NoError(t, os.Mkdir(filepath.Join(root, tt.dir), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(root, tt.dir, "Ex.json"), []byte(tt.body), 0o644))
			got, err := Load(root)
			if tt.err != "" {
				require.ErrorContains(t, err, tt.err)
				return
			}
			require.NoError(t, err)
			require.Len(t, got, 1)
			x := got[0]
			require.Equal(t, tt.dir+"/Ex.json", x.File)
			require.Equal(t, tt.dir, x.Version)
			require.Equal(t, "X", x.OperationID)
			require.Equal(t, "3", x.Param("n"))
			require.Equal(t, "", x.Param("missing"))
			require.True(t, x.Has("n"))
			require.False(t, x.Has("missing"))
		})
	}
}
