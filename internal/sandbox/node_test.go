//go:build linux

package sandbox

import (
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

// requireNode skips the test when Node.js is missing, or fails it instead
// when AZSESSIONS_REQUIRE_SANDBOX=1.
func requireNode(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("node"); err == nil {
		return
	}
	if os.Getenv("AZSESSIONS_REQUIRE_SANDBOX") == "1" {
		t.Fatal("AZSESSIONS_REQUIRE_SANDBOX=1 but Node.js (node) is missing")
	}
	t.Skip("Node.js (node) not installed (set AZSESSIONS_REQUIRE_SANDBOX=1 to make this fatal)")
}

// nodeOptions are the test limits of a Node.js executor of mode.
func nodeOptions(mode string) Options {
	o := testOptions(mode)
	o.Runtime = RuntimeNode
	o.Ready = 1
	return o
}

// sharedNode returns the Node.js executor of opts.Mode shared by the tests
// (sharedFor, keyed by runtime too).
func sharedNode(t testing.TB, opts Options) *Executor {
	t.Helper()
	requireNode(t)
	return sharedFor(t, opts)
}

// runJS executes code with the given timeout.
func runJS(t testing.TB, k kernel.Kernel, code string, timeout time.Duration) kernel.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout+time.Minute)
	defer cancel()
	res, err := k.Execute(ctx, kernel.Request{Code: code, Timeout: timeout, OutputStreamsMaxLength: 4096})
	require.NoError(t, err)
	return res
}

// TestNodeKernel runs the NodeLTS kernel's contract on each backend, on one
// kernel (cells in order): state across cells, values and their text form,
// output streams, errors, top-level await, timeouts of synchronous and
// awaited code (state kept), cancellation, /mnt/data and the file limit.
func TestNodeKernel(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, opts Options) {
		e := sharedNode(t, nodeOptions(opts.Mode))
		info := e.Info()
		require.Regexp(t, `^\d+\.\d+\.\d+$`, info.NodeVersion)
		require.Empty(t, info.PythonVersion)
		k := newKernel(t, e)
		require.Equal(t, "node", k.Runner())
		ok := func(t *testing.T, code string) kernel.Result {
			t.Helper()
			res := runJS(t, k, code, 30*time.Second)
			require.Equal(t, kernel.Succeeded, res.Status, "code %q\nstdout: %s\nstderr: %s", code, res.Stdout, res.Stderr)
			require.False(t, res.Restarted)
			return res
		}

		t.Run("state", func(t *testing.T) {
			res := ok(t, "let x = 1; var v = 'var'; function f() { return 40 }; class C {}")
			require.JSONEq(t, `""`, string(res.Value), "a declaration has no value")
			require.Nil(t, res.Text)
			res = ok(t, "x + f() + 1")
			require.JSONEq(t, `42`, string(res.Value))
			require.Equal(t, "42", *res.Text)
			res = ok(t, "x = 2; [v, typeof C]")
			require.JSONEq(t, `"[ 'var', 'function' ]"`, string(res.Value))
		})

		t.Run("values", func(t *testing.T) {
			for _, tc := range []struct{ code, value, text string }{
				{"'nan'", `"nan"`, "'nan'"},
				{"1 / 4", `0.25`, "0.25"},
				{"NaN", `null`, "NaN"},
				{"-Infinity", `null`, "-Infinity"},
				{"3 > 2", `true`, "true"},
				{"({a: [1, {b: 'c'}], d: new Map([[1, 2]])})", `"{ a: [ 1, { b: 'c' } ], d: Map(1) { 1 => 2 } }"`, "{ a: [ 1, { b: 'c' } ], d: Map(1) { 1 => 2 } }"},
				{"10n ** 30n", `"1000000000000000000000000000000n"`, "1000000000000000000000000000000n"},
				{"Promise.resolve('resolved')", `"resolved"`, "'resolved'"},
			} {
				res := ok(t, tc.code)
				require.JSONEq(t, tc.value, string(res.Value), tc.code)
				require.NotNil(t, res.Text, tc.code)
				require.Equal(t, tc.text, *res.Text, tc.code)
			}
			res := ok(t, "null")
			require.JSONEq(t, `null`, string(res.Value))
			require.Nil(t, res.Text)
			res = ok(t, "undefined")
			require.JSONEq(t, `""`, string(res.Value))
			require.Nil(t, res.Text)
		})

		t.Run("streams", func(t *testing.T) {
			res := ok(t, "console.log('hello-world'); console.error('to', 'stderr'); process.stdout.write('raw')")
			require.Equal(t, "hello-world\nraw", res.Stdout)
			require.Equal(t, "to stderr\n", res.Stderr)
			require.JSONEq(t, `true`, string(res.Value), "stream.write's value")
		})

		t.Run("errors", func(t *testing.T) {
			res := runJS(t, k, "const before = 1;\nnull.boom", 30*time.Second)
			require.Equal(t, kernel.Failed, res.Status)
			require.Contains(t, res.Stderr, "TypeError: Cannot read properties of null (reading 'boom')")
			require.Contains(t, res.Stderr, "<cell-")
			require.NotContains(t, res.Stderr, "driver.js")
			require.NotContains(t, res.Stderr, "node:vm")
			require.JSONEq(t, `""`, string(res.Value))
			res = runJS(t, k, "let broken = ", 30*time.Second)
			require.Equal(t, kernel.Failed, res.Status)
			require.Contains(t, res.Stderr, "SyntaxError")
			res = runJS(t, k, "throw 'a string'", 30*time.Second)
			require.Equal(t, kernel.Failed, res.Status)
			require.Contains(t, res.Stderr, "Uncaught 'a string'")
			res = runJS(t, k, "Promise.reject(new RangeError('rejected'))", 30*time.Second)
			require.Equal(t, kernel.Failed, res.Status)
			require.Contains(t, res.Stderr, "RangeError: rejected")
			require.JSONEq(t, `2`, string(ok(t, "x").Value), "an error keeps the state")
		})

		t.Run("top-level await", func(t *testing.T) {
			res := ok(t, "const y = await new Promise(r => setTimeout(() => r(41), 10)); y")
			require.JSONEq(t, `41`, string(res.Value))
			require.JSONEq(t, `42`, string(ok(t, "y + 1").Value), "declarations of an awaiting cell stay")
		})

		t.Run("timeout", func(t *testing.T) {
			for _, code := range []string{"while (true) {}", "await new Promise(() => {})"} {
				res := runJS(t, k, code, time.Second)
				require.Equal(t, kernel.Failed, res.Status, code)
				require.True(t, res.TimedOut, code)
				require.False(t, res.Restarted, code)
				require.Contains(t, res.Stderr, "TimeoutError: the execution timed out after 1 seconds", code)
				require.JSONEq(t, `2`, string(ok(t, "x").Value), "a timeout keeps the state")
			}
		})

		t.Run("cancel", func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan kernel.Result, 1)
			go func() {
				res, err := k.Execute(ctx, kernel.Request{Code: "require('fs').writeFileSync('waiting', ''); await new Promise(() => {})", Timeout: time.Minute})
				require.NoError(t, err)
				done <- res
			}()
			require.Eventually(t, func() bool {
				_, err := os.Stat(filepath.Join(k.DataDir(), "waiting"))
				return err == nil
			}, 30*time.Second, 10*time.Millisecond)
			cancel()
			res := <-done
			require.Equal(t, kernel.Canceled, res.Status)
			require.False(t, res.Restarted, "an awaiting cell is interrupted, not killed")
			require.JSONEq(t, `2`, string(ok(t, "x").Value))
		})

		t.Run("limits", func(t *testing.T) {
			// (gVisor has no /proc/self/limits: bash reports them, in KiB.)
			res := ok(t, "require('child_process').execFileSync('/bin/bash', ['-c', 'ulimit -S -f; ulimit -H -f; ulimit -H -c'], {encoding: 'utf8'})")
			kib := strconv.Itoa(testFileSize >> 10)
			require.JSONEq(t, strconv.Quote(kib+"\n"+kib+"\n0\n"), string(res.Value))
		})

		t.Run("files", func(t *testing.T) {
			res := ok(t, "const fs = require('fs'); fs.writeFileSync('from-node.txt', 'hi'); process.cwd()")
			require.JSONEq(t, `"/mnt/data"`, string(res.Value))
			b, err := os.ReadFile(filepath.Join(k.DataDir(), "from-node.txt"))
			require.NoError(t, err)
			require.Equal(t, "hi", string(b))
			require.NoError(t, os.WriteFile(filepath.Join(k.DataDir(), "from-host.txt"), []byte("host"), 0o644))
			require.JSONEq(t, `"host"`, string(ok(t, "fs.readFileSync('/mnt/data/from-host.txt', 'utf8')").Value))
			res = runJS(t, k, "fs.writeFileSync('big', Buffer.alloc("+strconv.Itoa(testFileSize+1)+"))", 30*time.Second)
			require.Equal(t, kernel.Failed, res.Status)
			require.Contains(t, res.Stderr, "EFBIG")
		})
	})
}

// TestNodeKernelRestarts: code that blocks the event loop after an await
// (beyond vm's watchdog) is killed after the grace period, and a heap past
// the memory limit stops Node.js; both are restarted by the next execution
// (files kept).
func TestNodeKernelRestarts(t *testing.T) {
	testenv.SkipLongInQuickLoop(t)
	t.Parallel()
	requireSandbox(t, true)
	k := newKernel(t, sharedNode(t, nodeOptions(ModeBwrap)))
	k.killGrace = shortGrace // no interrupt stops the loop: it is killed after the grace
	// Atomics.wait blocks the thread as a busy loop would, without
	// burning a core until the kill.
	res := runJS(t, k, "require('fs').writeFileSync('kept', 'yes'); await null; Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0)", time.Second)
	require.Equal(t, kernel.Failed, res.Status)
	require.True(t, res.TimedOut)
	require.True(t, res.Restarted, "the kernel was killed")
	res = runJS(t, k, "const a = []; while (true) a.push(new Array(1e7).fill(1))", time.Minute)
	require.Equal(t, kernel.Failed, res.Status)
	require.Contains(t, res.Stderr, "heap out of memory")
	res = runJS(t, k, "require('fs').readFileSync('kept', 'utf8')", 30*time.Second)
	require.Equal(t, kernel.Succeeded, res.Status, res.Stderr)
	require.True(t, res.Restarted)
	require.JSONEq(t, `"yes"`, string(res.Value))
}

// TestNodeInheritedDescriptorsClosed: a descriptor the emulator holds
// without close-on-exec never reaches the cells: only 0-4 and Node.js's own
// (event loop, epoll, eventfd; low numbers) are open.
func TestNodeInheritedDescriptorsClosed(t *testing.T) {
	requireSandbox(t, true)
	requireNode(t)
	f, err := os.Open("/etc/hostname")
	require.NoError(t, err)
	defer f.Close()
	// A high number, which the child's own descriptors (3, 4, then bwrap's)
	// do not overwrite; dup2 leaves FD_CLOEXEC clear.
	const leaked = 900
	require.NoError(t, syscall.Dup2(int(f.Fd()), leaked))
	defer syscall.Close(leaked)
	e, err := New(Options{DataDir: testenv.DataDir(t), Ready: 0, Runtime: RuntimeNode})
	require.NoError(t, err)
	defer e.Close()
	k := newKernel(t, e)
	res := runJS(t, k, `const fs = require('fs'); const fds = {};
for (const f of fs.readdirSync('/proc/self/fd')) { try { fds[f] = fs.readlinkSync('/proc/self/fd/' + f) } catch (e) {} }
JSON.stringify(fds)`, 30*time.Second)
	require.Equal(t, kernel.Succeeded, res.Status, res.Stderr)
	var s string
	require.NoError(t, json.Unmarshal(res.Value, &s))
	var fds map[string]string
	require.NoError(t, json.Unmarshal([]byte(s), &fds))
	require.NotContains(t, fds, strconv.Itoa(leaked), "an inherited descriptor reached user code")
	for fd := range fds {
		n, err := strconv.Atoi(fd)
		require.NoError(t, err)
		require.Less(t, n, 100, "descriptor %s (%s) reached user code", fd, fds[fd])
	}
}

// TestNodeOutsideSystemDirs: a Node.js executable outside the directories
// the sandbox shows (here a hard link in a temporary directory, as
// /usr/local/bin/node would be) is bound into the sandbox alone, at
// /opt/azsessions/node; its host directory stays invisible.
func TestNodeOutsideSystemDirs(t *testing.T) {
	t.Parallel()
	requireNode(t)
	real, err := filepath.EvalSymlinks(nodePath(t))
	require.NoError(t, err)
	hostDir := filepath.Join(testenv.DataDir(t), "node-bin")
	require.NoError(t, os.Mkdir(hostDir, 0o755))
	bin := filepath.Join(hostDir, "node")
	if err := os.Link(real, bin); err != nil {
		t.Skipf("cannot hard-link %s into %s: %v", real, hostDir, err)
	}
	forEachBackend(t, func(t *testing.T, opts Options) {
		opts.Runtime, opts.Node, opts.Ready, opts.DataDir = RuntimeNode, bin, 0, testenv.DataDir(t)
		e, err := New(opts)
		require.NoError(t, err)
		defer e.Close()
		require.Equal(t, bin, e.Info().Interpreter)
		k := newKernel(t, e)
		res := runJS(t, k, "[process.execPath, require('fs').existsSync("+strconv.Quote(hostDir)+")]", 30*time.Second)
		require.Equal(t, kernel.Succeeded, res.Status, res.Stderr)
		require.Equal(t, `[ '/opt/azsessions/node', false ]`, *res.Text)
	})
}

// nodePath is the node on PATH.
func nodePath(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("node")
	require.NoError(t, err)
	return p
}

// TestNodeForgedReplyBounded (red team, NodeLTS): session code can write a
// reply of its own to the driver's reply descriptor (fd 4; the protocol
// socket on gVisor) with the running cell's id. driver.js's replies have no
// figure and values capped at 1 Mi characters, yet the emulator took lines
// of up to 64 MiB from it (the Python driver's bound, for PNGs) and answered
// a forged 60 MiB executionResult (~400 MiB of emulator RSS after two
// requests). A line past maxReplyBytes (16 MiB; the forged value alone is
// that long) is now a broken protocol: the kernel is restarted and the
// forged value never reaches the Result. The largest real reply (1 Mi
// control characters: 6 bytes each in JSON) still passes.
func TestNodeForgedReplyBounded(t *testing.T) {
	testenv.SkipLongInQuickLoop(t)
	// Alone when gVisor runs: a 20 MiB line through gVisor's socket beside
	// other sandboxes' work took over a minute on the loaded 2-core machine
	// (12 s alone). Without it (the quick loop) nothing needs the machine
	// to itself.
	if gvisor, _ := testenv.GvisorInThisRun(); !gvisor {
		t.Parallel()
	}
	// The writer retries a full socket at once: waiting a millisecond
	// instead saved CPU alone (20.5 s -> 15.1 s) but, woken late on a
	// loaded machine, doubled the test's time in a full run (48 s -> 95 s).
	forEachBackendAlone(t, func(t *testing.T, opts Options) {
		k := newKernel(t, sharedNode(t, nodeOptions(opts.Mode)))
		res := runJS(t, k, `'\x01'.repeat(2 << 20)`, time.Minute)
		require.Equal(t, kernel.Succeeded, res.Status, res.Stderr)
		var s string
		require.NoError(t, json.Unmarshal(res.Value, &s))
		require.Len(t, s, 1<<20)

		// The driver pushes each request on its queue: that gives the id.
		res = runJS(t, k, `const push = Array.prototype.push;
Array.prototype.push = function (...a) {
  if (a.length === 1 && a[0] !== null && typeof a[0] === 'object' && a[0].op === 'exec') globalThis.forgeID = a[0].id;
  return push.apply(this, a);
}; 1`, time.Minute)
		require.Equal(t, kernel.Succeeded, res.Status, res.Stderr)
		res = runJS(t, k, fmt.Sprintf(`const fs = require('fs');
let fd = 4;
for (const f of fs.readdirSync('/proc/self/fd')) {
  try { if (fs.readlinkSync('/proc/self/fd/' + f).startsWith('socket:')) fd = Number(f); } catch (e) {}
}
let b = Buffer.from(JSON.stringify({id: globalThis.forgeID, ok: true, has_value: true, value: 'F'.repeat(%d),
  text: 'forged', timed_out: false, interrupted: false, duration_ms: 1, exit_code: null}) + '\n');
while (b.length > 0) {
  try { b = b.subarray(fs.writeSync(fd, b)); } catch (e) { if (e.code !== 'EAGAIN') throw e; }
}
'real'`, maxReplyBytes), time.Minute)
		require.False(t, strings.Contains(string(res.Value), "FFFFFFFF"), "a forged reply past the bound was taken (%d bytes)", len(res.Value))
		if res.Text != nil {
			require.NotEqual(t, "forged", *res.Text, "a forged reply past the bound was taken")
		}
		res = runJS(t, k, `1 + 1`, time.Minute)
		require.Equal(t, kernel.Succeeded, res.Status, res.Stderr)
		require.JSONEq(t, "2", string(res.Value))
	})
}

// TestReplyWithinContract: the replies the drivers can write pass; a text
// or string value past maxValueChars characters, a huge number, or an
// object that is not a figure is session code's own reply.
func TestReplyWithinContract(t *testing.T) {
	t.Parallel()
	str := func(s string) *string { return &s }
	quoted := func(s string) json.RawMessage { b, _ := json.Marshal(s); return b }
	cases := []struct {
		name string
		rep  execReply
		ok   bool
	}{
		{name: "no value", rep: execReply{}, ok: true},
		{name: "null", rep: execReply{Value: json.RawMessage(`null`)}, ok: true},
		{name: "number", rep: execReply{Value: json.RawMessage(`42`), Text: str("42")}, ok: true},
		{name: "string at the cap", rep: execReply{Value: quoted(strings.Repeat("é", maxValueChars)), Text: str(strings.Repeat("é", maxValueChars))}, ok: true},
		{name: "control characters at the cap", rep: execReply{Value: quoted(strings.Repeat("\x01", maxValueChars))}, ok: true},
		{name: "figure", rep: execReply{Value: json.RawMessage(`{"type":"image","format":"png","base64_data":"` + strings.Repeat("A", 8<<20) + `"}`)}, ok: true},
		{name: "figure past the cap", rep: execReply{Value: json.RawMessage(`{"type":"image","format":"png","base64_data":"` + strings.Repeat("A", base64.StdEncoding.EncodedLen(maxFigureBytes)+4) + `"}`)}},
		{name: "string past the cap", rep: execReply{Value: quoted(strings.Repeat("F", maxValueChars+1))}},
		{name: "text past the cap", rep: execReply{Value: json.RawMessage(`1`), Text: str(strings.Repeat("F", maxValueChars+1))}},
		{name: "huge number", rep: execReply{Value: json.RawMessage(strings.Repeat("9", maxScalarValueBytes+1))}},
		{name: "object that is not a figure", rep: execReply{Value: json.RawMessage(`{"type":"text","x":"forged"}`)}},
		{name: "array", rep: execReply{Value: json.RawMessage(`["forged"]`)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.ok, replyWithinContract(tc.rep))
		})
	}
}

// TestPythonForgedReplyBounded (PythonLTS, the Python analogue of
// TestNodeForgedReplyBounded): session code writes, to the driver's reply
// descriptor, a reply with the running cell's id and a value one character
// past the driver's 1 Mi-character cap (maxValueChars), under the 16 MiB
// line bound. Without the contract check it was the cell's Result (sent
// back by the emulator as executionResult); now the kernel is restarted
// and the forged value never reaches the Result. It measures nothing
// host-wide: it runs beside other tests.
func TestPythonForgedReplyBounded(t *testing.T) {
	testenv.SkipLongInQuickLoop(t)
	t.Parallel()
	forEachBackend(t, func(t *testing.T, opts Options) {
		k := newKernel(t, sharedFor(t, opts))
		// The cell finds the running request's id in the driver's frames
		// and writes through the driver's own reply function (its lock
		// keeps the background preload's message from splitting the line).
		res := runT(t, k, fmt.Sprintf(`import sys
mid = None
for f in sys._current_frames().values():
    while f is not None:
        m = f.f_locals.get("msg")
        if isinstance(m, dict) and m.get("op") == "exec":
            mid, reply = m["id"], f.f_globals["reply"]
        f = f.f_back
assert mid is not None, "no request found"
reply({"id": mid, "ok": True, "has_value": True, "value": "F" * (%d + 1), "text": "forged",
    "timed_out": False, "interrupted": False, "duration_ms": 1, "exit_code": None})
mid`, maxValueChars), 2*time.Minute)
		require.Equal(t, kernel.Failed, res.Status, "the forged reply was taken as the cell's")
		require.True(t, res.Restarted)
		require.NotContains(t, string(res.Value), "FFFFFFFF", "a forged reply past the value cap was taken (%d bytes)", len(res.Value))
		if res.Text != nil {
			require.NotEqual(t, "forged", *res.Text, "a forged reply past the value cap was taken")
		}
		res = run(t, k, `1 + 1`)
		require.Equal(t, kernel.Succeeded, res.Status, res.Stderr)
		require.JSONEq(t, "2", string(res.Value))
	})
}
