package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
	"go.uber.org/zap"

	"github.com/netjam/netjam/emulator"
	"github.com/netjam/netjam/hostnet"
	"github.com/netjam/netjam/scenario"
)

func shellCommand() *cli.Command {
	return &cli.Command{
		Name:      "shell",
		Usage:     "run a command in a network namespace whose only way out is the emulated path",
		ArgsUsage: "[SCENARIO.yaml] -- COMMAND [ARGS...]",
		Description: `Makes a fresh network namespace holding only a loopback device and the
scenario's TUN device, with default routes into the device, and runs
COMMAND in it, as mahimahi's shells do: every packet COMMAND sends crosses
the scenario's uplink, every reply its downlink. The peer (NETJAM_PEER in
COMMAND's environment, 10.99.0.2 by default) answers ping and relays the
scenario's tun.forward ports to real servers, and tun.transparent's allow
list to any destination. The scenario's flows run alongside.

The namespace and the device go away with COMMAND; netjam exits with
COMMAND's exit status (128+N when a signal N ended it; 127 when COMMAND
is not found, 126 when it cannot be run, as shells do). netjam's flags go
before "--", COMMAND and its arguments after it. Without a scenario
file, or when it has no tun section, the device takes its defaults.
Ctrl-C reaches COMMAND from the terminal; netjam passes SIGTERM and SIGHUP
on to it. With root, the namespace is netjam's; without, where the system
allows unprivileged user namespaces, COMMAND runs as root of a user
namespace of its own (rootless, as unshare -r does), and netjam, outside
it, still relays to the host's services. Where neither works, netjam
exits 2 saying how to get what is missing.

Under sudo, COMMAND runs as the user who ran sudo (SUDO_UID, SUDO_GID,
that user's groups and home), with no capability: a command holding
root's capabilities could leave the namespace (nsenter) and change the
host. --as-root keeps root with every capability dropped but those
--cap names (--as-root --cap net_raw,net_bind_service).

Examples:
   sudo netjam shell --set link.delay=50ms -- ping -c 5 10.99.0.2
   sudo netjam shell configs/tun-iperf3.yaml -- iperf3 -c 10.99.0.2 -C bbr
   sudo netjam shell my.yaml --variant lossy -- bash`,
		Flags: []cli.Flag{
			&cli.StringSliceFlag{Name: "set", Usage: "override a scenario key by its dotted path: KEY=VALUE (repeatable); VALUE is YAML"},
			seedFlag(),
			&cli.StringFlag{Name: "variant", Usage: "the variant to run, when the scenario has variants"},
			&cli.StringFlag{Name: "out", Usage: "write the run's results into this folder, as netjam run does (summary.json, timeseries.csv, plots, report.html, netjam.log)"},
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "print no table when COMMAND ends"},
			&cli.BoolFlag{Name: "as-root", Usage: "run COMMAND as root (under sudo it runs as the invoking user), with only the capabilities of --cap"},
			&cli.StringSliceFlag{Name: "cap", Usage: "with --as-root: a capability COMMAND keeps, such as net_raw (repeatable, or comma-separated)"},
			&cli.StringFlag{Name: "control", Usage: "serve the control API while COMMAND runs, at `unix:PATH`, HOST:PORT, or unix (control.sock in --out, else in the temporary folder); COMMAND finds it in $NETJAM_CONTROL, so `netjam ctl set link.loss=100%` from inside cuts its own network"},
			&cli.StringFlag{Name: "control-token", Usage: "a `FILE` holding the token every control request must carry; required for a non-loopback --control"},
		},
		OnUsageError: usageError,
		Action:       doShell,
	}
}

// shellDuration is a shell run's duration when the scenario names none
// that is longer: the run lasts as long as COMMAND, and the duration only
// bounds the scenario's flows.
const shellDuration = 24 * time.Hour

func doShell(c *cli.Context) error {
	// The flag parser drops a "--" that directly follows the flags (no
	// scenario file) and keeps one after the file.
	args := c.Args().Slice()
	var files, command []string
	dash := slices.Index(args, "--")
	switch {
	case dash >= 0:
		files, command = args[:dash], args[dash+1:]
	case len(args) > 0 && isScenarioFile(args[0]):
		// netjam shell my.yaml, or netjam shell my.yaml ping 10.99.0.2:
		// the file is the scenario, never the command.
		files, command = args[:1], args[1:]
	default:
		command = args
	}
	if len(command) == 0 {
		return cli.Exit("shell needs a command after --: netjam shell [SCENARIO.yaml] -- COMMAND [ARGS...]", exitBadUsage)
	}
	if len(files) > 1 {
		return cli.Exit(fmt.Sprintf("shell takes at most one scenario file before --, got %d", len(files)), exitBadUsage)
	}
	s, err := shellScenario(c, files)
	if err != nil {
		return err
	}
	if _, err := parseCaps(c.StringSlice("cap")); err != nil {
		return cli.Exit(err, exitBadUsage)
	}
	if c.IsSet("cap") && !c.Bool("as-root") {
		return cli.Exit("--cap: only with --as-root (a command run as the invoking user has no capability)", exitBadUsage)
	}
	// Find the command before making anything, and fail as a shell does.
	if _, err := exec.LookPath(command[0]); err != nil {
		return commandError(command[0], err)
	}
	level := c.String("log-level")
	if !c.IsSet("log-level") {
		level = "warn" // COMMAND owns the terminal
	}
	// With --out, the folder holds what run's does, netjam.log included
	// (at the level asked for, or info: the terminal is COMMAND's).
	var logFile io.Writer
	out := c.String("out")
	if out != "" {
		if err := os.MkdirAll(out, 0o755); err != nil {
			return cli.Exit(fmt.Sprintf("output folder: %v", err), exitFailed)
		}
		f, err := os.Create(filepath.Join(out, "netjam.log"))
		if err != nil {
			return cli.Exit(fmt.Sprintf("output folder: %v", err), exitFailed)
		}
		defer f.Close()
		logFile = f
	}
	log, err := newLogger(level, c.String("log-format"), c.App.ErrWriter, logFile)
	if err != nil {
		return cli.Exit(err, exitBadUsage)
	}
	defer log.Sync() //nolint:errcheck // nothing to do about a failed flush at exit

	// With root, a namespace of netjam's making; without, a rootless
	// shell (see rootless.go) where the system allows user namespaces.
	ns, err := hostnet.NewNetns()
	rootlessShell := err != nil && emulator.IsPrivilege(err) && os.Geteuid() != 0
	switch {
	case rootlessShell && (c.Bool("as-root") || c.IsSet("cap")):
		return cli.Exit("--as-root and --cap: only for a shell run as root (a rootless shell's command is root of its own user namespace, with no power outside it)", exitBadUsage)
	case rootlessShell && s.KernelFlows():
		return cli.Exit("kernel flows in netjam shell need root: their sockets would live in the command's user namespace, which netjam cannot enter", exitBadUsage)
	case err != nil && !rootlessShell:
		return failure(err)
	case err == nil:
		defer ns.Close()
		s.TUN.Netns = ns.Path()
	}
	for _, a := range s.TUN.Address {
		def := netip.MustParsePrefix("0.0.0.0/0")
		if a.Addr().Is6() {
			def = netip.MustParsePrefix("::/0")
		}
		s.TUN.Routes = append(s.TUN.Routes, def)
	}

	// SIGTERM and SIGHUP go on to COMMAND, which then ends, and so does
	// the run. SIGINT from the terminal reaches COMMAND by itself (it is
	// in netjam's process group); netjam ignores it rather than die with
	// the namespace in use.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGINT)
	defer signal.Stop(sigs)

	status := -1
	opts := emulator.Options{Log: log.Named("emulator"), Version: versionString()}
	env := shellEnv(s)
	var socket string // the control API's unix socket, if any
	if c.IsSet("control") {
		addr := c.String("control")
		if addr == "unix" || addr == "unix:" || addr == "" {
			dir := out
			if dir == "" {
				dir = os.TempDir()
			}
			addr = "unix:" + filepath.Join(dir, fmt.Sprintf("netjam-%d.sock", os.Getpid()))
		}
		// The API's stop ends the run as SIGTERM would: COMMAND gets it.
		stop := func() {
			select {
			case sigs <- syscall.SIGTERM:
			default:
			}
		}
		srv, sock, err := serveControl(c, addr, stop)
		if err != nil {
			return err
		}
		defer srv.Close()
		socket = sock
		opts.Live = srv.Attach
		env = append(env, controlEnv+"="+addr)
	}
	var rl *rootless
	if rootlessShell {
		log.Info("no root: the shell runs in a user namespace", zap.NamedError("reason", err))
		opts.OpenTUN = func(cfg hostnet.TUNConfig) (*hostnet.TUN, error) {
			r, t, err := startRootless(cfg, command, env)
			rl = r
			return t, err
		}
	}
	opts.Attached = func(ctx context.Context) error {
		var cmd *exec.Cmd
		if rl != nil {
			// The namespaces' first process becomes the command.
			cmd = rl.cmd
			if err := rl.start(); err != nil {
				return fmt.Errorf("starting %s: %w", command[0], err)
			}
		} else {
			cmd = exec.Command(command[0], command[1:]...)
			cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
			cmd.Env = append(os.Environ(), env...)
			who, err := confine(cmd, c.Bool("as-root"), c.StringSlice("cap"), os.Getenv)
			if err != nil {
				return err
			}
			if pa := cmd.SysProcAttr; socket != "" && pa != nil && pa.Credential != nil {
				cr := pa.Credential
				// The command runs as the user who called sudo: the
				// control socket (0600) is theirs to use.
				if err := os.Chown(socket, int(cr.Uid), int(cr.Gid)); err != nil {
					return fmt.Errorf("control socket: %w", err)
				}
			}
			log.Info("the command runs as "+who, zap.Strings("command", command))
			if err := ns.Do(cmd.Start); err != nil {
				return commandError(command[0], err)
			}
		}
		status = waitCommand(cmd, sigs, log)
		return nil
	}
	sum, runErr := emulator.Run(context.Background(), &scenario.Plan{Name: s.Name, Runs: []*scenario.Scenario{s}}, opts)
	if rl != nil && status < 0 {
		// The run failed before the command started: end the
		// namespaces' first process.
		rl.cmd.Process.Kill()
		rl.cmd.Wait()
	}
	if out != "" && sum != nil {
		// COMMAND has ended: Ctrl-C is netjam's again, and ends it at
		// once while it writes.
		written := newOutputs(out, outputNames...)
		stop := exitOnSignal(sigs, c.App.ErrWriter, written, os.Exit)
		err := writeOutputs(out, &scenario.Plan{Name: s.Name, Runs: []*scenario.Scenario{s}}, sum, written)
		stop()
		if err != nil {
			return err
		}
	}
	if !c.Bool("quiet") && sum != nil && len(sum.Runs) > 0 && sum.Runs[0].Skipped == "" {
		printTable(c.App.ErrWriter, sum)
	}
	if runErr != nil {
		var ec cli.ExitCoder
		if errors.As(runErr, &ec) {
			return cli.Exit(runErr, ec.ExitCode()) // the command could not be started
		}
		return failure(runErr)
	}
	if status != 0 {
		return cli.Exit("", status)
	}
	return nil
}

// shellScenario loads the one run a shell runs: the file's (or an empty
// scenario's), with a tun section.
func shellScenario(c *cli.Context, files []string) (*scenario.Scenario, error) {
	o, err := planOptions(c)
	if err != nil {
		return nil, err
	}
	load := func(o scenario.Options) (*scenario.Plan, error) {
		if len(files) == 0 {
			return scenario.Parse("shell", []byte(fmt.Sprintf("duration: %s\n", shellDuration)), o)
		}
		return scenario.Load(files[0], o)
	}
	plan, err := load(o)
	if err != nil {
		return nil, cli.Exit(err, exitBadUsage)
	}
	if plan.Runs[0].TUN == nil {
		// Defaults for the device, under what the user set.
		o.Sets = append([]string{"tun={}"}, o.Sets...)
		if plan, err = load(o); err != nil {
			return nil, cli.Exit(err, exitBadUsage)
		}
	}
	var s *scenario.Scenario
	variant := c.String("variant")
	var names []string
	for _, r := range plan.Runs {
		names = append(names, r.Variant)
		if r.Variant == variant {
			s = r
		}
	}
	switch {
	case s != nil:
	case variant == "" && len(plan.Runs) > 1:
		return nil, cli.Exit(fmt.Sprintf("%s has variants; choose one with --variant (%s)", plan.Path, strings.Join(names, ", ")), exitBadUsage)
	default:
		return nil, cli.Exit(fmt.Sprintf("--variant: %s has no variant %q (it has: %s)", plan.Path, variant, strings.Join(names, ", ")), exitBadUsage)
	}
	if s.TUN.Netns != "" {
		return nil, cli.Exit(fmt.Sprintf("%s: tun.netns: a shell makes its own namespace; remove tun.netns", plan.Path), exitBadUsage)
	}
	return s, nil
}

// waitCommand waits for cmd to end, passing SIGTERM and SIGHUP from sigs
// on to it (and killing it 10 s after the first if it is still there),
// and returns its exit status.
func waitCommand(cmd *exec.Cmd, sigs <-chan os.Signal, log *zap.Logger) int {
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	var killTimer <-chan time.Time
	for {
		select {
		case err := <-waited:
			return exitStatus(cmd, err)
		case sig := <-sigs:
			if sig == syscall.SIGINT {
				continue
			}
			log.Info("passing a signal on to the command", zap.Stringer("signal", sig))
			cmd.Process.Signal(sig)
			if killTimer == nil {
				killTimer = time.After(10 * time.Second)
			}
		case <-killTimer:
			log.Warn("the command did not end 10 s after the signal: killing it")
			cmd.Process.Kill()
		}
	}
}

// shellEnv tells COMMAND where the path leads.
func shellEnv(s *scenario.Scenario) []string {
	env := []string{"NETJAM_DEVICE=" + s.TUN.Name}
	for _, p := range s.TUN.Peer {
		if p.Is4() {
			env = append(env, "NETJAM_PEER="+p.String())
		} else {
			env = append(env, "NETJAM_PEER6="+p.String())
		}
	}
	return env
}

// exitStatus is a finished command's exit status as a shell reports it.
func exitStatus(cmd *exec.Cmd, err error) int {
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return exitFailed
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
	exitCannotRun = 126 // found, but not executable
	exitNotFound  = 127
)

// commandError is the error for a command that could not be started:
// exit status 127 when it does not exist, 126 when it cannot be run.
func commandError(name string, err error) error {
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
		return cli.Exit(fmt.Sprintf("shell: %s: command not found", name), exitNotFound)
	}
	if cause := errors.Unwrap(err); cause != nil {
		err = cause // "permission denied", without exec's own wording around it
	}
	return cli.Exit(fmt.Sprintf("shell: %s: cannot run: %v", name, err), exitCannotRun)
}

// exitCodeOf is 2 for a missing privilege, 1 for any other failure.
func exitCodeOf(err error) int {
	if emulator.IsPrivilege(err) {
		return exitBadUsage
	}
	return exitFailed
}
