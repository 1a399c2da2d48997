//go:build linux

package sandbox

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGvisorSmoke runs cells in a gVisor kernel: state persists, output and
// values come back, files written in /mnt/data appear in the data directory,
// and a file the host writes into the data directory while the kernel runs
// appears in /mnt/data after the kernel looked it up and listed the
// directory (the Sentry revalidates that mount: no read-only system mount's
// exclusive caching, gvisorExclusiveHint).
func TestGvisorSmoke(t *testing.T) {
	t.Parallel()
	requireGvisor(t)
	e := sharedFor(t, testOptions(ModeGvisor))
	require.Equal(t, "gvisor", e.Info().Sandbox)
	k := newKernel(t, e)
	requireOK(t, k, "x = 20")
	res := requireOK(t, k, "print('hi'); open('/mnt/data/f.txt', 'w').write('data'); x + 22")
	require.Equal(t, "hi\n", res.Stdout)
	require.JSONEq(t, "42", string(res.Value))
	data, err := os.ReadFile(filepath.Join(k.DataDir(), "f.txt"))
	require.NoError(t, err)
	require.Equal(t, "data", string(data))

	res = requireOK(t, k, "import json, os\nprint(json.dumps([os.path.exists('/mnt/data/later.txt'), sorted(os.listdir('/mnt/data'))]))")
	require.JSONEq(t, `[false, ["f.txt"]]`, res.Stdout)
	require.NoError(t, os.WriteFile(filepath.Join(k.DataDir(), "later.txt"), []byte("from the host"), 0o644))
	res = requireOK(t, k, "print(json.dumps([open('/mnt/data/later.txt').read(), sorted(os.listdir('/mnt/data'))]))")
	require.JSONEq(t, `["from the host", ["f.txt", "later.txt"]]`, res.Stdout)
}

// TestGvisorExclusiveHints: the bundle's mount hints (gvisorExclusiveHint)
// name only read-only binds, never the data directory, the socket
// directories or a tmpfs; /usr has one.
func TestGvisorExclusiveHints(t *testing.T) {
	t.Parallel()
	requireGvisor(t)
	e := sharedFor(t, testOptions(ModeGvisor))
	dataDir := filepath.Join(t.TempDir(), "data")
	_, c, err := e.gvisorArgs(dataDir, e.procEnv(), e.newDriverConfig(), e.program())
	require.NoError(t, err)
	defer c.remove()
	raw, err := os.ReadFile(filepath.Join(c.bundle, "config.json"))
	require.NoError(t, err)
	var spec ociSpec
	require.NoError(t, json.Unmarshal(raw, &spec))
	sources := map[string]bool{}
	for k, v := range spec.Annotations {
		name, field, ok := strings.Cut(strings.TrimPrefix(k, "dev.gvisor.spec.mount."), ".")
		require.True(t, ok && strings.HasPrefix(k, "dev.gvisor.spec.mount."), k)
		switch field {
		case "source":
			sources[v] = true
		case "type":
			require.Equal(t, "bind", v, name)
		case "share":
			require.Equal(t, "container", v, name)
		default:
			t.Fatalf("unexpected hint field %s", k)
		}
	}
	require.True(t, sources["/usr"], "no hint for /usr: %v", sources)
	hinted := 0
	for _, m := range spec.Mounts {
		if !sources[m.Source] {
			continue
		}
		hinted++
		require.Equal(t, "bind", m.Type, m.Destination)
		require.Contains(t, m.Options, "ro", m.Destination)
		require.NotContains(t, m.Options, "rw", m.Destination)
		require.NotContains(t, []string{sandboxData, gvisorIODir, sandboxProxyDir}, m.Destination)
	}
	require.Len(t, sources, hinted, "a hint names no mount or several")
}

// TestGvisorKernelIsGvisor checks that session code talks to gVisor's
// Sentry, not to the host's kernel: uname and the kernel log are gVisor's,
// the process table holds only the sandbox's processes, and the host's
// kernel command line and modules are not visible.
func TestGvisorKernelIsGvisor(t *testing.T) {
	t.Parallel()
	requireGvisor(t)
	k := newKernel(t, sharedFor(t, testOptions(ModeGvisor)))
	host, err := os.ReadFile("/proc/sys/kernel/osrelease")
	require.NoError(t, err)
	res := requireOK(t, k, `import os, subprocess
print(os.uname().release)
print(subprocess.run(['dmesg'], capture_output=True, text=True).stdout[:2000])
pids = [p for p in os.listdir('/proc') if p.isdigit()]
print('PIDS', len(pids))
print('MODULES', os.path.exists('/proc/modules'))
`)
	lines := strings.Split(res.Stdout, "\n")
	require.NotEqual(t, strings.TrimSpace(string(host)), lines[0], "uname shows the host's kernel")
	require.Contains(t, res.Stdout, "gVisor", "dmesg is not gVisor's")
	// The driver and at most a few helpers: not the host's hundreds.
	require.Regexp(t, `PIDS [1-9]\n`, res.Stdout)
	require.Contains(t, res.Stdout, "MODULES False")
}

// TestGvisorKernelContract runs the kernel contract tests (execution,
// values, output cap, timeouts, restarts, cancellation, figures, preload,
// the data directory watcher) on the gVisor backend; they run on bwrap as
// top-level tests. shared and diskExecutor give them a gVisor executor (see
// contractMode). These run in parallel (each calls t.Parallel); those that
// must run alone are in TestGvisorKernelContractAlone.
func TestGvisorKernelContract(t *testing.T) {
	t.Parallel()
	requireGvisor(t)
	runContract(t, []contractTest{
		{"TestStatePersists", TestStatePersists},
		{"TestOutputCap", TestOutputCap},
		{"TestLastExpressionValues", TestLastExpressionValues},
		{"TestPrintOutput", TestPrintOutput},
		{"TestExceptionFails", TestExceptionFails},
		{"TestSeedSyntaxError", TestSeedSyntaxError},
		{"TestMatplotlibFigure", TestMatplotlibFigure},
		{"TestTimeoutInterruptsCell", TestTimeoutInterruptsCell},
		{"TestIgnoredInterruptKillsAndRestarts", TestIgnoredInterruptKillsAndRestarts},
		{"TestKernelDeathRestartsOnNextExecute", TestKernelDeathRestartsOnNextExecute},
		{"TestCancel", TestCancel},
		{"TestDataDir", TestDataDir},
		{"TestParallelKernels", TestParallelKernels},
		{"TestCloseDuringExecute", TestCloseDuringExecute},
		{"TestSkippedStartModulesImportable", TestSkippedStartModulesImportable},
		{"TestUnlinkedOpenFilesCount", TestUnlinkedOpenFilesCount},
		{"TestUnlinkedMappedFilesCount", TestUnlinkedMappedFilesCount},
		{"TestDataDirSpace", TestDataDirSpace},
		{"TestDataDirEntryLimit", TestDataDirEntryLimit},
	})
}

// TestGvisorKernelContractAlone runs, on gVisor, the contract tests that
// run alone (not in parallel): the data directory tests race a writer
// against the watcher's polls, which other tests' load would make flaky.
func TestGvisorKernelContractAlone(t *testing.T) {
	requireGvisor(t)
	runContract(t, []contractTest{
		{"TestDataDirQuota", TestDataDirQuota},
		{"TestBackgroundWriterIsStopped", TestBackgroundWriterIsStopped},
	})
}

type contractTest struct {
	name string
	f    func(*testing.T)
}

func runContract(t *testing.T, tests []contractTest) {
	t.Helper()
	for _, tc := range tests {
		t.Run(tc.name, tc.f)
	}
}

// TestDistinctFileTables: processes that share a descriptor table (threads
// here; the Sentry's stubs under gVisor) are scanned once.
func TestDistinctFileTables(t *testing.T) {
	t.Parallel()
	self := os.Getpid()
	require.Equal(t, []int{self}, distinctFileTables([]int{self, self}))
	require.Equal(t, []int{self, 1}, distinctFileTables([]int{self, 1, self}))
}

// TestGvisorCloseLeavesNoSandbox: Kernel.Close returns once nothing of the
// container runs any more, although runsc's state may still be being
// removed in the background (gvisorContainer.removeLater): no Sentry, Gofer
// or `runsc run` of it is left, only, for a while, a `runsc delete`.
func TestGvisorCloseLeavesNoSandbox(t *testing.T) {
	t.Parallel()
	requireGvisor(t)
	k := newKernel(t, sharedFor(t, testOptions(ModeGvisor)))
	requireOK(t, k, "import subprocess\nsubprocess.Popen(['sleep', '1000'], start_new_session=True)")
	k.pmu.Lock()
	id := k.p.gv.id
	k.pmu.Unlock()
	require.NotEmpty(t, findProcs(t, id))
	require.NoError(t, k.Close())
	for _, pid := range findProcs(t, id) {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue // gone meanwhile
		}
		args := strings.Split(strings.TrimRight(string(data), "\x00"), "\x00")
		require.Contains(t, args, "delete", "a process of the closed container still runs: %q", args)
	}
}
