//go:build !linux

package confine

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"

	"github.com/netjam/netjam/hostnet"
)

// A shell needs Linux (network namespaces): on other systems netjam shell
// fails at its namespace first, and these are never reached.

// notLinux is the error of confining a shell's command here.
var notLinux = &hostnet.NotLinuxError{Op: "confining a shell's command", GOOS: runtime.GOOS, GOARCH: runtime.GOARCH}

// ownSession returns a *hostnet.NotLinuxError.
func ownSession(*exec.Cmd) error { return notLinux }

// Main reports that confining a command needs Linux.
func Main([]string) int {
	fmt.Fprintln(os.Stderr, "netjam:", notLinux)
	return ExitCannotRun
}
