package emulator

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/netjam/netjam/confine"
	"github.com/netjam/netjam/hostnet"
	"github.com/netjam/netjam/scenario"
)

// netjam shell: the one run it runs (ShellScenario), the namespace its
// command runs in (Shell), and the command, started once the path is up
// and waited for (ShellCommand, Shell.Prepare).

// shellDuration is a shell run's duration when the scenario names none
// that is longer: the run lasts as long as COMMAND, and the duration only
// bounds the scenario's flows.
const shellDuration = 24 * time.Hour

// ShellScenario loads the one run a shell runs: the scenario file's
// (file; "" for an empty scenario's) with the overrides o, a tun section
// (the device's defaults, under what o sets, when it has none), nodes
// (--node NAME=CMD, scenario.NodesSet) and, of its variants, variant. A
// scenario whose capture needs an output folder is refused unless out is
// given. Every error is the user's to fix before anything is made.
func ShellScenario(file string, o scenario.Options, nodes []string, variant string, out bool) (*scenario.Scenario, error) {
	load := func(o scenario.Options) (*scenario.Plan, error) {
		if file == "" {
			return scenario.Parse("shell", []byte(fmt.Sprintf("duration: %s\n", shellDuration)), o)
		}
		return scenario.Load(file, o)
	}
	plan, err := load(o)
	if err != nil {
		return nil, err
	}
	if plan.Runs[0].TUN == nil {
		// Defaults for the device, under what the user set.
		o.Sets = append([]string{"tun={}"}, o.Sets...)
		if plan, err = load(o); err != nil {
			return nil, err
		}
	}
	if len(nodes) > 0 {
		set, err := scenario.NodesSet(nodes, plan.Runs[0].Nodes)
		if err != nil {
			return nil, err
		}
		o.Sets = append(o.Sets, set)
		if plan, err = load(o); err != nil {
			return nil, err
		}
	}
	if err := CheckExpectations(plan); err != nil {
		return nil, err
	}
	i := slices.IndexFunc(plan.Runs, func(r *scenario.Scenario) bool { return r.Variant == variant })
	var names []string
	for _, r := range plan.Runs {
		names = append(names, r.Variant)
	}
	switch {
	case i >= 0:
	case variant == "" && len(plan.Runs) > 1:
		return nil, fmt.Errorf("%s has variants; choose one with --variant (%s)", plan.Path, strings.Join(names, ", "))
	default:
		return nil, fmt.Errorf("--variant: %s has no variant %q (it has: %s)", plan.Path, variant, strings.Join(names, ", "))
	}
	s := plan.Runs[i]
	if s.TUN.Device.Netns != "" {
		return nil, fmt.Errorf("%s: tun.netns: a shell makes its own namespace; remove tun.netns", plan.Path)
	}
	// Said before anything is made, not when the run opens its files.
	if s.Capture != nil && len(s.Capture.Points) > 0 && !out {
		return nil, fmt.Errorf("%s: capture: netjam shell writes the capture into --out DIR; give one", plan.Path)
	}
	return s, nil
}

// ShellEnv tells a shell's command where the path of s leads: the
// device's name and the peer's addresses.
func ShellEnv(s *scenario.Scenario) []string {
	env := []string{"NETJAM_DEVICE=" + s.TUN.Device.Name}
	for _, p := range s.TUN.Peer {
		if p.Is4() {
			env = append(env, "NETJAM_PEER="+p.String())
		} else {
			env = append(env, "NETJAM_PEER6="+p.String())
		}
	}
	return env
}

// Shell is the network namespace netjam shell runs its command in, behind
// the scenario's TUN device. With the privilege to make network
// namespaces it is a fresh one of netjam's; without (and not root) it is
// rootless: netjam starts itself again as root of new user and network
// namespaces, which makes the device there, hands it over and becomes the
// command, while netjam stays in the user's namespace.
type Shell struct {
	ns       *hostnet.Netns    // nil when rootless
	rootless *hostnet.Rootless // the namespaces' first process, once the device is open
	started  bool
}

// NewShell makes the shell's namespace. A rootless shell is chosen when a
// namespace cannot be made for want of a privilege and netjam is not
// root; why is then that privilege error. Any other failure is err.
func NewShell() (sh *Shell, why, err error) {
	ns, err := hostnet.NewNetns()
	switch {
	case err == nil:
		return &Shell{ns: ns}, nil, nil
	case IsPrivilege(err) && os.Geteuid() != 0:
		return &Shell{}, err, nil
	}
	return nil, nil, err
}

// Rootless reports whether the command runs in user namespaces of its own.
func (sh *Shell) Rootless() bool { return sh.ns == nil }

// Netns is the path of the namespace, for the scenario's tun.netns; ""
// for a rootless shell, whose device is made in its own namespaces.
func (sh *Shell) Netns() string { return sh.ns.Path() }

// Prepare sets o up to run the scenario for c: c starts once the path is
// up and the run lasts as long as it (Attached); a rootless shell opens
// its TUN device through the namespaces' first process, which becomes c.
func (sh *Shell) Prepare(o *Options, c *ShellCommand) {
	o.Attached = sh.attached(c)
	if !sh.Rootless() {
		return
	}
	o.OpenTUN = func(cfg hostnet.TUNConfig) (*hostnet.TUN, error) {
		r, t, err := hostnet.StartRootless(cfg, c.Args, c.Env)
		sh.rootless = r
		return t, err
	}
	o.OpenNode = func(cfg hostnet.TUNConfig, c hostnet.RootlessCommand) (*hostnet.TUN, *hostnet.Rootless, error) {
		r, t, err := hostnet.StartRootlessCommand(cfg, c)
		return t, r, err
	}
}

// Start starts the command: cmd, started inside the namespace, or, for a
// rootless shell, the namespaces' first process turning into it (cmd is
// then ignored, what Prepare was given runs). It returns the process to
// wait for.
//
// etc, when not "", is a folder of files the command sees in /etc
// (NodesEtc: the run's nodes' names).
func (sh *Shell) Start(cmd *exec.Cmd, etc string) (*exec.Cmd, error) {
	if sh.Rootless() {
		if sh.rootless == nil {
			return nil, errors.New("rootless shell: the device was never opened")
		}
		err := sh.rootless.Start(etc)
		sh.started = err == nil
		return sh.rootless.Cmd(), err
	}
	err := sh.ns.Start(cmd, etc)
	sh.started = err == nil
	return cmd, err
}

// Close ends a rootless shell's first process if the command never
// started (the run failed before), and releases the namespace.
// Idempotent.
func (sh *Shell) Close() error {
	if sh.rootless != nil && !sh.started {
		sh.rootless.Kill()
		sh.rootless = nil
	}
	return sh.ns.Close()
}

// Route puts s's device into the shell's namespace and routes
// everything of the device's families into it.
func (sh *Shell) Route(s *scenario.Scenario) {
	s.TUN.Device.Netns = sh.Netns()
	for _, a := range s.TUN.Device.Addrs {
		def := netip.MustParsePrefix("0.0.0.0/0")
		if a.Addr().Is6() {
			def = netip.MustParsePrefix("::/0")
		}
		s.TUN.Device.Routes = append(s.TUN.Device.Routes, def)
	}
}

// ShellCommand is a shell's command: what it runs, and, once it has
// ended, its exit status.
type ShellCommand struct {
	Args []string // COMMAND and its arguments
	Env  []string // added to netjam's environment (ShellEnv, the control API's)
	// AsRoot and Caps are --as-root and --cap: how a root shell's
	// command is confined (package confine).
	AsRoot bool
	Caps   []string
	// Sigs are the signals netjam got (SIGINT, SIGTERM, SIGHUP), passed
	// on to the command (confine.Wait).
	Sigs <-chan os.Signal
	Log  *zap.Logger
	// Status is the command's exit status once it has ended; -1 before.
	Status int
}

// attached is the run's Options.Attached for c: it starts c in the shell
// once the path is up and waits for it, passing the terminal's signals on.
func (sh *Shell) attached(c *ShellCommand) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		// The terminal's other signals, caught before COMMAND may send any.
		term := make(chan os.Signal, 4)
		signal.Notify(term, confine.TerminalSignals...)
		defer signal.Stop(term)
		cmd, err := sh.startCommand(c, NodesEtc(ctx))
		if err != nil {
			return err
		}
		c.Status = confine.Wait(cmd, c.Sigs, term, c.Log)
		return nil
	}
}

// startCommand starts c: the namespaces' first process becoming it in a
// rootless shell, or a process of netjam's, confined, in the namespace.
func (sh *Shell) startCommand(c *ShellCommand, etc string) (*exec.Cmd, error) {
	command := c.Args
	if sh.Rootless() {
		cmd, err := sh.Start(nil, etc)
		if err != nil {
			return nil, fmt.Errorf("starting %s: %w", command[0], err)
		}
		return cmd, nil
	}
	cmd := exec.Command(command[0], command[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), c.Env...)
	who, err := confine.Command(cmd, c.AsRoot, c.Caps, os.Getenv)
	if err != nil {
		return nil, err
	}
	c.Log.Info("the command runs as "+who, zap.Strings("command", command))
	if _, err := sh.Start(cmd, etc); err != nil {
		return nil, confine.StartError(command[0], err)
	}
	return cmd, nil
}
