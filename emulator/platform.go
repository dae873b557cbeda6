package emulator

import "github.com/netjam/netjam/hostnet"

// NotLinuxError is the one error of TUN mode, netjam shell and kernel
// flows on a system other than Linux ("TUN mode needs Linux: ..."): see
// package hostnet. Lab runs and the Go API do not need Linux.
type NotLinuxError = hostnet.NotLinuxError

// ErrNeedsLinux is wrapped by every *NotLinuxError.
var ErrNeedsLinux = hostnet.ErrNeedsLinux
