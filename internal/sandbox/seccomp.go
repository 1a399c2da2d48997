//go:build linux

package sandbox

import (
	"encoding/binary"
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// The seccomp filter bwrap installs (--seccomp FD) in every sandbox, on amd64
// and arm64 (other architectures get none; the other layers still apply).
//
// What it refuses, and why:
//
//   - Every system call of another ABI than the native one (i386 and x32 on
//     amd64, arm on arm64) fails with ENOSYS: only native binaries run, and
//     the rules below need no second set of numbers. The compat entry points
//     are an old source of kernel bugs.
//   - socket(2) is an allow-list of families: AF_UNIX, AF_INET, AF_INET6, and
//     AF_NETLINK with protocol NETLINK_ROUTE only (glibc's if_nameindex and
//     getaddrinfo's address-family check use it; in the sandbox's network
//     namespace it only shows the private loopback). Anything else (AF_VSOCK,
//     which reaches the hypervisor whatever the network namespace,
//     AF_PACKET, AF_ALG, AF_BLUETOOTH, other netlink protocols, ...) fails
//     with EAFNOSUPPORT, as on a kernel without that family. socketpair(2)
//     only takes AF_UNIX.
//   - keyctl, add_key and request_key fail with EPERM: the kernel keyring is
//     not namespaced and keys are charged to the host user's quota.
//   - Kernel and system administration fail with EPERM, although most need a
//     capability the sandbox does not have (defence in depth against kernel
//     bugs): bpf, userfaultfd, perf_event_open, kexec_load,
//     kexec_file_load, reboot, module loading, swapon/swapoff, acct, syslog,
//     clock and time setting, quotactl, vhangup, lookup_dcookie, nfsservctl,
//     fanotify_init, the mount API (mount, umount2, pivot_root, open_tree,
//     move_mount, fsopen, fsconfig, fsmount, fspick, mount_setattr),
//     namespaces (unshare, setns, and clone with a CLONE_NEW* flag),
//     name_to_handle_at/open_by_handle_at, and looking into other processes
//     (ptrace, process_vm_readv/writev, kcmp, pidfd_getfd), plus on amd64
//     iopl, ioperm, modify_ldt, uselib, ustat, sysfs, _sysctl and the
//     obsolete module calls.
//   - clone3 fails with ENOSYS (its flags are in memory, where seccomp cannot
//     look; glibc and Go then fall back to clone, whose flags it checks).
//   - personality(2) only takes PER_LINUX and the 0xffffffff query (EPERM
//     otherwise: other personalities change the address-space layout).
//   - ioctl TIOCSTI and TIOCLINUX fail with EPERM (no typing into a terminal;
//     the sandbox has none, this is belt and braces).
//   - fallocate(2) fails with EOPNOTSUPP: with FALLOC_FL_KEEP_SIZE it reserves
//     disk blocks without growing the file, so RLIMIT_FSIZE does not apply
//     and one call could fill the host's disk long before the 300 ms watcher
//     of MaxDataDirBytes looks. glibc's posix_fallocate falls back to
//     writing, which RLIMIT_FSIZE bounds.
//   - io_uring_setup, io_uring_enter and io_uring_register fail with ENOSYS
//     (as on a kernel without io_uring, so libraries fall back to plain
//     system calls): IORING_OP_FALLOCATE would pass the fallocate rule, and
//     io_uring is a large kernel attack surface.
//   - sendmsg and sendmmsg fail with EPERM: their ancillary data can carry
//     SCM_RIGHTS, which puts descriptors "in flight" in an AF_UNIX socket's
//     queue, where no process holds them. A file created in /mnt/data,
//     unlinked, filled and sent that way takes host disk space that neither
//     du nor the /proc/<pid>/fd scan of the MaxDataDirBytes watcher can see
//     (a red-team wrote 3 GB past a 1 GiB limit). seccomp cannot read the
//     msghdr (it is in memory), so both calls are refused whole; send,
//     sendto, write and recvmsg keep working. Nothing the driver, IPython,
//     numpy, pandas, matplotlib or multiprocessing's fork start method run
//     uses them (the forkserver start method passes descriptors with
//     sendmsg and does not work; glibc's resolver uses sendmmsg, and the
//     sandbox has no DNS server to reach anyway).
//   - A mode with S_ISUID or S_ISGID fails with EPERM in chmod, fchmod,
//     fchmodat, fchmodat2, mknod(at), creat and open(at) with O_CREAT or
//     O_TMPFILE (the mode argument is only read then), and openat2 (its mode
//     is in memory) fails with ENOSYS, as on a kernel without it: files in
//     /mnt/data are files on the host, and a setuid copy of a program made
//     in a session (owned by -sandbox-user) would run as that user for
//     whoever on the host executes it. The sandbox's own mounts are nosuid
//     anyway, so no session code needs these bits.
//
// Everything else is allowed: it is a deny-list for system calls and an
// allow-list where arguments matter (socket families, clone flags,
// personality, file modes).
//
// # Compared with Docker's and Flatpak's filters
//
// Docker's default profile (moby profiles/seccomp/default.json) is an
// allow-list of ~350 system calls; a system call it does not list fails with
// EPERM. The system calls it leaves out that this filter allows are
// harmless for the sandbox:
//   - the ones that need a capability Docker does not grant by default (and
//     that the sandbox never has: bwrap --cap-drop ALL, and a user namespace
//     owned by an unprivileged host uid, with --disable-userns), e.g.
//     chroot, setdomainname/sethostname (UTS namespace of its own anyway),
//     mbind/set_mempolicy/move_pages/get_mempolicy (NUMA placement of its
//     own pages, bounded by its memory cgroup), open_by_handle_at (refused
//     here too), clock_adjtime (refused here);
//   - system calls newer than Docker's list, which this filter allows:
//     Docker's policy is "unknown means denied", ours "unknown means the
//     kernel's own permission checks". New system calls that reach other
//     processes or the host (pidfd_getfd, the mount API) are refused here
//     by name; the rest (e.g. landlock_*, memfd_secret, futex_waitv,
//     cachestat, map_shadow_stack) act on the caller itself.
//
// Docker allows things this filter refuses: ptrace and process_vm_*
// (kernels >= 4.8), personality's PER_LINUX32 and UNAME26 variants, socket
// families other than AF_VSOCK, io_uring (newer profiles refuse it),
// fallocate, sendmsg/sendmmsg, setuid/setgid modes (Docker mounts volumes
// nosuid only on request; its containers' files stay in its storage),
// openat2, and the i386/x32 ABIs. Refusing them costs
// nothing to notebook code (debuggers do not run in a session; no notebook
// library passes descriptors). Docker needs no sendmsg rule because it
// enforces disk limits with filesystem quotas (or not at all), which count
// in-flight files; this sandbox's disk limit is a watcher that cannot see
// them.
//
// Flatpak (common/flatpak-run.c, setup_seccomp) is, like this filter, a
// deny-list plus a socket-family allow-list returning EAFNOSUPPORT
// (AF_UNIX, AF_INET, AF_INET6, AF_NETLINK, and AF_CAN/AF_BLUETOOTH on
// request). Both refuse syslog, uselib, acct, modify_ldt, quotactl, the
// keyring calls, unshare, setns, mount, umount2, pivot_root, the new mount
// API, TIOCSTI, clone with CLONE_NEWUSER, and (outside Flatpak's
// development mode) perf_event_open, ptrace and personality other than
// PER_LINUX. Differences:
//   - Flatpak allows every netlink protocol (this filter only
//     NETLINK_ROUTE), every CLONE_NEW* flag but CLONE_NEWUSER (here none),
//     bpf, userfaultfd, io_uring, fallocate and sendmsg/sendmmsg (refused
//     here: desktop applications pass descriptors over D-Bus and Wayland,
//     and Flatpak has no disk limit to enforce), and supports
//     multiarch for 32-bit programs (refused here).
//   - Flatpak refuses chroot, move_pages, mbind, get_mempolicy,
//     set_mempolicy and migrate_pages, which this filter allows: chroot
//     needs CAP_SYS_CHROOT, which the sandbox never has (and --disable-userns
//     keeps it from getting one in a namespace of its own); the NUMA calls
//     only place the caller's own pages (moving another process's pages
//     needs CAP_SYS_NICE over it), within its memory cgroup.
//
// The filter cannot be relaxed from inside: bwrap sets no_new_privs, and a
// seccomp filter can only be added to.

// Classic BPF opcodes and seccomp return values (linux/filter.h,
// linux/seccomp.h), and offsets in struct seccomp_data, which x/sys/unix
// does not define.
const (
	bpfLdWAbs = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
	bpfJeqK   = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
	bpfJgeK   = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
	bpfJsetK  = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
	bpfRetK   = unix.BPF_RET | unix.BPF_K
	retAllow  = unix.SECCOMP_RET_ALLOW
	retErrno  = unix.SECCOMP_RET_ERRNO
	offNr     = 0  // offsetof(struct seccomp_data, nr)
	offArch   = 4  // offsetof(struct seccomp_data, arch)
	offArgs   = 16 // offsetof(struct seccomp_data, args): 8 bytes each
)

// argLow is the offset of the low 32 bits of argument i (little-endian:
// amd64 and arm64). int arguments (families, personality, ioctl requests
// as the kernel reads them) are only their low 32 bits.
func argLow(i int) uint32 { return uint32(offArgs + 8*i) }

// perLinux is personality(2)'s PER_LINUX (linux/personality.h).
const perLinux = 0

// cloneNamespaceFlags are clone(2)'s CLONE_NEW* flags. CLONE_NEWTIME is not
// among them: clone(2) reads that bit as part of the exit signal.
const cloneNamespaceFlags = unix.CLONE_NEWNS | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC | unix.CLONE_NEWUSER |
	unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWCGROUP

// setIDBits are S_ISUID and S_ISGID, refused in file modes.
const setIDBits = unix.S_ISUID | unix.S_ISGID

// oTmpfileOnly is O_TMPFILE without the O_DIRECTORY it includes.
const oTmpfileOnly = unix.O_TMPFILE &^ unix.O_DIRECTORY

// modeRule is a system call whose mode argument may not have setIDBits.
type modeRule struct {
	name     string // for gVisor's OCI seccomp filter
	nr       uint32
	flagsArg int // open flags argument (mode read only with O_CREAT or O_TMPFILE), -1 if none
	modeArg  int
}

// modeRules are the system calls that set a file's mode, with the
// architecture's own from archModeRules.
func modeRules() []modeRule {
	return append([]modeRule{
		{"fchmod", unix.SYS_FCHMOD, -1, 1},
		{"fchmodat", unix.SYS_FCHMODAT, -1, 2},
		{"fchmodat2", unix.SYS_FCHMODAT2, -1, 2},
		{"mknodat", unix.SYS_MKNODAT, -1, 2},
		{"openat", unix.SYS_OPENAT, 2, 3},
	}, archModeRules...)
}

// deniedSyscall is a system call the filter makes fail with errno.
type deniedSyscall struct {
	nr    uint32
	errno syscall.Errno
}

// deniedSyscalls lists the native system calls the filter refuses (the
// architecture's own extras come from archDenied).
func deniedSyscalls() []deniedSyscall {
	var out []deniedSyscall
	add := func(errno syscall.Errno, nrs ...uint32) {
		for _, nr := range nrs {
			out = append(out, deniedSyscall{nr, errno})
		}
	}
	add(syscall.EOPNOTSUPP, unix.SYS_FALLOCATE)
	add(syscall.ENOSYS, unix.SYS_OPENAT2, unix.SYS_IO_URING_SETUP, unix.SYS_IO_URING_ENTER, unix.SYS_IO_URING_REGISTER, unix.SYS_CLONE3)
	add(syscall.EPERM,
		unix.SYS_KEYCTL, unix.SYS_ADD_KEY, unix.SYS_REQUEST_KEY,
		unix.SYS_BPF, unix.SYS_USERFAULTFD, unix.SYS_PERF_EVENT_OPEN,
		unix.SYS_KEXEC_LOAD, unix.SYS_KEXEC_FILE_LOAD, unix.SYS_REBOOT,
		unix.SYS_INIT_MODULE, unix.SYS_FINIT_MODULE, unix.SYS_DELETE_MODULE,
		unix.SYS_SWAPON, unix.SYS_SWAPOFF, unix.SYS_ACCT, unix.SYS_SYSLOG,
		unix.SYS_SETTIMEOFDAY, unix.SYS_CLOCK_SETTIME, unix.SYS_CLOCK_ADJTIME,
		unix.SYS_QUOTACTL, unix.SYS_VHANGUP, unix.SYS_LOOKUP_DCOOKIE, unix.SYS_NFSSERVCTL,
		unix.SYS_FANOTIFY_INIT,
		unix.SYS_MOUNT, unix.SYS_UMOUNT2, unix.SYS_PIVOT_ROOT,
		unix.SYS_OPEN_TREE, unix.SYS_MOVE_MOUNT, unix.SYS_FSOPEN, unix.SYS_FSCONFIG,
		unix.SYS_FSMOUNT, unix.SYS_FSPICK, unix.SYS_MOUNT_SETATTR,
		unix.SYS_UNSHARE, unix.SYS_SETNS,
		unix.SYS_NAME_TO_HANDLE_AT, unix.SYS_OPEN_BY_HANDLE_AT,
		unix.SYS_PTRACE, unix.SYS_PROCESS_VM_READV, unix.SYS_PROCESS_VM_WRITEV,
		unix.SYS_KCMP, unix.SYS_PIDFD_GETFD,
		// SCM_RIGHTS would hide unlinked files from the disk watcher (see above).
		unix.SYS_SENDMSG, unix.SYS_SENDMMSG,
	)
	add(syscall.EPERM, archDenied...)
	return out
}

// bpfAsm assembles a classic BPF program with symbolic jump targets.
type bpfAsm struct {
	prog   []sockFilter
	labels map[string]int
	fixups []fixup
}

type fixup struct {
	at     int
	jt, jf string // labels ("" = next instruction)
}

type sockFilter struct {
	code   uint16
	jt, jf uint8
	k      uint32
}

func (a *bpfAsm) label(name string) { a.labels[name] = len(a.prog) }

func (a *bpfAsm) load(off uint32) { a.prog = append(a.prog, sockFilter{code: bpfLdWAbs, k: off}) }

func (a *bpfAsm) ret(k uint32) { a.prog = append(a.prog, sockFilter{code: bpfRetK, k: k}) }

// jump adds a conditional jump (op is bpfJeqK, bpfJgeK or bpfJsetK) to jt
// when it holds, else to jf.
func (a *bpfAsm) jump(op uint16, k uint32, jt, jf string) {
	a.fixups = append(a.fixups, fixup{at: len(a.prog), jt: jt, jf: jf})
	a.prog = append(a.prog, sockFilter{code: op, k: k})
}

// assemble resolves the jumps and encodes struct sock_filter entries.
func (a *bpfAsm) assemble() ([]byte, error) {
	off := func(from int, label string) (int, error) {
		if label == "" {
			return 0, nil
		}
		to, ok := a.labels[label]
		if !ok || to <= from {
			return 0, fmt.Errorf("sandbox: seccomp: bad jump to %q", label)
		}
		return to - from - 1, nil
	}
	for _, f := range a.fixups {
		t, err := off(f.at, f.jt)
		if err != nil {
			return nil, err
		}
		e, err := off(f.at, f.jf)
		if err != nil {
			return nil, err
		}
		if t > 255 || e > 255 {
			return nil, fmt.Errorf("sandbox: seccomp: jump too far")
		}
		a.prog[f.at].jt, a.prog[f.at].jf = uint8(t), uint8(e)
	}
	out := make([]byte, 0, 8*len(a.prog))
	for _, ins := range a.prog {
		out = binary.NativeEndian.AppendUint16(out, ins.code)
		out = append(out, ins.jt, ins.jf)
		out = binary.NativeEndian.AppendUint32(out, ins.k)
	}
	return out, nil
}

// seccompProgram returns the filter as the struct sock_filter array bwrap
// reads from its --seccomp descriptor, or nil when this architecture has no
// filter (the limits then rest on the data directory watcher only).
func seccompProgram() []byte {
	if auditArch == 0 {
		return nil
	}
	a := &bpfAsm{labels: map[string]int{}}
	errno := func(e syscall.Errno) string { return "errno-" + e.Error() }
	used := map[syscall.Errno]bool{syscall.ENOSYS: true, syscall.EPERM: true, syscall.EAFNOSUPPORT: true}

	a.load(offArch)
	a.jump(bpfJeqK, auditArch, "", errno(syscall.ENOSYS))
	a.load(offNr)
	if compatBit != 0 {
		a.jump(bpfJgeK, compatBit, errno(syscall.ENOSYS), "") // x32
	}
	a.jump(bpfJeqK, unix.SYS_SOCKET, "socket", "")
	a.jump(bpfJeqK, unix.SYS_SOCKETPAIR, "socketpair", "")
	a.jump(bpfJeqK, unix.SYS_CLONE, "clone", "")
	a.jump(bpfJeqK, unix.SYS_PERSONALITY, "personality", "")
	a.jump(bpfJeqK, unix.SYS_IOCTL, "ioctl", "")
	for _, r := range modeRules() {
		a.jump(bpfJeqK, r.nr, fmt.Sprintf("mode-%d", r.nr), "")
	}
	for _, d := range deniedSyscalls() {
		used[d.errno] = true
		a.jump(bpfJeqK, d.nr, errno(d.errno), "")
	}
	a.ret(retAllow)

	a.label("socket")
	a.load(argLow(0))
	a.jump(bpfJeqK, unix.AF_UNIX, "allow", "")
	a.jump(bpfJeqK, unix.AF_INET, "allow", "")
	a.jump(bpfJeqK, unix.AF_INET6, "allow", "")
	a.jump(bpfJeqK, unix.AF_NETLINK, "", errno(syscall.EAFNOSUPPORT))
	a.load(argLow(2))
	a.jump(bpfJeqK, unix.NETLINK_ROUTE, "allow", errno(syscall.EAFNOSUPPORT))

	a.label("socketpair")
	a.load(argLow(0))
	a.jump(bpfJeqK, unix.AF_UNIX, "allow", errno(syscall.EAFNOSUPPORT))

	a.label("clone")
	a.load(argLow(0)) // flags (arg 0 on amd64 and arm64); CLONE_NEW* are in the low word
	a.jump(bpfJsetK, cloneNamespaceFlags, errno(syscall.EPERM), "allow")

	a.label("personality")
	a.load(argLow(0))
	a.jump(bpfJeqK, perLinux, "allow", "")
	a.jump(bpfJeqK, 0xffffffff, "allow", errno(syscall.EPERM))

	a.label("ioctl")
	a.load(argLow(1))
	a.jump(bpfJeqK, unix.TIOCSTI, errno(syscall.EPERM), "")
	a.jump(bpfJeqK, unix.TIOCLINUX, errno(syscall.EPERM), "allow")

	for _, r := range modeRules() {
		a.label(fmt.Sprintf("mode-%d", r.nr))
		if r.flagsArg >= 0 {
			a.load(argLow(r.flagsArg))
			a.jump(bpfJsetK, unix.O_CREAT|oTmpfileOnly, "", "allow")
		}
		a.load(argLow(r.modeArg))
		a.jump(bpfJsetK, setIDBits, errno(syscall.EPERM), "allow")
	}

	a.label("allow")
	a.ret(retAllow)
	for _, e := range []syscall.Errno{syscall.ENOSYS, syscall.EPERM, syscall.EAFNOSUPPORT, syscall.EOPNOTSUPP} {
		if used[e] {
			a.label(errno(e))
			a.ret(retErrno | uint32(e))
		}
	}
	prog, err := a.assemble()
	if err != nil {
		panic(err) // a bug in the program above, caught by every test that starts a sandbox
	}
	return prog
}
