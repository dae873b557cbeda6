//go:build !linux

package hostnet

import "os/exec"

// Netns is a Linux network namespace; on this system there is none:
// NewNetns and OpenNetns return a *NotLinuxError. A nil *Netns is the
// caller's own network, as on Linux. See netns_linux.go.
type Netns struct{}

// NewNetns returns a *NotLinuxError: network namespaces need Linux.
func NewNetns() (*Netns, error) { return nil, notLinux("making a network namespace") }

// OpenNetns returns a *NotLinuxError: network namespaces need Linux.
func OpenNetns(string) (*Netns, error) { return nil, notLinux("opening a network namespace") }

// Path returns "".
func (n *Netns) Path() string { return "" }

// Do runs f for a nil Netns (the caller's own network), and returns a
// *NotLinuxError otherwise.
func (n *Netns) Do(f func() error) error {
	if n == nil {
		return f()
	}
	return notLinux("entering a network namespace")
}

// Close does nothing.
func (n *Netns) Close() error { return nil }

// Start starts cmd for a nil Netns without etc, and returns a
// *NotLinuxError otherwise.
func (n *Netns) Start(cmd *exec.Cmd, etc string) error {
	if n == nil && etc == "" {
		return cmd.Start()
	}
	return notLinux("starting a command in a network namespace")
}
