package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"github.com/netjam/netjam/outdir"
)

// A shell run as root hands its command as little of root as it can:
// "the only way out is the path" must hold against the command, and a
// command with the host's CAP_SYS_ADMIN can nsenter the host's network
// namespace and change anything there.
//
//   - Under sudo (SUDO_UID names another user) the command runs as the
//     invoking user, with its groups and home, and no capability: as
//     mahimahi's shells do.
//   - --as-root keeps root, with every capability dropped from the
//     bounding set except those --cap names, so the command and whatever
//     it starts never hold more.
//   - Root without sudo runs the command as root, as before: the person at
//     the terminal is root anyway; --as-root --cap limits it.
//
// Rootless shells are not touched: their command is root of a user
// namespace of its own, which has no power outside it.

// capDropArg is the hidden first argument of netjam started to drop
// capabilities and exec a shell's command: netjam __netjam-drop-caps
// CAPS -- COMMAND [ARGS...], CAPS a comma-separated list (maybe empty).
const capDropArg = "__netjam-drop-caps"

// capNames are Linux's capabilities by number (linux/capability.h).
var capNames = []string{
	"chown", "dac_override", "dac_read_search", "fowner", "fsetid", "kill", "setgid", "setuid",
	"setpcap", "linux_immutable", "net_bind_service", "net_broadcast", "net_admin", "net_raw", "ipc_lock", "ipc_owner",
	"sys_module", "sys_rawio", "sys_chroot", "sys_ptrace", "sys_pacct", "sys_admin", "sys_boot", "sys_nice",
	"sys_resource", "sys_time", "sys_tty_config", "mknod", "lease", "audit_write", "audit_control", "setfcap",
	"mac_override", "mac_admin", "syslog", "wake_alarm", "block_suspend", "audit_read", "perfmon", "bpf",
	"checkpoint_restore",
}

// parseCaps turns --cap values (net_raw, CAP_NET_RAW, cap_net_raw; each
// value may hold a comma-separated list) into capability numbers.
func parseCaps(values []string) ([]int, error) {
	var caps []int
	for _, v := range values {
		for _, name := range strings.Split(v, ",") {
			n := strings.TrimPrefix(strings.ToLower(strings.TrimSpace(name)), "cap_")
			i := slices.Index(capNames, n)
			if i < 0 {
				return nil, fmt.Errorf("--cap: %q is not a capability (expected a name such as net_raw, net_bind_service, sys_ptrace)", name)
			}
			if !slices.Contains(caps, i) {
				caps = append(caps, i)
			}
		}
	}
	slices.Sort(caps)
	return caps, nil
}

// commandUser is who a shell's command runs as when not root.
type commandUser struct {
	uid, gid uint32
	groups   []uint32
	name     string
	home     string
}

// invokingUser returns the user who ran netjam through sudo, from
// SUDO_UID and SUDO_GID, with the supplementary groups and home the
// system's user database gives; nil when netjam is not root under sudo
// for another user.
func invokingUser(getenv func(string) string) (*commandUser, error) {
	if os.Geteuid() != 0 || getenv("SUDO_UID") == "" {
		return nil, nil
	}
	uid, err := strconv.ParseUint(getenv("SUDO_UID"), 10, 32)
	if err != nil {
		return nil, fmt.Errorf("SUDO_UID: %q is not a user id", getenv("SUDO_UID"))
	}
	if uid == 0 {
		return nil, nil
	}
	gid, err := strconv.ParseUint(getenv("SUDO_GID"), 10, 32)
	if err != nil {
		return nil, fmt.Errorf("SUDO_GID: %q is not a group id", getenv("SUDO_GID"))
	}
	u := &commandUser{uid: uint32(uid), gid: uint32(gid), name: getenv("SUDO_USER"), home: "/"}
	if pw, err := user.LookupId(strconv.FormatUint(uid, 10)); err == nil {
		u.name, u.home = pw.Username, pw.HomeDir
		if ids, err := pw.GroupIds(); err == nil {
			for _, id := range ids {
				if g, err := strconv.ParseUint(id, 10, 32); err == nil && uint32(g) != u.gid {
					u.groups = append(u.groups, uint32(g))
				}
			}
		}
	}
	return u, nil
}

// confine makes cmd, a root shell's command not started yet, run as little
// of root as asked (see the top of this file). It returns a line saying
// who the command runs as, for the log.
func confine(cmd *exec.Cmd, asRoot bool, capValues []string, getenv func(string) string) (string, error) {
	if !asRoot {
		if len(capValues) > 0 {
			return "", errors.New("--cap: only with --as-root (a command run as the invoking user has no capability)")
		}
		u, err := invokingUser(getenv)
		if err != nil || u == nil {
			return "root", err
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: u.uid, Gid: u.gid, Groups: u.groups}}
		env := slices.DeleteFunc(slices.Clone(cmd.Env), func(kv string) bool {
			return strings.HasPrefix(kv, "HOME=") || strings.HasPrefix(kv, "USER=") || strings.HasPrefix(kv, "LOGNAME=")
		})
		cmd.Env = append(env, "HOME="+u.home, "USER="+u.name, "LOGNAME="+u.name)
		return fmt.Sprintf("user %s (uid %d, gid %d), no capability", u.name, u.uid, u.gid), nil
	}
	caps, err := parseCaps(capValues)
	if err != nil {
		return "", err
	}
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("--as-root: %w", err)
	}
	var names []string
	for _, c := range caps {
		names = append(names, capNames[c])
	}
	cmd.Args = append([]string{exe, capDropArg, strings.Join(names, ","), "--"}, cmd.Args...)
	cmd.Path = exe
	if len(names) == 0 {
		return "root, no capability", nil
	}
	return "root, capabilities " + strings.Join(names, ", ") + " only", nil
}

// runCapDrop is netjam started as capDropArg: it drops every capability
// but the listed ones from the bounding set and the inheritable set of
// this thread, then execs the command on it. A root process's
// capabilities after exec are its bounding set (Linux treats every
// program run by root as if it had all file capabilities), so the command
// holds the listed capabilities only, and nothing it starts can get more.
func runCapDrop(args []string) int {
	fail := func(format string, a ...any) int {
		fmt.Fprintf(os.Stderr, "netjam: dropping capabilities: "+format+"\n", a...)
		return 126
	}
	if len(args) < 3 || args[1] != "--" {
		return fail("usage: %s CAPS -- COMMAND [ARGS...]", capDropArg)
	}
	var keep []int
	if args[0] != "" {
		var err error
		if keep, err = parseCaps([]string{args[0]}); err != nil {
			return fail("%v", err)
		}
	}
	command := args[2:]
	path, err := exec.LookPath(command[0])
	if err != nil {
		return fail("%v", err)
	}
	// Bounding and inheritable sets are per thread; exec keeps the
	// calling thread's.
	runtime.LockOSThread()
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
	err = syscall.Exec(path, command, os.Environ())
	return fail("exec %s: %v", command[0], err)
}

// resultsOwner is the user netjam writes results for: under sudo, the
// user who ran it, whose rights decide where netjam may write and who gets
// what it makes (package outdir); nil otherwise. A run started again in a
// user namespace of its own (rootless) is that user already.
func resultsOwner() (*outdir.Owner, error) {
	if os.Getenv(rootlessRunEnv) == "1" {
		return nil, nil
	}
	u, err := invokingUser(os.Getenv)
	if err != nil || u == nil {
		return nil, err
	}
	o := &outdir.Owner{UID: int(u.uid), GID: int(u.gid)}
	for _, g := range u.groups {
		o.Groups = append(o.Groups, int(g))
	}
	return o, nil
}

// openOutput makes and opens the output folder path, for the user
// resultsOwner names, and returns it with that user.
func openOutput(path string) (*outdir.Dir, *outdir.Owner, error) {
	owner, err := resultsOwner()
	if err != nil {
		return nil, nil, cli.Exit(err, exitBadUsage)
	}
	d, err := outdir.Make(path, owner)
	if err != nil {
		return nil, nil, outputError(err, owner)
	}
	return d, owner, nil
}

// outputError is the exit for an output folder that could not be opened,
// saying, under sudo, whose rights were missing.
func outputError(err error, owner *outdir.Owner) error {
	msg := fmt.Sprintf("output folder: %v", err)
	if owner != nil && errors.Is(err, fs.ErrPermission) {
		msg += fmt.Sprintf(" (under sudo netjam writes as the user who ran it, uid %d: give a folder that user may write into)", owner.UID)
	}
	return cli.Exit(msg, exitFailed)
}
