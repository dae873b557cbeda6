package confine

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"syscall"
	"time"

	"go.uber.org/zap"
)

// Wait waits for cmd to end and returns its exit status. cmd leads a
// session of its own, so the terminal's signals reach netjam, in its
// foreground process group, and not cmd: netjam passes them on to cmd's
// process group as the terminal would have: SIGINT and SIGHUP from sigs,
// SIGQUIT (Ctrl-\) and SIGWINCH (the window's size changed) from term
// (TerminalSignals). SIGTERM from sigs goes to cmd alone. After SIGTERM
// or SIGHUP cmd is killed if it is still there 10 s later. SIGTSTP
// (Ctrl-Z) is caught and dropped: it would stop netjam and leave cmd
// running, out of the user's shell's job control.
func Wait(cmd *exec.Cmd, sigs, term <-chan os.Signal, log *zap.Logger) int {
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	toGroup := func(sig os.Signal) {
		// The session's leader leads its first process group too; the
		// group is gone only once all of it has ended.
		signalGroup(cmd.Process.Pid, sig)
	}
	var killTimer <-chan time.Time
	for {
		select {
		case err := <-waited:
			return ExitStatus(cmd, err)
		case sig := <-term:
			if !isStop(sig) {
				toGroup(sig)
			}
		case sig := <-sigs:
			log.Info("passing a signal on to the command", zap.Stringer("signal", sig))
			if sig == syscall.SIGTERM {
				cmd.Process.Signal(sig)
			} else {
				toGroup(sig)
			}
			if sig != syscall.SIGINT && killTimer == nil {
				killTimer = time.After(10 * time.Second)
			}
		case <-killTimer:
			log.Warn("the command did not end 10 s after the signal: killing it")
			cmd.Process.Kill()
		}
	}
}

// ExitStatus is a finished command's exit status as a shell reports it:
// 128+N when signal N ended it. err is what cmd.Wait returned: one that
// is not the command's exit (the wait itself failed) gives 1, netjam's
// status for a failure of its own.
func ExitStatus(cmd *exec.Cmd, err error) int {
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return 1
	}
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return cmd.ProcessState.ExitCode()
}

// Exit statuses of a command that could not be started, as POSIX shells
// give them.
const (
	ExitCannotRun = 126 // found, but not executable
	ExitNotFound  = 127
)

// Error is a command that could not be started, with the exit status a
// shell gives it (its ExitCode, as urfave/cli's ExitCoder has it).
type Error struct {
	msg  string
	code int
}

func (e *Error) Error() string { return e.msg }

// ExitCode is ExitNotFound or ExitCannotRun.
func (e *Error) ExitCode() int { return e.code }

// StartError is the error for the command name that could not be started
// (err): exit status 127 when it does not exist, 126 when it cannot be
// run.
func StartError(name string, err error) *Error {
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
		return &Error{fmt.Sprintf("shell: %s: command not found", name), ExitNotFound}
	}
	if cause := errors.Unwrap(err); cause != nil {
		err = cause // "permission denied", without exec's own wording around it
	}
	return &Error{fmt.Sprintf("shell: %s: cannot run: %v", name, err), ExitCannotRun}
}
