package confine

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"syscall"

	"golang.org/x/sys/unix"
)

// The Linux half of confine.go: the command's own session, and netjam
// started as Arg dropping privileges and capabilities before it
// execs the command.

// ownSession makes cmd lead a session of its own (setsid), with no
// controlling terminal.
func ownSession(cmd *exec.Cmd) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	return nil
}

// Main is netjam started as Arg, as root: it sets
// no_new_privs, drops every capability but the listed ones from the
// bounding set, empties the inheritable and ambient sets, becomes the
// user if one is given, and execs the command. A root process's
// capabilities after exec are its bounding set (Linux treats every
// program run by root as if it had all file capabilities), so a command
// kept root holds the listed capabilities only; one that became a user
// holds none (changing every uid from 0 clears them); and with
// no_new_privs nothing either starts can get more, set-user-ID programs
// included. The bounding set is dropped before the uids change, since
// that needs CAP_SETPCAP. It returns only on failure, with the exit
// status a shell gives: 127 when the command is not found, 126 else.
func Main(args []string) int {
	fail := func(format string, a ...any) int {
		fmt.Fprintf(os.Stderr, "netjam: confining the command: "+format+"\n", a...)
		return ExitCannotRun
	}
	if len(args) < 4 || args[2] != "--" {
		return fail("usage: %s CAPS USER -- COMMAND [ARGS...]", Arg)
	}
	var keep []int
	if args[0] != "" {
		var err error
		if keep, err = ParseCaps([]string{args[0]}); err != nil {
			return fail("%v", err)
		}
	}
	var u *User
	if args[1] != "" {
		var err error
		if u, err = parseUser(args[1]); err != nil {
			return fail("user: %v", err)
		}
	}
	command := args[3:]
	// no_new_privs, the bounding and the inheritable sets are per
	// thread, and exec keeps the calling thread's: the goroutine stays on
	// the thread that sets them. (Go changes the uids and gids on every
	// thread.)
	runtime.LockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fail("PR_SET_NO_NEW_PRIVS: %v", err)
	}
	for c := 0; c < 64; c++ {
		if slices.Contains(keep, c) {
			continue
		}
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil {
			if errors.Is(err, unix.EINVAL) {
				break // past the kernel's last capability
			}
			return fail("PR_CAPBSET_DROP %d: %v", c, err)
		}
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fail("capget: %v", err)
	}
	data[0].Inheritable, data[1].Inheritable = 0, 0
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fail("capset: %v", err)
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return fail("clearing ambient capabilities: %v", err)
	}
	if u != nil {
		groups := make([]int, len(u.Groups))
		for i, g := range u.Groups {
			groups[i] = int(g)
		}
		// Groups first: once the uids are the user's, they cannot change.
		if err := unix.Setgroups(groups); err != nil {
			return fail("setgroups: %v", err)
		}
		if err := unix.Setresgid(int(u.GID), int(u.GID), int(u.GID)); err != nil {
			return fail("setresgid: %v", err)
		}
		if err := unix.Setresuid(int(u.UID), int(u.UID), int(u.UID)); err != nil {
			return fail("setresuid: %v", err)
		}
	}
	// Looked up as the user, who may not reach everything root does.
	path, err := exec.LookPath(command[0])
	if err == nil {
		err = syscall.Exec(path, command, os.Environ())
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		err = os.NewSyscallError("exec", errno) // said as "permission denied", not LookPath's "stat PATH: ..."
	}
	se := StartError(command[0], err)
	fmt.Fprintln(os.Stderr, "netjam:", se.Error())
	return se.ExitCode()
}
