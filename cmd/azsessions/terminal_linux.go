package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// isTerminalFile reports whether f is a terminal (a character device such
// as /dev/null is not).
func isTerminalFile(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
