// Command netjam is a userspace network emulator: loss, delay, rate limits,
// queues and AQM on a path between endpoints, driven by a YAML scenario,
// with no root and no kernel netem.
//
// This package is flags and wiring only: it parses flags and calls into
// the packages that do the work (emulator, control, confine, sweep,
// report, proxy, and internal/cliargs, interrupt, logging, progress,
// buildinfo), turning their errors into netjam's exit codes.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/netjam/netjam/confine"
	"github.com/netjam/netjam/emulator"
	"github.com/netjam/netjam/internal/cliargs"
	"github.com/netjam/netjam/internal/logging"
	"github.com/urfave/cli/v2"
)

// Exit codes, as documented in the README.
const (
	exitOK       = 0
	exitFailed   = 1 // a run that failed or was interrupted
	exitBadUsage = 2 // bad usage, a bad scenario or a missing privilege: nothing was started
	exitExpect   = 3 // every run worked, but an expectation of the scenario did not hold
)

func main() {
	os.Exit(run(os.Args, os.Stdout, os.Stderr))
}

// run is main without os.Exit, for tests.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 1 && args[1] == emulator.ShellInitArg {
		return emulator.ShellInit() // a rootless shell's first process
	}
	if len(args) > 1 && args[1] == confine.Arg {
		return confine.Main(args[2:]) // a root shell's command, see package confine
	}
	app := newApp(stdout, stderr)
	app.Metadata = map[string]any{"args": args} // a rootless run starts netjam again with them
	err := cliargs.CheckShell(app, args)
	if err != nil {
		err = cli.Exit(err, exitBadUsage)
	} else {
		err = app.Run(cliargs.FlagsFirst(app, args))
	}
	if err == nil {
		return exitOK
	}
	var ec cli.ExitCoder
	if errors.As(err, &ec) {
		if msg := err.Error(); msg != "" {
			fmt.Fprintln(stderr, "netjam:", msg)
		}
		return ec.ExitCode()
	}
	// Anything else comes from flag or argument parsing.
	fmt.Fprintln(stderr, "netjam:", err)
	return exitBadUsage
}

func newApp(stdout, stderr io.Writer) *cli.App {
	app := &cli.App{
		Name:  "netjam",
		Usage: "a userspace network emulator: loss, delay, rate, queues and AQM without root or netem",
		UsageText: `netjam [global options] command [command options] [arguments...]

Examples:
   netjam run                                   # the embedded default scenario
   netjam run configs/reference.yaml --set link.uplink.loss=5% --seed 7
   netjam validate configs/*.yaml
   sudo netjam shell --set link.delay=20ms -- ping -c 3 10.99.0.2
   netjam --log-level debug --log-format json run my.yaml`,
		Writer:    stdout,
		ErrWriter: stderr,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "log-level", Value: "info", Usage: "debug, info, warn or error"},
			&cli.StringFlag{Name: "log-format", Value: "console", Usage: "console or json"},
		},
		Before: func(c *cli.Context) error {
			if _, err := logging.ParseLevel(c.String("log-level")); err != nil {
				return cli.Exit(err, exitBadUsage)
			}
			if f := c.String("log-format"); f != "console" && f != "json" {
				return cli.Exit(fmt.Sprintf("--log-format: %q is not a log format (expected console or json)", f), exitBadUsage)
			}
			return nil
		},
		// Without a command, or with one netjam does not know, urfave/cli
		// would print help and exit 0 or 3; the README promises 2.
		Action:          noCommand,
		Commands:        []*cli.Command{runCommand(), shellCommand(), sweepCommand(), mergeCommand(), ctlCommand(), proxyCommand(), validateCommand(), plotCommand(), versionCommand()},
		HideHelpCommand: true,
		// --set values are YAML and may hold commas: {time: 5ms, jitter: 1ms}.
		DisableSliceFlagSeparator: true,
		OnUsageError:              usageError,
		ExitErrHandler:            func(*cli.Context, error) {}, // run() maps errors to exit codes
	}
	// A flag misspelled gets the nearest of the flags where it was given
	// (urfave/cli tells the handler no more than the flag's name).
	app.OnUsageError = flagError("netjam", app.Flags, nil)
	for _, cmd := range app.Commands {
		cmd.OnUsageError = flagError("netjam "+cmd.Name, cmd.Flags, app.Flags)
	}
	return app
}

// noCommand is the app's action, reached only when the first argument
// after the global flags is not a command: usage on stderr, exit 2.
func noCommand(c *cli.Context) error {
	if c.Args().First() == "help" { // netjam help [COMMAND], as people type it
		if name := c.Args().Get(1); name != "" && c.App.Command(name) != nil {
			return cli.ShowCommandHelp(c, name)
		}
		return cli.ShowAppHelp(c)
	}
	if c.NArg() == 0 {
		cli.HelpPrinter(c.App.ErrWriter, cli.AppHelpTemplate, c.App)
		return cli.Exit("no command given", exitBadUsage)
	}
	// A command mistyped gets one line, not the help before it (which
	// pushed the line that says what went wrong off the screen).
	return cli.Exit(cliargs.UnknownCommand(c.App, c.Args().First()), exitBadUsage)
}

func usageError(_ *cli.Context, err error, _ bool) error {
	return cli.Exit(err.Error(), exitBadUsage)
}

// flagError is the usage error handler of where, which takes flags (and
// global ones, given after the command): a flag it does not know is named
// as given, with the nearest of them (--sed: did you mean --seed?).
func flagError(where string, flags, global []cli.Flag) cli.OnUsageErrorFunc {
	return func(c *cli.Context, err error, sub bool) error {
		if msg, ok := cliargs.UnknownFlag(err, where, flags, global); ok {
			return cli.Exit(msg, exitBadUsage)
		}
		return usageError(c, err, sub)
	}
}

// failure is a run's error as netjam's last words (emulator.Advice): exit
// 2 when all it says is a missing privilege, else 1.
func failure(err error) error {
	msg, privilege, only := emulator.Advice(err)
	switch {
	case only:
		return cli.Exit(msg, exitBadUsage)
	case privilege:
		return cli.Exit(msg, exitFailed)
	case emulator.IsPrivilege(err):
		return cli.Exit(err, exitBadUsage)
	}
	return cli.Exit(err, exitFailed)
}
