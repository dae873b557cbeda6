// Package confine runs the commands netjam starts as root (netjam shell's
// command, a node's) with as little of root as asked, each leading a
// session of its own, and waits for such a command, passing the
// terminal's signals on to it. It exists so that "the only way out is
// the path" holds against the command: what the command line asks for
// (--as-root, --cap, the user who ran sudo) is turned here into the
// arguments of netjam started again as Arg, which drops the privileges
// and execs the command (Main).
package confine

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"slices"
	"strconv"
	"strings"

	"go.uber.org/zap"
)

// A shell run as root hands its command as little of root as it can:
// "the only way out is the path" must hold against the command, and a
// command with the host's CAP_SYS_ADMIN can nsenter the host's network
// namespace and change anything there.
//
//   - Under sudo (SUDO_UID names another user) the command runs as the
//     invoking user, with its groups and home, and no capability: as
//     mahimahi's shells do. Its bounding and ambient sets are empty and
//     no_new_privs is set, as Kubernetes' allowPrivilegeEscalation: false
//     and systemd's NoNewPrivileges= do: a set-user-ID-root program (or
//     one with file capabilities) it runs gains nothing, so neither sudo
//     with the user's cached credentials nor a setuid program of the
//     system can take it back to root.
//   - --as-root keeps root, with every capability dropped from the
//     bounding set except those --cap names, so the command and whatever
//     it starts never hold more; no_new_privs is set too.
//   - Root without sudo runs the command as root, with root's
//     capabilities: the person at the terminal is root anyway; --as-root
//     --cap limits it.
//
// Every shell's command, these and the rootless one, starts in a new
// session (setsid), as bubblewrap's --new-session does, so it has no
// controlling terminal. With one, it could push input into the terminal
// for the user's shell to run after netjam ends (ioctl TIOCSTI, which
// Linux allows on a process's own controlling terminal without privilege
// unless dev.tty.legacy_tiocsti is 0, new in 6.2), such as a sudo
// command that the user's cached credentials would let through. The
// price is job control: the terminal's signals go to netjam, which
// passes Ctrl-C, Ctrl-\, hangups and window size changes on to the
// command's process group (Wait); Ctrl-Z suspends nothing, an
// interactive shell run as the command says it has no job control, and
// /dev/tty cannot be opened. Running the command under script(1) gives
// it a terminal of its own with all of that (docs/security.md). A
// pseudo-terminal of netjam's, as sudo's use_pty makes, would too, at
// the cost of netjam relaying every byte of the terminal for the run.
//
// Rootless shells are not confined further: their command is root of a
// user namespace of its own, which has no power outside it; it runs with
// no_new_privs (hostnet.RootlessInit).

// Arg is the hidden first argument of netjam started, as root, to
// confine a root shell's command and exec it; main then calls Main with
// the arguments after it and exits with its status:
//
//	netjam __netjam-confine CAPS USER -- COMMAND [ARGS...]
//
// CAPS is a comma-separated list of the capabilities to keep (maybe
// empty), USER "" to stay root or UID:GID[:GROUP,...] to become.
const Arg = "__netjam-confine"

// capNames are Linux's capabilities by number (linux/capability.h).
var capNames = []string{
	"chown", "dac_override", "dac_read_search", "fowner", "fsetid", "kill", "setgid", "setuid",
	"setpcap", "linux_immutable", "net_bind_service", "net_broadcast", "net_admin", "net_raw", "ipc_lock", "ipc_owner",
	"sys_module", "sys_rawio", "sys_chroot", "sys_ptrace", "sys_pacct", "sys_admin", "sys_boot", "sys_nice",
	"sys_resource", "sys_time", "sys_tty_config", "mknod", "lease", "audit_write", "audit_control", "setfcap",
	"mac_override", "mac_admin", "syslog", "wake_alarm", "block_suspend", "audit_read", "perfmon", "bpf",
	"checkpoint_restore",
}

// ParseCaps turns --cap values (net_raw, CAP_NET_RAW, cap_net_raw; each
// value may hold a comma-separated list) into capability numbers.
func ParseCaps(values []string) ([]int, error) {
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

// User is who a shell's command runs as when not root: the user who ran
// sudo.
type User struct {
	UID, GID uint32
	Groups   []uint32 // the supplementary groups, but GID
	Name     string
	Home     string
}

// String is the user as Arg's USER: UID:GID, then :GROUP,... when
// it has supplementary groups.
func (u *User) String() string {
	s := fmt.Sprintf("%d:%d", u.UID, u.GID)
	for i, g := range u.Groups {
		sep := ","
		if i == 0 {
			sep = ":"
		}
		s += sep + strconv.FormatUint(uint64(g), 10)
	}
	return s
}

// parseUser reads Arg's USER (see User.String).
func parseUser(s string) (*User, error) {
	parts := strings.Split(s, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return nil, fmt.Errorf("%q is not UID:GID[:GROUP,...]", s)
	}
	id := func(v string) (uint32, error) {
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			return 0, fmt.Errorf("%q is not UID:GID[:GROUP,...]", s)
		}
		return uint32(n), nil
	}
	var u User
	var err error
	if u.UID, err = id(parts[0]); err != nil {
		return nil, err
	}
	if u.GID, err = id(parts[1]); err != nil {
		return nil, err
	}
	if len(parts) == 3 {
		for _, g := range strings.Split(parts[2], ",") {
			n, err := id(g)
			if err != nil {
				return nil, err
			}
			u.Groups = append(u.Groups, n)
		}
	}
	return &u, nil
}

// InvokingUser returns the user who ran netjam through sudo, from
// SUDO_UID and SUDO_GID, with the supplementary groups and home the
// system's user database gives; nil when netjam is not root under sudo
// for another user.
func InvokingUser(getenv func(string) string) (*User, error) {
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
	u := &User{UID: uint32(uid), GID: uint32(gid), Name: getenv("SUDO_USER"), Home: "/"}
	if pw, err := user.LookupId(strconv.FormatUint(uid, 10)); err == nil {
		u.Name, u.Home = pw.Username, pw.HomeDir
		if ids, err := pw.GroupIds(); err == nil {
			for _, id := range ids {
				if g, err := strconv.ParseUint(id, 10, 32); err == nil && uint32(g) != u.GID {
					u.Groups = append(u.Groups, uint32(g))
				}
			}
		}
	}
	return u, nil
}

// Command makes cmd, a root shell's command not started yet, run as
// little of root as asked (see the top of this file): with asRoot as
// root keeping the capabilities of capValues (--cap), else under sudo as
// the invoking user (getenv's SUDO_UID). It returns a line saying who
// the command runs as, for the log.
func Command(cmd *exec.Cmd, asRoot bool, capValues []string, getenv func(string) string) (string, error) {
	// A session of its own, whatever it runs as.
	if err := ownSession(cmd); err != nil {
		return "", err
	}
	var caps []int
	var u *User
	if asRoot {
		var err error
		if caps, err = ParseCaps(capValues); err != nil {
			return "", err
		}
	} else {
		if len(capValues) > 0 {
			return "", errors.New("--cap: only with --as-root (a command run as the invoking user has no capability)")
		}
		var err error
		if u, err = InvokingUser(getenv); err != nil {
			return "", err
		}
		if u == nil {
			return "root, every capability, own session", nil
		}
	}
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("confining the command: %w", err)
	}
	var names []string
	for _, c := range caps {
		names = append(names, capNames[c])
	}
	userArg := ""
	if u != nil {
		userArg = u.String()
		env := slices.DeleteFunc(slices.Clone(cmd.Env), func(kv string) bool {
			return strings.HasPrefix(kv, "HOME=") || strings.HasPrefix(kv, "USER=") || strings.HasPrefix(kv, "LOGNAME=")
		})
		cmd.Env = append(env, "HOME="+u.Home, "USER="+u.Name, "LOGNAME="+u.Name)
	}
	cmd.Args = append([]string{exe, Arg, strings.Join(names, ","), userArg, "--"}, cmd.Args...)
	cmd.Path = exe
	const rest = ", no_new_privs, own session"
	switch {
	case u != nil:
		return fmt.Sprintf("user %s (uid %d, gid %d), no capability%s", u.Name, u.UID, u.GID, rest), nil
	case len(names) == 0:
		return "root, no capability" + rest, nil
	}
	return "root, capabilities " + strings.Join(names, ", ") + " only" + rest, nil
}

// Node returns the emulator's ConfineNode: a node's command runs as a
// shell's does (Command), under sudo as the invoking user.
func Node(log *zap.Logger, asRoot bool, caps []string) func(cmd *exec.Cmd) error {
	return func(cmd *exec.Cmd) error {
		who, err := Command(cmd, asRoot, caps, os.Getenv)
		if err == nil {
			log.Info("a node's command runs as "+who, zap.Strings("command", cmd.Args))
		}
		return err
	}
}
