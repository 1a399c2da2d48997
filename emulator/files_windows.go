package emulator

import "io/fs"

// oDirectory is 0: Windows has no O_DIRECTORY (nor FIFOs that would block
// openDir's open).
const oDirectory = 0

// fileBlocks does not know the blocks of a file on Windows: replacedBytes
// counts its size.
func fileBlocks(fs.FileInfo) (nlink uint64, bytes int64, ok bool) { return 0, 0, false }
