//go:build !linux

package control

import (
	"fmt"
	"net"
	"runtime"
)

// The control socket is made and moved into place with Linux's calls
// (socket.go); elsewhere the control API serves on TCP only.

// Owner is a user and group a unix socket is handed to: the invoking user
// of a shell run under sudo, whose command uses the socket. Shells need
// Linux: here there is never one.
type Owner struct{ UID, GID int }

// listenUnix refuses: the control socket needs Linux.
func listenUnix(path string, _ *Owner) (net.Listener, error) {
	return nil, fmt.Errorf("control: a unix socket (%s) needs Linux here (%s): serve on a TCP address instead, --control 127.0.0.1:PORT", path, runtime.GOOS)
}
