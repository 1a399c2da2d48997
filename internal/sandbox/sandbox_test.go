//go:build linux

package sandbox

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/azsessions/azsessions/internal/kernel"
	"github.com/azsessions/azsessions/internal/testenv"
)

func TestInfo(t *testing.T) {
	t.Parallel()
	e := shared(t)
	info := e.Info()
	require.Equal(t, "bubblewrap", info.Sandbox)
	require.NotEmpty(t, info.Interpreter)
	require.Regexp(t, `^3\.\d+\.\d+$`, info.PythonVersion)
	if _, err := os.Stat("/usr/lib/python3/dist-packages/IPython"); err == nil {
		require.Contains(t, info.Packages, "ipython")
	}
	require.NotEmpty(t, e.Limits())
	t.Logf("info %+v, limits %s", info, e.Limits())
}

func TestStatePersists(t *testing.T) {
	t.Parallel()
	k := newKernel(t, shared(t))
	requireOK(t, k, "x = 41\nimport math")
	res := requireOK(t, k, "x + 1")
	require.JSONEq(t, `42`, string(res.Value))
	res = requireOK(t, k, "import os\nos.getcwd(), math.floor(2.5)")
	require.JSONEq(t, `"('/mnt/data', 2)"`, string(res.Value))
}

func TestLastExpressionValues(t *testing.T) {
	t.Parallel()
	k := newKernel(t, shared(t))
	requireOK(t, k, "class Thing:\n    def __repr__(self):\n        return 'Thing()'\n")
	tests := []struct {
		name, code, want string
	}{
		{"int", "1 + 1", `2`},
		{"big int", "2**70", `1180591620717411303424`},
		{"float", "1 / 4", `0.25`},
		{"nan", "float('nan')", `null`},
		{"inf", "float('inf')", `null`},
		{"minus inf", "-float('inf')", `null`},
		{"str", "'hello'", `"hello"`},
		{"str nan", "'nan'", `"nan"`},
		{"bool", "3 > 2", `true`},
		{"None", "None", `null`},
		{"None from call", "print('x')", `null`},
		{"no expression", "y = 3", `""`},
		{"for loop", "for i in range(2):\n    i", `""`},
		{"empty", "", `""`},
		{"list", "[1, 'a', None]", `"[1, 'a', None]"`},
		{"dict", "{'a': 1}", `"{'a': 1}"`},
		{"object", "Thing()", `"Thing()"`},
		{"numpy int", "import numpy as np\nnp.int64(7)", `7`},
		{"numpy float", "import numpy as np\nnp.float64(0.5)", `0.5`},
		{"tuple after statements", "a = 1\nb = 2\na, b", `"(1, 2)"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if strings.Contains(tc.code, "numpy") {
				if _, ok := shared(t).Info().Packages["numpy"]; !ok {
					t.Skip("numpy not installed")
				}
			}
			res := requireOK(t, k, tc.code)
			require.JSONEq(t, tc.want, string(res.Value))
		})
	}
}

func TestPrintOutput(t *testing.T) {
	t.Parallel()
	k := newKernel(t, shared(t))
	res := requireOK(t, k, "import sys\nprint('hello')\nprint('warn', file=sys.stderr)\nimport subprocess\nsubprocess.run(['echo', 'from child'])\n")
	require.Equal(t, "hello\nfrom child\n", res.Stdout)
	require.Equal(t, "warn\n", res.Stderr)
	require.False(t, res.StdoutTruncated)
	// Output of one execution does not leak into the next.
	res = requireOK(t, k, "print('second')")
	require.Equal(t, "second\n", res.Stdout)
	require.Empty(t, res.Stderr)
}

func TestExceptionFails(t *testing.T) {
	t.Parallel()
	k := newKernel(t, shared(t))
	res := run(t, k, "def f():\n    return 1 / 0\nprint('before')\nf()")
	require.Equal(t, kernel.Failed, res.Status)
	require.Equal(t, "before\n", res.Stdout)
	require.Contains(t, res.Stderr, "ZeroDivisionError")
	require.Contains(t, res.Stderr, "Traceback")
	require.Contains(t, res.Stderr, "line 4")
	require.JSONEq(t, `""`, string(res.Value))
	// The kernel is still fine.
	res = requireOK(t, k, "f.__name__")
	require.JSONEq(t, `"f"`, string(res.Value))
}

const seedSyntaxError = "import pandas as pd\n\ndf = pd.read_csv('/mnt/data/TemperatureData.csv')\ndf_sorted = df.sort_values(by='Temperature', ascending=False)\ndf_sorted.to_csv('/mnt/data/TemperatureData.csv', index=False)\n'filename': 'TemperatureData.csv'"

func TestSeedSyntaxError(t *testing.T) {
	t.Parallel()
	k := newKernel(t, shared(t))
	res := run(t, k, seedSyntaxError)
	require.Equal(t, kernel.Failed, res.Status)
	require.Contains(t, res.Stderr, "SyntaxError")
	require.Contains(t, res.Stderr, "illegal target for annotation")
	require.Contains(t, res.Stderr, "line 6")
	require.Empty(t, res.Stdout)
	// Nothing ran: the CSV file was not needed.
	requireOK(t, k, "1")
}

func requirePNG(t *testing.T, value json.RawMessage) {
	t.Helper()
	var img struct {
		Type, Format, Base64Data string `json:"-"`
	}
	var m map[string]string
	require.NoError(t, json.Unmarshal(value, &m), "value %.200s", value)
	img.Type, img.Format, img.Base64Data = m["type"], m["format"], m["base64_data"]
	require.Equal(t, "image", img.Type)
	require.Equal(t, "png", img.Format)
	data, err := base64.StdEncoding.DecodeString(img.Base64Data)
	require.NoError(t, err)
	require.True(t, bytes.HasPrefix(data, []byte("\x89PNG\r\n\x1a\n")), "not a PNG")
	require.Greater(t, len(data), 1000)
}

func TestMatplotlibFigure(t *testing.T) {
	t.Parallel()
	if _, ok := shared(t).Info().Packages["matplotlib"]; !ok {
		t.Skip("matplotlib not installed")
	}
	k := figureKernel(t)
	tests := []struct{ name, code string }{
		{"open figure", "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nx = 1"},
		{"plt.show", "import matplotlib.pyplot as plt\nplt.figure()\nplt.bar(['a', 'b'], [3, 5])\nplt.show()"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := requireOK(t, k, tc.code)
			requirePNG(t, res.Value)
			require.NotContains(t, res.Stderr, "non-interactive")
			// The figures were closed.
			res = requireOK(t, k, "len(plt.get_fignums())")
			require.JSONEq(t, `0`, string(res.Value))
		})
	}
}

// TestOutputCap: 100 MB on stdout and 1 MB on stderr come back cut at the
// cap, and the streams that read them held at most the cap: what was read
// past it was counted and dropped, not buffered. The check reads the
// kernel's own buffers (not the process's allocations, which other tests
// and the Go runtime change), so it does not depend on the machine's load;
// without the cap (stream.keep) the stdout buffer would hold 100 MB.
func TestOutputCap(t *testing.T) {
	t.Parallel()
	k := newKernel(t, shared(t))
	// 100 MB on stdout, 1 MB on stderr.
	res := requireOK(t, k, "import sys\nchunk = 'x' * 1_000_000\nfor _ in range(100):\n    print(chunk)\nsys.stderr.write('é' * 1_000_000)\n'done'")
	require.JSONEq(t, `"done"`, string(res.Value))
	require.Len(t, res.Stdout, 4096)
	require.True(t, res.StdoutTruncated)
	require.Equal(t, 4096, len([]rune(res.Stderr)))
	require.Equal(t, strings.Repeat("é", 4096), res.Stderr)
	require.True(t, res.StderrTruncated)
	// Reading 100 MB must not have been buffered: each stream of the
	// kernel's process holds at most its cap (4096 characters of 4 bytes,
	// one more, and a nonce's length held back), having dropped the rest.
	p, err := k.current()
	require.NoError(t, err)
	for _, c := range []struct {
		name    string
		s       *stream
		written int64
	}{{"stdout", p.stdout, 100 * 1_000_001}, {"stderr", p.stderr, 2 * 1_000_000}} {
		c.s.mu.Lock()
		held := cap(c.s.buf) + cap(c.s.pending) + cap(c.s.scratch)
		dropped := c.s.dropped
		c.s.mu.Unlock()
		t.Logf("%s: %d bytes of buffers, %d bytes dropped", c.name, held, dropped)
		require.LessOrEqual(t, held, 64<<10, "%s buffered what was read past the cap", c.name)
		require.GreaterOrEqual(t, dropped, c.written-int64(held), "%s: the output did not pass through the stream", c.name)
	}
	res = requireOK(t, k, "print('small')")
	require.Equal(t, "small\n", res.Stdout)
	require.False(t, res.StdoutTruncated)
}

func TestTimeoutInterruptsCell(t *testing.T) {
	t.Parallel()
	k := newKernel(t, shared(t))
	requireOK(t, k, "kept = 'yes'")
	res := runT(t, k, "print('start')\nwhile True:\n    pass", time.Second)
	require.Equal(t, kernel.Failed, res.Status)
	require.True(t, res.TimedOut)
	require.False(t, res.Restarted, "stderr: %s", res.Stderr)
	require.Contains(t, res.Stderr, "timed out")
	require.Equal(t, "start\n", res.Stdout)
	res = requireOK(t, k, "kept")
	require.JSONEq(t, `"yes"`, string(res.Value))
	require.False(t, res.TimedOut)
}

func TestIgnoredInterruptKillsAndRestarts(t *testing.T) {
	t.Parallel()
	k := newKernel(t, shared(t))
	k.killGrace = shortGrace // the cell ignores the interrupt: it is killed after the grace
	requireOK(t, k, "open('/mnt/data/keep.txt', 'w').write('kept')\nvariable = 1")
	code := "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\nprint('stubborn', flush=True)\nwhile True:\n    time.sleep(0.05)"
	res := runT(t, k, code, time.Second)
	require.Equal(t, kernel.Failed, res.Status)
	require.True(t, res.TimedOut)
	require.True(t, res.Restarted)
	require.Contains(t, res.Stderr, "restarted")
	require.Equal(t, "stubborn\n", res.Stdout)
	res = requireOK(t, k, "open('/mnt/data/keep.txt').read()")
	require.JSONEq(t, `"kept"`, string(res.Value))
	res = run(t, k, "variable")
	require.Equal(t, kernel.Failed, res.Status)
	require.Contains(t, res.Stderr, "NameError")
}

func TestKernelDeathRestartsOnNextExecute(t *testing.T) {
	t.Parallel()
	k := newKernel(t, shared(t))
	requireOK(t, k, "v = 1")
	res := run(t, k, "import os\nprint('bye', flush=True)\nos._exit(1)")
	require.Equal(t, kernel.Failed, res.Status)
	require.Contains(t, res.Stderr, "died")
	require.Equal(t, "bye\n", res.Stdout)
	res = run(t, k, "'v' in globals()")
	require.Equal(t, kernel.Succeeded, res.Status, res.Stderr)
	require.True(t, res.Restarted)
	require.JSONEq(t, `false`, string(res.Value))
	res = requireOK(t, k, "1")
	require.False(t, res.Restarted)
}

func TestCancel(t *testing.T) {
	t.Parallel()
	k := newKernel(t, shared(t))
	requireOK(t, k, "kept = 5")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { // cancels once the cell runs
		waitForFile(ctx, filepath.Join(k.DataDir(), "started"))
		cancel()
	}()
	res, err := k.Execute(ctx, kernel.Request{Code: "import time\nopen('/mnt/data/started', 'w').close()\ntime.sleep(30)", Timeout: time.Minute})
	require.NoError(t, err)
	require.Equal(t, kernel.Canceled, res.Status)
	require.False(t, res.Restarted, "stderr: %s", res.Stderr) // killed after the grace, or restarted before the cell (stderr says which)
	res = requireOK(t, k, "kept")
	require.JSONEq(t, `5`, string(res.Value))
}

// TestCancelWithSIGINTIgnored: a driver that starts with SIGINT ignored
// (the emulator or the test binary run as a background job of a shell
// without job control passes SIG_IGN on through Go and bwrap, and Python
// then installs no KeyboardInterrupt handler) still stops a canceled cell,
// and the cell's subprocesses get SIGINT at its default. Before, every
// cancellation of such a run waited for the grace (the "TestCancel load
// flake": the cell of TestCancel sleeps about as long as testGrace). The
// cell sleeps past the grace: a lost interrupt always shows as a restart.
func TestCancelWithSIGINTIgnored(t *testing.T) {
	t.Parallel()
	requireSandbox(t, true)
	e, err := newExecutor(Options{Ready: 0, noPreload: true, noFontCache: true, killGrace: testGrace,
		launchPrefix: []string{"/bin/sh", "-c", `trap '' INT; exec "$@"`, "sh"}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Close() })
	k := newKernel(t, e)
	requireOK(t, k, "kept = 5")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { // cancels once the cell runs
		waitForFile(ctx, filepath.Join(k.DataDir(), "started"))
		cancel()
	}()
	res, err := k.Execute(ctx, kernel.Request{Code: "import time\nopen('/mnt/data/started', 'w').close()\ntime.sleep(3600)", Timeout: 2 * time.Hour})
	require.NoError(t, err)
	require.Equal(t, kernel.Canceled, res.Status)
	require.False(t, res.Restarted, "the driver must stop the cell: %s", res.Stderr)
	require.Contains(t, res.Stderr, "KeyboardInterrupt")
	res = requireOK(t, k, "kept")
	require.JSONEq(t, `5`, string(res.Value))
	res = requireOK(t, k, "import subprocess\nsubprocess.run(['grep', '^SigIgn:', '/proc/self/status'], capture_output=True, text=True).stdout.split()[1]")
	var sigIgn string
	require.NoError(t, json.Unmarshal(res.Value, &sigIgn))
	mask, err := strconv.ParseUint(sigIgn, 16, 64)
	require.NoError(t, err)
	require.Zero(t, mask&(1<<(int(syscall.SIGINT)-1)), "SigIgn of a subprocess: %s", sigIgn)
}

// TestInterruptBeforeCellStarts: the interrupt of a cell canceled before
// the driver starts it (a cancellation right after the request, a driver
// starved of CPU) is not lost: the driver held the cell until it had
// received (and, finding no cell running, dropped) the first interrupt; Go
// sends it again until the reply, and one of those stops the cell. Before,
// the cell ran on until the kill grace. The cell sleeps past the grace: a
// lost interrupt always shows as a restart.
func TestInterruptBeforeCellStarts(t *testing.T) {
	t.Parallel()
	requireSandbox(t, true)
	e, err := newExecutor(Options{Ready: 0, noPreload: true, noFontCache: true, killGrace: testGrace, holdCells: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Close() })
	k := newKernel(t, e)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err := k.Execute(ctx, kernel.Request{Code: "# hold\nimport time\ntime.sleep(3600)", Timeout: 2 * time.Hour})
	require.NoError(t, err)
	require.Equal(t, kernel.Canceled, res.Status)
	require.False(t, res.Restarted, "the driver must stop the cell: %s", res.Stderr)
	require.Contains(t, res.Stderr, "KeyboardInterrupt")
	res = requireOK(t, k, "1")
	require.False(t, res.Restarted)
}

func TestDataDir(t *testing.T) {
	t.Parallel()
	e := shared(t)
	k := newKernel(t, e)
	require.NoError(t, os.WriteFile(filepath.Join(k.DataDir(), "in.csv"), []byte("a,b\n1,2\n"), 0o644))
	res := requireOK(t, k, "open('/mnt/data/in.csv').read().splitlines()[1]")
	require.JSONEq(t, `"1,2"`, string(res.Value))
	requireOK(t, k, "with open('out.txt', 'w') as f:\n    f.write('from python')")
	data, err := os.ReadFile(filepath.Join(k.DataDir(), "out.txt"))
	require.NoError(t, err)
	require.Equal(t, "from python", string(data))
	dir := k.DataDir()
	require.NoError(t, k.Close())
	require.NoDirExists(t, dir)
	_, err = k.Execute(context.Background(), kernel.Request{Code: "1"})
	require.ErrorIs(t, err, ErrClosed)
}

func TestModeNone(t *testing.T) {
	t.Parallel()
	requireSandbox(t, false)
	e, err := newExecutor(Options{Mode: ModeNone, Ready: 0, noPreload: true, noFontCache: true})
	require.NoError(t, err)
	defer func() { require.NoError(t, e.Close()) }()
	require.Equal(t, "none", e.Info().Sandbox)
	k := newKernel(t, e)
	res := requireOK(t, k, "import os\nopen('f.txt', 'w').write('x')\nos.getcwd()")
	require.JSONEq(t, `"`+k.DataDir()+`"`, string(res.Value))
	require.FileExists(t, filepath.Join(k.DataDir(), "f.txt"))
}

// TestOtherInterpreter runs a second python3 from PATH (a pyenv one here):
// the shim is resolved and the interpreter's prefix is bound in the sandbox.
func TestOtherInterpreter(t *testing.T) {
	t.Parallel()
	requireSandbox(t, true)
	py, err := exec.LookPath("python3")
	if err != nil || py == "/usr/bin/python3" {
		t.Skip("no second python3 on PATH")
	}
	e, err := newExecutor(Options{Python: py, Ready: 0, noPreload: true, noFontCache: true})
	if os.Geteuid() == 0 && err != nil && strings.Contains(err.Error(), "cannot be used") {
		// As root, sandboxes run as an unprivileged user, which cannot read
		// an interpreter in root's home: New says so.
		require.ErrorContains(t, err, "not searchable by others")
		t.Skipf("%s is out of the sandbox user's reach: %v", py, err)
	}
	require.NoError(t, err)
	defer func() { require.NoError(t, e.Close()) }()
	info := e.Info()
	t.Logf("%s resolved to %s (%s), packages %v", py, info.Interpreter, info.PythonVersion, info.Packages)
	require.NotEqual(t, "/usr/bin/python3", info.Interpreter)
	k := newKernel(t, e)
	res := requireOK(t, k, "import sys\nsys.executable")
	require.JSONEq(t, strconv.Quote(info.Interpreter), string(res.Value))
}

// TestFallbackRunner runs cells through the driver's stdlib runner (ast +
// exec/eval), used when IPython is not importable.
func TestFallbackRunner(t *testing.T) {
	testenv.SkipLongInQuickLoop(t)
	t.Parallel()
	requireSandbox(t, true)
	e, err := newExecutor(Options{Ready: 0, noIPython: true, noPreload: true})
	require.NoError(t, err)
	defer func() { require.NoError(t, e.Close()) }()
	k := newKernel(t, e)
	require.Equal(t, "fallback", k.Runner())
	res := requireOK(t, k, "x = 2\nprint('hi')\nx * 21")
	require.JSONEq(t, `42`, string(res.Value))
	require.Equal(t, "hi\n", res.Stdout)
	res = requireOK(t, k, "None")
	require.JSONEq(t, `null`, string(res.Value))
	res = requireOK(t, k, "y = 1")
	require.JSONEq(t, `""`, string(res.Value))
	res = requireOK(t, k, "float('nan')")
	require.JSONEq(t, `null`, string(res.Value))
	require.Equal(t, "nan", *res.Text)
	res = run(t, k, "def g():\n    raise ValueError('bad')\ng()")
	require.Equal(t, kernel.Failed, res.Status)
	require.Contains(t, res.Stderr, "ValueError: bad")
	require.Contains(t, res.Stderr, "raise ValueError('bad')")
	require.NotContains(t, res.Stderr, "driver.py")
	res = run(t, k, seedSyntaxError)
	require.Equal(t, kernel.Failed, res.Status)
	require.Contains(t, res.Stderr, "SyntaxError: illegal target for annotation")
	res = runT(t, k, "while True:\n    pass", time.Second)
	require.True(t, res.TimedOut)
	require.False(t, res.Restarted)
	requireOK(t, k, "x")
}

// TestParallelKernels runs cells on several kernels at once (for -race).
func TestParallelKernels(t *testing.T) {
	t.Parallel()
	e := shared(t)
	kernels := []*Kernel{newKernel(t, e), newKernel(t, e), newKernel(t, e)}
	errs := make(chan error, len(kernels))
	for i, k := range kernels {
		go func() {
			for j := 0; j < 5; j++ {
				res, err := k.Execute(context.Background(), kernel.Request{Code: fmt.Sprintf("%d * %d", i, j), Timeout: time.Minute})
				if err == nil && string(res.Value) != strconv.Itoa(i*j) {
					err = fmt.Errorf("kernel %d: got %s, want %d", i, res.Value, i*j)
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range kernels {
		require.NoError(t, <-errs)
	}
}

// TestCloseDuringExecute: closing a kernel ends its running execution.
func TestCloseDuringExecute(t *testing.T) {
	t.Parallel()
	k := newKernel(t, shared(t))
	type out struct {
		res kernel.Result
		err error
	}
	done := make(chan out, 1)
	go func() {
		res, err := k.Execute(context.Background(), kernel.Request{Code: "import time\nopen('/mnt/data/started', 'w').close()\ntime.sleep(60)", Timeout: 2 * time.Minute})
		done <- out{res, err}
	}()
	require.Eventually(t, func() bool {
		_, err := os.Stat(filepath.Join(k.DataDir(), "started"))
		return err == nil
	}, 2*time.Minute, 10*time.Millisecond, "the cell did not start")
	require.NoError(t, k.Close())
	o := <-done
	require.NoError(t, o.err)
	require.Equal(t, kernel.Failed, o.res.Status)
	require.NoDirExists(t, k.DataDir())
}

// waitForFile returns once path exists, or when ctx ends.
func waitForFile(ctx context.Context, path string) {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
