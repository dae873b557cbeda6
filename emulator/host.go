package emulator

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strings"
	"syscall"

	"go.uber.org/zap"

	"github.com/netjam/netjam/confine"
	"github.com/netjam/netjam/hostnet"
	"github.com/netjam/netjam/scenario"
	"github.com/netjam/netjam/stack"
)

// What the command line needs of the host beyond a run: the namespace
// netjam shell runs its command in (Shell), netjam started again in user
// namespaces of its own (RootlessProcAttr, ShellInit), the errors of a
// missing privilege, and where gVisor's own log lines go. The command
// line reaches packages hostnet and stack only through these.

// PrivilegeError is the error of a missing privilege (no TUN device node,
// no CAP_NET_ADMIN, no user namespaces): what failed, what is needed, and
// each way to get it. errors.Is(err, ErrPrivilege) holds for it.
type PrivilegeError = hostnet.PrivilegeError

// ErrPrivilege is wrapped by every error from a missing privilege.
var ErrPrivilege = hostnet.ErrPrivilege

// Advice is a run's error err (errors.Join of its runs' errors) as
// netjam's last words: a missing privilege in plain words with its
// advice, once however many runs it stopped (each run's table line has
// said which), after any other error as it is. privilege tells that a run
// lacked a privilege (else msg is err's text), only that every error was
// such.
func Advice(err error) (msg string, privilege, only bool) {
	var others []string
	var privs []*PrivilegeError
	for _, e := range leaves(err) {
		var pe *PrivilegeError
		if errors.As(e, &pe) {
			privs = append(privs, pe)
		} else {
			others = append(others, e.Error())
		}
	}
	if len(privs) == 0 {
		return err.Error(), false, false
	}
	pe := privs[0]
	var b strings.Builder
	for _, o := range others {
		b.WriteString(o + "\n")
	}
	if len(privs) > 1 {
		fmt.Fprintf(&b, "%d runs were skipped: ", len(privs))
	}
	fmt.Fprintf(&b, "%s (%s: %v)", strings.TrimSuffix(pe.Need, "."), pe.Op, pe.Err)
	if len(pe.Fixes) > 0 {
		b.WriteString(". Either:")
		for _, f := range pe.Fixes {
			b.WriteString("\n  - " + f)
		}
	}
	return b.String(), true, len(others) == 0
}

// leaves splits the errors.Join of the runs' errors into one error per
// run.
func leaves(err error) []error {
	if _, pe := err.(*PrivilegeError); pe {
		return []error{err} // it too unwraps to a list: its causes
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, leaves(e)...)
		}
		return out
	}
	return []error{err}
}

// RouteLogs sends the log lines of the libraries a run uses (gVisor's,
// which would otherwise go to standard error, into a shell's terminal)
// to log; nil discards them.
func RouteLogs(log *zap.Logger) { stack.RouteGVisorLog(log) }

// ShellInitArg is the hidden first argument with which a rootless shell
// starts netjam again as the first process of its namespaces; main then
// calls ShellInit and exits with its status.
const ShellInitArg = hostnet.RootlessInitArg

// ShellInit is that first process: it makes the TUN device, hands it to
// netjam and becomes the shell's command. It returns only on failure,
// with the exit status.
func ShellInit() int { return hostnet.RootlessInit() }

// RootlessProcAttr starts a process as root of new user and network
// namespaces mapped to this process's user, killed if netjam ends first:
// netjam run started again where it may make a TUN device without root.
func RootlessProcAttr() *syscall.SysProcAttr { return hostnet.UserNetns() }

// InRootlessRun readies netjam run started again with RootlessProcAttr:
// its new network namespace's loopback goes up.
func InRootlessRun() error { return hostnet.LoopbackUp() }

// A rootless run: `netjam run` of a scenario in TUN mode, by a user
// without CAP_NET_ADMIN, runs again as root of a user and network
// namespace of its own, where it may make the device. Kernel flows run
// there too, against the peer; nothing reaches the host's own network,
// so a scenario whose TUN relays to real servers (forward, transparent)
// or names a namespace needs real privileges instead.

// RootlessRunEnv, "1" in netjam run's environment, marks it started again
// in its namespaces (RerunRootless).
const RootlessRunEnv = "NETJAM_ROOTLESS_RUN"

// NeedsRootless reports whether plan needs a TUN device this process may
// not make, and can do without the host's network. Off Linux it is
// false: a run in TUN mode goes on in this process and fails at its
// device with the one error of package hostnet ("TUN mode needs Linux:
// ...").
func NeedsRootless(plan *scenario.Plan) bool {
	if runtime.GOOS != "linux" || hostnet.HasNetAdmin() {
		return false
	}
	tun := false
	for _, s := range plan.Runs {
		if s.TUN == nil {
			continue
		}
		tun = true
		if len(s.TUN.Relay.Forwards) > 0 || s.TUN.Relay.Transparent || s.TUN.Device.Netns != "" {
			return false // needs the host's network: the privilege error says what to do
		}
	}
	return tun
}

// RerunRootless runs this netjam command, args (os.Args), again in a new
// user and network namespace, with RootlessRunEnv set, its output on
// stdout and stderr, passing SIGINT, SIGTERM and SIGHUP on, and returns
// its exit status. ok is false when the system does not allow that (no
// user namespaces; stderr says so): the caller goes on without.
func RerunRootless(args []string, stdout, stderr io.Writer) (status int, ok bool) {
	exe, err := os.Executable()
	if err != nil || len(args) == 0 {
		return 0, false
	}
	cmd := exec.Command(exe, args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, stderr
	cmd.Env = append(os.Environ(), RootlessRunEnv+"=1")
	cmd.SysProcAttr = RootlessProcAttr()
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGINT)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "netjam: user namespaces are not available (%v): the runs in TUN mode need root or CAP_NET_ADMIN\n", err)
		return 0, false
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	for {
		select {
		case err := <-waited:
			return confine.ExitStatus(cmd, err), true
		case sig := <-sigs:
			cmd.Process.Signal(sig)
		}
	}
}
