//go:build unix

package confine

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// TerminalSignals are the terminal's signals a shell passes on to its
// command besides SIGINT and SIGHUP: SIGQUIT (Ctrl-\) and SIGWINCH, and
// SIGTSTP (Ctrl-Z), which it drops (see Wait).
var TerminalSignals = []os.Signal{syscall.SIGQUIT, syscall.SIGWINCH, syscall.SIGTSTP}

// isStop reports whether sig is the terminal's Ctrl-Z.
func isStop(sig os.Signal) bool { return sig == syscall.SIGTSTP }

// signalGroup sends sig to the process group that pid leads.
func signalGroup(pid int, sig os.Signal) {
	if s, ok := sig.(syscall.Signal); ok {
		unix.Kill(-pid, s)
	}
}
