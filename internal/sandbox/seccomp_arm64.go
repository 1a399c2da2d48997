//go:build linux

package sandbox

import "golang.org/x/sys/unix"

// auditArch is the seccomp_data.arch of native system calls.
const auditArch = unix.AUDIT_ARCH_AARCH64

// ociArch is auditArch as an OCI seccomp architecture (gVisor).
const ociArch = "SCMP_ARCH_AARCH64"

// compatBit is 0: arm64 has no x32-like ABI with the native arch.
const compatBit = 0

// archDenied are arm64-only system calls refused with EPERM: none.
var archDenied = []uint32{}

// archModeRules: none (see modeRules).
var archModeRules = []modeRule{}
