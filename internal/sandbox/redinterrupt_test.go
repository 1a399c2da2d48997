//go:build linux

package sandbox

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/azsessions/azsessions/internal/kernel"
	"github.com/azsessions/azsessions/internal/testenv"
)

// TestHostileCellsAndInterruptResend: session code that fights the cancel
// (swallows every KeyboardInterrupt; tries to flood its own command pipe through
// /proc/self/fd (denied) and starves the reader of the GIL; clears the
// driver's interrupted flag) is still ended: the kernel is killed after the
// grace and restarted, and the next cell runs. A bystander kernel whose
// cell runs meanwhile, and whose command pipe the hostile cell tries to
// reach through /proc, is untouched.
//
// Each cell writes its "started" marker inside the try that swallows the
// interrupt: written before it, an interrupt that arrived while the marker
// was being written ended the cell as a plain Canceled without the kill
// (1 of 3 quick-loop runs on a slower machine), and the test did not test
// the kill.
func TestHostileCellsAndInterruptResend(t *testing.T) {
	testenv.SkipLongInQuickLoop(t)
	t.Parallel()
	requireSandbox(t, true)
	const grace = 2 * time.Second
	e, err := newExecutor(Options{Ready: 0, noPreload: true, killGrace: grace})
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Close() })
	forgeOthers := `
import os, json
for p in os.listdir('/proc'):
    if not p.isdigit(): continue
    for fd in ('3', '4'):
        try:
            w = os.open('/proc/%s/fd/%s' % (p, fd), os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            continue
        for i in range(64):
            try: os.write(w, (json.dumps({"op": "interrupt", "id": i}) + "\n").encode())
            except OSError: pass
        os.close(w)
`
	cases := []struct{ name, code string }{
		{"swallow", `
import time
while True:
    try:
        open('/mnt/data/started', 'w').close()
        time.sleep(3600)
    except KeyboardInterrupt:
        pass
`},
		{"flood own command pipe", forgeOthers + `
import os, sys, time
sys.setswitchinterval(1000)
try:
    w = os.open('/proc/self/fd/3', os.O_WRONLY | os.O_NONBLOCK)
    while True: os.write(w, b'x' * 4096)
except OSError:
    pass  # denied: the pipe is not the sandbox user's
while True:
    try:
        open('/mnt/data/started', 'w').close()
        while True: pass
    except KeyboardInterrupt:
        pass
`},
		{"clear interrupted flag", `
import sys, time
m = sys.modules['__main__']
while True:
    try:
        open('/mnt/data/started', 'w').close()
        getattr(m, '_state', {})['interrupted'] = False
        time.sleep(0.05)
    except KeyboardInterrupt:
        pass
`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k := newKernel(t, e)
			by := newKernel(t, e)
			byDone := make(chan kernel.Result, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				res, _ := by.Execute(ctx, kernel.Request{Code: "import time\nfor _ in range(40): time.sleep(0.05)\n'by'", Timeout: time.Minute})
				byDone <- res
			}()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go func() {
				waitForFile(ctx, filepath.Join(k.DataDir(), "started"))
				cancel()
			}()
			res, err := k.Execute(ctx, kernel.Request{Code: tc.code, Timeout: time.Hour})
			require.NoError(t, err)
			require.Equal(t, kernel.Canceled, res.Status, "stderr: %s", res.Stderr)
			require.True(t, res.Restarted, "stderr: %s", res.Stderr)
			requireOK(t, k, "1")
			bres := <-byDone
			require.Equal(t, kernel.Succeeded, bres.Status, "bystander: %s", bres.Stderr)
			require.JSONEq(t, `"by"`, string(bres.Value))
		})
	}
}
