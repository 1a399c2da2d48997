//go:build !windows

package emulator

import (
	"io/fs"
	"syscall"
)

// oDirectory is O_DIRECTORY (see openDir).
const oDirectory = syscall.O_DIRECTORY

// fileBlocks returns fi's link count and the bytes of the blocks allocated
// to it (ok false when the system does not say).
func fileBlocks(fi fs.FileInfo) (nlink uint64, bytes int64, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return uint64(st.Nlink), int64(st.Blocks) * 512, true
}
