package hostnet

import (
	"errors"
	"fmt"
	"strings"
)

// The errors for a missing privilege: what failed, what is needed, and
// each way to get it, as commands the user can run.

// ErrPrivilege is wrapped by every error of OpenTUN that comes from a
// missing privilege or device: no /dev/net/tun, no access to it, no
// CAP_NET_ADMIN. errors.Is(err, ErrPrivilege) tells the CLI to exit with
// status 2; the error's text (a *PrivilegeError) says what is needed and
// how to get it.
var ErrPrivilege = errors.New("missing privilege")

// PrivilegeError is OpenTUN's error for a missing privilege. It wraps both
// ErrPrivilege and the system's error (errors.Is(err, syscall.EPERM)).
type PrivilegeError struct {
	// Op is what failed: "open /dev/net/tun", "create device netjam0",
	// "add address 10.99.0.1/24 to netjam0".
	Op string
	// Err is the system's error: a syscall.Errno.
	Err error
	// Need says what is missing, in one sentence.
	Need string
	// Fixes are the ways to get it, each a command or an action.
	Fixes []string
}

// Error implements error: one line saying what failed and what is needed,
// then one line per way to get it.
func (e *PrivilegeError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "hostnet: TUN: %s: %v: %s", e.Op, e.Err, e.Need)
	if len(e.Fixes) > 0 {
		b.WriteString(" Either:")
		for _, f := range e.Fixes {
			b.WriteString("\n  - ")
			b.WriteString(f)
		}
	}
	return b.String()
}

// Unwrap returns ErrPrivilege and the system's error.
func (e *PrivilegeError) Unwrap() []error { return []error{ErrPrivilege, e.Err} }
