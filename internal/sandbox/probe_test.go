//go:build linux

package sandbox

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/azsessions/azsessions/internal/testenv"
)

// TestProbeIgnoresWorkingDirectory (red team): New runs the interpreter on
// the host, outside any sandbox (the probe, then matplotlib's font cache),
// in the emulator's working directory. With python -s -c, that directory
// came first on sys.path: a json.py there (a session's file downloaded by
// `azsessions download json.py` or the MCP server's download_file into its
// directory, or any local user's file where root starts the emulator) ran
// as the emulator's user, root included: `azsessions --emulator exec 1+1` run
// by root in such a directory ran it twice as uid 0. Both now run python -I.
// Not parallel: t.Chdir changes the process's directory.
func TestProbeIgnoresWorkingDirectory(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	shadow := `import sys
with open(` + "%q" + `, "a") as f:
    f.write("shadow json.py ran\n")
del sys.modules["json"]
p = sys.path.pop(0)
import importlib
real = importlib.import_module("json")
sys.path.insert(0, p)
globals().update(real.__dict__)
`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "json.py"), []byte(fmtQ(shadow, marker)), 0o644))
	t.Chdir(dir)
	e, err := newExecutor(Options{Mode: ModeNone, Ready: 0, DataDir: testenv.DataDir(t), noPreload: true, noFontCache: true})
	if err == nil {
		require.NoError(t, e.Close())
	}
	_, statErr := os.Stat(marker)
	require.ErrorIs(t, statErr, os.ErrNotExist, "the interpreter ran json.py from the working directory")
	require.NoError(t, err)
}

// fmtQ puts path, quoted for Python, in place of %q in s.
func fmtQ(s, path string) string {
	return strings.Replace(s, "%q", strconv.Quote(path), 1)
}
