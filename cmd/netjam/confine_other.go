//go:build !linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"

	"github.com/netjam/netjam/emulator"
)

// A shell needs Linux (network namespaces): on other systems netjam shell
// fails at its namespace first, and these are never reached.

// notLinux is the error of confining a shell's command here.
var notLinux = &emulator.NotLinuxError{Op: "confining a shell's command", GOOS: runtime.GOOS, GOARCH: runtime.GOARCH}

// ownSession returns a *emulator.NotLinuxError.
func ownSession(*exec.Cmd) error { return notLinux }

// runConfined reports that confining a command needs Linux.
func runConfined([]string) int {
	fmt.Fprintln(os.Stderr, "netjam:", notLinux)
	return exitCannotRun
}
