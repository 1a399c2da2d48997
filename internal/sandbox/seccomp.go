package sandbox

import (
	"encoding/binary"
	"runtime"
	"slices"
	"syscall"
)

// The seccomp filter bwrap installs (--seccomp FD) in every sandbox. It makes
// fallocate(2) fail with EOPNOTSUPP: with FALLOC_FL_KEEP_SIZE it reserves
// disk blocks without growing the file, so RLIMIT_FSIZE does not apply and
// one call could fill the host's disk long before the 300 ms watcher of
// MaxDataDirBytes looks. glibc's posix_fallocate falls back to writing, which
// RLIMIT_FSIZE bounds. io_uring_setup, io_uring_enter and io_uring_register
// fail with ENOSYS (as on a kernel without io_uring, so libraries fall back to
// plain system calls): IORING_OP_FALLOCATE would reserve blocks past the
// fallocate rule, and io_uring is a large kernel attack surface. Everything
// else is allowed.

// Classic BPF opcodes and seccomp return values (linux/filter.h, linux/seccomp.h).
const (
	bpfLdWAbs   = 0x20 // BPF_LD | BPF_W | BPF_ABS
	bpfJeqK     = 0x15 // BPF_JMP | BPF_JEQ | BPF_K
	bpfRetK     = 0x06 // BPF_RET | BPF_K
	retAllow    = 0x7fff0000
	retErrno    = 0x00050000
	offNr       = 0 // offsetof(struct seccomp_data, nr)
	offArch     = 4 // offsetof(struct seccomp_data, arch)
	archX86_64  = 0xc000003e
	archI386    = 0x40000003
	archAArch64 = 0xc00000b7
	archARM     = 0x40000028
	x32Bit      = 0x40000000
)

// deniedSyscall is a system call the filter makes fail with errno.
type deniedSyscall struct {
	nr    uint32
	errno syscall.Errno
}

// ioUring are io_uring_setup, io_uring_enter and io_uring_register, which have
// the same numbers on every architecture (x86_64, i386, x32 with x32Bit,
// arm64 and arm).
var ioUring = []uint32{425, 426, 427}

// deniedSyscalls lists, per audit architecture a process of this machine can
// use, the denied system calls: fallocate (EOPNOTSUPP) and io_uring (ENOSYS).
func deniedSyscalls() map[uint32][]deniedSyscall {
	list := func(fallocate []uint32, uring []uint32) []deniedSyscall {
		var out []deniedSyscall
		for _, nr := range fallocate {
			out = append(out, deniedSyscall{nr, syscall.EOPNOTSUPP})
		}
		for _, nr := range uring {
			out = append(out, deniedSyscall{nr, syscall.ENOSYS})
		}
		return out
	}
	x32Uring := make([]uint32, len(ioUring))
	for i, nr := range ioUring {
		x32Uring[i] = x32Bit | nr
	}
	switch runtime.GOARCH {
	case "amd64":
		return map[uint32][]deniedSyscall{
			archX86_64: list([]uint32{285, x32Bit | 285}, append(slices.Clone(ioUring), x32Uring...)),
			archI386:   list([]uint32{324}, ioUring),
		}
	case "arm64":
		return map[uint32][]deniedSyscall{archAArch64: list([]uint32{47}, ioUring), archARM: list([]uint32{352}, ioUring)}
	}
	return nil
}

type sockFilter struct {
	code   uint16
	jt, jf uint8
	k      uint32
}

// seccompProgram returns the filter as the struct sock_filter array bwrap
// reads from its --seccomp descriptor, or nil when this architecture has no
// filter (the limits then rest on the data directory watcher only).
func seccompProgram() []byte {
	denied := deniedSyscalls()
	if len(denied) == 0 {
		return nil
	}
	var prog []sockFilter
	type jump struct {
		at    int
		errno syscall.Errno
	}
	var denyJumps []jump // jumps to a deny instruction (patched below)
	prog = append(prog, sockFilter{code: bpfLdWAbs, k: offArch})
	for _, arch := range []uint32{archX86_64, archI386, archAArch64, archARM} {
		nrs, ok := denied[arch]
		if !ok {
			continue
		}
		// if arch != A: skip this block (load, compares, allow).
		prog = append(prog, sockFilter{code: bpfJeqK, k: arch, jf: uint8(1 + len(nrs) + 1)})
		prog = append(prog, sockFilter{code: bpfLdWAbs, k: offNr})
		for _, d := range nrs {
			denyJumps = append(denyJumps, jump{len(prog), d.errno})
			prog = append(prog, sockFilter{code: bpfJeqK, k: d.nr})
		}
		prog = append(prog, sockFilter{code: bpfRetK, k: retAllow})
	}
	prog = append(prog, sockFilter{code: bpfRetK, k: retAllow}) // other architectures
	deny := map[syscall.Errno]int{}                             // errno -> index of its return
	for _, j := range denyJumps {
		if _, ok := deny[j.errno]; !ok {
			deny[j.errno] = len(prog)
			prog = append(prog, sockFilter{code: bpfRetK, k: retErrno | uint32(j.errno)})
		}
	}
	for _, j := range denyJumps {
		off := deny[j.errno] - j.at - 1
		if off > 255 {
			panic("sandbox: seccomp program too long")
		}
		prog[j.at].jt = uint8(off)
	}
	out := make([]byte, 0, 8*len(prog))
	for _, ins := range prog {
		out = binary.NativeEndian.AppendUint16(out, ins.code)
		out = append(out, ins.jt, ins.jf)
		out = binary.NativeEndian.AppendUint32(out, ins.k)
	}
	return out
}
