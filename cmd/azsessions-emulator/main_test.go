package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/azsessions/azsessions/internal/testenv"
	"go.uber.org/goleak"

	"github.com/azsessions/azsessions/emulator"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestParseFlags(t *testing.T) {
	tests := []struct {
		args    []string
		wantErr string
		check   func(t *testing.T, c config)
	}{
		{nil, "", func(t *testing.T, c config) {
			require.Equal(t, "127.0.0.1:8080", c.addr)
			require.Equal(t, "bwrap", c.sandbox)
			require.Equal(t, 5*time.Minute, c.cooldown)
			require.Equal(t, 0, c.maxSessions, "0: derived from the executor's capacity")
			require.Equal(t, 1.0, c.cpus)
			require.Zero(t, c.maxMemory, "0: the sandbox's default")
			require.Zero(t, c.maxDisk)
			require.Empty(t, c.sandboxUser)
			require.Equal(t, 220*time.Second, c.maxExecutionTime)
			require.Equal(t, byteSize(128<<20), c.maxUploadBytes)
			require.Equal(t, 4096, c.outputStreamsMaxLength)
			require.Equal(t, byteSize(1<<30), c.memoryLimit)
			require.Equal(t, 2, c.ready)
			require.Nil(t, c.preload, "nil: the sandbox's default")
		}},
		{[]string{"-preload", "numpy, pandas,matplotlib"}, "", func(t *testing.T, c config) {
			require.Equal(t, []string{"numpy", "pandas", "matplotlib"}, c.preload)
		}},
		{[]string{"-pool-type", "Perl"}, "-pool-type must be PythonLTS, NodeLTS, Shell or CustomContainer", nil},
		{[]string{"-pool-type", "NodeLTS", "-node", "/opt/node/bin/node"}, "", func(t *testing.T, c config) {
			require.Equal(t, "NodeLTS", c.poolType)
			require.Equal(t, "/opt/node/bin/node", c.node)
		}},
		{[]string{"-pool-type", "CustomContainer"}, "needs -container-command and -target-port", nil},
		{[]string{"-container-command", "x", "-target-port", "80"}, "need -pool-type CustomContainer", nil},
		{[]string{"-pool-type", "CustomContainer", "-container-command", "python3 server.py", "-target-port", "8080", "-container-dir", "/srv"}, "", func(t *testing.T, c config) {
			require.Equal(t, "python3 server.py", c.containerCommand)
			require.Equal(t, 8080, c.targetPort)
			require.Equal(t, "/srv", c.containerDir)
			require.Equal(t, []string{}, c.preload)
		}},
		{[]string{"-pool-type", "Shell"}, "", func(t *testing.T, c config) { require.Equal(t, "Shell", c.poolType) }},
		{[]string{"-pool-type", "shell"}, "", func(t *testing.T, c config) { require.Equal(t, "Shell", c.poolType, "any case") }},
		{[]string{"-pool-type", "nodelts"}, "", func(t *testing.T, c config) { require.Equal(t, "NodeLTS", c.poolType, "any case") }},
		{[]string{"-preload", "none"}, "", func(t *testing.T, c config) {
			require.NotNil(t, c.preload)
			require.Empty(t, c.preload)
		}},
		{[]string{"-sandbox=none", "-max-upload-bytes", "10MiB", "-memory-limit", "512MB", "-cooldown", "1h", "-require-token"}, "", func(t *testing.T, c config) {
			require.Equal(t, "none", c.sandbox)
			require.Equal(t, byteSize(10<<20), c.maxUploadBytes)
			require.Equal(t, byteSize(512e6), c.memoryLimit)
			require.Equal(t, time.Hour, c.cooldown)
			require.True(t, c.requireToken)
		}},
		{[]string{"-cpus", "0.5", "-max-memory", "8GiB", "-max-disk", "20GiB", "-sandbox-user", "1234:1234", "-max-sessions", "7"}, "", func(t *testing.T, c config) {
			require.Equal(t, 0.5, c.cpus)
			require.Equal(t, byteSize(8<<30), c.maxMemory)
			require.Equal(t, byteSize(20<<30), c.maxDisk)
			require.Equal(t, "1234:1234", c.sandboxUser)
			require.Equal(t, 7, c.maxSessions)
		}},
		{[]string{"-sandbox", "gvisor"}, "", func(t *testing.T, c config) {
			require.Equal(t, emulator.SandboxGvisor, c.sandbox)
		}},
		{[]string{"-cpus", "0"}, "-cpus must be", nil},
		{[]string{"-max-sessions", "-3"}, "negative", nil},
		{[]string{"-sandbox=docker"}, "-sandbox must be", nil},
		{[]string{"-tls-cert", "x.pem"}, "go together", nil},
		{[]string{"-max-upload-bytes", "lots"}, "invalid size", nil},
		{[]string{"-ready", "-1"}, "negative", nil},
		{[]string{"-max-ready", "-1"}, "negative", nil},
		{[]string{"-max-ready", "8", "-ready", "3"}, "", func(t *testing.T, c config) {
			require.Equal(t, 8, c.maxReady)
			require.Equal(t, 3, c.ready)
		}},
		// The output cap's name and its deprecated former name.
		{[]string{"-output-streams-max-length", "100"}, "", func(t *testing.T, c config) { require.Equal(t, 100, c.outputStreamsMaxLength) }},
		{[]string{"-output-max-length", "200"}, "", func(t *testing.T, c config) {
			require.Equal(t, 200, c.outputStreamsMaxLength, "the old name still works")
		}},
		{[]string{"-output-max-length", "300", "-output-streams-max-length", "300"}, "", func(t *testing.T, c config) { require.Equal(t, 300, c.outputStreamsMaxLength) }},
		{[]string{"-output-max-length", "300", "-output-streams-max-length", "4096"}, "-output-max-length (deprecated) and -output-streams-max-length differ", nil},
		{[]string{"-output-max-length", "4096", "-output-streams-max-length", "300"}, "differ", nil},
		{[]string{"-output-streams-max-length", "-1"}, "must be in 0-1048576", nil},
		{[]string{"-output-max-length", "1048577"}, "must be in 0-1048576", nil},
		{[]string{"extra"}, "unexpected argument", nil},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			c, err := parseFlags(tt.args, io.Discard)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			tt.check(t, c)
		})
	}
}

// TestUsageHidesDeprecatedFlags: -help lists -output-streams-max-length and
// not its deprecated former name -output-max-length, which a command line may
// still use (and is then told to switch).
func TestUsageHidesDeprecatedFlags(t *testing.T) {
	var help bytes.Buffer
	_, err := parseFlags([]string{"-help"}, &help)
	require.ErrorIs(t, err, flag.ErrHelp)
	require.Contains(t, help.String(), "-output-streams-max-length int")
	require.Contains(t, help.String(), "-max-upload-bytes value")
	require.Contains(t, help.String(), "(default 4096)")
	require.NotContains(t, help.String(), "-output-max-length")

	var stderr bytes.Buffer
	_, err = parseFlags([]string{"-output-max-length", "10"}, &stderr)
	require.NoError(t, err)
	require.Contains(t, stderr.String(), "-output-max-length is deprecated: use -output-streams-max-length")
}

// TestRunNetworkExposure: an address reachable from other machines is
// refused before any sandbox starts unless -require-token comes with
// AZSESSIONS_EMULATOR_TOKEN, and then the printed endpoint names the address
// actually bound (not "localhost").
func TestRunNetworkExposure(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		token string
		ok    bool
	}{
		{"all interfaces", []string{"-addr", "0.0.0.0:0"}, "", false},
		{"ipv6 all interfaces", []string{"-addr", "[::]:0"}, "", false},
		{"presence-only token", []string{"-addr", "0.0.0.0:0", "-require-token"}, "", false},
		{"token without -require-token", []string{"-addr", "0.0.0.0:0"}, "tok-SECRET-9", false},
		{"shared token", []string{"-addr", "0.0.0.0:0", "-require-token"}, "tok-SECRET-9", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(tokenEnv, tt.token)
			// -sandbox none with no ready kernels: the refusal must come
			// before the executor, and the accepted case needs no bwrap.
			args := append([]string{"-sandbox", "none", "-ready", "0", "-python", "/usr/bin/python3"}, tt.args...)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var stdout, stderr testenv.SyncBuffer
			done := make(chan error, 1)
			go func() { done <- run(ctx, args, &stdout, &stderr, nil) }()
			if !tt.ok {
				err := <-done
				require.ErrorIs(t, err, emulator.ErrNotLoopback)
				require.Empty(t, stdout.String())
				require.NotContains(t, stderr.String(), "executor ready", "a sandbox started")
				return
			}
			require.Eventually(t, func() bool {
				select {
				case err := <-done:
					if _, statErr := os.Stat("/usr/bin/python3"); statErr != nil {
						t.Skipf("no /usr/bin/python3: %v", err)
					}
					t.Fatalf("run failed: %v\n%s", err, stderr.String())
				default:
				}
				return strings.Contains(stdout.String(), "\n")
			}, 60*time.Second, 20*time.Millisecond)
			endpoint := strings.TrimSpace(stdout.String())
			require.Regexp(t, `^http://(0\.0\.0\.0|\[::\]):\d+/subscriptions/`, endpoint)
			cancel()
			require.NoError(t, <-done)
			require.NotContains(t, stderr.String(), "SECRET")
		})
	}
}

// TestRunBusyAddress: an address another program holds (most often an
// emulator left running) fails at once, saying what to do, before any
// sandbox starts.
func TestRunBusyAddress(t *testing.T) {
	t.Parallel()
	if runtime.GOOS == "windows" {
		t.Skip("Windows reports WSAEADDRINUSE, not syscall.EADDRINUSE: no hint there")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	var stdout, stderr testenv.SyncBuffer
	err = run(context.Background(), []string{"-sandbox", "none", "-ready", "0", "-addr", ln.Addr().String()}, &stdout, &stderr, nil)
	require.ErrorIs(t, err, syscall.EADDRINUSE)
	require.ErrorContains(t, err, "another emulator or program holds it")
	require.ErrorContains(t, err, "-addr")
	require.Empty(t, stdout.String())
	require.NotContains(t, stderr.String(), "executor ready", "a sandbox started")
}

// started is a run of the command in a goroutine (startRun).
type started struct {
	stdout, stderr *testenv.SyncBuffer
	done           chan error // run's error, once it returned
	// skipNoSandbox makes endpoint skip the test (unless
	// AZSESSIONS_REQUIRE_SANDBOX=1) when run fails with ErrNoBubblewrap.
	skipNoSandbox bool
}

// startRun runs the command with args until ctx ends, in a goroutine.
func startRun(ctx context.Context, args ...string) *started {
	r := &started{stdout: &testenv.SyncBuffer{}, stderr: &testenv.SyncBuffer{}, done: make(chan error, 1)}
	go func() { r.done <- run(ctx, args, r.stdout, r.stderr, nil) }()
	return r
}

// endpoint waits up to within for the endpoint line the command prints on
// stdout and returns it; the test fails if run returns first.
func (r *started) endpoint(t *testing.T, within time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(within)
	for !strings.Contains(r.stdout.String(), "\n") {
		select {
		case err := <-r.done:
			if r.skipNoSandbox && errors.Is(err, emulator.ErrNoBubblewrap) && os.Getenv(testenv.RequireSandboxEnv) != "1" {
				t.Skipf("no sandbox here: %v", err)
			}
			t.Fatalf("run failed: %v\n%s", err, r.stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no endpoint on stdout after %v; stderr: %s", within, r.stderr.String())
		}
	}
	return strings.TrimSpace(r.stdout.String())
}

// TestRun starts the emulator with the real sandbox, runs code through it
// and shuts it down. It is skipped when the sandbox cannot start here
// (unless AZSESSIONS_REQUIRE_SANDBOX=1): bwrap or Python missing, or the
// command's executor failing with ErrNoBubblewrap (an unusable bwrap).
func TestRun(t *testing.T) {
	t.Parallel() // it mostly waits for its sandbox
	testenv.NeedSandbox(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dataDir := testenv.DataDir(t)
	r := startRun(ctx, "-addr", "127.0.0.1:0", "-ready", "0", "-data-dir", dataDir, "-require-token")
	r.skipNoSandbox = true
	stderr, done := r.stderr, r.done
	endpoint := r.endpoint(t, 30*time.Second)
	require.Equal(t, endpoint+"\n", r.stdout.String(), "one line on stdout")
	require.Regexp(t, `^http://127\.0\.0\.1:\d+/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/local/sessionPools/emulator$`, endpoint)

	do := func(method, route, body string, token bool) (int, string) {
		req, err := http.NewRequest(method, endpoint+"/"+route, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		if token {
			req.Header.Set("Authorization", "Bearer tok-SECRET-123")
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	q := "?api-version=2025-10-02-preview&identifier=cmd-test"
	status, _ := do("GET", "metadata?api-version=2025-10-02-preview", "", false)
	require.Equal(t, http.StatusUnauthorized, status)
	status, body := do("POST", "executions"+q, `{"code":"import os\nos.symlink('/etc/passwd', '/mnt/data/escape')\nopen('/mnt/data/in.txt','w').write('hi')\n6*7","timeoutInSeconds":60}`, true)
	require.Equal(t, http.StatusOK, status, body)
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(body), &m))
	require.Equal(t, "Succeeded", m["status"], body)
	require.Equal(t, float64(42), m["result"].(map[string]any)["executionResult"])
	status, body = do("GET", "files/in.txt/content"+q, "", true)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "hi", body)
	status, _ = do("GET", "files/escape/content"+q, "", true)
	require.Equal(t, http.StatusNotFound, status, "a symlink out of the data directory is not found")

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("run did not return after cancel")
	}
	entries, err := os.ReadDir(dataDir)
	require.NoError(t, err)
	require.Empty(t, entries, "session data left behind")
	require.NotContains(t, stderr.String(), "cmd-test")
	require.NotContains(t, stderr.String(), "SECRET")
}

func TestRunRefusesWithoutBubblewrap(t *testing.T) {
	// An empty PATH hides bwrap.
	t.Setenv("PATH", t.TempDir())
	err := run(context.Background(), []string{"-addr", "127.0.0.1:0", "-python", "/usr/bin/python3", "-ready", "0"}, io.Discard, io.Discard, nil)
	if err == nil {
		t.Fatal("started without bwrap on PATH")
	}
	if !errors.Is(err, emulator.ErrNoBubblewrap) {
		t.Skipf("the sandbox found bwrap elsewhere or failed otherwise: %v", err)
	}
	require.ErrorContains(t, err, "apt-get install bubblewrap")
	require.ErrorContains(t, err, "-sandbox=none")
}

// capacityExecutor is an executor with a pool-wide capacity, like the
// sandbox's.
type capacityExecutor struct {
	emulator.Executor
	n int
}

func (c capacityExecutor) Capacity() int { return c.n }

func TestMaxSessionsDefault(t *testing.T) {
	scripted := emulator.ScriptedExecutor(nil)
	tests := []struct {
		name string
		flag int
		ex   emulator.Executor
		want int
	}{
		{"explicit", 7, capacityExecutor{scripted, 3}, 7},
		{"fits the executor", 0, capacityExecutor{scripted, 12}, 12},
		{"at most the service's", 0, capacityExecutor{scripted, 100000}, emulator.DefaultMaxSessions},
		{"unbounded executor", 0, capacityExecutor{scripted, -1}, emulator.DefaultMaxSessions},
		{"no capacity", 0, scripted, emulator.DefaultMaxSessions},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, maxSessions(tt.flag, tt.ex))
		})
	}
}

// TestReadyCap: -max-ready (its default when 0) is the executor's
// MaxReady, at most -max-sessions when that is set.
func TestReadyCap(t *testing.T) {
	tests := []struct {
		name                  string
		maxReady, maxSessions int
		want                  int
	}{
		{"default", 0, 0, emulator.DefaultMaxReady},
		{"explicit", 10, 0, 10},
		{"at most -max-sessions", 0, 7, 7},
		{"explicit, at most -max-sessions", 10, 7, 7},
		{"explicit under -max-sessions", 5, 7, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, readyCap(config{maxReady: tt.maxReady, maxSessions: tt.maxSessions}))
		})
	}
}

// TestRunBurst: with the default flags, 20 new identifiers at once each get
// a sandbox and run their first cell. Before the pool-wide memory limit was
// enforced by a cgroup, every sandbox counted its 1 GiB -memory-limit
// against half of the host's RAM (11 on a 23 GiB host), and the 12th to
// 20th got 404 NoSessionsAvailable. Root is needed for the cgroups (without
// them each sandbox still counts at its limit, see sandbox.Options).
func TestRunBurst(t *testing.T) {
	// the pool under a burst of sessions: the full suite's (make test)
	testenv.SkipLongInQuickLoop(t)
	t.Parallel() // it mostly waits for its sandboxes
	testenv.NeedSandbox(t, "IPython", "numpy")
	if os.Geteuid() != 0 {
		if os.Getenv(testenv.RequireSandboxEnv) == "1" {
			t.Fatal("AZSESSIONS_REQUIRE_SANDBOX=1 but the tests do not run as root, which the pool's cgroups need")
		}
		t.Skip("needs root: without cgroups every sandbox counts its -memory-limit against -max-memory")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dataDir := testenv.DataDir(t)
	r := startRun(ctx, "-addr", "127.0.0.1:0", "-data-dir", dataDir, "-log-level", "warn")
	done := r.done
	endpoint := r.endpoint(t, 2*time.Minute)

	const burst = 20
	client := &http.Client{Timeout: 10 * time.Minute} // a loaded 2-core machine starts 20 sandboxes slowly
	defer client.CloseIdleConnections()
	type answer struct {
		status int
		body   string
		err    error
	}
	answers := make([]answer, burst)
	var wg sync.WaitGroup
	for i := range burst {
		wg.Add(1)
		go func() {
			defer wg.Done()
			url := fmt.Sprintf("%s/executions?api-version=2025-10-02-preview&identifier=burst-%d", endpoint, i)
			resp, err := client.Post(url, "application/json", strings.NewReader(fmt.Sprintf(`{"code":"%d * 2","timeoutInSeconds":220}`, i)))
			if err != nil {
				answers[i].err = err
				return
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			answers[i] = answer{resp.StatusCode, string(b), err}
		}()
	}
	wg.Wait()
	for i, a := range answers {
		require.NoError(t, a.err, "identifier %d", i)
		require.Equal(t, http.StatusOK, a.status, "identifier %d: %s", i, a.body)
		var m struct {
			Status string `json:"status"`
			Result struct {
				ExecutionResult json.RawMessage `json:"executionResult"`
			} `json:"result"`
		}
		require.NoError(t, json.Unmarshal([]byte(a.body), &m), a.body)
		require.Equal(t, "Succeeded", m.Status, a.body)
		require.Equal(t, fmt.Sprint(i*2), string(m.Result.ExecutionResult), "identifier %d got another session's answer", i)
	}
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(2 * time.Minute):
		t.Fatal("run did not return after cancel")
	}
}

// TestNoneWarnsWhoRunsTheCode (red team): as root, -sandbox=none runs code as
// -sandbox-user, the owner of every bwrap sandbox run as that account on the
// host (its code read and wrote another emulator's sessions' /mnt/data); the
// warning says so instead of "as the current user". It is logged before the
// listen, which the invalid address then fails without starting anything.
func TestNoneWarnsWhoRunsTheCode(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		user string
	}{
		{nil, "nobody"},
		{[]string{"-sandbox-user", "65533"}, "65533"},
	} {
		var stderr bytes.Buffer
		args := append([]string{"-sandbox=none", "-addr", "256.0.0.1:0"}, tc.args...)
		require.Error(t, run(context.Background(), args, io.Discard, &stderr, nil))
		if os.Geteuid() != 0 {
			require.Contains(t, stderr.String(), "as the current user")
			continue
		}
		require.Contains(t, stderr.String(), "as -sandbox-user ("+tc.user+")")
		require.Contains(t, stderr.String(), "can enter every bwrap sandbox that runs as that account on this host")
	}
}
