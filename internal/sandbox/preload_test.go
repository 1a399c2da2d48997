//go:build linux

package sandbox

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/azsessions/azsessions/internal/kernel"
	"github.com/azsessions/azsessions/internal/testenv"
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
	testenv.SkipLongInQuickLoop(t)
	t.Parallel()
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

// TestDriverDeferredStartModules (issue 16): the modules IPython's start-up
// would import only to bind a name (driver.py, _DEFER_AT_START) are
// stand-ins in the IPython modules that hold them, and everything that uses
// them works: a cell's imports get the real modules, top-level await, the
// %%bash and %prun magics, shell escapes (!cmd), tracebacks in IPython's format (stack_data),
// obj? and its HTML (pygments' PythonLexer), logging.config.
func TestDriverDeferredStartModules(t *testing.T) {
	t.Parallel()
	k := newKernel(t, shared(t))
	if k.Runner() != "ipython" {
		t.Skip("no IPython")
	}
	res := requireOK(t, k, `from IPython.core import async_helpers, ultratb, oinspect
from IPython.core.magics import code, execution, script
from IPython.utils import _process_posix
held = [type(m).__name__ for m in (async_helpers.asyncio, script.asyncio, ultratb.stack_data, ultratb.pydoc, execution.profile, execution.pstats, _process_posix.pexpect)]
import sys, asyncio, urllib.request, stack_data, pydoc, logging.config, cProfile, pstats, pygments.lexers, pexpect
real = [type(m).__name__ for m in (asyncio, urllib.request, stack_data, pydoc, logging.config, cProfile, pstats, pexpect)]
str((sorted(set(held)), sorted(set(real)), script.asyncio.new_event_loop is asyncio.new_event_loop,
     ultratb.stack_data.FrameInfo is stack_data.FrameInfo, type(code.Request('http://example.invalid/')) is urllib.request.Request,
     '<div' in oinspect.pylight('x = 1')))`)
	require.JSONEq(t, `"(['_Deferred'], ['module'], True, True, True, True)"`, string(res.Value), res.Stderr)

	for _, tc := range []struct {
		name, code, value, stdout string
	}{
		{"top-level await", "await asyncio.sleep(0)\n'awaited'", `"awaited"`, ""},
		{"bash cell magic", "%%bash\necho from-bash", "", "from-bash\n"},
		{"prun", "%prun -q sum(range(10))\n'profiled'", `"profiled"`, ""},
		{"pinfo", "len?", "", "Signature: len(obj, /)"},
		{"shell escapes", "!echo from-bang\nx = !echo captured\nx[0]", `"captured"`, "from-bang"},
		{"dictConfig", "logging.config.dictConfig({'version': 1})\n'configured'", `"configured"`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := requireOK(t, k, tc.code)
			if tc.value != "" {
				require.JSONEq(t, tc.value, string(res.Value), res.Stderr)
			}
			require.Contains(t, res.Stdout, tc.stdout, res.Stderr)
		})
	}

	res = run(t, k, "def f(d):\n    return d['k']\nf({})")
	require.Equal(t, kernel.Failed, res.Status)
	require.Contains(t, res.Stderr, "----> 2     return d['k']", "IPython's traceback with its source lines")
	require.Contains(t, res.Stderr, "KeyError: 'k'")
}

// asRoom is the cell that prints RLIMIT_AS less the address space mapped
// now, then whether numpy is imported and whether the preload thread runs.
const asRoom = `import resource, sys, threading
vm = [int(l.split()[1]) * 1024 for l in open('/proc/self/status') if l.startswith('VmSize:')][0]
print(resource.getrlimit(resource.RLIMIT_AS)[1] - vm)
print('numpy' in sys.modules, any(t.name == 'azsessions-preload' for t in threading.enumerate()))`

// roomAndState runs asRoom in k.
func roomAndState(t *testing.T, k *Kernel) (room int64, state string) {
	t.Helper()
	res := requireOK(t, k, asRoom)
	lines := strings.Split(strings.TrimSpace(res.Stdout), "\n")
	require.Len(t, lines, 2, res.Stdout)
	room, err := strconv.ParseInt(lines[0], 10, 64)
	require.NoError(t, err)
	return room, lines[1]
}

// TestPreloadHeldWhileStartsWait (issue 16): a kernel the pool hands out
// while other NewKernel calls still wait for a start does not begin its
// background preload (it would take CPU from those starts); a cell that
// imports a preload module meanwhile imports it itself, under the
// preload's looser address-space limit; once no call waits, the held
// preloads begin, end, and the limit is tightened.
func TestPreloadHeldWhileStartsWait(t *testing.T) {
	testenv.SkipLongInQuickLoop(t)
	for _, mode := range []string{ModeBwrap, ModeGvisor} {
		t.Run(mode, func(t *testing.T) {
			if mode == ModeGvisor {
				requireGvisor(t)
			} else {
				requireSandbox(t, true)
				requireRoot(t) // the preload is held only with a memory cgroup
			}
			var (
				starts  atomic.Int32
				second  = make(chan struct{})
				release = make(chan struct{})
				once    sync.Once
			)
			o := Options{Mode: mode, Ready: 0, Preload: []string{"numpy"}, MemoryLimitBytes: testMemory, killGrace: testGrace}
			// The first start ends only once the second has begun (both
			// calls wait), which waits for release.
			o.startHook = func() func() {
				switch starts.Add(1) {
				case 1:
					<-second
				case 2:
					close(second)
					<-release
				}
				return func() {}
			}
			e, err := newExecutor(o)
			require.NoError(t, err)
			t.Cleanup(func() { _ = e.Close() })
			t.Cleanup(func() { once.Do(func() { close(release) }) }) // runs first
			if e.cg == nil || e.cg.memory == "" {
				t.Skip("no memory cgroup: the preload is not held (Executor.Limits: " + e.Limits() + ")")
			}

			got := make(chan *Kernel, 2)
			for range 2 {
				go func() {
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
					defer cancel()
					k, err := e.NewKernel(ctx)
					if err != nil {
						t.Error(err)
						got <- nil
						return
					}
					got <- k.(*Kernel)
				}()
			}
			k1 := <-got
			require.NotNil(t, k1)
			t.Cleanup(func() { _ = k1.Close() })
			require.True(t, k1.p.gated, "the driver holds its preload")

			// Another call waits for a start: k1's preload has not begun.
			room, state := roomAndState(t, k1)
			require.Equal(t, "False False", state, "numpy imported or preloading while a start is pending")
			require.False(t, k1.p.preloadDone())
			require.Greater(t, room, int64(testMemory)+(512<<20), "the preload's reserve holds until it ends")

			// A cell imports numpy itself meanwhile.
			res := requireOK(t, k1, "import numpy\nint(numpy.arange(4).sum())")
			require.JSONEq(t, `6`, string(res.Value))

			// The second start ends: no call waits, both preloads begin.
			once.Do(func() { close(release) })
			k2 := <-got
			require.NotNil(t, k2)
			t.Cleanup(func() { _ = k2.Close() })
			for _, k := range []*Kernel{k1, k2} {
				require.Eventually(t, k.p.preloadDone, time.Minute, 10*time.Millisecond)
				room, state := roomAndState(t, k)
				require.Equal(t, "True False", state)
				require.Greater(t, room, int64(testMemory)-(64<<20), "room above the runtime")
				require.Less(t, room, int64(testMemory)+(64<<20), "the preload reserve must be gone")
			}
		})
	}
}

// TestPreloadThreadRefused: a held preload released while no thread can be
// started (a cell holds the sandbox at its process limit; simulated by a
// Thread.start that refuses the preload's thread) ends with nothing
// preloaded, and the kernel keeps taking cells. Before, start_preload's
// RuntimeError killed the driver's reader thread, which alone reads the
// requests: the next cell could not be sent and the kernel was killed
// ("killed by signal killed"; TestEscapeForkBomb, 2 of 30 full runs).
func TestPreloadThreadRefused(t *testing.T) {
	t.Parallel()
	requireSandbox(t, true)
	requireRoot(t) // the preload is held only with a memory cgroup
	e, err := newExecutor(Options{Ready: 0, Preload: []string{"numpy"}, MemoryLimitBytes: testMemory, killGrace: testGrace, holdPreloads: true, noFontCache: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Close() })
	if e.cg == nil || e.cg.memory == "" {
		requireCgroupController(t, "memory")
	}
	k := newKernel(t, e)
	require.True(t, k.p.gated, "the driver holds its preload")
	requireOK(t, k, `import threading
_start = threading.Thread.start
def _refuse(self):
    if self.name == "azsessions-preload":
        raise RuntimeError("can't start new thread")
    return _start(self)
threading.Thread.start = _refuse`)
	k.p.startPreload()
	require.Eventually(t, k.p.preloadDone, 30*time.Second, 10*time.Millisecond, "no preloaded reply: the reader thread died")
	res := requireOK(t, k, "threading.Thread.start = _start\n1")
	require.JSONEq(t, `1`, string(res.Value))
}
