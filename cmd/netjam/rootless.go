package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/netjam/netjam/hostnet"
	"github.com/netjam/netjam/scenario"
)

// A rootless shell, as rootlesskit and `unshare --user --map-root-user
// --net` do it: without root, netjam starts itself again as the first
// process of a new user and network namespace, where it is root (mapped
// to the user) and may make the TUN device. That process hands the
// device's descriptor back over a socket, waits for the path to be up,
// and becomes the user's command. netjam itself stays in the user's own
// namespace, so its relay reaches the host's services (forwards,
// transparent) as with root. The command runs as root of its user
// namespace, with no privilege outside it.

// nsInitArg is the hidden first argument of netjam started as the first
// process of a rootless shell's namespaces; nsInitEnv carries its
// configuration.
const (
	nsInitArg = "__netjam-shell-ns"
	nsInitEnv = "NETJAM_SHELL_NS"
)

// nsInit is what the namespaces' first process is told.
type nsInit struct {
	TUN     hostnet.TUNConfig
	Command []string
}

// nsReply is the first process's answer: the device's name and whether
// the kernel agreed to offload, or what went wrong (Privilege: a missing
// privilege, exit status 2, in parts so that netjam gives its advice once).
type nsReply struct {
	Name      string
	TSO       bool
	Err       string
	Privilege *nsPrivilege `json:",omitempty"`
}

// nsPrivilege is a hostnet.PrivilegeError sent across the socket.
type nsPrivilege struct {
	Op, Need string
	Errno    syscall.Errno
	Fixes    []string
}

// privilegeReply is the reply for err, with its parts when err is a
// missing privilege.
func privilegeReply(err error) nsReply {
	r := nsReply{Err: err.Error()}
	var pe *hostnet.PrivilegeError
	if errors.As(err, &pe) {
		r.Privilege = &nsPrivilege{Op: pe.Op, Need: pe.Need, Fixes: pe.Fixes}
		errors.As(pe.Err, &r.Privilege.Errno)
	}
	return r
}

// err rebuilds the first process's error in netjam.
func (r nsReply) err() error {
	p := r.Privilege
	if p == nil {
		return errors.New(r.Err)
	}
	var e error = p.Errno
	if p.Errno == 0 {
		e = errors.New(r.Err)
	}
	return &hostnet.PrivilegeError{Op: p.Op + " in the rootless shell's user namespace", Err: e, Need: p.Need, Fixes: p.Fixes}
}

// userNetns starts a process as root of new user and network namespaces,
// mapped to this process's user and group, killed if netjam ends first.
func userNetns() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{
		Cloneflags:                 syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET,
		UidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
		GidMappingsEnableSetgroups: false,
		Pdeathsig:                  syscall.SIGKILL,
	}
}

// rootless is a started rootless shell: its first process, waiting for
// the go, and netjam's end of their socket.
type rootless struct {
	cmd  *exec.Cmd
	sock *os.File
}

// startRootless starts the first process of new user and network
// namespaces, has it make the device cfg describes and returns it; the
// process becomes command when go is called.
func startRootless(cfg hostnet.TUNConfig, command, env []string) (*rootless, *hostnet.TUN, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("rootless shell: socketpair: %w", err)
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "netjam-shell"), os.NewFile(uintptr(fds[1]), "netjam-shell-ns")
	defer theirs.Close()
	conf, err := json.Marshal(nsInit{TUN: cfg, Command: command})
	if err != nil {
		ours.Close()
		return nil, nil, err
	}
	exe, err := os.Executable()
	if err != nil {
		ours.Close()
		return nil, nil, err
	}
	cmd := exec.Command(exe, nsInitArg)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(append(os.Environ(), env...), nsInitEnv+"="+string(conf))
	cmd.ExtraFiles = []*os.File{theirs} // fd 3
	cmd.SysProcAttr = userNetns()
	if err := cmd.Start(); err != nil {
		ours.Close()
		if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EUSERS) {
			return nil, nil, &hostnet.PrivilegeError{Op: "making a user namespace", Err: err,
				Need: "netjam shell without root needs unprivileged user namespaces, which this system does not allow.",
				Fixes: []string{"run netjam as root: sudo " + exe + " shell ...",
					"allow unprivileged user namespaces: sudo sysctl -w kernel.unprivileged_userns_clone=1 (Debian, Ubuntu) or user.max_user_namespaces=15000",
					"on Ubuntu 24.04 and later, AppArmor restricts them: sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0"}}
		}
		return nil, nil, fmt.Errorf("rootless shell: %w", err)
	}
	r := &rootless{cmd: cmd, sock: ours}
	fail := func(err error) (*rootless, *hostnet.TUN, error) {
		r.cmd.Process.Kill()
		r.cmd.Wait()
		ours.Close()
		return nil, nil, err
	}
	buf, oob := make([]byte, 4096), make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := unix.Recvmsg(fds[0], buf, oob, 0)
	if err != nil || n == 0 {
		return fail(fmt.Errorf("rootless shell: the namespace's first process did not answer (%v)", err))
	}
	var reply nsReply
	if err := json.Unmarshal(buf[:n], &reply); err != nil {
		return fail(fmt.Errorf("rootless shell: %w", err))
	}
	if reply.Err != "" {
		return fail(reply.err())
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return fail(fmt.Errorf("rootless shell: no device descriptor came back (%v)", err))
	}
	rights, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(rights) != 1 {
		return fail(fmt.Errorf("rootless shell: no device descriptor came back (%v)", err))
	}
	mtu := cfg.MTU
	if mtu == 0 {
		mtu = 1500
	}
	t, err := hostnet.TUNFromFile(os.NewFile(uintptr(rights[0]), "/dev/net/tun"), reply.Name, mtu, cfg.Offload, reply.TSO)
	if err != nil {
		return fail(err)
	}
	return r, t, nil
}

// start lets the first process become the command.
func (r *rootless) start() error {
	_, err := r.sock.Write([]byte{1})
	r.sock.Close()
	return err
}

// runNSInit is the namespaces' first process: it brings the loopback up,
// makes the device, hands it over, waits for the go and becomes the
// command. It returns only on failure.
func runNSInit() int {
	sock := os.NewFile(3, "netjam-shell")
	reply := func(r nsReply, fd int) {
		b, _ := json.Marshal(r)
		var oob []byte
		if fd >= 0 {
			oob = unix.UnixRights(fd)
		}
		unix.Sendmsg(int(sock.Fd()), b, oob, nil, 0)
	}
	fail := func(err error) int {
		reply(privilegeReply(err), -1)
		return exitFailed
	}
	var conf nsInit
	if err := json.Unmarshal([]byte(os.Getenv(nsInitEnv)), &conf); err != nil || len(conf.Command) == 0 {
		return fail(fmt.Errorf("rootless shell: bad configuration: %v", err))
	}
	os.Unsetenv(nsInitEnv)
	if err := loopbackUp(); err != nil {
		return fail(fmt.Errorf("rootless shell: loopback: %w", err))
	}
	path, err := exec.LookPath(conf.Command[0])
	if err != nil {
		return fail(err)
	}
	t, err := hostnet.OpenTUN(conf.TUN)
	if err != nil {
		return fail(err)
	}
	reply(nsReply{Name: t.Name(), TSO: t.Offload()}, int(t.File().Fd()))
	// netjam's go: the path is up. EOF means netjam is gone.
	var b [1]byte
	if n, _ := sock.Read(b[:]); n != 1 {
		return exitFailed
	}
	sock.Close()
	// The device's descriptor is close-on-exec: netjam's copy keeps it.
	err = syscall.Exec(path, conf.Command, os.Environ())
	fmt.Fprintf(os.Stderr, "netjam: %s: %v\n", conf.Command[0], err)
	return 127
}

// A rootless run: `netjam run` of a scenario in TUN mode, by a user
// without CAP_NET_ADMIN, runs again as root of a user and network
// namespace of its own, where it may make the device. Kernel flows run
// there too, against the peer; nothing reaches the host's own network,
// so a scenario whose TUN relays to real servers (forward, transparent)
// or names a namespace needs real privileges instead.

// rootlessRunEnv marks netjam run started again in its namespaces.
const rootlessRunEnv = "NETJAM_ROOTLESS_RUN"

// needsRootless reports whether plan needs a TUN device this process may
// not make, and can do without the host's network.
func needsRootless(plan *scenario.Plan) bool {
	if hasNetAdmin() {
		return false
	}
	tun := false
	for _, s := range plan.Runs {
		if s.TUN == nil {
			continue
		}
		tun = true
		if len(s.TUN.Forward) > 0 || s.TUN.Transparent != nil || s.TUN.Netns != "" {
			return false // needs the host's network: the privilege error says what to do
		}
	}
	return tun
}

// hasNetAdmin reports whether this process has CAP_NET_ADMIN in effect.
func hasNetAdmin() bool {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return os.Geteuid() == 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && caps&(1<<unix.CAP_NET_ADMIN) != 0
		}
	}
	return false
}

// rerunRootless runs this netjam command again in a new user and network
// namespace, passing SIGINT, SIGTERM and SIGHUP on, and returns its
// outcome. ok is false when the system does not allow that (no user
// namespaces): the caller goes on without.
func rerunRootless(c *cli.Context) (err error, ok bool) {
	args, _ := c.App.Metadata["args"].([]string)
	exe, err := os.Executable()
	if err != nil || len(args) == 0 {
		return nil, false
	}
	cmd := exec.Command(exe, args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, c.App.Writer, c.App.ErrWriter
	cmd.Env = append(os.Environ(), rootlessRunEnv+"=1")
	cmd.SysProcAttr = userNetns()
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGINT)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(c.App.ErrWriter, "netjam: user namespaces are not available (%v): the runs in TUN mode need root or CAP_NET_ADMIN\n", err)
		return nil, false
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	for {
		select {
		case err := <-waited:
			if code := exitStatus(cmd, err); code != 0 {
				return cli.Exit("", code), true
			}
			return nil, true
		case sig := <-sigs:
			cmd.Process.Signal(sig)
		}
	}
}

// loopbackUp sets the loopback device of this process's namespace up.
func loopbackUp() error {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return err
	}
	return netlink.LinkSetUp(lo)
}
