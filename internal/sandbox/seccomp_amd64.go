//go:build linux

package sandbox

import "golang.org/x/sys/unix"

// auditArch is the seccomp_data.arch of native system calls.
const auditArch = unix.AUDIT_ARCH_X86_64

// ociArch is auditArch as an OCI seccomp architecture (gVisor).
const ociArch = "SCMP_ARCH_X86_64"

// compatBit marks x32 system calls, which arrive with the native arch.
const compatBit = 0x40000000

// archDenied are amd64-only system calls refused with EPERM (see seccomp.go).
var archDenied = []uint32{
	unix.SYS_IOPL, unix.SYS_IOPERM, unix.SYS_MODIFY_LDT, unix.SYS_USELIB, unix.SYS_USTAT, unix.SYS_SYSFS, unix.SYS__SYSCTL,
	unix.SYS_CREATE_MODULE, unix.SYS_GET_KERNEL_SYMS, unix.SYS_QUERY_MODULE,
}

// archModeRules are amd64-only system calls that set a file's mode (see
// modeRules).
var archModeRules = []modeRule{
	{"chmod", unix.SYS_CHMOD, -1, 1},
	{"creat", unix.SYS_CREAT, -1, 1},
	{"mknod", unix.SYS_MKNOD, -1, 1},
	{"open", unix.SYS_OPEN, 1, 2},
}
