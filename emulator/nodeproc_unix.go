//go:build !windows

package emulator

import (
	"os/exec"
	"syscall"
)

// ownGroup makes cmd lead a process group of its own (unless it leads a
// session, and so one), so that the run's end reaches every process it
// started.
func ownGroup(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	if !cmd.SysProcAttr.Setsid {
		cmd.SysProcAttr.Setpgid = true
	}
}

// terminateGroup sends SIGTERM to cmd's process group; killGroup SIGKILL.
func terminateGroup(cmd *exec.Cmd) { syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
func killGroup(cmd *exec.Cmd)      { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
