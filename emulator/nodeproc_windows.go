package emulator

import (
	"os/exec"
)

// Nodes need Linux's network namespaces; on Windows no node command ever
// starts (its namespace cannot be made). These keep the package whole.

func ownGroup(*exec.Cmd)           {}
func terminateGroup(cmd *exec.Cmd) { cmd.Process.Kill() }
func killGroup(cmd *exec.Cmd)      { cmd.Process.Kill() }
