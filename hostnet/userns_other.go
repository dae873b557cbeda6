//go:build !linux

package hostnet

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

// Rootless is a started rootless shell; on this system there is none:
// StartRootless returns a *NotLinuxError. See userns_linux.go.
type Rootless struct{}

// UserNetns returns nil: user namespaces need Linux, and a caller must
// not start a process with them (StartRootless and the CLI's rootless
// run check the platform first).
func UserNetns() *syscall.SysProcAttr { return nil }

// StartRootless returns a *NotLinuxError: rootless shells need Linux's
// user and network namespaces.
func StartRootless(TUNConfig, []string, []string) (*Rootless, *TUN, error) {
	return nil, nil, notLinux("a rootless shell (user and network namespaces)")
}

// Cmd returns nil.
func (r *Rootless) Cmd() *exec.Cmd { return nil }

// StartRootlessCommand returns a *NotLinuxError.
func StartRootlessCommand(TUNConfig, RootlessCommand) (*Rootless, *TUN, error) {
	return nil, nil, notLinux("a rootless shell (user and network namespaces)")
}

// Start returns a *NotLinuxError.
func (r *Rootless) Start(string) error {
	return notLinux("a rootless shell (user and network namespaces)")
}

// Kill does nothing.
func (r *Rootless) Kill() {}

// RootlessInit reports that rootless shells need Linux and returns
// RootlessFailed: netjam is never started this way here.
func RootlessInit() int {
	fmt.Fprintln(os.Stderr, notLinux("a rootless shell (user and network namespaces)"))
	return RootlessFailed
}

// LoopbackUp returns a *NotLinuxError: network namespaces need Linux.
func LoopbackUp() error { return notLinux("a network namespace's loopback device") }

// HasNetAdmin reports false: CAP_NET_ADMIN is Linux's.
func HasNetAdmin() bool { return false }
