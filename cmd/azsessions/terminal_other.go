//go:build !linux

package main

import "os"

// isTerminalFile reports whether f is a character device: a terminal, or
// (on systems without the Linux check) a device such as /dev/null.
func isTerminalFile(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
