//go:build linux

package sandbox

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"image"
	_ "image/png"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/azsessions/azsessions/internal/kernel"
)

// ipythonPretty renders expr with IPython.lib.pretty.pretty in the host's
// /usr/bin/python3 (the interpreter the sandbox runs), outside the driver:
// the reference the kernel's text/plain must match.
func ipythonPretty(t *testing.T, expr string) string {
	t.Helper()
	return ipythonPrettyAll(t, expr)[0]
}

// ipythonPrettyAll is ipythonPretty of each expression, with one
// interpreter (an IPython import takes about a second).
func ipythonPrettyAll(t *testing.T, exprs ...string) []string {
	t.Helper()
	out, err := exec.Command("/usr/bin/python3", append([]string{"-c",
		"import json, sys\nfrom IPython.lib.pretty import pretty\nsys.stdout.write(json.dumps([pretty(eval(e)) for e in sys.argv[1:]]))"}, exprs...)...).Output()
	if err != nil {
		requireOrSkip(t, "IPython in /usr/bin/python3: "+err.Error())
	}
	var texts []string
	require.NoError(t, json.Unmarshal(out, &texts), "%s", out)
	require.Len(t, texts, len(exprs))
	return texts
}

// requireOrSkip skips with why, or fails under AZSESSIONS_REQUIRE_SANDBOX=1.
func requireOrSkip(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("AZSESSIONS_REQUIRE_SANDBOX") == "1" {
		t.Fatalf("AZSESSIONS_REQUIRE_SANDBOX=1 but %s is missing", why)
	}
	t.Skipf("%s missing (set AZSESSIONS_REQUIRE_SANDBOX=1 to make this fatal)", why)
}

func textOf(res kernel.Result) string {
	if res.Text == nil {
		return "<nil>"
	}
	return *res.Text
}

// TestValueTextLikeIPython checks that a cell's value and its text/plain form
// are the ones IPython's display formatter gives: a long list or dict breaks
// over lines exactly as IPython.lib.pretty breaks it (AutoGen's
// ACADynamicSessionsCodeExecutor parses that form), not as repr().
func TestValueTextLikeIPython(t *testing.T) {
	t.Parallel()
	k := newKernel(t, shared(t))
	if k.Runner() != "ipython" {
		requireOrSkip(t, "IPython in the sandbox's Python")
	}
	tests := []struct {
		name string
		expr string // evaluated in the kernel and by ipythonPretty
		// wantValue is the JSON value; "" means the text/plain string.
		wantValue string
	}{
		{"int", "6 * 7", `42`},
		{"float", "1 / 3", `0.3333333333333333`},
		{"bool", "2 > 1", `true`},
		{"nan", "float('nan')", `null`},
		{"inf", "float('-inf')", `null`},
		{"str", "'nan'", `"nan"`},
		{"str with newline", "'a\\nb'", `"a\nb"`},
		{"short list", "[1, 'a', None]", ""},
		{"long list", "list(range(40))", ""},
		{"long list of names", "['package-%d' % i for i in range(30)]", ""},
		{"long dict", "{('key%02d' % i): 'v' * i for i in range(12)}", ""},
		{"nested", "{'a': list(range(25)), 'b': {'c': tuple(range(20))}}", ""},
		{"set", "set(range(30))", ""},
		{"over max_seq_length", "list(range(1500))", ""},
	}
	exprs := make([]string, len(tests))
	for i, tc := range tests {
		exprs[i] = tc.expr
	}
	wants := ipythonPrettyAll(t, exprs...)
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := wants[i]
			res := requireOK(t, k, tc.expr)
			require.NotNil(t, res.Text, "text/plain of %s", tc.expr)
			require.Equal(t, want, *res.Text)
			if tc.wantValue == "" {
				var got string
				require.NoError(t, json.Unmarshal(res.Value, &got), "value %s", res.Value)
				require.Equal(t, want, got)
			} else {
				require.JSONEq(t, tc.wantValue, string(res.Value))
			}
		})
	}

	// A known string, independent of the host's IPython: 40 items do not fit
	// in 79 columns, so each goes on its own line.
	res := requireOK(t, k, "list(range(40))")
	items := make([]string, 40)
	for i := range items {
		items[i] = strings.Repeat(" ", min(i, 1)) + itoa(i)
	}
	require.Equal(t, "["+strings.Join(items, ",\n")+"]", textOf(res))
	require.NotContains(t, textOf(res), "0, 1, 2", "repr() keeps a long list on one line")

	// None and statements have no text.
	for _, code := range []string{"None", "x = 1"} {
		res := requireOK(t, k, code)
		require.Nil(t, res.Text, code)
	}

	// A value whose __repr__ raises: the traceback goes to stderr (as in
	// IPython), without the driver's frames, and the cell still succeeds.
	res = requireOK(t, k, "class Bad:\n    def __repr__(self):\n        raise ValueError('no repr')\nBad()")
	require.Contains(t, res.Stderr, "ValueError: no repr")
	require.NotContains(t, res.Stderr, "driver.py")
	require.Nil(t, res.Text)
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

// TestAutoGenPackageListParses runs the cell AutoGen's
// ACADynamicSessionsCodeExecutor runs to list the session's packages and
// parses its value the way AutoGen does (strip "[]", split on ",\n", strip
// " '"): with repr() the list came back on one line and the parse gave one
// bogus name.
func TestAutoGenPackageListParses(t *testing.T) {
	t.Parallel()
	k := newKernel(t, shared(t))
	if k.Runner() != "ipython" {
		requireOrSkip(t, "IPython in the sandbox's Python")
	}
	// What AutoGen sends, less its pkg_resources import (deprecated; Debian's
	// setuptools warns on stderr): the same list of names.
	res := requireOK(t, k, "import importlib.metadata\n[d.metadata['Name'] for d in importlib.metadata.distributions()]")
	var out string
	require.NoError(t, json.Unmarshal(res.Value, &out))
	names := map[string]bool{}
	for _, p := range strings.Split(strings.Trim(out, "[]"), ",\n") {
		names[strings.Trim(p, " '")] = true
	}
	require.Greater(t, len(names), 3, "value %q", out)
	for n := range names {
		require.NotContains(t, n, ",", "a name still holds a list: %q", n)
	}
}

// TestTimeoutStderrShowsNoDriver checks that a timed-out cell's stderr shows
// the cell's own frames and a timeout line, and none of the emulator's
// (the driver's signal handler, its path).
func TestTimeoutStderrShowsNoDriver(t *testing.T) {
	t.Parallel()
	for _, runner := range []string{"ipython", "fallback"} {
		t.Run(runner, func(t *testing.T) {
			e := shared(t)
			if runner == "fallback" {
				var err error
				e, err = newExecutor(Options{Ready: 0, noIPython: true, noPreload: true, noFontCache: true, killGrace: testGrace})
				require.NoError(t, err)
				t.Cleanup(func() { require.NoError(t, e.Close()) })
			}
			k := newKernel(t, e)
			if k.Runner() != runner {
				requireOrSkip(t, "IPython in the sandbox's Python")
			}
			// spin sleeps rather than burns a core: the interrupt reaches
			// it the same way (TestTimeoutInterruptsCell and
			// TestFallbackRunner time out busy loops).
			res := runT(t, k, "import time\ndef spin():\n    while True:\n        time.sleep(0.05)\nprint('start')\nspin()", time.Second)
			require.Equal(t, kernel.Failed, res.Status)
			require.True(t, res.TimedOut)
			require.False(t, res.Restarted, "stderr: %s", res.Stderr)
			require.Equal(t, "start\n", res.Stdout)
			for _, internal := range []string{"driver.py", "_on_alarm", "/opt/azsessions", "run_one", "signum"} {
				require.NotContains(t, res.Stderr, internal)
			}
			require.Contains(t, res.Stderr, "spin()")
			require.Contains(t, res.Stderr, "KeyboardInterrupt")
			require.Contains(t, res.Stderr, "TimeoutError: the execution timed out after 1 seconds\n")
		})
	}
}

// TestDisplayOutputs pins the emulator's guess for cells with several display
// outputs (no public source shows the service's answer): display() prints
// each object's text/plain to stdout, as a terminal IPython does, and of
// several figures the last one is the cell's image value.
func TestDisplayOutputs(t *testing.T) {
	t.Parallel()
	k := figureKernel(t)
	if k.Runner() != "ipython" {
		requireOrSkip(t, "IPython in the sandbox's Python")
	}
	res := requireOK(t, k, "from IPython.display import display\ndisplay('one')\ndisplay(list(range(30)))\n42")
	require.Equal(t, "'one'\n"+ipythonPretty(t, "list(range(30))")+"\n", res.Stdout)
	require.JSONEq(t, `42`, string(res.Value))

	// A DataFrame's value is its text/plain form (no text/html).
	if _, ok := shared(t).Info().Packages["pandas"]; ok {
		res = requireOK(t, k, "import pandas as pd\npd.DataFrame({'a': [1, 2], 'b': ['x', 'y']})")
		var got string
		require.NoError(t, json.Unmarshal(res.Value, &got), "value %s", res.Value)
		require.Equal(t, "   a  b\n0  1  x\n1  2  y", got)
		require.NotContains(t, got, "<table")
	}

	if _, ok := shared(t).Info().Packages["matplotlib"]; !ok {
		requireOrSkip(t, "matplotlib")
	}
	res = requireOK(t, k, "import matplotlib.pyplot as plt\nplt.figure(figsize=(1, 1)); plt.plot([1, 2])\nplt.figure(figsize=(2, 1)); plt.plot([2, 1])\nplt.show()")
	var m map[string]string
	require.NoError(t, json.Unmarshal(res.Value, &m), "value %s", res.Value)
	require.Equal(t, "image", m["type"])
	require.Equal(t, "png", m["format"])
	png, err := base64.StdEncoding.DecodeString(m["base64_data"])
	require.NoError(t, err)
	cfg, _, err := image.DecodeConfig(bytes.NewReader(png))
	require.NoError(t, err)
	require.Greater(t, cfg.Width, cfg.Height, "the last figure (2x1 inches), not the first (1x1)")
	require.Nil(t, res.Text)
}

// TestDriverOutputPerBackend runs the driver's output code on every backend
// (bubblewrap, gVisor): a long list's text/plain as IPython.lib.pretty gives
// it, and a timed-out cell's stderr without the driver's frames.
func TestDriverOutputPerBackend(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, opts Options) {
		// The shared probe kernel: the cells only read, and the timed-out
		// one is stopped by the driver (no kill, nothing left).
		k := probeKernel(t, opts)
		if k.Runner() != "ipython" {
			requireOrSkip(t, "IPython in the sandbox's Python")
		}
		const expr = "['package-%02d' % i for i in range(12)]"
		res := requireOK(t, k, expr)
		require.Equal(t, ipythonPretty(t, expr), textOf(res))
		res = runT(t, k, "import time\ndef spin():\n    while True:\n        time.sleep(0.05)\nspin()", time.Second)
		require.True(t, res.TimedOut)
		require.Contains(t, res.Stderr, "spin()")
		require.Contains(t, res.Stderr, "TimeoutError")
		for _, internal := range []string{"driver.py", "_on_alarm", "/opt/azsessions"} {
			require.NotContains(t, res.Stderr, internal)
		}
	})
}

// TestFigureOverCap: a figure whose PNG passes the driver's
// max_figure_bytes is not returned (stderr says why) and the kernel keeps
// working; under the cap it is the cell's image.
func TestFigureOverCap(t *testing.T) {
	t.Parallel()
	if _, ok := shared(t).Info().Packages["matplotlib"]; !ok {
		requireOrSkip(t, "matplotlib")
	}
	cases := []struct {
		name     string
		capBytes int // 0: the shared executor's, maxFigureBytes
		image    bool
	}{
		{name: "under the cap", image: true},
		{name: "over the cap", capBytes: 1 << 10},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var k *Kernel
			if tc.capBytes == 0 {
				k = figureKernel(t)
			} else {
				k = newKernel(t, diskExecutor(t, Options{maxFigureBytes: tc.capBytes}))
			}
			res := runT(t, k, "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.gcf()", 2*time.Minute)
			require.Equal(t, kernel.Succeeded, res.Status, res.Stderr)
			if tc.image {
				require.Contains(t, string(res.Value), "base64_data")
				return
			}
			require.NotContains(t, string(res.Value), "base64_data")
			require.Contains(t, res.Stderr, "over the emulator's limit of 1024")
			requireOK(t, k, "1")
		})
	}
}
