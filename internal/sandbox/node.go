//go:build linux

package sandbox

// Node.js kernels (Options.Runtime RuntimeNode, for NodeLTS session pools).
//
// Every kernel runs driver.js (embedded, copied into the sandbox like
// driver.py) in one long-lived Node.js process, in the same sandboxes
// (bwrap, gvisor, none), cgroups, data directory watcher and protocol as the
// Python driver; driver.js's header says how cells run and what their
// values are.
//
// The process is started by a small bash script (nodeWrapper) inside the
// sandbox, because Node.js can neither lower its own rlimits nor tell the
// descriptors it inherited from its own: the script lowers RLIMIT_CORE to 0,
// RLIMIT_FSIZE to MaxFileSizeBytes (rounded down to KiB: bash counts in KiB)
// and, where no pids cgroup bounds the tasks, RLIMIT_NPROC (the Python
// driver's values), closes every descriptor above 4 (those the emulator
// inherited without close-on-exec; 0-2 are the cell's streams, 3-4 the
// protocol), then execs node.
//
// Memory: V8's heap is capped at 3/4 of MemoryLimitBytes
// (--max-old-space-size; the rest is for Node.js itself and buffers, so
// that the heap's limit comes before the memory cgroup's): past it Node.js
// stops with "JavaScript heap out of memory", the kernel dies and the next
// execution restarts it. RLIMIT_AS is set only where no
// memory cgroup bounds the sandbox, to MemoryLimitBytes + 1 GiB (Node.js
// maps ~0.7 GiB of address space before it runs anything): an address-space
// limit makes every WebAssembly.Memory fail (V8 reserves ~10 GiB of guard
// pages for each), so with cgroups, the memory cgroup alone bounds it.
//
// Seccomp: node runs under the same filter (io_uring refused: libuv falls
// back to its thread pool; sendmsg refused: node's stdio, files, pipes and
// TCP do not use it).

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/azsessions/azsessions/internal/kernel"
)

//go:embed driver.js
var nodeDriverSource []byte

// sandboxNode is where a Node.js executable from outside the system
// directories is bound in the sandbox.
const sandboxNode = sandboxSys + "/node"

// nodeRuntimeAS is the address space Node.js maps before it runs a cell
// (~0.7 GiB measured with Node.js 20), on top of which MemoryLimitBytes is
// allowed when RLIMIT_AS applies.
const nodeRuntimeAS = 1 << 30

// nodeWrapper is the bash script that starts node in the sandbox: its
// arguments are RLIMIT_FSIZE in KiB, RLIMIT_AS in KiB and RLIMIT_NPROC (0:
// not set), then node's command line.
const nodeWrapper = `f=$1 a=$2 n=$3; shift 3
ulimit -c 0 || exit 125
[ "$f" = 0 ] || ulimit -f "$f" || exit 125
[ "$a" = 0 ] || ulimit -v "$a" || exit 125
[ "$n" = 0 ] || ulimit -u "$n" || exit 125
for d in /proc/self/fd/*; do d=${d##*/}; [ "$d" -gt 4 ] && eval "exec $d>&-"; done
exec "$@"`

// probeNode finds the Node.js executable and asks it for its version.
func (e *Executor) probeNode() error {
	node := e.opts.Node
	if node == "" {
		node = "node"
		if _, err := os.Stat("/usr/bin/node"); err == nil {
			node = "/usr/bin/node"
		}
	}
	path, err := exec.LookPath(node)
	if err != nil {
		return fmt.Errorf("sandbox: Node.js executable %q not found (install Node.js 18 or later, or set -node): %w", node, err)
	}
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	if path, err = filepath.Abs(path); err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "--version")
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8"}
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = fmt.Errorf("%w: %s", err, strings.TrimSpace(string(ee.Stderr)))
		}
		return fmt.Errorf("sandbox: Node.js executable %s does not run: %w", path, err)
	}
	version := strings.TrimPrefix(strings.TrimSpace(string(out)), "v")
	if version == "" {
		return fmt.Errorf("sandbox: Node.js executable %s: unexpected --version output %q", path, out)
	}
	e.node = path
	// Bound alone unless the system directories the sandbox shows hold it.
	e.nodeBind = !underSystemDirs(path)
	for _, d := range hiddenDirs {
		if strings.HasPrefix(path, d+"/") {
			e.nodeBind = true
		}
	}
	e.info = kernel.Info{Interpreter: path, NodeVersion: version, Packages: map[string]string{}, Sandbox: e.sandboxName()}
	return nil
}

// sandboxName names the executor's isolation for Info.
func (e *Executor) sandboxName() string {
	switch e.opts.Mode {
	case ModeNone:
		return "none"
	case ModeGvisor:
		return "gvisor"
	}
	return "bubblewrap"
}

// program is what the executor's kernels run: driver.py, or driver.js
// for RuntimeNode.
func (e *Executor) program() programArgs {
	if e.opts.Runtime == RuntimeNode {
		return e.nodeArgv
	}
	return e.driverArgv
}

// nodeArgv runs driver.js: the wrapper script, node and its flags, the
// driver and its configuration as argv[2]. sysDir is where the executor's
// files are seen (e.sysDir in mode none, sandboxSys in a sandbox).
func (e *Executor) nodeArgv(sysDir string, cfg driverConfig) []string {
	cj, _ := json.Marshal(cfg)
	node := e.node
	if e.nodeBind && sysDir == sandboxSys {
		node = sandboxNode
	}
	fsize := cfg.MaxFileSize >> 10
	var as int64
	if e.cg == nil || e.cg.memory == "" {
		as = (cfg.Memory + nodeRuntimeAS) >> 10
	}
	heap := max(cfg.Memory*3/4>>20, 16)
	return []string{"/bin/bash", "-c", nodeWrapper, "azsessions-node",
		strconv.FormatInt(fsize, 10), strconv.FormatInt(as, 10), strconv.Itoa(cfg.NProc),
		node, "--expose-internals", "--max-old-space-size=" + strconv.FormatInt(heap, 10),
		sysDir + "/driver.js", string(cj)}
}
