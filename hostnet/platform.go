package hostnet

import (
	"errors"
	"runtime"
)

// What only Linux has. TUN devices configured over netlink, network
// namespaces, rootless shells (user namespaces) and the kernel's TCP with
// a chosen congestion control and its TCP_INFO are Linux's: their code is
// in _linux.go files, and on every other system the same names exist in
// _other.go files and return one error, a *NotLinuxError. The rest of
// netjam (the lab, the Go API, scenarios, reports, sweeps) does not use
// them and runs anywhere Go does.

// ErrNeedsLinux is wrapped by every error of a part of hostnet that only
// Linux has, on other systems; errors.Is(err, errors.ErrUnsupported)
// holds too.
var ErrNeedsLinux = errors.New("needs Linux")

// NotLinuxError is the error of a part of hostnet that only Linux has,
// on another system.
type NotLinuxError struct {
	// Op is what was asked for: "open a TUN device", "make a network
	// namespace".
	Op string
	// GOOS and GOARCH are the system netjam runs on.
	GOOS, GOARCH string
}

// notLinux is the error of op on this system.
func notLinux(op string) error {
	return &NotLinuxError{Op: op, GOOS: runtime.GOOS, GOARCH: runtime.GOARCH}
}

// Error implements error: what needs Linux, why, and what runs here
// instead.
func (e *NotLinuxError) Error() string {
	return "TUN mode needs Linux: " + e.Op + " is not available on " + e.GOOS + "/" + e.GOARCH +
		" (TUN devices, network namespaces and kernel flows are Linux's); lab scenarios (without a tun: section) and the Go API run here"
}

// Is reports whether target is ErrNeedsLinux or errors.ErrUnsupported.
func (e *NotLinuxError) Is(target error) bool {
	return target == ErrNeedsLinux || target == errors.ErrUnsupported
}
