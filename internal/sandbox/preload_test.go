//go:build linux

package sandbox

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/azsessions/azsessions/internal/kernel"
)

func TestPreloadList(t *testing.T) {
	t.Parallel()
	got, err := preloadList(nil)
	require.NoError(t, err)
	require.Equal(t, DefaultPreload(), got)
	got, err = preloadList([]string{})
	require.NoError(t, err)
	require.Empty(t, got)
	got, err = preloadList([]string{"numpy", " pandas ", "matplotlib", "matplotlib.pyplot", "numpy", "_x.y2"})
	require.NoError(t, err)
	require.Equal(t, []string{"numpy", "pandas", "matplotlib.pyplot", "_x.y2"}, got)
	for _, bad := range []string{"", "os;x", "a..b", ".a", "a.", "1abc", "a-b", "a.2b"} {
		_, err := preloadList([]string{bad})
		require.Error(t, err, bad)
	}
}

// allPreload is the heaviest preload, so that a first cell surely runs
// while the background import is still going on.
var allPreload = []string{"numpy", "pandas", "matplotlib.pyplot"}

// A kernel answers cells while it preloads; a timeout still interrupts a
// cell then, an import of a module being preloaded waits for it, and the
// address-space limit is tightened once the preload is done.
func TestBackgroundPreload(t *testing.T) {
	requireSandbox(t, true)
	e, err := newExecutor(Options{Ready: 0, Preload: allPreload, MemoryLimitBytes: testMemory, killGrace: testGrace})
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Close() })

	t.Run("timeout while preloading", func(t *testing.T) {
		k := newKernel(t, e)
		// an hour: a cell the driver did not interrupt would be killed after
		// the grace (Restarted) or hold the test; no duration is asserted
		res := runT(t, k, "import time\ntime.sleep(3600)", time.Second)
		require.Equal(t, kernel.Failed, res.Status, res.Stderr)
		require.True(t, res.TimedOut)
		require.False(t, res.Restarted, "the driver itself must stop the cell: %s", res.Stderr)
		res = requireOK(t, k, "import pandas, matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()")
		require.Contains(t, string(res.Value), `"image"`)
	})

	t.Run("import waits for the preload", func(t *testing.T) {
		k := newKernel(t, e)
		res := requireOK(t, k, "import pandas as pd\nimport matplotlib.pyplot as plt\npd.DataFrame({'a': [1, 2, 3]})['a'].sum()")
		require.JSONEq(t, `6`, string(res.Value))
	})

	t.Run("limits after preload", func(t *testing.T) {
		k := newKernel(t, e)
		select {
		case <-k.p.preloaded:
		case <-time.After(time.Minute):
			t.Fatal("the preload did not finish")
		}
		res := requireOK(t, k, `import resource, sys
vm = [int(l.split()[1]) * 1024 for l in open('/proc/self/status') if l.startswith('VmSize:')][0]
print(resource.getrlimit(resource.RLIMIT_AS)[1] - vm)
print(sorted(m for m in ('numpy', 'pandas', 'matplotlib.pyplot') if m in sys.modules))`)
		lines := strings.Split(strings.TrimSpace(res.Stdout), "\n")
		require.Len(t, lines, 2, res.Stdout)
		room, err := strconv.ParseInt(lines[0], 10, 64)
		require.NoError(t, err)
		require.Greater(t, room, int64(testMemory)-(64<<20), "room above the runtime")
		require.Less(t, room, int64(testMemory)+(64<<20), "the preload reserve must be gone")
		require.Equal(t, "['matplotlib.pyplot', 'numpy', 'pandas']", lines[1])
	})

	t.Run("interrupt while preloading", func(t *testing.T) {
		k := newKernel(t, e)
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		res, err := k.Execute(ctx, kernel.Request{Code: "import time\ntime.sleep(30)", Timeout: time.Minute, OutputStreamsMaxLength: 4096})
		require.NoError(t, err)
		require.Equal(t, kernel.Canceled, res.Status, res.Stderr)
		require.False(t, res.Restarted, res.Stderr)
		requireOK(t, k, "1")
	})
}

// The modules kept out of IPython's start-up stay importable, and
// IPython.embed still resolves to the real function.
func TestSkippedStartModulesImportable(t *testing.T) {
	t.Parallel()
	k := newKernel(t, shared(t))
	if k.Runner() != "ipython" {
		t.Skip("no IPython")
	}
	res := requireOK(t, k, `import sys
before = [m for m in ('jedi', 'prompt_toolkit', 'IPython.terminal.embed') if sys.modules.get(m) is not None]
import IPython
from IPython.terminal.embed import embed, InteractiveShellEmbed
ok = IPython.embed is embed
try:
    import jedi
    has_jedi = True
except ImportError:
    has_jedi = False
import importlib.util
(before, ok, has_jedi == (importlib.util.find_spec('jedi') is not None))`)
	require.JSONEq(t, `"([], True, True)"`, string(res.Value), res.Stderr)
}
