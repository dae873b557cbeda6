package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"github.com/urfave/cli/v2"
	"go.uber.org/zap"

	"github.com/netjam/netjam/confine"
	"github.com/netjam/netjam/control"
	"github.com/netjam/netjam/emulator"
	"github.com/netjam/netjam/internal/cliargs"
	"github.com/netjam/netjam/internal/interrupt"
	"github.com/netjam/netjam/outdir"
	"github.com/netjam/netjam/report"
	"github.com/netjam/netjam/scenario"
	"github.com/netjam/netjam/summary"
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
COMMAND leads a session of its own, without the terminal as its
controlling one (it cannot push input into it): netjam passes Ctrl-C,
Ctrl-\, SIGTERM, SIGHUP and window size changes on to it; Ctrl-Z does
nothing, and an interactive shell has no job control (run it under
script -q -c bash /dev/null for a terminal of its own). With root, the namespace is netjam's; without, where the system
allows unprivileged user namespaces, COMMAND runs as root of a user
namespace of its own (rootless, as unshare -r does), and netjam, outside
it, still relays to the host's services. Where neither works, netjam
exits 2 saying how to get what is missing.

Under sudo, COMMAND runs as the user who ran sudo (SUDO_UID, SUDO_GID,
that user's groups and home), with no capability and no_new_privs (a
set-user-ID program, sudo included, gives it nothing): a command holding
root's capabilities could leave the namespace (nsenter) and change the
host. --as-root keeps root with every capability dropped but those
--cap names (--as-root --cap net_raw,net_bind_service).

With --node NAME=CMD, a node takes the peer's place: a namespace of its
own with a TUN device holding the peer's addresses, where CMD runs (with
/bin/sh -c, as COMMAND runs, under sudo as the invoking user). netjam
forwards packets between COMMAND's kernel and the node's and terminates
nothing: a download is sent by the node's kernel, with its congestion
control. Both sides resolve "client" and NAME through a hosts file of
their own. CMD starts first; COMMAND starts once CMD listens (or after
5 s), and CMD gets SIGTERM when COMMAND ends. Its output goes to netjam's
standard error, each line after "NAME| ". Without root each node is a
user namespace of its own, as COMMAND is (see docs/nodes.md).

Examples:
   sudo netjam shell --set link.delay=50ms -- ping -c 5 10.99.0.2
   sudo netjam shell --node server='iperf3 -s' -- iperf3 -c server -R -C bbr
   sudo netjam shell configs/tun-iperf3.yaml -- iperf3 -c 10.99.0.2 -C bbr
   sudo netjam shell my.yaml --variant lossy -- bash`,
		Flags: []cli.Flag{
			&cli.StringSliceFlag{Name: "set", Usage: "override a scenario key by its dotted path: KEY=VALUE (repeatable); VALUE is YAML"},
			seedFlag(),
			&cli.StringFlag{Name: "variant", Usage: "the variant to run, when the scenario has variants"},
			&cli.StringSliceFlag{Name: "node", Usage: "run `NAME=CMD` in a node of its own at the far end of the path, in the peer's place (its kernel ends the connections; COMMAND finds it by NAME); CMD runs with /bin/sh -c, starts first and ends when COMMAND ends (repeatable; a scenario's node of that name gets CMD)"},
			&cli.StringFlag{Name: "out", Usage: "write the run's results into this folder, as netjam run does (summary.json, timeseries.csv, plots, report.html, netjam.log)"},
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "print no table when COMMAND ends"},
			&cli.BoolFlag{Name: "as-root", Usage: "run COMMAND as root (under sudo it runs as the invoking user), with only the capabilities of --cap"},
			&cli.StringSliceFlag{Name: "cap", Usage: "with --as-root: a capability COMMAND keeps, such as net_raw (repeatable, or comma-separated)"},
			&cli.StringFlag{Name: "control", Usage: "serve the control API while COMMAND runs, at `unix:PATH`, HOST:PORT, or unix (control.sock in --out, else in the temporary folder); COMMAND finds it in $NETJAM_CONTROL, so `netjam ctl set link.loss=100%` from inside cuts its own network"},
			&cli.StringFlag{Name: "control-token", Usage: "a `FILE` holding the token every control request must carry; a TCP --control given none makes one (COMMAND finds it in $NETJAM_CONTROL_TOKEN; netjam prints the dashboard's URL with it, and writes it into control.token of --out)"},
			&cli.StringFlag{Name: "control-tls-cert", Usage: "serve a TCP --control over HTTPS with this certificate `FILE` (PEM; with --control-tls-key): for an address others reach"},
			&cli.StringFlag{Name: "control-tls-key", Usage: "the private key `FILE` of --control-tls-cert (PEM)"},
		},
		OnUsageError: usageError,
		Action:       doShell,
	}
}

func doShell(c *cli.Context) error {
	file, command, err := cliargs.ShellArgs(c.Args().Slice())
	if err != nil {
		return cli.Exit(err, exitBadUsage)
	}
	o, err := planOptions(c)
	if err != nil {
		return err
	}
	s, err := emulator.ShellScenario(file, o, c.StringSlice("node"), c.String("variant"), c.String("out") != "")
	if err != nil {
		return cli.Exit(err, exitBadUsage)
	}
	if err := checkShellCommand(c, command); err != nil {
		return err
	}
	if err := checkOutputFlags(c); err != nil {
		return err
	}
	sr := &shellRun{c: c, s: s, out: c.String("out")}
	if sr.out != "" {
		// Opened now, before COMMAND runs: whatever COMMAND does to the
		// folder's path, the results go into this folder (package outdir).
		if sr.dir, _, err = openOutput(sr.out); err != nil {
			return err
		}
		defer sr.dir.Close()
	}
	var open func(string) (*os.File, error)
	if sr.dir != nil {
		open = sr.dir.Create // --out: netjam.log there, as run's
	}
	log, closeLog, err := commandLog(c, true, open)
	if err != nil {
		return err
	}
	defer closeLog()
	sh, why, err := sr.namespace()
	if err != nil {
		return err
	}
	defer sh.Close()

	// SIGTERM and SIGHUP go on to COMMAND, which then ends, and so does
	// the run; so does SIGINT, the terminal's Ctrl-C, which only netjam
	// gets (COMMAND leads a session of its own, see package confine),
	// rather than end netjam with the namespace in use.
	sr.sigs = make(chan os.Signal, 4)
	signal.Notify(sr.sigs, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGINT)
	defer signal.Stop(sr.sigs)
	sr.cmd = emulator.ShellCommand{Args: command, Env: emulator.ShellEnv(s), AsRoot: c.Bool("as-root"),
		Caps: c.StringSlice("cap"), Sigs: sr.sigs, Log: log, Status: -1}

	// The output folder is the run's, as in netjam run: the scenario's
	// captures go there.
	opts := emulator.Options{Log: log.Named("emulator"), Version: versionString(), OutDir: sr.dir,
		ConfineNode: confine.Node(log, c.Bool("as-root"), c.StringSlice("cap"))}
	if c.IsSet("control") {
		closeControl, err := sr.control(&opts, sh.Rootless())
		if err != nil {
			return err
		}
		defer closeControl()
	}
	if sh.Rootless() {
		log.Info("no root: the shell runs in a user namespace", zap.NamedError("reason", why))
	}
	sh.Prepare(&opts, &sr.cmd)
	sum, runErr := emulator.Run(context.Background(), &scenario.Plan{Name: s.Name, Runs: []*scenario.Scenario{s}}, opts)
	// When the run failed before the command started, a rootless
	// shell's first process ends now.
	sh.Close()
	return sr.finish(sum, runErr)
}

// checkShellCommand checks --cap and finds the command before anything
// is made, failing as a shell does.
func checkShellCommand(c *cli.Context, command []string) error {
	if _, err := confine.ParseCaps(c.StringSlice("cap")); err != nil {
		return cli.Exit(err, exitBadUsage)
	}
	if c.IsSet("cap") && !c.Bool("as-root") {
		return cli.Exit("--cap: only with --as-root (a command run as the invoking user has no capability)", exitBadUsage)
	}
	if _, err := exec.LookPath(command[0]); err != nil {
		return confine.StartError(command[0], err)
	}
	return nil
}

// shellRun is one netjam shell: its scenario and command, and what it
// makes on the way.
type shellRun struct {
	c    *cli.Context
	s    *scenario.Scenario
	cmd  emulator.ShellCommand
	out  string      // --out, or ""
	dir  *outdir.Dir // the folder of --out, opened before COMMAND runs; nil without
	sigs chan os.Signal
}

// namespace makes the shell's namespace (with root, one of netjam's
// making; without, a rootless shell where the system allows user
// namespaces, why saying what it lacked) and routes everything of the
// device's families into it.
func (sr *shellRun) namespace() (sh *emulator.Shell, why, err error) {
	sh, why, err = emulator.NewShell()
	switch {
	case err != nil:
		return nil, nil, failure(err)
	case sh.Rootless() && (sr.c.Bool("as-root") || sr.c.IsSet("cap")):
		return nil, nil, cli.Exit("--as-root and --cap: only for a shell run as root (a rootless shell's command is root of its own user namespace, with no power outside it)", exitBadUsage)
	case sh.Rootless() && sr.s.KernelFlows():
		return nil, nil, cli.Exit("kernel flows in netjam shell need root: their sockets would live in the command's user namespace, which netjam cannot enter", exitBadUsage)
	}
	sh.Route(sr.s)
	return sh, why, nil
}

// control serves the control API while COMMAND runs (--control), and
// tells COMMAND where it is, and its token. Under sudo, COMMAND runs as
// the invoking user: its unix socket is theirs, made so from the start
// (control/socket.go), and so is the token's file.
func (sr *shellRun) control(opts *emulator.Options, rootless bool) (closeControl func(), err error) {
	addr := sr.c.String("control")
	if addr == "unix" || addr == "unix:" || addr == "" {
		addr = control.ShellSocket(sr.out)
	}
	// The API's stop ends the run as SIGTERM would: COMMAND gets it.
	stop := func() {
		select {
		case sr.sigs <- syscall.SIGTERM:
		default:
		}
	}
	var owner *control.Owner
	if !rootless && !sr.c.Bool("as-root") {
		if owner, err = sudoOwner(); err != nil {
			return nil, err
		}
	}
	o := endpointOptions(sr.c, stop, owner, sr.dir)
	o.API, o.Quiet = addr, true
	srv, api, end, err := control.Start(o)
	if err != nil {
		return nil, controlError(err)
	}
	opts.Live = attach(srv)
	sr.cmd.Env = append(sr.cmd.Env, control.EndpointEnv+"="+api.Where())
	if api.Token != "" {
		sr.cmd.Env = append(sr.cmd.Env, control.TokenEnv+"="+api.Token)
	}
	return func() {
		srv.Close()
		end()
	}, nil
}

// finish writes the outputs (--out) and the table once COMMAND has
// ended, and turns the run's outcome into netjam's: COMMAND's status.
func (sr *shellRun) finish(sum *summary.Summary, runErr error) error {
	c := sr.c
	if sr.dir != nil && sum != nil {
		// COMMAND has ended: Ctrl-C is netjam's again, and ends it at
		// once while it writes.
		written := interrupt.NewOutputs(sr.out, outputNames...)
		stop := interrupt.ExitOnSignal(sr.sigs, c.App.ErrWriter, written, os.Exit)
		err := writeOutputs(sr.dir, &scenario.Plan{Name: sr.s.Name, Runs: []*scenario.Scenario{sr.s}}, sum, written)
		stop()
		if err != nil {
			return err
		}
	}
	if !c.Bool("quiet") && sum != nil && len(sum.Runs) > 0 && sum.Runs[0].Skipped == "" {
		report.PrintSummary(c.App.ErrWriter, sum)
	}
	if runErr != nil {
		var ec cli.ExitCoder
		if errors.As(runErr, &ec) {
			return cli.Exit(runErr, ec.ExitCode()) // the command could not be started
		}
		return failure(runErr)
	}
	if sr.cmd.Status != 0 {
		return cli.Exit("", sr.cmd.Status)
	}
	return nil
}
