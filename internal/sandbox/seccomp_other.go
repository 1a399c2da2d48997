//go:build linux && !amd64 && !arm64

package sandbox

// auditArch 0 means no seccomp filter on this architecture.
const auditArch = 0

const compatBit = 0

const ociArch = ""

var archDenied = []uint32{}

// archModeRules: none (see modeRules).
var archModeRules = []modeRule{}
