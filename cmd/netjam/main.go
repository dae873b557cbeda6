// Command netjam is a userspace network emulator: loss, delay, rate limits,
// queues and AQM on a path between endpoints, driven by a YAML scenario,
// with no root and no kernel netem.
//
// This package is CLI wiring only: it parses flags, builds the logger and
// calls into package emulator.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/netjam/netjam/confine"
	"github.com/netjam/netjam/emulator"
	"github.com/netjam/netjam/scenario"
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
	err := checkShellArgs(app, args)
	if err == nil {
		err = app.Run(flagsFirst(app, args))
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
			if _, err := parseLevel(c.String("log-level")); err != nil {
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
	var names []string
	for _, cmd := range c.App.VisibleCommands() {
		names = append(names, cmd.Name)
	}
	given := c.Args().First()
	msg := fmt.Sprintf("%q is not a command", given)
	if s := scenario.Suggest(given, names); s != "" {
		msg += fmt.Sprintf("; did you mean %q?", s)
	}
	return cli.Exit(fmt.Sprintf("%s (the commands are %s; netjam --help says more)", msg, strings.Join(names, ", ")), exitBadUsage)
}

func usageError(_ *cli.Context, err error, _ bool) error {
	return cli.Exit(err.Error(), exitBadUsage)
}

// undefinedFlag is the flag package's error for a flag it does not know.
var undefinedFlag = regexp.MustCompile(`^flag provided but not defined: -+(.+)$`)

// flagError is the usage error handler of where, which takes flags (and
// global ones, given after the command): a flag it does not know is named
// as given, with the nearest of them (--sed: did you mean --seed?).
func flagError(where string, flags, global []cli.Flag) cli.OnUsageErrorFunc {
	return func(c *cli.Context, err error, sub bool) error {
		m := undefinedFlag.FindStringSubmatch(err.Error())
		if m == nil {
			return usageError(c, err, sub)
		}
		var names []string
		for _, f := range append(slices.Clone(flags), global...) {
			names = append(names, f.Names()...)
		}
		names = append(names, "help")
		msg := fmt.Sprintf("%s: not a flag of %s", dashes(m[1]), where)
		if s := scenario.Suggest(m[1], names); s != "" {
			msg += fmt.Sprintf("; did you mean %s?", dashes(s))
		}
		return cli.Exit(msg+" ("+where+" --help lists them)", exitBadUsage)
	}
}

// dashes is a flag's name as typed: -o, --seed.
func dashes(name string) string {
	if len([]rune(name)) == 1 {
		return "-" + name
	}
	return "--" + name
}

// flagsFirst lets flags follow the arguments, as people type them
// (netjam run my.yaml --seed 7 --log-level debug): urfave/cli, like package
// flag, stops at the first argument, and takes global flags only before the
// command. So a command's flags are moved in front of its arguments, and
// global flags given after the command in front of the command. Everything
// after "--" stays where it is.
func flagsFirst(app *cli.App, args []string) []string {
	// Find the command: the first token after the global flags.
	i := 1
	for i < len(args) && strings.HasPrefix(args[i], "-") {
		if takesValue(app.Flags, args[i]) {
			i++
		}
		i++
	}
	if i >= len(args) {
		return args
	}
	cmd := app.Command(args[i])
	if cmd == nil {
		return args
	}
	globals := append([]string(nil), args[:i]...)
	cmdFlags := []string{args[i]}
	var positional []string
	rest := args[i+1:]
	for j := 0; j < len(rest); j++ {
		a := rest[j]
		switch {
		case a == "--" || cmd.Name == "shell" && isShellCommandName(positional, a):
			// A shell's command and its arguments stay as they are
			// (checkShellArgs has made sure no flag follows one named
			// without "--").
			positional = append(positional, rest[j:]...)
			j = len(rest)
		case strings.HasPrefix(a, "-") && a != "-":
			dst, flags := &cmdFlags, cmd.Flags
			if !isFlag(cmd.Flags, a) && isFlag(app.Flags, a) {
				dst, flags = &globals, app.Flags
			}
			*dst = append(*dst, a)
			if takesValue(flags, a) && j+1 < len(rest) {
				j++
				*dst = append(*dst, rest[j])
			}
		default:
			positional = append(positional, a)
		}
	}
	return append(append(globals, cmdFlags...), positional...)
}

// isFlag reports whether token (-x, --name or --name=value) names one of
// flags.
func isFlag(flags []cli.Flag, token string) bool {
	name, _, _ := strings.Cut(strings.TrimLeft(token, "-"), "=")
	for _, f := range flags {
		for _, n := range f.Names() {
			if n == name {
				return true
			}
		}
	}
	return false
}

// takesValue reports whether token (-x, --name, without "=value") names a
// flag of flags that needs a value in the next token.
func takesValue(flags []cli.Flag, token string) bool {
	if strings.Contains(token, "=") {
		return false
	}
	name := strings.TrimLeft(token, "-")
	for _, f := range flags {
		for _, n := range f.Names() {
			if n == name {
				if d, ok := f.(cli.DocGenerationFlag); ok {
					return d.TakesValue()
				}
				return false
			}
		}
	}
	return false
}

// isScenarioFile reports whether arg names a scenario file by its
// extension, as the first argument of netjam shell may.
func isScenarioFile(arg string) bool {
	return strings.HasSuffix(arg, ".yaml") || strings.HasSuffix(arg, ".yml")
}

// isShellCommandName reports whether arg, a token of netjam shell's
// arguments following the positional ones seen so far, names the command
// to run: the first argument that is not a flag, unless it is the
// scenario file.
func isShellCommandName(positional []string, arg string) bool {
	if strings.HasPrefix(arg, "-") {
		return false
	}
	return len(positional) > 0 || !isScenarioFile(arg)
}

// checkShellArgs catches a missing "--" in netjam shell: a flag after the
// command's name (netjam shell ping -c 1 10.99.0.2) would otherwise be
// taken for one of netjam's and refused with "flag provided but not
// defined", or, worse, be netjam's own flag with the same name.
func checkShellArgs(app *cli.App, args []string) error {
	i := 1
	for i < len(args) && strings.HasPrefix(args[i], "-") {
		if takesValue(app.Flags, args[i]) {
			i++
		}
		i++
	}
	if i >= len(args) || args[i] != "shell" {
		return nil
	}
	shell := app.Command("shell")
	var positional []string
	for j := i + 1; j < len(args); j++ {
		a := args[j]
		switch {
		case a == "--":
			return nil
		case strings.HasPrefix(a, "-"):
			if takesValue(shell.Flags, a) || takesValue(app.Flags, a) {
				j++
			}
		case isShellCommandName(positional, a):
			for _, b := range args[j+1:] {
				if strings.HasPrefix(b, "-") && b != "-" {
					fixed := append(append(append([]string{"netjam"}, args[1:j]...), "--"), args[j:]...)
					return cli.Exit(fmt.Sprintf("shell: %s follows the command %s: netjam's flags go before \"--\" and the command after it:\n  %s",
						b, a, strings.Join(fixed, " ")), exitBadUsage)
				}
			}
			return nil
		default:
			positional = append(positional, a)
		}
	}
	return nil
}
