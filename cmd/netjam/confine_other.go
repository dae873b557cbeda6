//go:build !linux

package main

import (
	"fmt"
	"os"
	"os/exec"

	"github.com/netjam/netjam/hostnet"
)

// A shell needs Linux (network namespaces): on other systems netjam shell
// fails at its namespace first, and these are never reached.

// ownSession returns hostnet's *NotLinuxError.
func ownSession(*exec.Cmd) error {
	_, err := hostnet.NewNetns()
	return err
}

// runConfined reports that confining a command needs Linux.
func runConfined([]string) int {
	_, err := hostnet.NewNetns()
	fmt.Fprintln(os.Stderr, "netjam: confining the command:", err)
	return exitCannotRun
}
