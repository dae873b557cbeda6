package confine

import "os"

// A shell needs Linux: on Windows netjam shell fails at its namespace
// before it starts a command, so these are never reached.

// TerminalSignals is empty: Windows has no terminal signals to pass on.
var TerminalSignals []os.Signal

// isStop reports false: Windows has no Ctrl-Z signal.
func isStop(os.Signal) bool { return false }

// signalGroup does nothing: Windows has no process groups to signal.
func signalGroup(int, os.Signal) {}
