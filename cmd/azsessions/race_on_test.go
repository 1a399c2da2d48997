//go:build race

package main

// raceBuild: the test binary is race-built (see TestMain).
const raceBuild = true
