package hostnet

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
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

// rootlessReplyMax bounds the first process's reply (an nsReply in JSON).
const rootlessReplyMax = 4096

// nsInit is what the namespaces' first process is told.
type nsInit struct {
	TUN     TUNConfig
	Command []string
	Dir     string
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

// nsPrivilege is a PrivilegeError sent across the socket.
type nsPrivilege struct {
	Op, Need string
	Errno    syscall.Errno
	Fixes    []string
}

// privilegeReply is the reply for err, with its parts when err is a
// missing privilege.
func privilegeReply(err error) nsReply {
	r := nsReply{Err: err.Error()}
	var pe *PrivilegeError
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
	return &PrivilegeError{Op: p.Op + " in the rootless shell's user namespace", Err: e, Need: p.Need, Fixes: p.Fixes}
}

// UserNetns returns the attributes that start a process as root of new
// user and network namespaces, mapped to this process's user and group,
// killed if netjam ends first.
func UserNetns() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{
		Cloneflags:                 syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET,
		UidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
		GidMappingsEnableSetgroups: false,
		Pdeathsig:                  syscall.SIGKILL,
	}
}

// Rootless is a started rootless shell: its first process, waiting for
// the go, and netjam's end of their socket.
type Rootless struct {
	cmd  *exec.Cmd
	sock *os.File
	hold bool // no command: the process holds the namespaces until sock closes
}

// StartRootless starts the first process of new user and network
// namespaces (netjam itself, with RootlessInitArg), has it make the
// device cfg describes and returns it; the process becomes command, with
// env added to netjam's environment, when Start is called.
func StartRootless(cfg TUNConfig, command, env []string) (*Rootless, *TUN, error) {
	return StartRootlessCommand(cfg, RootlessCommand{Args: command, Env: env, Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr})
}

// StartRootlessCommand is StartRootless for the command c.
func StartRootlessCommand(cfg TUNConfig, c RootlessCommand) (*Rootless, *TUN, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("rootless shell: socketpair: %w", err)
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "netjam-shell"), os.NewFile(uintptr(fds[1]), "netjam-shell-ns")
	defer theirs.Close()
	r, err := startInit(cfg, c, theirs)
	if err != nil {
		ours.Close()
		return nil, nil, err
	}
	r.sock, r.hold = ours, len(c.Args) == 0
	t, err := r.receive(fds[0], cfg)
	if err != nil {
		r.Kill()
		ours.Close()
		return nil, nil, err
	}
	return r, t, nil
}

// startInit starts the namespaces' first process with theirs as its
// descriptor 3.
func startInit(cfg TUNConfig, c RootlessCommand, theirs *os.File) (*Rootless, error) {
	conf, err := json.Marshal(nsInit{TUN: cfg, Command: c.Args, Dir: c.Dir})
	if err != nil {
		return nil, err
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, RootlessInitArg)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = c.Stdin, c.Stdout, c.Stderr
	cmd.Env = append(append(os.Environ(), c.Env...), rootlessInitEnv+"="+string(conf))
	cmd.ExtraFiles = []*os.File{theirs} // fd 3
	cmd.SysProcAttr = UserNetns()
	// The command leads a session of its own, without the terminal as
	// its controlling one: it can push no input into it (TIOCSTI) for
	// the user's shell to run. netjam passes the terminal's signals on.
	cmd.SysProcAttr.Setsid = true
	if err := cmd.Start(); err != nil {
		if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EUSERS) {
			return nil, &PrivilegeError{Op: "making a user namespace", Err: err,
				Need: "netjam shell without root needs unprivileged user namespaces, which this system does not allow.",
				Fixes: []string{"run netjam as root: sudo " + exe + " shell ...",
					"allow unprivileged user namespaces: sudo sysctl -w kernel.unprivileged_userns_clone=1 (Debian, Ubuntu) or user.max_user_namespaces=15000",
					"on Ubuntu 24.04 and later, AppArmor restricts them: sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0"}}
		}
		return nil, fmt.Errorf("rootless shell: %w", err)
	}
	return &Rootless{cmd: cmd}, nil
}

// receive reads the first process's reply from the socket fd, and the
// device's descriptor with it.
func (r *Rootless) receive(fd int, cfg TUNConfig) (*TUN, error) {
	buf, oob := make([]byte, rootlessReplyMax), make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := unix.Recvmsg(fd, buf, oob, 0)
	if err != nil || n == 0 {
		return nil, fmt.Errorf("rootless shell: the namespace's first process did not answer (%v)", err)
	}
	var reply nsReply
	if err := json.Unmarshal(buf[:n], &reply); err != nil {
		return nil, fmt.Errorf("rootless shell: %w", err)
	}
	if reply.Err != "" {
		return nil, reply.err()
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return nil, fmt.Errorf("rootless shell: no device descriptor came back (%v)", err)
	}
	rights, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(rights) != 1 {
		return nil, fmt.Errorf("rootless shell: no device descriptor came back (%v)", err)
	}
	return TUNFromFile(os.NewFile(uintptr(rights[0]), "/dev/net/tun"), reply.Name, cfg.mtu(), cfg.Offload, reply.TSO)
}

// Cmd is the namespaces' first process, which Start turns into the
// command: wait for it as for the command.
func (r *Rootless) Cmd() *exec.Cmd { return r.cmd }

// Start lets the first process become the command; with etc (a folder:
// "" for none), in a mount namespace of its own where each file of etc
// is mounted over its namesake in /etc, as Netns.Start does. A process
// that holds its namespaces (no command) keeps the socket open, and ends
// when netjam closes it (Kill, or netjam's end).
func (r *Rootless) Start(etc string) error {
	_, err := r.sock.Write(append([]byte{1}, etc...))
	if r.hold {
		return err
	}
	r.sock.Close()
	return err
}

// Kill ends the first process and waits for it: for a run that failed
// before the command started.
func (r *Rootless) Kill() {
	r.cmd.Process.Kill()
	r.cmd.Wait()
	r.sock.Close()
}

// RootlessInit is the namespaces' first process (netjam started with
// RootlessInitArg): it brings the loopback up, makes the device, hands it
// over, waits for the go and becomes the command. It returns only on
// failure, with the exit status to end with.
func RootlessInit() int {
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
		return RootlessFailed
	}
	var conf nsInit
	if err := json.Unmarshal([]byte(os.Getenv(rootlessInitEnv)), &conf); err != nil {
		return fail(fmt.Errorf("rootless shell: bad configuration: %v", err))
	}
	os.Unsetenv(rootlessInitEnv)
	if err := LoopbackUp(); err != nil {
		return fail(fmt.Errorf("rootless shell: loopback: %w", err))
	}
	var path string
	if len(conf.Command) > 0 {
		var err error
		if path, err = exec.LookPath(conf.Command[0]); err != nil {
			return fail(err)
		}
	}
	t, err := OpenTUN(conf.TUN)
	if err != nil {
		return fail(err)
	}
	reply(nsReply{Name: t.Name(), TSO: t.Offload()}, int(t.File().Fd()))
	// netjam's go: the path is up, with the folder of the command's
	// /etc files after it. EOF means netjam is gone.
	var b [4097]byte
	n, _ := sock.Read(b[:])
	if n < 1 || b[0] != 1 {
		return RootlessFailed
	}
	if len(conf.Command) == 0 {
		// Hold the namespaces until netjam closes the socket.
		sock.Read(b[:])
		return 0
	}
	sock.Close()
	etc := string(b[1:n])
	// Nothing the command runs gains privileges by exec: a set-user-ID
	// program of the host would not anyway (its owner, root, has no uid
	// in this namespace), but one of the user's own, or file
	// capabilities, would without no_new_privs.
	// It is the thread's, which exec makes the process's: the goroutine
	// stays on it.
	runtime.LockOSThread()
	if etc != "" {
		files, err := os.ReadDir(etc)
		if err == nil {
			err = privateEtc(etc, files)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "netjam: %v\n", err)
			return RootlessNoExec
		}
	}
	if conf.Dir != "" {
		if err := os.Chdir(conf.Dir); err != nil {
			fmt.Fprintf(os.Stderr, "netjam: %v\n", err)
			return RootlessNoExec
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		fmt.Fprintf(os.Stderr, "netjam: PR_SET_NO_NEW_PRIVS: %v\n", err)
		return RootlessNoExec
	}
	// The device's descriptor is close-on-exec: netjam's copy keeps it.
	err = syscall.Exec(path, conf.Command, os.Environ())
	fmt.Fprintf(os.Stderr, "netjam: %s: %v\n", conf.Command[0], err)
	return RootlessNoExec
}

// LoopbackUp sets the loopback device of the calling thread's namespace
// up: a new namespace has it down.
func LoopbackUp() error {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return err
	}
	return netlink.LinkSetUp(lo)
}

// HasNetAdmin reports whether this process has CAP_NET_ADMIN in effect:
// without it, a run in TUN mode needs a rootless run (user and network
// namespaces of its own) to make its device.
func HasNetAdmin() bool {
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
