package sandbox

import (
	"encoding/binary"
	"runtime"
	"syscall"
)

// The seccomp filter bwrap installs (--seccomp FD) in every sandbox. It makes
// fallocate(2) fail with EOPNOTSUPP: with FALLOC_FL_KEEP_SIZE it reserves
// disk blocks without growing the file, so RLIMIT_FSIZE does not apply and
// one call could fill the host's disk long before the 300 ms watcher of
// MaxDataDirBytes looks. glibc's posix_fallocate falls back to writing, which
// RLIMIT_FSIZE bounds. Everything else is allowed.

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

// deniedSyscalls lists, per audit architecture a process of this machine can
// use, the numbers of the denied system calls (fallocate).
func deniedSyscalls() map[uint32][]uint32 {
	switch runtime.GOARCH {
	case "amd64":
		return map[uint32][]uint32{archX86_64: {285, x32Bit | 285}, archI386: {324}}
	case "arm64":
		return map[uint32][]uint32{archAArch64: {47}, archARM: {352}}
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
	var denyJumps []int // indexes of jumps to the deny instruction (patched below)
	prog = append(prog, sockFilter{code: bpfLdWAbs, k: offArch})
	for _, arch := range []uint32{archX86_64, archI386, archAArch64, archARM} {
		nrs, ok := denied[arch]
		if !ok {
			continue
		}
		// if arch != A: skip this block (load, compares, allow).
		prog = append(prog, sockFilter{code: bpfJeqK, k: arch, jf: uint8(1 + len(nrs) + 1)})
		prog = append(prog, sockFilter{code: bpfLdWAbs, k: offNr})
		for _, nr := range nrs {
			denyJumps = append(denyJumps, len(prog))
			prog = append(prog, sockFilter{code: bpfJeqK, k: nr})
		}
		prog = append(prog, sockFilter{code: bpfRetK, k: retAllow})
	}
	prog = append(prog, sockFilter{code: bpfRetK, k: retAllow}) // other architectures
	deny := len(prog)
	prog = append(prog, sockFilter{code: bpfRetK, k: retErrno | uint32(syscall.EOPNOTSUPP)})
	for _, i := range denyJumps {
		prog[i].jt = uint8(deny - i - 1)
	}
	out := make([]byte, 0, 8*len(prog))
	for _, ins := range prog {
		out = binary.NativeEndian.AppendUint16(out, ins.code)
		out = append(out, ins.jt, ins.jf)
		out = binary.NativeEndian.AppendUint32(out, ins.k)
	}
	return out
}
