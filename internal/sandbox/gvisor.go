//go:build linux

package sandbox

// gVisor backend (Options.Mode "gvisor"): each kernel runs in a gVisor
// sandbox, a user-space kernel (the Sentry) between session code and the
// host kernel.
//
// Per kernel, startProc builds an OCI bundle here (config.json written with
// encoding/json, and a root directory made of mount points, symbolic links
// and copies of the sys files) and runs
//
//	runsc --root <executor dir>/.gvisor/state --network=none --platform=ptrace
//	      --host-uds=open --ignore-cgroups run --bundle <bundle> <id>
//
// from inside the kernel's cgroups (joined by the same wrapper as bwrap's, so
// runsc, its Gofer and its Sentry are all charged to them and killed with
// them). What the container sees:
//   - root: the bundle's rootfs, read-only: empty mount points, the
//     symbolic links of the host's root (/bin -> usr/bin, ...), and copies
//     of the driver, the synthetic /etc/passwd, /etc/group, /etc/hosts and
//     the matplotlib font cache (no host path anywhere: gVisor's mountinfo
//     shows none in any case);
//   - read-only binds of /usr, /lib*, /bin, /sbin (those that are
//     directories), the interpreter's prefixes and the /etc files Python
//     needs, the same list as bwrap's, cached by the Sentry without
//     revalidation (gvisorExclusiveHint); /usr/local is an empty read-only
//     tmpfs;
//   - /mnt/data: the kernel's data directory, read-write;
//   - /tmp and /dev/shm: size-capped tmpfs in the Sentry's memory (so charged
//     to the kernel's memory cgroup); /proc and /dev are gVisor's own;
//   - /opt/azsessions/io: a directory holding one Unix socket on which the
//     driver connects at start and speaks its protocol (runsc passes only
//     stdin, stdout and stderr to the container, so the protocol cannot use
//     inherited descriptors 3 and 4 as under bwrap). --host-uds=open lets
//     the container connect to host sockets in its mounts; the socket is
//     removed as soon as the driver connected, and no other mount holds one.
//
// The process runs as the sandbox user's uid and gid (Options.SandboxUser,
// "nobody" by default; the data directory is theirs on the host, and gVisor
// checks permissions with the host's owners), with no capability, no new
// privileges and hard rlimits RLIMIT_CORE = 0 and RLIMIT_NPROC =
// MaxProcesses (which gVisor enforces for the container's tasks; the
// driver also lowers RLIMIT_AS and RLIMIT_FSIZE as in every mode). The
// Sentry itself runs as host "nobody" in a user namespace of its own,
// chrooted, under gVisor's seccomp filter; the Gofer, which opens the
// mounted files for it, runs as root, chrooted.
//
// Limits: --ignore-cgroups, because the kernel's cgroups (memory, pids, CPU
// quota) are the executor's own, joined before runsc starts: runsc would
// otherwise move its Sentry and Gofer into groups of its own making, outside
// the executor's bookkeeping (usage, kill, leftovers). The pids group allows
// the Sentry's and Gofer's host threads on top of MaxProcesses (see
// gvisorHostTasks); the container's own processes are bounded by
// RLIMIT_NPROC inside. The memory group bounds the whole sandbox: Sentry,
// Gofer and session code.
//
// Platform: ptrace, the only one of this gVisor (Debian bookworm's runsc
// 0.0~20221219) that works without /dev/kvm; systrap is newer than it.
//
// Cleanup: Kernel.Close, a restart and Executor.Close kill the cgroup (and
// so runsc, the Sentry and the Gofer), then run `runsc delete --force` and
// remove the bundle. runsc's state directory lives in the executor's
// directory, so what a killed emulator left (its runsc children die with it:
// they run attached, with a parent-death signal) is removed with that
// directory by the next executor's leftovers pass.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// gvisorPlatform is runsc's --platform (see the comment at the top).
const gvisorPlatform = "ptrace"

// gvisorIODir is where the protocol socket is mounted in the container.
const gvisorIODir = sandboxSys + "/io"

// gvisorHostTasks is the pids.max of a gVisor kernel's cgroup. The
// container's processes are bounded inside by RLIMIT_NPROC = MaxProcesses;
// on the host, the ptrace platform gives every address space a stub process
// with one thread per Sentry thread that ever ran in it (measured here: ~45
// host tasks idle, ~690 with 40 processes, ~1230 with 60), on top of the
// Sentry's, the Gofer's and runsc's own threads. The group is a backstop
// for the host: a Sentry that reaches it cannot create threads and dies
// (the kernel is restarted by the next execution).
func gvisorHostTasks(maxProcs int) int { return 32*maxProcs + 256 }

// gvisorContainer is one kernel's runsc container.
type gvisorContainer struct {
	runsc  string
	root   string // runsc --root
	id     string
	bundle string
	ln     *net.UnixListener
	sock   string
	// later counts removeLater's removals, which Executor.Close waits for
	// (the executor's rmWG).
	later *sync.WaitGroup
}

// initGvisor checks that runsc can be used (New, before prepareDirs).
func (e *Executor) initGvisor() error {
	p, err := exec.LookPath("runsc")
	if err != nil {
		return fmt.Errorf("sandbox: %w", ErrNoGvisor)
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("sandbox: %w: runsc needs root (its rootless mode gives up most of the isolation)", ErrNoGvisor)
	}
	e.runsc = p
	return nil
}

// prepareGvisor creates the executor's bundle and state directories
// (New, after prepareDirs).
func (e *Executor) prepareGvisor() error {
	e.gvDir = filepath.Join(e.base, ".gvisor")
	if err := os.MkdirAll(filepath.Join(e.gvDir, "state"), 0o700); err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	return os.Chmod(e.gvDir, 0o700)
}

// ociSpec is the part of the OCI runtime spec (config.json) the bundles use.
type ociSpec struct {
	OCIVersion  string            `json:"ociVersion"`
	Process     ociProcess        `json:"process"`
	Root        ociRoot           `json:"root"`
	Hostname    string            `json:"hostname"`
	Mounts      []ociMount        `json:"mounts"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Linux       ociLinux          `json:"linux"`
}

type ociProcess struct {
	User            ociUser         `json:"user"`
	Args            []string        `json:"args"`
	Env             []string        `json:"env"`
	Cwd             string          `json:"cwd"`
	NoNewPrivileges bool            `json:"noNewPrivileges"`
	Capabilities    ociCapabilities `json:"capabilities"`
	Rlimits         []ociRlimit     `json:"rlimits"`
}

type ociUser struct {
	UID            uint32   `json:"uid"`
	GID            uint32   `json:"gid"`
	AdditionalGids []uint32 `json:"additionalGids"`
}

// ociCapabilities are all empty: the process holds no capability.
type ociCapabilities struct {
	Bounding    []string `json:"bounding"`
	Effective   []string `json:"effective"`
	Inheritable []string `json:"inheritable"`
	Permitted   []string `json:"permitted"`
	Ambient     []string `json:"ambient"`
}

type ociRlimit struct {
	Type string `json:"type"`
	Hard uint64 `json:"hard"`
	Soft uint64 `json:"soft"`
}

type ociRoot struct {
	Path     string `json:"path"`
	Readonly bool   `json:"readonly"`
}

type ociMount struct {
	Destination string   `json:"destination"`
	Type        string   `json:"type"`
	Source      string   `json:"source"`
	Options     []string `json:"options,omitempty"`
}

type ociLinux struct {
	Namespaces []ociNamespace `json:"namespaces"`
	Seccomp    *ociSeccomp    `json:"seccomp,omitempty"`
}

// ociSeccomp is the filter the Sentry applies to session code (runsc
// --oci-seccomp); it never reaches the host kernel.
type ociSeccomp struct {
	DefaultAction string           `json:"defaultAction"`
	Architectures []string         `json:"architectures"`
	Syscalls      []ociSeccompRule `json:"syscalls"`
}

type ociSeccompRule struct {
	Names    []string        `json:"names"`
	Action   string          `json:"action"`
	ErrnoRet uint            `json:"errnoRet"`
	Args     []ociSeccompArg `json:"args,omitempty"`
}

type ociSeccompArg struct {
	Index    uint   `json:"index"`
	Value    uint64 `json:"value"`
	ValueTwo uint64 `json:"valueTwo"`
	Op       string `json:"op"`
}

// gvisorSeccomp refuses setuid and setgid modes (EPERM) as bwrap's filter
// does (see seccomp.go): gVisor's Gofer sets them on the host files of
// /mnt/data otherwise. fchmodat2 is left out: this gVisor does not know it
// (ENOSYS). Nil on architectures without a filter.
func gvisorSeccomp() *ociSeccomp {
	if ociArch == "" {
		return nil
	}
	f := &ociSeccomp{DefaultAction: "SCMP_ACT_ALLOW", Architectures: []string{ociArch}}
	for _, r := range modeRules() {
		if r.name == "fchmodat2" {
			continue
		}
		for _, bit := range []uint64{unix.S_ISUID, unix.S_ISGID} {
			mode := ociSeccompArg{Index: uint(r.modeArg), Value: bit, ValueTwo: bit, Op: "SCMP_CMP_MASKED_EQ"}
			if r.flagsArg < 0 {
				f.Syscalls = append(f.Syscalls, ociSeccompRule{Names: []string{r.name}, Action: "SCMP_ACT_ERRNO", ErrnoRet: uint(syscall.EPERM), Args: []ociSeccompArg{mode}})
				continue
			}
			for _, flag := range []uint64{unix.O_CREAT, oTmpfileOnly} {
				f.Syscalls = append(f.Syscalls, ociSeccompRule{Names: []string{r.name}, Action: "SCMP_ACT_ERRNO", ErrnoRet: uint(syscall.EPERM),
					Args: []ociSeccompArg{{Index: uint(r.flagsArg), Value: flag, ValueTwo: flag, Op: "SCMP_CMP_MASKED_EQ"}, mode}})
			}
		}
	}
	return f
}

type ociNamespace struct {
	Type string `json:"type"`
}

// gvisorArgs builds the kernel's bundle, whose process runs prog, and
// returns the runsc command line and the container, whose listener the
// driver connects to.
func (e *Executor) gvisorArgs(dataDir string, env map[string]string, cfg driverConfig, prog programArgs) ([]string, *gvisorContainer, error) {
	c := &gvisorContainer{runsc: e.runsc, root: filepath.Join(e.gvDir, "state"), id: "azs-" + randHex(8), later: &e.rmWG}
	c.bundle = filepath.Join(e.gvDir, c.id)
	fail := func(err error) ([]string, *gvisorContainer, error) {
		c.remove()
		return nil, nil, err
	}
	rootfs := filepath.Join(c.bundle, "rootfs")
	ioDir := filepath.Join(c.bundle, "io")
	if err := os.MkdirAll(rootfs, 0o755); err != nil {
		return fail(err)
	}
	if err := os.Mkdir(ioDir, 0o700); err != nil {
		return fail(err)
	}
	if err := e.id.chown(ioDir); err != nil {
		return fail(err)
	}
	c.sock = filepath.Join(ioDir, "s")
	// Bound through a descriptor of its directory: the path may be longer
	// than a socket address's 107 bytes.
	dfd, err := unix.Open(ioDir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fail(err)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: fmt.Sprintf("/proc/self/fd/%d/s", dfd), Net: "unix"})
	_ = unix.Close(dfd)
	if err != nil {
		return fail(err)
	}
	ln.SetUnlinkOnClose(false) // its name was the descriptor's: accept removes c.sock
	c.ln = ln
	if err := e.id.chown(c.sock); err != nil {
		return fail(err)
	}

	var mounts []ociMount
	annotations := map[string]string{}
	dir := func(p string) error { return os.MkdirAll(filepath.Join(rootfs, p), 0o755) }
	bind := func(src, dst string, rw bool) {
		o := "ro"
		if rw {
			o = "rw"
		}
		mounts = append(mounts, ociMount{Destination: dst, Type: "bind", Source: src, Options: []string{"rbind", o}})
	}
	// roBind is a read-only bind of a host system path (see
	// gvisorExclusiveHint).
	roBind := func(p string) {
		bind(p, p, false)
		gvisorExclusiveHint(annotations, len(mounts)-1, p)
	}
	for _, d := range systemDirs {
		fi, err := os.Lstat(d)
		switch {
		case err != nil:
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(d)
			if err == nil {
				err = os.Symlink(target, filepath.Join(rootfs, d))
			}
			if err != nil {
				return fail(err)
			}
		case fi.IsDir():
			if err := dir(d); err != nil {
				return fail(err)
			}
			roBind(d)
		}
	}
	for _, p := range e.binds {
		if err := dir(p); err != nil {
			return fail(err)
		}
		roBind(p)
	}
	if e.nodeBind {
		// The Node.js executable alone (node.go): a file mount point.
		if err := dir(filepath.Dir(sandboxNode)); err != nil {
			return fail(err)
		}
		if err := os.WriteFile(filepath.Join(rootfs, sandboxNode), nil, 0o755); err != nil {
			return fail(err)
		}
		bind(e.node, sandboxNode, false)
	}
	for _, d := range hiddenDirs {
		if e.needsDir(d) {
			continue
		}
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			mounts = append(mounts, ociMount{Destination: d, Type: "tmpfs", Source: "tmpfs", Options: []string{"ro", "size=4096", "mode=755"}})
		}
	}
	etc := []string{"/etc/alternatives", "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d",
		"/etc/fonts", "/etc/localtime", "/etc/timezone", "/etc/matplotlibrc", "/etc/mime.types",
		"/etc/ssl", "/etc/ca-certificates", "/etc/nsswitch.conf", "/etc/python3"}
	if ents, err := filepath.Glob("/etc/python3.*"); err == nil {
		etc = append(etc, ents...)
	}
	for _, p := range etc {
		fi, err := os.Stat(p)
		if err != nil {
			continue
		}
		if fi.IsDir() {
			err = dir(p)
		} else if err = dir(filepath.Dir(p)); err == nil {
			err = os.WriteFile(filepath.Join(rootfs, p), nil, 0o644)
		}
		if err != nil {
			return fail(err)
		}
		roBind(p)
	}
	shm, tmp := tmpfsSizes(e.opts)
	for _, d := range []string{"/proc", "/dev", "/tmp", sandboxData, gvisorIODir, sandboxProxyDir, sandboxSys + "/mpl"} {
		if err := dir(d); err != nil {
			return fail(err)
		}
	}
	mounts = append(mounts,
		ociMount{Destination: "/proc", Type: "proc", Source: "proc"},
		ociMount{Destination: sandboxTmp, Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "nodev", "mode=1777", "size=" + strconv.FormatInt(tmp, 10)}},
		ociMount{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: []string{"nosuid", "nodev", "noexec", "mode=1777", "size=" + strconv.FormatInt(shm, 10)}},
	)
	bind(dataDir, sandboxData, true)
	bind(ioDir, gvisorIODir, false)
	bind(proxyDir(dataDir), sandboxProxyDir, false) // empty unless a custom container runs (container.go)

	// The sys files, copied; /etc/passwd and /etc/group name the sandbox
	// user, whose uid the process has inside.
	sys, err := e.sysFiles()
	if err != nil {
		return fail(err)
	}
	uid, gid := uint32(e.id.uid), uint32(e.id.gid)
	for _, sf := range sys {
		var data []byte
		switch sf.sandbox {
		case "/etc/passwd":
			data = fmt.Appendf(nil, "root:x:0:0:root:/root:/usr/sbin/nologin\nuser:x:%d:%d:user:/tmp:/bin/sh\n", uid, gid)
		case "/etc/group":
			data = fmt.Appendf(nil, "root:x:0:\nuser:x:%d:\n", gid)
		default:
			data, err = os.ReadFile(sf.host)
			if err != nil {
				return fail(err)
			}
		}
		dst := filepath.Join(rootfs, sf.sandbox)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return fail(err)
		}
		if err := os.WriteFile(dst, data, 0o644); err != nil {
			return fail(err)
		}
	}

	cfg.Socket = gvisorIODir + "/s"
	spec := ociSpec{
		OCIVersion: "1.0.2",
		Process: ociProcess{
			User:            ociUser{UID: uid, GID: gid, AdditionalGids: []uint32{}},
			Args:            prog(sandboxSys, cfg),
			Cwd:             sandboxData,
			NoNewPrivileges: true,
			Capabilities:    ociCapabilities{Bounding: []string{}, Effective: []string{}, Inheritable: []string{}, Permitted: []string{}, Ambient: []string{}},
			Rlimits: []ociRlimit{
				{Type: "RLIMIT_CORE", Hard: 0, Soft: 0},
				{Type: "RLIMIT_NPROC", Hard: uint64(e.opts.MaxProcesses), Soft: uint64(e.opts.MaxProcesses)},
				{Type: "RLIMIT_NOFILE", Hard: 4096, Soft: 4096},
			},
		},
		Root:        ociRoot{Path: "rootfs", Readonly: true},
		Hostname:    "sandbox",
		Mounts:      mounts,
		Annotations: annotations,
		Linux: ociLinux{Namespaces: []ociNamespace{
			{Type: "pid"}, {Type: "network"}, {Type: "ipc"}, {Type: "uts"}, {Type: "mount"},
		}, Seccomp: gvisorSeccomp()},
	}
	for k, v := range env {
		spec.Process.Env = append(spec.Process.Env, k+"="+v)
	}
	sj, err := json.MarshalIndent(spec, "", " ")
	if err != nil {
		return fail(err)
	}
	if err := os.WriteFile(filepath.Join(c.bundle, "config.json"), sj, 0o600); err != nil {
		return fail(err)
	}
	// --dcache bounds the Sentry's cache of unused dentries (by default
	// per mount), each of which holds a host descriptor in the Gofer: the
	// data directory's measurement before and after every cell follows each
	// of them (see Kernel.measure), and with numpy and pandas imported there
	// were ~2,960; with 100 cached, ~910, and a warm 1+1 took 84 instead of
	// 423 ms in an alternating run (BENCHMARKS.md). Files in use stay open.
	args := []string{e.runsc, "--root", c.root, "--network=none", "--platform=" + gvisorPlatform,
		"--host-uds=open", "--ignore-cgroups", "--oci-seccomp", "--dcache=100", "run", "--bundle", c.bundle, c.id}
	return args, c, nil
}

// gvisorExclusiveHint marks the read-only bind of the host system path src
// (the i-th mount) for the Sentry's exclusive file access: a mount hint
// (runsc's annotations dev.gvisor.spec.mount.<name>.source/type/share,
// matched to the mount by its source) with share "container", which mounts
// it without cache=remote_revalidating, like the root. With the default
// (--file-access-mounts=shared), the Sentry revalidates every path it
// walks with the Gofer, one round trip per step, so that it sees the
// host's changes. /usr, the /etc files and the interpreter's prefixes are
// the host's system files, which the kernels only read: a change made to them on the host while a kernel runs
// (a package upgrade) may not show in that kernel, only in kernels started
// afterwards; the data directory, the socket directories and the tmpfs mounts get no hint
// and keep their behaviour (the emulator writes files into the data
// directory while the kernel runs). The mounts stay read-only (the hint
// changes the caching only: the spec's "ro" still applies in the Sentry
// and the Gofer). Measured (BENCHMARKS.md, "gVisor start"): a kernel start
// with the numpy preload, its 1+1 and its close took 4.30 s of CPU before
// and 3.62 s after (medians of 9, alternating, load ~11); a stat(2) of a
// path under /usr costs the session ~155 µs of CPU instead of ~360 µs.
func gvisorExclusiveHint(annotations map[string]string, i int, src string) {
	name := "dev.gvisor.spec.mount.sys" + strconv.Itoa(i)
	annotations[name+".source"] = src
	annotations[name+".type"] = "bind"
	annotations[name+".share"] = "container"
}

// accept waits for the driver's connection and returns two descriptors of
// it (commands and replies), with deadlines, or an error once the process
// exited or ctx or the timer ends. The socket file is removed either way.
func (c *gvisorContainer) accept(ctx context.Context, exited <-chan struct{}, timeout time.Duration) (cmdW, resR *os.File, err error) {
	defer func() {
		_ = c.ln.Close()
		_ = os.Remove(c.sock)
	}()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		t := time.NewTimer(timeout)
		defer t.Stop()
		select {
		case <-stop:
			return
		case <-ctx.Done():
		case <-exited:
		case <-t.C:
		}
		_ = c.ln.SetDeadline(time.Now())
	}()
	conn, err := c.ln.AcceptUnix()
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		return nil, nil, errors.New("the driver did not connect")
	}
	defer conn.Close()
	raw, err := conn.SyscallConn()
	if err != nil {
		return nil, nil, err
	}
	var fds [2]int
	var dupErr error
	if err := raw.Control(func(fd uintptr) {
		for i := range fds {
			// The duplicates share the original's O_NONBLOCK, so os.NewFile
			// makes them pollable (deadlines work).
			fds[i], dupErr = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0)
			if dupErr != nil {
				return
			}
		}
	}); err != nil || dupErr != nil {
		for _, fd := range fds {
			if fd > 0 {
				_ = unix.Close(fd)
			}
		}
		return nil, nil, errors.Join(err, dupErr)
	}
	return os.NewFile(uintptr(fds[0]), "gvisor-cmd"), os.NewFile(uintptr(fds[1]), "gvisor-res"), nil
}

// remove deletes the container's runsc state (killing what is left of it)
// and its bundle.
func (c *gvisorContainer) remove() {
	if c.ln != nil {
		_ = c.ln.Close()
	}
	if _, err := os.Stat(filepath.Join(c.bundle, "config.json")); err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, c.runsc, "--root", c.root, "delete", "--force", c.id)
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		_ = cmd.Run() // "not found" when the container never started
	}
	_ = os.RemoveAll(c.bundle)
}

// removeLater is remove in a goroutine that Executor.Close waits for, for a
// container whose processes are all gone (its cgroup was seen empty), so
// that closing or restarting a kernel does not wait for `runsc delete`.
// That command kills the sandbox again and waits until its process has
// left the process table; the Sentry, orphaned when its parent `runsc run`
// was killed, is reaped by the host's init, which on this project's
// machines takes ~1.5 s (BENCHMARKS.md, "Kernel close"). With the cgroup
// empty nothing of the sandbox runs any more: what is left is runsc's state
// file and the bundle, under the executor's directory.
func (c *gvisorContainer) removeLater() {
	if c.later == nil {
		c.remove()
		return
	}
	c.later.Add(1)
	go func() {
		defer c.later.Done()
		c.remove()
	}()
}

// gvisorLeftovers lists the containers runsc still knows in a dead
// executor's directory and deletes them (killing what still runs) before
// the directory is removed.
func gvisorLeftovers(execDir string) {
	root := filepath.Join(execDir, ".gvisor", "state")
	// runsc trusts the state files under its --root: only the executor's
	// own directories (removeLeftovers checked execDir) are handed to it.
	if !ownDir(filepath.Join(execDir, ".gvisor")) || !ownDir(root) {
		return
	}
	runsc, err := exec.LookPath("runsc")
	if err != nil {
		return
	}
	ents, err := os.ReadDir(filepath.Join(execDir, ".gvisor"))
	if err != nil {
		return
	}
	for _, ent := range ents {
		if !ent.IsDir() || !strings.HasPrefix(ent.Name(), "azs-") {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		cmd := exec.CommandContext(ctx, runsc, "--root", root, "delete", "--force", ent.Name())
		_ = cmd.Run()
		cancel()
	}
}

// distinctFileTables keeps one process of each descriptor table among pids
// (kcmp KCMP_FILES; the first pid is always kept). Under the ptrace
// platform, the Sentry's stub processes share its table of hundreds of
// descriptors: the data directory watcher scans it once, not once per stub.
func distinctFileTables(pids []int) []int {
	var out []int
	for _, pid := range pids {
		dup := false
		for _, q := range out {
			r, _, errno := unix.Syscall6(unix.SYS_KCMP, uintptr(pid), uintptr(q), kcmpFiles, 0, 0, 0)
			if errno == 0 && r == 0 {
				dup = true
				break
			}
		}
		if !dup {
			out = append(out, pid)
		}
	}
	return out
}

// kcmpFiles is KCMP_FILES of kcmp(2).
const kcmpFiles = 2
