package cliargs

import (
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// app has the flags of netjam's that the tests move: global ones, run's,
// validate's and shell's.
func app() *cli.App {
	set := &cli.StringSliceFlag{Name: "set"}
	quiet := &cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}}
	return &cli.App{
		Flags: []cli.Flag{&cli.StringFlag{Name: "log-level"}, &cli.StringFlag{Name: "log-format"}},
		Commands: []*cli.Command{
			{Name: "run", Flags: []cli.Flag{set, &cli.StringFlag{Name: "seed"}, quiet}},
			{Name: "validate", Flags: []cli.Flag{set}},
			{Name: "shell", Flags: []cli.Flag{set, quiet}},
		},
	}
}

func TestFlagsMayFollowArguments(t *testing.T) {
	app := app()
	for _, tc := range []struct{ in, want []string }{
		{[]string{"netjam", "run", "a.yaml", "--seed", "7", "-q"}, []string{"netjam", "run", "--seed", "7", "-q", "a.yaml"}},
		{[]string{"netjam", "--log-level", "debug", "run", "a.yaml", "--set=x=1"}, []string{"netjam", "--log-level", "debug", "run", "--set=x=1", "a.yaml"}},
		{[]string{"netjam", "validate", "a.yaml", "--set", "k=v", "b.yaml"}, []string{"netjam", "validate", "--set", "k=v", "a.yaml", "b.yaml"}},
		{[]string{"netjam", "run", "--", "-odd.yaml"}, []string{"netjam", "run", "--", "-odd.yaml"}},
		{[]string{"netjam", "nosuch", "x", "--y"}, []string{"netjam", "nosuch", "x", "--y"}},
		// A shell's command keeps its arguments; the scenario file is not the command.
		{[]string{"netjam", "shell", "a.yaml", "-q", "--", "ping", "-c", "1"}, []string{"netjam", "shell", "-q", "a.yaml", "--", "ping", "-c", "1"}},
		{[]string{"netjam", "shell", "a.yaml", "ping", "h"}, []string{"netjam", "shell", "a.yaml", "ping", "h"}},
		{[]string{"netjam", "run", "a.yaml", "--log-level", "warn", "-q", "--log-format=json"}, []string{"netjam", "--log-level", "warn", "--log-format=json", "run", "-q", "a.yaml"}},
	} {
		got := FlagsFirst(app, tc.in)
		if strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("FlagsFirst(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestCheckShell: a flag after a shell's command named without "--" is
// refused with the command line that has it; with "--", or none, it is
// the command's.
func TestCheckShell(t *testing.T) {
	app := app()
	err := CheckShell(app, []string{"netjam", "shell", "-q", "ping", "-c", "1", "h"})
	if want := "shell: -c follows the command ping: netjam's flags go before \"--\" and the command after it:\n  netjam shell -q -- ping -c 1 h"; err == nil || err.Error() != want {
		t.Errorf("got %v, want %q", err, want)
	}
	for _, args := range [][]string{
		{"netjam", "shell", "--set", "x=1", "--", "ping", "-c", "1"},
		{"netjam", "shell", "a.yaml", "ping", "h"},
		{"netjam", "run", "a.yaml", "-q"},
	} {
		if err := CheckShell(app, args); err != nil {
			t.Errorf("%q: %v", args, err)
		}
	}
}

// TestUnknownFlag: a flag mistyped is named with the nearest one.
func TestUnknownFlag(t *testing.T) {
	run := app().Command("run")
	msg, ok := UnknownFlag(errorString("flag provided but not defined: -sed"), "netjam run", run.Flags, nil)
	if want := "--sed: not a flag of netjam run; did you mean --seed? (netjam run --help lists them)"; !ok || msg != want {
		t.Errorf("got %q, %v; want %q", msg, ok, want)
	}
	if _, ok := UnknownFlag(errorString("invalid value"), "netjam run", run.Flags, nil); ok {
		t.Error("another usage error taken for an unknown flag")
	}
}

// TestUnknownCommand: a command mistyped is named with the nearest one,
// and the commands listed.
func TestUnknownCommand(t *testing.T) {
	if got, want := UnknownCommand(app(), "rn"), `"rn" is not a command; did you mean "run"? (the commands are run, validate, shell; netjam --help says more)`; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestShellArgs: a shell's scenario file and command, with "--" or
// without; no command, or two files, refused.
func TestShellArgs(t *testing.T) {
	for _, c := range []struct {
		args    []string
		file    string
		command string
	}{
		{[]string{"ping", "-c", "1"}, "", "ping -c 1"},
		{[]string{"a.yaml", "--", "ping"}, "a.yaml", "ping"},
		{[]string{"a.yml", "ping", "h"}, "a.yml", "ping h"},
		{[]string{"--", "a.yaml"}, "", "a.yaml"},
	} {
		file, command, err := ShellArgs(c.args)
		if err != nil || file != c.file || strings.Join(command, " ") != c.command {
			t.Errorf("%q: %q, %q, %v", c.args, file, command, err)
		}
	}
	for _, args := range [][]string{nil, {"a.yaml"}, {"a.yaml", "b.yaml", "--", "ping"}} {
		if _, _, err := ShellArgs(args); err == nil {
			t.Errorf("%q: no error", args)
		}
	}
}

type errorString string

func (e errorString) Error() string { return string(e) }
