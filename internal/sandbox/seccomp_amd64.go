package sandbox

import "golang.org/x/sys/unix"

// auditArch is the seccomp_data.arch of native system calls (AUDIT_ARCH_X86_64).
const auditArch = 0xc000003e

// compatBit marks x32 system calls, which arrive with the native arch.
const compatBit = 0x40000000

// archDenied are amd64-only system calls refused with EPERM (see seccomp.go).
var archDenied = []uint32{
	unix.SYS_IOPL, unix.SYS_IOPERM, unix.SYS_MODIFY_LDT, unix.SYS_USELIB, unix.SYS_USTAT, unix.SYS_SYSFS, unix.SYS__SYSCTL,
	unix.SYS_CREATE_MODULE, unix.SYS_GET_KERNEL_SYMS, unix.SYS_QUERY_MODULE,
}
