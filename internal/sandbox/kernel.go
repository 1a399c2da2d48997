//go:build linux

package sandbox

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/azsessions/azsessions/internal/kernel"
)

// Paths inside the sandbox.
const (
	sandboxData = "/mnt/data"
	sandboxSys  = "/opt/azsessions"
	sandboxTmp  = "/tmp"
)

// maxReplyBytes bounds one protocol line from either driver while a reply
// is awaited: a value and its text are each capped at max_value_chars (1 Mi
// characters, at most 6 bytes each in JSON: \uXXXX), a figure at
// maxFigureBytes of PNG (base64: 4/3 of it), so a real reply is under
// 13 MiB. A longer line is session code writing to the reply descriptor
// (fd 4, or the gVisor socket), which would otherwise make the emulator
// hold and answer it (line, value and response: ~3 times its size of
// emulator heap per request, charged to no sandbox; a 64 MiB bound let 10
// forged figures hold 1 GiB): a broken protocol, the kernel is restarted.
const maxReplyBytes = 16 << 20

// maxFigureBytes caps the PNG of a cell's figure (the driver's
// max_figure_bytes): a larger one is not returned (stderr says so). A
// default matplotlib figure takes tens of KiB. The service's own bound is
// not documented: the emulator's guess (see package emulator).
const maxFigureBytes = 8 << 20

// idleReplyBytes bounds a protocol line that arrives while no reply is
// awaited (no cell running, kernel started): the only legitimate one is the
// driver's "preloaded" message (a list of module names). Session code can
// write to the reply descriptor (fd 4; the protocol socket on gVisor); a
// longer line is discarded as it is read, without being buffered, so an idle
// session holds at most this much of the emulator's memory in replies
// (before, 5 lines of 64 MiB each: 320 MiB of emulator heap per session,
// charged to no sandbox).
const idleReplyBytes = 64 << 10

// proc is one running driver process (inside bwrap or not).
type proc struct {
	cmd     *exec.Cmd
	dataDir string
	cg      *cgroupSet
	role    string
	gv      *gvisorContainer // mode gvisor: the runsc container

	cmdW             *os.File // fd 3 of the driver
	resR, outR, errR *os.File
	stdout, stderr   *stream
	msgs             chan []byte // replies; closed when fd 4 ends or breaks

	// awaitMu guards await: non-nil while a reply is awaited (start-up, an
	// execution), closed when it no longer is. Lines arriving without one
	// are dropped (see idleReplyBytes).
	awaitMu sync.Mutex
	await   chan struct{}

	exited  chan struct{} // closed once the process was reaped
	waitErr error
	dead    chan struct{} // closed by kill
	once    sync.Once
	wg      sync.WaitGroup
	runner  string
	nextID  int

	// preloaded is closed once the driver finished its background preload
	// (at once when there is nothing to preload).
	preloaded   chan struct{}
	preloadOnce sync.Once
	onPreloaded func(line []byte) // called once with the "preloaded" message
	// gated: the driver holds its background preload until startPreload
	// (its "ready" reply said "gated"; see Executor.holdPreloadLocked).
	gated     bool
	startOnce sync.Once
}

// startPreload lets a gated driver begin its background preload (once; a
// no-op for a driver that began it on its own). Best effort: a driver that
// died meanwhile is restarted on its next execution, ungated.
func (p *proc) startPreload() {
	if !p.gated {
		return
	}
	p.startOnce.Do(func() {
		_ = p.send(map[string]string{"op": "preload"}, time.Now().Add(startTimeout))
	})
}

// preloadDone says whether the background preload has finished.
func (p *proc) preloadDone() bool {
	select {
	case <-p.preloaded:
		return true
	default:
		return false
	}
}

func (p *proc) markPreloaded(line []byte) {
	p.preloadOnce.Do(func() {
		close(p.preloaded)
		if p.onPreloaded != nil && line != nil {
			p.onPreloaded(line)
		}
	})
}

// driverConfig is the driver's argv[1].
type driverConfig struct {
	MaxFileSize   int64    `json:"max_file_size"`
	Memory        int64    `json:"memory"`
	NProc         int      `json:"nproc,omitempty"`
	Preload       []string `json:"preload"`
	MplCache      string   `json:"mpl_cache"`
	MaxValueChars int      `json:"max_value_chars"`
	// MaxFigureBytes caps a figure's PNG (maxFigureBytes).
	MaxFigureBytes int  `json:"max_figure_bytes"`
	NoIPython      bool `json:"no_ipython,omitempty"`
	// HoldCells: a cell whose code begins with "# hold\n" starts only once
	// the driver received an interrupt (tests: Options.holdCells).
	HoldCells bool `json:"hold_cells,omitempty"`
	// PreloadGate: the driver starts its background preload only on an
	// {"op":"preload"} request (proc.startPreload), not right after "ready".
	PreloadGate bool `json:"preload_gate,omitempty"`
	// Socket is the Unix socket the driver connects to and uses as fds 3
	// and 4 (mode gvisor, where runsc passes no other descriptor).
	Socket string `json:"socket,omitempty"`
}

// preloadMessage starts the driver's "preloaded" reply.
var preloadMessage = []byte(`{"preloaded"`)

// startProc starts a driver on dataDir and waits until it is ready. Its
// steps: the driver's configuration and limits (newDriverConfig,
// procCgroup), environment (procEnv), pipes (openPipes), command line
// (commandLine, running what program says: driverArgv or nodeArgv,
// wrapped by cgroupWrap as chooseCgroupJoin decides), the process
// (procCommand, launch) and its
// readiness (awaitReady).
func (e *Executor) startProc(ctx context.Context, dataDir, role string) (*proc, error) {
	cfg := e.newDriverConfig()
	cg, err := e.procCgroup(role, &cfg)
	if err != nil {
		return nil, err
	}
	env := e.procEnv()
	fds := &childFiles{}
	var gv *gvisorContainer
	fail := func(err error) (*proc, error) {
		fds.closeAll()
		cg.kill(0)
		if gv != nil {
			gv.remove()
		}
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	pp, err := e.openPipes(fds)
	if err != nil {
		return fail(err)
	}
	args, gv, err := e.commandLine(dataDir, env, cfg, fds, e.program())
	if err != nil {
		return fail(err)
	}
	if len(e.opts.launchPrefix) > 0 {
		args = append(slices.Clone(e.opts.launchPrefix), args...)
	}
	entry := e.cgroupEntryFor(cg)
	defer entry.close()
	command := func(entry cgroupEntry) *exec.Cmd {
		cmd := e.procCommand(e.cgroupWrap(cg, entry.mode, args), dataDir, env, cg, entry)
		cmd.Stdout, cmd.Stderr = pp.outW, pp.errW
		cmd.ExtraFiles = fds.extra
		return cmd
	}
	cmd := command(entry)
	p := &proc{
		cmd: cmd, dataDir: dataDir, cg: cg, role: role, gv: gv,
		cmdW: pp.cmdW, resR: pp.resR, outR: pp.outR, errR: pp.errR,
		stdout: newStream(), stderr: newStream(),
		msgs:   make(chan []byte), // unbuffered: no reply is held once no one waits
		exited: make(chan struct{}),
		dead:   make(chan struct{}),

		preloaded:   make(chan struct{}),
		onPreloaded: e.checkPreloaded,
	}
	err = e.launch(p, append(fds.extra, pp.outW, pp.errW))
	if err != nil && entry.mode == joinAtClone && !errors.Is(err, ErrClosed) {
		// clone3 into a cgroup refused (a kernel before 5.7, a seccomp
		// filter): the wrapper joins instead, from now on if it works.
		p.cmd = command(cgroupEntry{mode: joinWrapper})
		if err = e.launch(p, append(fds.extra, pp.outW, pp.errW)); err == nil && e.cg != nil {
			e.cg.cloneIntoFailed.Store(true)
		}
	}
	if err != nil {
		return fail(fmt.Errorf("start %s: %w", args[0], err))
	}
	if err := p.awaitReady(ctx); err != nil {
		return nil, err
	}
	return p, nil
}

// newDriverConfig is the driver's configuration from the executor's
// options; the mode's paths are set by commandLine.
func (e *Executor) newDriverConfig() driverConfig {
	cfg := driverConfig{
		MaxFileSize:    e.opts.MaxFileSizeBytes,
		Memory:         e.opts.MemoryLimitBytes,
		Preload:        e.opts.Preload,
		MaxValueChars:  maxValueChars,
		MaxFigureBytes: cmp.Or(e.opts.maxFigureBytes, maxFigureBytes),
		NoIPython:      e.opts.noIPython,
		HoldCells:      e.opts.holdCells,
	}
	if e.opts.noPreload {
		cfg.Preload = []string{}
	}
	return cfg
}

// procCgroup creates the process's cgroups (nil when the executor has
// none), and sets cfg.NProc when no pids cgroup bounds its tasks.
func (e *Executor) procCgroup(role string, cfg *driverConfig) (*cgroupSet, error) {
	var cg *cgroupSet
	if e.cg != nil {
		var err error
		tasks := e.opts.MaxProcesses
		if e.opts.Mode == ModeGvisor {
			tasks = gvisorHostTasks(tasks)
		}
		cg, err = e.cg.create(fmt.Sprintf("%s-%s", role, randHex(6)), e.opts.MemoryLimitBytes, tasks, e.opts.CPUs)
		if err != nil {
			return nil, fmt.Errorf("sandbox: cgroup: %w", err)
		}
	}
	// The driver holds its preload for the pool (holdPreloadLocked) only
	// where a memory cgroup bounds the sandbox meanwhile: until the preload
	// ends, RLIMIT_AS is looser by its reserve (driver.py, set_limits).
	cfg.PreloadGate = cg != nil && cg.memory != "" && len(cfg.Preload) > 0
	if cg == nil || e.cg.pids == "" {
		if uid := os.Getuid(); uid != 0 && e.opts.Mode != ModeGvisor {
			// RLIMIT_NPROC counts every task of the real uid on the machine.
			cfg.NProc = countUserTasks(uid) + e.opts.MaxProcesses
		}
	}
	return cg, nil
}

// procEnv is the environment of the sandboxed process common to every
// mode (commandLine adds the mode's HOME, TMPDIR and cache directories).
func (e *Executor) procEnv() map[string]string {
	env := map[string]string{
		"LANG":                    "C.UTF-8",
		"LC_ALL":                  "C.UTF-8",
		"MPLBACKEND":              "Agg",
		"OPENBLAS_NUM_THREADS":    "1",
		"OMP_NUM_THREADS":         "1",
		"MKL_NUM_THREADS":         "1",
		"MALLOC_ARENA_MAX":        "2",
		"PYTHONDONTWRITEBYTECODE": "1",
		"PATH":                    "/usr/local/bin:/usr/bin:/bin",
	}
	if d := filepath.Dir(e.python); e.python != "" && !underSystemDirs(d) {
		env["PATH"] = d + ":" + env["PATH"]
	}
	return env
}

// childFiles are the descriptors startProc opens: all of them (closed by
// closeAll on failure) and those the child gets as fds 3, 4, ... (extra).
type childFiles struct {
	files []*os.File
	extra []*os.File
}

func (c *childFiles) closeAll() {
	for _, f := range c.files {
		_ = f.Close()
	}
}

// addFD passes f to the child and returns its descriptor number there.
func (c *childFiles) addFD(f *os.File) int {
	c.extra = append(c.extra, f)
	return 2 + len(c.extra)
}

// pipe opens a pipe whose ends closeAll closes.
func (c *childFiles) pipe() (r, w *os.File, err error) {
	r, w, err = os.Pipe()
	if err == nil {
		c.files = append(c.files, r, w)
	}
	return
}

// procPipes are the parent's ends of the driver's pipes, and the child's
// ends of stdout and stderr. cmdW and resR are nil in mode gvisor, where
// the protocol is a socket the driver connects to (see awaitReady).
type procPipes struct {
	outR, outW, errR, errW *os.File
	cmdW, resR             *os.File
}

// openPipes opens the driver's stdout and stderr pipes and, except in mode
// gvisor, the protocol pipes, whose child ends become its fds 3 (requests)
// and 4 (replies).
func (e *Executor) openPipes(fds *childFiles) (procPipes, error) {
	var pp procPipes
	var err3, err4 error
	pp.outR, pp.outW, err3 = fds.pipe()
	pp.errR, pp.errW, err4 = fds.pipe()
	if err := errors.Join(err3, err4); err != nil {
		return pp, err
	}
	if e.opts.Mode != ModeGvisor {
		cmdR, w, err1 := fds.pipe()
		r, resW, err2 := fds.pipe()
		if err := errors.Join(err1, err2); err != nil {
			return pp, err
		}
		pp.cmdW, pp.resR = w, r
		fds.addFD(cmdR)
		fds.addFD(resW)
	}
	return pp, nil
}

// programArgs is the command line of what runs in the sandbox, given the
// directory where the executor's files (driver.py) are seen from inside it
// and the driver's configuration with the mode's paths set.
type programArgs func(sysDir string, cfg driverConfig) []string

// driverArgv runs the Python driver: the interpreter, driver.py and its
// configuration as argv[1].
func (e *Executor) driverArgv(sysDir string, cfg driverConfig) []string {
	cj, _ := json.Marshal(cfg)
	return []string{e.python, "-s", sysDir + "/driver.py", string(cj)}
}

// commandLine is the host command that runs prog in the sandbox of the
// executor's mode on dataDir: prog itself in mode none, bwrap and its
// arguments (descriptors added to fds), or runsc with a bundle (gv). It sets
// the mode's entries of env and paths of cfg.
func (e *Executor) commandLine(dataDir string, env map[string]string, cfg driverConfig, fds *childFiles, prog programArgs) ([]string, *gvisorContainer, error) {
	switch e.opts.Mode {
	case ModeNone:
		tmpDir := dataDir + ".tmp" // HOME and TMPDIR in mode none
		if err := os.MkdirAll(tmpDir, 0o700); err != nil {
			return nil, nil, err
		}
		if err := e.id.chown(tmpDir); err != nil {
			return nil, nil, err
		}
		env["HOME"], env["TMPDIR"] = tmpDir, tmpDir
		env["MPLCONFIGDIR"] = filepath.Join(tmpDir, ".config", "matplotlib")
		env["IPYTHONDIR"] = filepath.Join(tmpDir, ".ipython")
		cfg.MplCache = filepath.Join(e.sysDir, "mpl")
		return prog(e.sysDir, cfg), nil, nil
	case ModeGvisor:
		e.sandboxEnv(env, &cfg)
		return e.gvisorArgs(dataDir, env, cfg, prog)
	default:
		e.sandboxEnv(env, &cfg)
		args := e.bwrapArgs(dataDir, env)
		if seccomp := seccompProgram(); seccomp != nil {
			// bwrap reads the filter from the pipe (and closes it) before it
			// runs the driver; the program is far smaller than a pipe's buffer.
			secR, secW, err := fds.pipe()
			if err == nil {
				_, err = secW.Write(seccomp)
			}
			if err != nil {
				return nil, nil, err
			}
			_ = secW.Close()
			args = append(args, "--seccomp", strconv.Itoa(fds.addFD(secR)))
		}
		// The driver and the synthetic /etc files are copied into the
		// sandbox's root from descriptors (bwrap --file): no bind mount of
		// a host directory, so /proc/self/mountinfo does not show its path.
		sys, err := e.sysFiles()
		if err != nil {
			return nil, nil, err
		}
		for _, sf := range sys {
			f, err := os.Open(sf.host)
			if err != nil {
				return nil, nil, err
			}
			fds.files = append(fds.files, f)
			args = append(args, "--file", strconv.Itoa(fds.addFD(f)), sf.sandbox)
		}
		args = append(args, "--remount-ro", "/", "--")
		return append(args, prog(sandboxSys, cfg)...), nil, nil
	}
}

// oomScoreAdj is the oom_score_adj of every sandbox process started by the
// cgroup-joining shell: the largest, so that the kernel's OOM killer picks
// sandbox processes before any host process. A ready sandbox keeps it; a
// session's is lowered to sessionOOMScoreAdj when the session takes it, so
// that idle ready sandboxes go before a working session.
const oomScoreAdj = "1000"

// sessionOOMScoreAdj is the oom_score_adj of a session's sandbox processes
// (set by setSessionOOMScore when a session takes a sandbox, and on its
// restarts). The OOM killer picks the process with the most memory plus
// oom_score_adj/1000 of the memory it may use (the pool's cgroup limit when
// the pool's memory is full, the host's otherwise). A session holds at most
// MemoryLimitBytes, so with 1000 - ceil(1000 × MemoryLimitBytes / limit) - 1
// every ready sandbox (1000) scores above any session process and is killed
// first (red team: with the ready list grown by bursts, a session using 900
// MiB was OOM-killed while 7 idle ready sandboxes kept 240 MiB). At least 1:
// still above the emulator's 0, so a host short of memory loses a sandbox
// before the emulator; where the pool's budget is under two session limits
// the two orders cannot both hold for every size, and the emulator's wins.
func (e *Executor) sessionOOMScoreAdj() int {
	limit := e.opts.MaxTotalMemoryBytes
	if !e.memByUse || limit <= 0 {
		limit, _ = hostMemoryBytes()
	}
	m := e.opts.MemoryLimitBytes
	if limit <= 0 || m <= 0 {
		return 500
	}
	adj := int64(1000) - (1000*m+limit-1)/limit - 1
	return int(max(1, min(adj, 999)))
}

// setSessionOOMScore lowers the oom_score_adj of p's processes (those in its
// cgroup: the sandbox's host processes, before any session code ran in it)
// from oomScoreAdj to sessionOOMScoreAdj. Root writes it, so where root has
// CAP_SYS_RESOURCE it is also the floor session code cannot go below. Best
// effort: a process that exited meanwhile is skipped, and without cgroups
// (no cgroup-joining shell) nothing was raised.
//
// Not on gVisor: its host processes include stub processes that runsc
// creates as the session's code runs, which this does not follow, and the
// scores would not decide anyway: a gVisor session's memory is its Sentry's
// memory file, charged to the pool's cgroup but in no process's resident
// set, so the OOM killer picks among gVisor sandboxes by the little they
// show (dmesg: a Sentry of ~50 MB killed while another sandbox held 600
// MiB). Where the pool's OOM policy is on (cgroup v1, oom.go) the executor
// picks the pool's victims by their cgroups instead, for both backends;
// these scores then only order the sandboxes for a host-wide OOM.
func (e *Executor) setSessionOOMScore(p *proc) {
	if p == nil || p.cg == nil || len(p.cg.dirs) == 0 || e.opts.Mode == ModeGvisor {
		return
	}
	data, err := os.ReadFile(filepath.Join(p.cg.dirs[0], "cgroup.procs"))
	if err != nil {
		return
	}
	adj := []byte(strconv.Itoa(e.sessionOOMScoreAdj()))
	for _, pid := range strings.Fields(string(data)) {
		_ = os.WriteFile("/proc/"+pid+"/oom_score_adj", adj, 0)
	}
}

// cgroupWrap prefixes args with what puts the sandbox in cg's cgroups
// (chooseCgroupJoin): for joinWrapper a shell that joins them before the
// sandbox starts, so every descendant is in them; for joinAtClone (the
// process starts in its group) only the drop of root to the sandbox user;
// args as is for joinNone.
func (e *Executor) cgroupWrap(cg *cgroupSet, mode cgroupJoin, args []string) []string {
	switch {
	case cg == nil || mode == joinNone:
		return args
	case mode == joinAtClone:
		if e.id != nil && e.opts.Mode != ModeGvisor {
			return append(e.id.setprivArgs(), args...)
		}
		return args
	}
	// The shell also makes the sandbox the host's first choice when memory
	// runs out beyond the cgroups' limits (oom_score_adj 1000, inherited by
	// every descendant; written by root it is also the floor, so session
	// code cannot lower it): a host short of memory loses a sandbox process,
	// never the emulator or another host process first.
	wrap := []string{"/bin/sh", "-c", `for f in "$@"; do [ "$f" = -- ] && break; echo $$ > "$f" || exit 125; shift; done; shift; echo ` + oomScoreAdj + ` > /proc/self/oom_score_adj || exit 125; exec "$@"`, "azsessions-cg"}
	wrap = append(wrap, cg.procsFiles()...)
	wrap = append(wrap, "--")
	if e.id != nil && e.opts.Mode != ModeGvisor {
		// Root joins the cgroups, then becomes the sandbox user for good.
		// (runsc needs root: its Sentry drops to "nobody" itself.)
		wrap = append(wrap, e.id.setprivArgs()...)
	}
	return append(wrap, args...)
}

// procCommand is the host process for args: its environment and directory
// (env and dataDir in mode none; the sandbox sets them otherwise), killed
// with the emulator, in a process group of its own, created in its cgroup
// for joinAtClone.
func (e *Executor) procCommand(args []string, dataDir string, env map[string]string, cg *cgroupSet, entry cgroupEntry) *exec.Cmd {
	cmd := exec.Command(args[0], args[1:]...)
	if e.opts.Mode == ModeNone {
		cmd.Dir = dataDir
		for k, v := range env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	} else {
		cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8"}
		cmd.Dir = "/"
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if entry.mode == joinAtClone {
		cmd.SysProcAttr.UseCgroupFD = true
		cmd.SysProcAttr.CgroupFD = int(entry.dir.Fd())
	}
	if e.id != nil && cg == nil && e.opts.Mode != ModeGvisor {
		cmd.SysProcAttr.Credential = e.id.credential()
	}
	cmd.Stdin = nil
	return cmd
}

// launch starts p's process, closes the child's ends of its descriptors
// and starts the goroutines that reap it and read its output.
func (e *Executor) launch(p *proc, childEnds []*os.File) error {
	// Keep the start-up chatter of stderr for error messages.
	startNonce := []byte("\x1eazs-never-" + randHex(8))
	p.stdout.begin(startNonce, 2048)
	p.stderr.begin(startNonce, 2048)
	if err := e.start(p.cmd); err != nil {
		return err
	}
	// The child has its ends now.
	for _, f := range childEnds {
		_ = f.Close()
	}
	p.wg.Add(3)
	go func() {
		defer p.wg.Done()
		p.waitErr = p.cmd.Wait()
		close(p.exited)
	}()
	go func() { defer p.wg.Done(); p.stdout.pump(p.outR) }()
	go func() { defer p.wg.Done(); p.stderr.pump(p.errR) }()
	return nil
}

// startTimeout bounds a driver's start, until its "ready" reply.
const startTimeout = 90 * time.Second

// awaitReady waits for the driver's "ready" reply (in mode gvisor, first
// for its connection to the bundle's socket: its fds 3 and 4) and starts
// reading its replies. On failure, p is killed and the error says why
// (with the start-up chatter of stderr).
func (p *proc) awaitReady(ctx context.Context) error {
	timer := time.NewTimer(startTimeout)
	defer timer.Stop()
	if p.gv != nil {
		var err error
		p.cmdW, p.resR, err = p.gv.accept(ctx, p.exited, startTimeout)
		if err != nil {
			p.kill()
			if ctx.Err() != nil {
				return ctx.Err()
			}
			msg, _ := p.stderr.result(2048)
			return fmt.Errorf("sandbox: kernel did not start (%v; %v): %s", err, p.waitErr, strings.TrimSpace(msg))
		}
	}
	startDone := p.awaitReply()
	defer startDone()
	p.wg.Add(1)
	go func() { defer p.wg.Done(); p.readReplies() }()
	select {
	case line, ok := <-p.msgs:
		var ready struct {
			Ready   bool     `json:"ready"`
			Runner  string   `json:"runner"`
			Preload []string `json:"preload"`
			Gated   bool     `json:"gated"`
		}
		if ok && json.Unmarshal(line, &ready) == nil && ready.Ready {
			p.runner = ready.Runner
			p.gated = ready.Gated
			if len(ready.Preload) == 0 {
				p.markPreloaded(nil)
			}
			return nil
		}
		p.kill()
		msg, _ := p.stderr.result(2048)
		return fmt.Errorf("sandbox: kernel did not start (%v): %s", p.waitErr, strings.TrimSpace(msg))
	case <-ctx.Done():
		p.kill()
		return ctx.Err()
	case <-timer.C:
		p.kill()
		return errors.New("sandbox: kernel did not start within 90s")
	}
}

// bwrapArgs builds the bubblewrap command line up to the sandbox's files
// (commandLine adds them, the seccomp filter, --remount-ro / and the command).
// Everything that a bind mount would expose of the host is chosen here: the
// system directories, the interpreter's prefixes, a few /etc files and the
// data directory, whose host path /proc/self/mountinfo shows (its name is
// random; its parent is the executor's directory).
func (e *Executor) bwrapArgs(dataDir string, env map[string]string) []string {
	a := []string{e.bwrap, "--unshare-all", "--unshare-user"}
	if e.noUserns {
		a = append(a, "--disable-userns")
	}
	a = append(a, "--uid", "1000", "--gid", "1000",
		"--die-with-parent", "--new-session", "--cap-drop", "ALL",
		"--hostname", "sandbox",
	)
	for _, d := range systemDirs {
		fi, err := os.Lstat(d)
		switch {
		case err != nil:
		case fi.Mode()&fs.ModeSymlink != 0:
			if target, err := os.Readlink(d); err == nil {
				a = append(a, "--symlink", target, d)
			}
		case fi.IsDir():
			a = append(a, "--ro-bind", d, d)
		}
	}
	for _, p := range e.binds {
		a = append(a, "--ro-bind", p, p)
	}
	if e.nodeBind {
		// The Node.js executable alone (node.go), not its directory.
		a = append(a, "--ro-bind", e.node, sandboxNode)
	}
	// Directories of /usr that Python does not need are hidden behind an
	// empty read-only tmpfs (unless the interpreter lives there).
	for _, d := range hiddenDirs {
		if e.needsDir(d) {
			continue
		}
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			a = append(a, "--size", "4096", "--tmpfs", d, "--remount-ro", d)
		}
	}
	for _, p := range []string{"/etc/alternatives", "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d",
		"/etc/fonts", "/etc/localtime", "/etc/timezone", "/etc/matplotlibrc", "/etc/mime.types",
		"/etc/ssl", "/etc/ca-certificates", "/etc/nsswitch.conf", "/etc/python3"} {
		a = append(a, "--ro-bind-try", p, p)
	}
	if ents, err := filepath.Glob("/etc/python3.*"); err == nil {
		for _, p := range ents {
			a = append(a, "--ro-bind-try", p, p)
		}
	}
	a = append(a, "--proc", "/proc")
	// As Flatpak does: the kernel's global knobs are read-only inside even
	// if the sandbox's user could write them (it cannot: it is an
	// unprivileged host uid, see Options.SandboxUser).
	for _, p := range []string{"/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus"} {
		a = append(a, "--ro-bind-try", p, p)
	}
	shm, tmp := tmpfsSizes(e.opts)
	a = append(a, "--dev", "/dev")
	if e.sizeOpt {
		a = append(a, "--size", strconv.FormatInt(shm, 10))
	}
	a = append(a, "--tmpfs", "/dev/shm")
	if e.sizeOpt {
		a = append(a, "--size", strconv.FormatInt(tmp, 10))
	}
	a = append(a, "--tmpfs", sandboxTmp,
		// /dev is a tmpfs without a size: nothing may be written to it
		// (its devices and /dev/shm, a mount of its own, still work).
		"--remount-ro", "/dev",
		"--bind", dataDir, sandboxData,
		// empty unless a custom container runs (container.go)
		"--ro-bind", proxyDir(dataDir), sandboxProxyDir,
		"--chdir", sandboxData,
		"--clearenv",
	)
	for k, v := range env {
		a = append(a, "--setenv", k, v)
	}
	return a
}

// hiddenDirs are replaced by an empty directory in the sandbox: software
// installed locally is not the interpreter's, and may hold secrets.
var hiddenDirs = []string{"/usr/local"}

// needsDir says whether the interpreter lives in or under d.
func (e *Executor) needsDir(d string) bool {
	for _, p := range append([]string{e.python}, e.binds...) {
		if p == d || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	if real, err := filepath.EvalSymlinks(e.python); err == nil && strings.HasPrefix(real, d+"/") {
		return true
	}
	return false
}

// tmpfsSizes are the sizes of /dev/shm and /tmp in the sandbox: their pages
// are charged to the memory cgroup of the process that writes them (so to
// MemoryLimitBytes when cgroups are active), and without cgroups these sizes
// bound them: together at most 5/8 of MemoryLimitBytes, /tmp at most
// MaxDataDirBytes.
func tmpfsSizes(o Options) (shm, tmp int64) {
	shm = min(64<<20, o.MemoryLimitBytes/8)
	tmp = min(o.MaxDataDirBytes, o.MemoryLimitBytes/2)
	return shm, tmp
}

// sysFile is a file copied into the sandbox's read-only root.
type sysFile struct{ host, sandbox string }

// sysFiles lists the executor's files that each sandbox gets: the driver,
// the synthetic /etc files and the matplotlib font cache (once built).
func (e *Executor) sysFiles() ([]sysFile, error) {
	out := []sysFile{
		{filepath.Join(e.sysDir, "driver.py"), sandboxSys + "/driver.py"},
		{filepath.Join(e.sysDir, "driver.js"), sandboxSys + "/driver.js"},
		{filepath.Join(e.sysDir, "passwd"), "/etc/passwd"},
		{filepath.Join(e.sysDir, "group"), "/etc/group"},
		{filepath.Join(e.sysDir, "hosts"), "/etc/hosts"},
	}
	ents, err := os.ReadDir(filepath.Join(e.sysDir, "mpl"))
	if err != nil {
		return nil, err
	}
	for _, ent := range ents {
		if ent.Type().IsRegular() {
			out = append(out, sysFile{filepath.Join(e.sysDir, "mpl", ent.Name()), sandboxSys + "/mpl/" + ent.Name()})
		}
	}
	return out, nil
}

// awaitReply marks a reply as awaited until the returned func is called.
func (p *proc) awaitReply() (done func()) {
	stop := make(chan struct{})
	p.awaitMu.Lock()
	p.await = stop
	p.awaitMu.Unlock()
	return func() {
		p.awaitMu.Lock()
		if p.await == stop {
			p.await = nil
		}
		p.awaitMu.Unlock()
		close(stop)
	}
}

// awaiting is the current await channel, nil when no reply is awaited.
func (p *proc) awaiting() chan struct{} {
	p.awaitMu.Lock()
	defer p.awaitMu.Unlock()
	return p.await
}

// readReplies turns fd 4 into messages until it ends or breaks. A line is
// held only while a reply is awaited (at most maxReplyBytes, one at a time:
// msgs is unbuffered); without one, lines longer than idleReplyBytes are
// discarded as they are read, and complete ones other than "preloaded" are
// dropped.
func (p *proc) readReplies() {
	defer close(p.msgs)
	r := bufio.NewReaderSize(p.resR, 64*1024)
	for {
		var line []byte
		discard := false
		for {
			chunk, err := r.ReadSlice('\n')
			if !discard {
				limit, awaited := idleReplyBytes, p.awaiting() != nil
				if awaited {
					limit = maxReplyBytes
				}
				switch {
				case len(line)+len(chunk) <= limit:
					line = append(line, chunk...)
				case awaited:
					return // broken protocol: treated as a dead kernel
				default:
					discard, line = true, nil // not a reply: skip to its end
				}
			}
			if err == nil {
				break
			}
			if err != bufio.ErrBufferFull {
				return
			}
		}
		if discard {
			continue
		}
		if bytes.HasPrefix(line, preloadMessage) {
			// Not an execution's reply: the background preload is done.
			p.markPreloaded(line)
			continue
		}
		stop := p.awaiting()
		if stop == nil {
			continue // no one waits: not a reply
		}
		select {
		case p.msgs <- line:
		case <-stop: // the wait ended: drop it
		case <-p.dead:
			return
		}
	}
}

// checkPreloaded logs, once per executor, modules that could not be
// preloaded.
func (e *Executor) checkPreloaded(line []byte) {
	var msg struct {
		Preloaded []string `json:"preloaded"`
	}
	if json.Unmarshal(line, &msg) != nil {
		return
	}
	var missing []string
	for _, m := range e.opts.Preload {
		if !slices.Contains(msg.Preloaded, m) {
			missing = append(missing, m)
		}
	}
	if len(missing) > 0 && !e.opts.noPreload {
		e.preloadWarn.Do(func() {
			e.log.Warn("sandbox: some modules could not be preloaded", "modules", missing)
		})
	}
}

// usable reports whether p may run a cell: alive, and not the pool's OOM
// victim (flagged as its kill begins: its processes may outlive the flag
// by a moment, under gVisor the Sentry's exit; a cell sent then would die
// with it instead of finding a fresh kernel).
func (p *proc) usable() bool {
	return p.alive() && (p.cg == nil || !p.cg.oomKilled.Load())
}

func (p *proc) alive() bool {
	select {
	case <-p.exited:
		return false
	case <-p.dead:
		return false
	default:
		return true
	}
}

// killGroup SIGKILLs the process group the driver's process leads
// (Setpgid), unless that process was reaped already: its pid, the group's
// id, is then free, and pids wrap (32768 on many hosts, a few seconds of
// sandbox starts under load), so a kill long after the process died (a
// ready sandbox found dead by NewKernel, a session's dead kernel restarted
// on its next execution, Close) would SIGKILL whatever group holds that id
// by then: another session's sandbox (TestEscapeForkBomb's kernel died
// "killed by signal killed" in 1 of 3 full runs) or any process group of the
// host, as root. What the group left behind is in the sandbox's cgroups
// (cgroupSet.kill) or died with bwrap's pid namespace; only mode none
// without cgroups can leave an orphan then. The leader may be reaped
// between the check and the kill, but the kernel hands its pid out again
// only after the pid counter has wrapped, not within that moment.
func (p *proc) killGroup() {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
}

// kill stops the process and everything it started, and waits for the
// goroutines that serve it. It is idempotent and does not remove the data
// dir. A gVisor container whose cgroup it saw empty has its runsc state
// removed in the background (gvisorContainer.removeLater).
func (p *proc) kill() {
	p.once.Do(func() {
		close(p.dead)
		if p.cmd.Process != nil {
			p.killGroup()
			_ = p.cmd.Process.Kill() // after Wait, Go sends nothing
		}
		empty := p.cg.kill(3 * time.Second)
		select {
		case <-p.exited:
		case <-time.After(5 * time.Second):
		}
		_ = p.cmdW.Close()
		_ = p.resR.Close()
		_ = p.outR.Close()
		_ = p.errR.Close()
		p.wg.Wait()
		switch {
		case p.gv != nil && empty:
			p.gv.removeLater() // nothing of it runs: its state can go later
		case p.gv != nil:
			p.gv.remove() // runsc delete kills what the cgroup did not
		}
	})
}

// send writes one request line, giving up at the deadline.
func (p *proc) send(v any, deadline time.Time) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	_ = p.cmdW.SetWriteDeadline(deadline)
	_, err = p.cmdW.Write(b)
	return err
}

// exitDescription says how the process of executor e ended.
func (p *proc) exitDescription(e *Executor) string {
	select {
	case <-p.exited:
	case <-time.After(2 * time.Second):
		return "it stopped answering"
	}
	if p.cg != nil && p.cg.oomKilled.Load() {
		return "killed: the sandboxes together reached the pool's memory limit and this one held the most"
	}
	if why := p.memoryDeath(e); why != "" {
		return why
	}
	if p.waitErr == nil {
		return "exit status 0"
	}
	var ee *exec.ExitError
	if errors.As(p.waitErr, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return "killed by signal " + ws.Signal().String()
		}
		return fmt.Sprintf("exit status %d", ee.ExitCode())
	}
	return p.waitErr.Error()
}

// Kernel is one session's interpreter. It implements kernel.Kernel. Its
// variables live until a restart; its files in DataDir live until Close.
type Kernel struct {
	e       *Executor
	dataDir string

	mu sync.Mutex // serializes Execute and Close

	pmu     sync.Mutex // guards p, closed and stopped
	p       *proc
	closed  bool
	stopped string          // why the watcher killed p ("" when it did not)
	ctr     *containerProxy // the custom container (StartContainer), nil before

	stopWatch chan struct{} // closed by Close: the watcher returns
	watchWG   sync.WaitGroup
	// closeDone is closed when the first Close has finished; a concurrent
	// Close (Executor.Close while the session's own Close runs) waits for
	// it, so that Executor.Close does not return, and remove the
	// executor's cgroups and directories, while the sandbox is being killed
	// (TestCloseWaitsForKernelClose). Guarded by pmu.
	closeDone chan struct{}

	// killGrace, when set, replaces Options.killGrace for this kernel
	// (tests that wait for a kill after the grace shorten it; set before
	// the first Execute).
	killGrace time.Duration

	// diskBytes and diskEntries are the data directory's last measurement,
	// counted in the executor's pool-wide totals (guarded by e.mu; see
	// Executor.accountDisk).
	diskBytes, diskEntries int64

	// frozenAt is when measure last froze the sandbox (UnixNano; 0: never).
	frozenAt atomic.Int64
	// freezeEvery, when set (a time.Duration), replaces measureFreezeEvery
	// for this kernel (tests: 1ns freezes every measurement; atomic: the
	// watcher reads it while tests set it).
	freezeEvery atomic.Int64
}

// measureFreezeEvery is how long after a measurement that froze the
// sandbox the next ones may measure it running: freezing its tasks costs
// a few milliseconds (BenchmarkWarmExecute on bwrap: 2.4 ms a cell
// measured twice running, 9.5 ms frozen twice), so a frozen walk is due
// at most this often, and what a walk of the running sandbox missed is
// counted by the next frozen one. It matches watchStatfsInterval: a
// writer gets about as long past the session's room either way.
const measureFreezeEvery = 200 * time.Millisecond

var (
	_ kernel.Kernel        = (*Kernel)(nil)
	_ kernel.SpaceReporter = (*Kernel)(nil)
)

// Intervals of the data directory watcher: while a cell runs (Execute) and
// while the kernel is idle (its watcher goroutine; threads and processes a
// cell started keep running between cells). The idle interval adapts to the
// cost of the last scan (see nextWatchInterval).
const (
	watchCellInterval = 300 * time.Millisecond
	watchIdleInterval = time.Second
	// watchStatfsInterval is how often the idle watcher compares the file
	// system's use with its last scan (one statfs): a writer at page-cache
	// speed gets this long past the session's room before a scan starts
	// (red team: 1 s let ~1.6 GB past a 1 GiB limit).
	watchStatfsInterval = 200 * time.Millisecond
	// watchIdleMax caps the idle interval: how long a background writer of
	// a session with a huge tree can write between two scans (each file
	// bounded by RLIMIT_FSIZE; the scans at the start and end of every
	// cell still enforce the limit before and after it).
	watchIdleMax = 30 * time.Second
	// watchIdleShare is the inverse of the share of one core the idle
	// watcher may spend per session: 20 = 5 %.
	watchIdleShare = 20
)

// nextWatchInterval is the idle watcher's wait after a scan that took last:
// 20 × last (so that scanning takes at most ~5 % of one core per idle
// session, outside the sandbox's CPU quota: a tree of 98,000 entries took
// ~0.5 s a scan, every second), at least watchIdleInterval, at most
// watchIdleMax.
func nextWatchInterval(last time.Duration) time.Duration {
	return min(max(watchIdleShare*last, watchIdleInterval), watchIdleMax)
}

// grace is how long Execute waits for the kernel to answer after its
// timeout or a cancellation before it kills it: Options.killGrace, unless
// a test set the kernel's own.
func (k *Kernel) grace() time.Duration {
	if k.killGrace > 0 {
		return k.killGrace
	}
	return k.e.opts.killGrace
}

// startWatch starts the watcher that stops the kernel when its data directory
// passes the limits between cells. Close stops it.
func (k *Kernel) startWatch() {
	k.stopWatch = make(chan struct{})
	k.watchWG.Add(1)
	go k.watch()
}

// watch measures the data directory every nextWatchInterval while no cell
// runs (Execute watches during a cell) and kills the kernel's processes when
// it is over the limits: what a cell left running in the background cannot
// fill the disk. The kernel is restarted by the next Execute (files kept),
// whose Result says why. A dead kernel is not measured (nothing of it writes).
//
// A scan of a large tree is slow, so scans of an idle kernel may be up to
// watchIdleMax apart; in between, every watchStatfsInterval, one statfs of
// the data directories' file system says whether more was written since
// the last scan than the kernel had room for (red team: a background
// writer beside a tree of 95,000 entries put 6.5 GB into a 1 GiB data
// directory between two scans), and then it scans at once.
func (k *Kernel) watch() {
	defer k.watchWG.Done()
	t := time.NewTimer(watchStatfsInterval)
	defer t.Stop()
	every := nextWatchInterval
	if d := k.e.opts.idleScanEvery; d > 0 {
		every = func(time.Duration) time.Duration { return d }
	}
	var took time.Duration
	lastScan := time.Now()
	base, haveBase := fsUsedBytes(k.dataDir)
	for {
		select {
		case <-k.stopWatch:
			return
		case <-t.C:
		}
		due := time.Since(lastScan) >= every(took)
		if !due && haveBase {
			used, ok := fsUsedBytes(k.dataDir)
			due = ok && used-base > max(k.roomLeft(), 0)
		}
		if due && k.mu.TryLock() { // else a cell runs (Execute watches it) or Close runs
			base, haveBase = fsUsedBytes(k.dataDir)
			took = 0
			p, err := k.current()
			if err == nil && p != nil && p.alive() {
				start := time.Now()
				over := k.overLimit(p)
				took = time.Since(start)
				if over != "" {
					p.kill()
					k.pmu.Lock()
					k.stopped = over
					k.pmu.Unlock()
				}
			}
			lastScan = time.Now()
			k.mu.Unlock()
		}
		t.Reset(watchStatfsInterval)
	}
}

// fsUsedBytes is the space in use on the file system of dir (statfs: one
// system call, whatever the tree's size).
func fsUsedBytes(dir string) (int64, bool) {
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) != nil {
		return 0, false
	}
	return int64(st.Blocks-st.Bfree) * int64(st.Bsize), true
}

// roomLeft is how much k's data directory may still grow by its last
// measurement: the room under MaxDataDirBytes and under the pool-wide
// MaxTotalDiskBytes (math.MaxInt64 without limits).
func (k *Kernel) roomLeft() int64 {
	e := k.e
	e.mu.Lock()
	defer e.mu.Unlock()
	room := int64(math.MaxInt64)
	if l := e.opts.MaxDataDirBytes; l > 0 {
		room = l - k.diskBytes
	}
	if total := e.opts.MaxTotalDiskBytes; total > 0 {
		room = min(room, total-e.diskBytes)
	}
	return room
}

// DataDirSpace implements kernel.SpaceReporter: the bytes the data directory
// uses as the limit counts them (du's allocated blocks plus files the kernel
// holds open after deleting them) and its limit: MaxDataDirBytes, or less
// when the pool-wide MaxTotalDiskBytes leaves less beside what the other
// kernels hold.
func (k *Kernel) DataDirSpace() (used, limit int64, err error) {
	p, err := k.current()
	if err != nil {
		return 0, 0, err
	}
	u, err := k.measure(p, 0)
	if err != nil {
		return 0, k.e.opts.MaxDataDirBytes, fmt.Errorf("sandbox: measuring the data directory: %s", usageError(err))
	}
	_, others := k.e.accountDisk(k, u)
	limit = k.e.opts.MaxDataDirBytes
	if total := k.e.opts.MaxTotalDiskBytes; total > 0 {
		// The room the pool-wide limit leaves beside the other kernels (at
		// least 1: 0 would mean no limit).
		limit = max(min(limit, total-others), 1)
	}
	return u.bytes, limit, nil
}

// measure is the usage of the data directory as the limits count it: du of
// the tree (see diskUsage; maxEntries as there) plus the blocks of files that
// p's processes hold open without a name on the data directory's file system
// (unlinked while open, or O_TMPFILE), which du cannot see.
//
// A walk is not atomic: code that keeps renaming a directory among
// several names, or moving it between two parents, makes walks miss it
// (296 of 500 walks of a plain directory missed a 1 MiB file renamed among
// 16 names in a loop). With a freezer cgroup (the emulator runs as root),
// p's processes are frozen while it measures, at least every
// measureFreezeEvery (TestMeasureFreezesSandbox): what a walk of the
// running sandbox misses is counted within that time. Without one (no
// root, so no cgroups) such code can make every measurement miss what it
// moves.
func (k *Kernel) measure(p *proc, maxEntries int64) (usage, error) {
	every := measureFreezeEvery
	if d := time.Duration(k.freezeEvery.Load()); d > 0 {
		every = d
	}
	if p != nil && p.alive() && time.Since(time.Unix(0, k.frozenAt.Load())) >= every {
		// gVisor's ptrace platform needs frequent thaws to get past a
		// stub stopped for its frozen tracer (see freezeTries); bwrap's
		// tasks cannot trace, and its freeze waits longer for tasks in an
		// uninterruptible sleep (see freezePatientTries).
		if err := p.cg.freeze(k.e.opts.Mode != ModeGvisor); errors.Is(err, errNoFreezer) {
			// no cgroups (not root): walked running, as documented above
		} else if err != nil {
			// Walk the running sandbox (frozenAt unchanged: the next
			// measurement tries to freeze again) rather than kill a kernel
			// whose tasks are slow to stop: a gVisor sandbox at the pool's
			// memory limit (its Sentry in reclaim) did not freeze in 2 s
			// and was killed as "cannot be measured" instead of by the
			// pool's OOM policy (CI, TestPoolOOMKillsLargestSandbox).
			k.e.log.Warn("sandbox: the sandbox could not be frozen to measure /mnt/data; measured running", "err", err)
		} else {
			k.frozenAt.Store(time.Now().UnixNano())
			defer p.cg.thaw()
		}
	}
	u, err := diskUsageOwned(k.dataDir, maxEntries, k.e.opts.maxWalkDepth, k.e.id)
	if err != nil || p == nil || !p.alive() || p.cmd.Process == nil {
		return u, err
	}
	root := p.cmd.Process.Pid
	var pids []int
	if p.cg != nil {
		pids = []int{root}
		for _, pid := range p.cg.pids() {
			if pid != root {
				pids = append(pids, pid)
			}
		}
	} else {
		pids = processTree(root)
	}
	if k.e.opts.Mode == ModeGvisor {
		// The host processes are runsc's (Sentry, Gofer, stubs), whose
		// leaders session code cannot end; their threads (hundreds of the
		// Sentry's) would cost ~1 ms a measurement to compare.
		pids = distinctFileTables(pids)
	} else {
		pids = withThreads(pids)
	}
	n, err := unlinkedBytes(pids, u.dev)
	u.bytes += n
	return u, err
}

// DataDir is the host directory that the kernel sees as /mnt/data.
func (k *Kernel) DataDir() string { return k.dataDir }

// Runner says what runs the cells: "ipython" or "fallback" (ast + exec).
func (k *Kernel) Runner() string {
	k.pmu.Lock()
	defer k.pmu.Unlock()
	if k.p == nil {
		return ""
	}
	return k.p.runner
}

func (k *Kernel) current() (*proc, error) {
	k.pmu.Lock()
	defer k.pmu.Unlock()
	if k.closed {
		return nil, ErrClosed
	}
	return k.p, nil
}

// replace installs a new process, unless the kernel was closed meanwhile.
func (k *Kernel) replace(p *proc) error {
	k.pmu.Lock()
	defer k.pmu.Unlock()
	if k.closed {
		p.kill()
		return ErrClosed
	}
	k.p = p
	return nil
}

// restart kills the current process and starts a new one on the same data dir.
func (k *Kernel) restart(ctx context.Context) error {
	if p, err := k.current(); err != nil {
		return err
	} else if p != nil {
		p.kill()
	}
	k.pmu.Lock()
	k.p = nil
	k.pmu.Unlock()
	np, err := k.e.startProc(ctx, k.dataDir, "kernel")
	if err != nil {
		return err
	}
	np.startPreload() // a restart is no burst's start: preload at once
	k.e.setSessionOOMScore(np)
	return k.replace(np)
}

type execReply struct {
	ID          int             `json:"id"`
	OK          bool            `json:"ok"`
	HasValue    bool            `json:"has_value"`
	Value       json.RawMessage `json:"value"`
	Text        *string         `json:"text"` // the value's text/plain form (IPython's display formatter)
	TimedOut    bool            `json:"timed_out"`
	Interrupted bool            `json:"interrupted"`
	DurationMS  float64         `json:"duration_ms"`
	ExitCode    *int            `json:"exit_code"` // of a Shell command (op "exec" with "shell")
}

var emptyValue = json.RawMessage(`""`)

// maxValueChars caps a value's text, and a string value, in characters
// (Unicode code points; driver.js counts UTF-16 units, never fewer): the
// drivers' max_value_chars.
const maxValueChars = 1 << 20

// maxScalarValueBytes bounds the JSON of a value that is neither a string
// nor a figure (null, a boolean, a number: at most a few thousand digits).
const maxScalarValueBytes = 64 << 10

// replyWithinContract reports whether rep is a reply the drivers can write:
// a text and a string value of at most maxValueChars characters, a number
// of a bounded length, and an object only as a figure of at most
// maxFigureBytes. Anything else was
// written to the reply descriptor by session code (a forged reply up to
// the line bound, answered as the cell's value, would hold and send tens
// of MiB per request): Execute treats it as a broken protocol.
func replyWithinContract(rep execReply) bool {
	if rep.Text != nil && utf8.RuneCountInString(*rep.Text) > maxValueChars {
		return false
	}
	v := bytes.TrimSpace(rep.Value)
	if len(v) == 0 {
		return true
	}
	switch v[0] {
	case '"':
		var s string
		return json.Unmarshal(v, &s) == nil && utf8.RuneCountInString(s) <= maxValueChars
	case '{':
		var img struct {
			Type string `json:"type"`
			Data string `json:"base64_data"`
		}
		return json.Unmarshal(v, &img) == nil && img.Type == "image" && len(img.Data) <= base64.StdEncoding.EncodedLen(maxFigureBytes)
	case '[':
		return false
	default:
		return len(v) <= maxScalarValueBytes
	}
}

// Execute runs one cell. req.Timeout <= 0 means no timeout (ctx still
// applies); the output cap is kernel.OutputCap(req) characters (4096 when
// unset), at most 1 Mi characters. A Python error or a timeout is a Result with Status Failed (TimedOut set for a timeout), a
// cancellation of ctx a Result with Status Canceled (the cell is interrupted
// like on a timeout), not an error. When the kernel does not
// stop within a grace period after its timeout or a cancellation, or its data
// directory grows past MaxDataDirBytes, it is killed and restarted on the same
// data directory (Restarted=true). A kernel that died is restarted on the next
// Execute, whose Result has Restarted=true. While the data directory is over
// its limits (measured as in overLimit) the cell is not run: its Result is
// Failed with a note, until files are deleted. The error is non-nil only when no
// kernel could be (re)started, or ErrClosed after Close.
//
// Its steps: a running kernel (ensureRunning), the data directory's limits
// (checkLimits, refused), the request to the driver (dispatch), and the wait
// for its reply, timeout, cancellation or death (wait), each ending in
// finish or killAndRestart.
func (k *Kernel) Execute(ctx context.Context, req kernel.Request) (kernel.Result, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	outputMax, err := kernel.OutputCap(req)
	if err != nil {
		return kernel.Result{}, err
	}
	outputMax = min(outputMax, MaxOutputStreamsMaxLength) // each stream buffers up to 4 bytes a character
	p, err := k.current()
	if err != nil {
		return kernel.Result{}, err
	}
	x := &execution{k: k, p: p, req: req, outputMax: outputMax}
	if err := x.ensureRunning(ctx); err != nil {
		return kernel.Result{}, err
	}
	refuse, err := x.checkLimits(ctx)
	if err != nil {
		return kernel.Result{}, err
	}
	if refuse != "" {
		return x.refused(refuse), nil
	}
	id, replyDone := x.dispatch()
	defer replyDone()
	return x.wait(ctx, id)
}

// execution is the state of one Kernel.Execute.
type execution struct {
	k         *Kernel
	p         *proc // the kernel's process (the one that ran the cell, once dispatched)
	req       kernel.Request
	outputMax int // the output cap, in characters

	res      kernel.Result
	notes    []string // restarts before the cell ran: the first lines of stderr
	start    time.Time
	canceled bool // ctx was canceled while the cell ran
}

// restart restarts the kernel before the cell runs, noting why.
func (x *execution) restart(ctx context.Context, note string) error {
	if err := x.k.restart(ctx); err != nil {
		return fmt.Errorf("sandbox: restarting the kernel: %w", err)
	}
	x.res.Restarted = true
	x.notes = append(x.notes, note)
	var err error
	x.p, err = x.k.current()
	return err
}

// ensureRunning restarts a kernel that is not running (it died, or the
// watcher stopped it), noting why.
func (x *execution) ensureRunning(ctx context.Context) error {
	if x.p != nil && x.p.usable() {
		return nil
	}
	k := x.k
	k.pmu.Lock()
	why := k.stopped
	k.stopped = ""
	k.pmu.Unlock()
	note := "The kernel had stopped and was restarted: variables were lost, files in /mnt/data were kept."
	if why == "" && x.p != nil && x.p.cg != nil && x.p.cg.oomKilled.Load() {
		why = "The sandboxes together reached the pool's memory limit and this one held the most"
	}
	if why == "" && x.p != nil {
		if d := x.p.memoryDeath(k.e); d != "" {
			return x.restart(ctx, "The kernel was "+d+"; it was restarted: variables were lost, files in /mnt/data were kept.")
		}
	}
	if why != "" {
		note = "The kernel was stopped between executions and restarted (variables were lost, files in /mnt/data were kept): " + pastLimitNote(why) + "."
	}
	return x.restart(ctx, note)
}

// pastLimitNote puts a data-directory limit note of overLimit or
// accountDisk ("OSError: /mnt/data holds ...") in the past tense, for the
// restart note of a kernel the watcher stopped between executions: files
// may have been deleted since (a fresh user read "holds" in the note of a
// cell that ran after deleting them).
func pastLimitNote(why string) string {
	why = strings.TrimPrefix(why, "OSError: ")
	for _, r := range [][2]string{{" holds ", " held "}, {" hold ", " held "}, {" cannot be measured", " could not be measured"}, {" counts as", " counted as"}} {
		why = strings.Replace(why, r[0], r[1], 1)
	}
	return why
}

// checkLimits measures the data directory before the cell runs, and
// returns why the cell may not run ("" when it may). The limits are never
// raised: a kernel over them is stopped (which also frees the files it
// holds open after deleting them), and when the directory is still over
// them no cell runs until files are deleted with the files API (which
// works without the kernel). A cell may then not make it grow past them.
func (x *execution) checkLimits(ctx context.Context) (string, error) {
	refuse := x.k.overLimit(x.p)
	if refuse != "" && !x.res.Restarted && x.p.alive() {
		if err := x.restart(ctx, refuse+": the kernel was stopped and restarted (variables were lost, files in /mnt/data were kept)."); err != nil {
			return "", err
		}
		refuse = x.k.overLimit(x.p)
	}
	return refuse, nil
}

// refused is the Result of a cell not run because the data directory is
// over its limits: Failed, with the notes and why in stderr.
func (x *execution) refused(why string) kernel.Result {
	why += ": the code was not run; delete files in /mnt/data with the files API to get under the limit"
	res := x.res
	res.Status = kernel.Failed
	res.Value = emptyValue
	res.Stderr = strings.Join(append(x.notes, why), "\n") + "\n"
	res.Stderr, res.StderrTruncated = kernel.TruncateOutput(res.Stderr, x.outputMax)
	return res
}

// dispatch sends the cell to the driver and returns its request id, with
// replyDone to call once the reply is no longer awaited. A driver that
// cannot take the request is killed (wait then sees it dead).
func (x *execution) dispatch() (id int, replyDone func()) {
	p, req := x.p, x.req
	x.start = time.Now()
	nonce := []byte("\x1eazs-" + randHex(12) + "\x1e")
	p.stdout.begin(nonce, x.outputMax)
	p.stderr.begin(nonce, x.outputMax)
	replyDone = p.awaitReply()
	p.nextID++
	id = p.nextID
	far := time.Now().Add(req.Timeout + x.k.grace() + time.Minute)
	msg := map[string]any{"op": "exec", "id": id, "code": req.Code,
		"timeout": req.Timeout.Seconds(), "nonce": string(nonce)}
	if req.Shell != nil {
		msg["shell"] = req.Shell // the driver runs it as a subprocess (run_shell)
	}
	if err := p.send(msg, far); err != nil {
		// The driver is gone or stuck: the next path sees it as dead.
		p.kill()
	}
	return id, replyDone
}

// wait waits for the reply to request id, while enforcing the timeout (plus
// the grace period), the cancellation of ctx (an interrupt, then a kill
// after the grace period) and the data directory's limits.
func (x *execution) wait(ctx context.Context, id int) (kernel.Result, error) {
	p, grace := x.p, x.k.grace()
	var timeoutC, cancelC, retryC <-chan time.Time
	if x.req.Timeout > 0 {
		t := time.NewTimer(x.req.Timeout + grace)
		defer t.Stop()
		timeoutC = t.C
	}
	tick := time.NewTicker(watchCellInterval)
	defer tick.Stop()
	done := ctx.Done()
	for {
		select {
		case line, ok := <-p.msgs:
			if !ok {
				desc := p.exitDescription(x.k.e)
				p.kill()
				x.res.Duration = time.Since(x.start)
				return x.finish(kernel.Failed, "The kernel died ("+desc+"); it will be restarted on the next execution: variables are lost, files in /mnt/data are kept.")
			}
			var rep execReply
			if err := json.Unmarshal(line, &rep); err != nil || rep.ID != id {
				continue // stale or garbage: ignore
			}
			return x.replied(rep)
		case <-timeoutC:
			x.res.TimedOut = true
			return x.killAndRestart(fmt.Sprintf("TimeoutError: the execution timed out after %s and did not stop within %s", x.req.Timeout, grace))
		case <-done:
			done = nil
			x.canceled = true
			x.interrupt(id)
			t := time.NewTimer(grace)
			defer t.Stop()
			cancelC = t.C
			r := time.NewTicker(interruptRetry)
			defer r.Stop()
			retryC = r.C
		case <-retryC:
			x.interrupt(id)
		case <-cancelC:
			return x.killAndRestart("The execution was canceled and did not stop")
		case <-tick.C:
			if over := x.k.overLimit(x.p); over != "" {
				return x.killAndRestart(over)
			}
		}
	}
}

// interruptRetry is how often the interrupt of a canceled cell is sent
// again, until its reply or the kill grace. The driver acts on the first one
// that finds the cell running (see _reader in driver.py): one that arrives
// before the driver starts the cell (a cancellation right after the request,
// a driver starved of CPU), or whose send failed, would be lost otherwise.
const interruptRetry = 250 * time.Millisecond

// interrupt asks the driver to interrupt cell id (best effort: sent again
// every interruptRetry while the execution is canceled).
func (x *execution) interrupt(id int) {
	_ = x.p.send(map[string]any{"op": "interrupt", "id": id}, time.Now().Add(time.Second))
}

// replied is the Result of the driver's reply to the cell.
func (x *execution) replied(rep execReply) (kernel.Result, error) {
	p := x.p
	// Wait for the end of the output, which the driver wrote before
	// the reply (it may still be in the pipes).
	wait := time.NewTimer(2 * time.Second)
	for _, s := range []*stream{p.stdout, p.stderr} {
		select {
		case <-s.doneCh():
		case <-wait.C:
		}
	}
	wait.Stop()
	if !replyWithinContract(rep) {
		return x.killAndRestart("The kernel's reply broke the driver's protocol (a value or text past its cap, written by the cell to the reply descriptor)")
	}
	x.res.Duration = time.Duration(rep.DurationMS * float64(time.Millisecond))
	x.res.TimedOut = rep.TimedOut
	x.res.ExitCode = rep.ExitCode
	if rep.HasValue && len(rep.Value) > 0 {
		x.res.Value, x.res.Text = rep.Value, rep.Text
	} else {
		x.res.Value = emptyValue
	}
	if over := x.k.overLimit(p); over != "" {
		// Stop what the cell may have left writing in the background.
		return x.killAndRestart(over)
	}
	status := kernel.Failed
	if rep.OK {
		status = kernel.Succeeded
	}
	// A cell canceled is Canceled even when it finished on its own just as
	// it was canceled (see finish).
	return x.finish(status, "")
}

// killAndRestart ends an execution the kernel did not end itself: the
// process is killed and a new one started on the same data directory; the
// Result is Failed (Canceled when canceled) with why in stderr.
func (x *execution) killAndRestart(why string) (kernel.Result, error) {
	x.p.kill()
	x.res.Duration = time.Since(x.start)
	x.res.Restarted = true
	rctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	note := why + ": the kernel was killed and restarted (variables were lost, files in /mnt/data were kept)."
	if err := x.k.restart(rctx); err != nil {
		note = why + ": the kernel was killed; restarting it failed (" + err.Error() + "); the next execution tries again."
	}
	return x.finish(kernel.Failed, note)
}

// finish completes the Result: status (Canceled instead when the execution
// was canceled), the output of the process that ran the cell and the notes
// before it, note (if any) after it, in stderr.
func (x *execution) finish(status kernel.Status, note string) (kernel.Result, error) {
	if x.canceled {
		status = kernel.Canceled
	}
	x.res.Status = status
	x.k.fill(&x.res, x.p, x.outputMax, x.notes, note)
	return x.res, nil
}

// fill sets the output fields of res from p's streams plus notes for stderr.
func (k *Kernel) fill(res *kernel.Result, p *proc, outputMax int, before []string, after string) {
	res.Stdout, res.StdoutTruncated = p.stdout.result(outputMax)
	stderr, trunc := p.stderr.result(outputMax)
	if len(before) > 0 {
		stderr = strings.Join(before, "\n") + "\n" + stderr
	}
	if after != "" {
		if stderr != "" && !strings.HasSuffix(stderr, "\n") {
			stderr += "\n"
		}
		stderr += after + "\n"
	}
	if utf8.RuneCountInString(stderr) > outputMax {
		if after != "" {
			// Keep the note: it explains what happened.
			tail := after + "\n"
			if n := utf8.RuneCountInString(tail); n < outputMax {
				stderr, _ = kernel.TruncateOutput(stderr, outputMax-n)
				stderr += tail
			} else {
				stderr, _ = kernel.TruncateOutput(tail, outputMax)
			}
		} else {
			stderr, _ = kernel.TruncateOutput(stderr, outputMax)
		}
		trunc = true
	}
	res.Stderr, res.StderrTruncated = stderr, trunc
	if res.Value == nil {
		res.Value = emptyValue
	}
}

// Close kills the kernel and removes its data directory: the directory is
// gone when Close returns, its content is deleted in the background (see
// Executor.Close, which waits for that). It is idempotent: a Close while
// another runs waits for that one to finish, and returns nil.
func (k *Kernel) Close() error {
	k.pmu.Lock()
	if k.closed {
		done := k.closeDone
		k.pmu.Unlock()
		if done != nil {
			<-done
		}
		return nil
	}
	k.closed = true
	k.closeDone = make(chan struct{})
	defer close(k.closeDone)
	p := k.p
	if k.stopWatch != nil {
		close(k.stopWatch)
	}
	k.pmu.Unlock()
	if p != nil {
		p.kill() // makes a running Execute return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.pmu.Lock()
	if k.p != nil && k.p != p {
		k.p.kill()
	}
	k.pmu.Unlock()
	k.watchWG.Wait() // it never waits for k.mu
	k.e.forget(k)
	return k.e.removeLater(k.dataDir)
}

// removeKernelDirs removes a kernel's data dir and its companion tmp dir
// (mode none).
func removeKernelDirs(dataDir string) error {
	return errors.Join(removeTree(dataDir), removeTree(dataDir+".tmp"), removeTree(proxyDir(dataDir)))
}

// overLimit measures the data directory (see measure) and returns a note
// when it is over MaxDataDirBytes or MaxDataDirEntries or cannot be measured
// (which counts as over), "" when it is within them.
func (k *Kernel) overLimit(p *proc) string {
	o := k.e.opts
	u, err := k.measure(p, o.MaxDataDirEntries)
	switch {
	case errors.Is(err, errTooManyEntries):
		return fmt.Sprintf("OSError: /mnt/data holds more than %d files and directories, over the limit of %d", o.MaxDataDirEntries, o.MaxDataDirEntries)
	case err != nil:
		return "OSError: /mnt/data cannot be measured (" + usageError(err) + "), which counts as over the limit of " + strconv.FormatInt(o.MaxDataDirBytes, 10) + " bytes"
	case u.bytes > o.MaxDataDirBytes:
		k.e.accountDisk(k, u)
		return fmt.Sprintf("OSError: /mnt/data holds %d bytes, over the limit of %d bytes", u.bytes, o.MaxDataDirBytes)
	}
	if over, _ := k.e.accountDisk(k, u); over != "" {
		return over
	}
	return ""
}

// sandboxEnv sets the environment and driver paths of the isolated modes
// (bwrap and gvisor), where /tmp is private and the sys files sit in
// sandboxSys.
func (e *Executor) sandboxEnv(env map[string]string, cfg *driverConfig) {
	env["HOME"], env["TMPDIR"] = sandboxTmp, sandboxTmp
	env["MPLCONFIGDIR"] = sandboxTmp + "/.config/matplotlib"
	env["IPYTHONDIR"] = sandboxTmp + "/.ipython"
	env["USER"], env["LOGNAME"] = "user", "user"
	cfg.MplCache = sandboxSys + "/mpl"
}
