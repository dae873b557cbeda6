// Package cliargs reads netjam's command line as people type it, where
// urfave/cli alone would not: flags after the arguments (netjam run
// my.yaml --seed 7), global flags after the command, netjam shell's
// command and its own flags left alone after netjam's, and a mistyped
// flag or command named with the nearest one. urfave/cli, like package flag, stops
// at the first argument and takes global flags only before the command.
package cliargs

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/netjam/netjam/scenario"
)

// FlagsFirst moves a command's flags in front of its arguments, and
// global flags given after the command in front of the command, so that
// urfave/cli reads them all. Everything after "--" stays where it is, and
// so does netjam shell's command with its arguments (CheckShell has made
// sure no flag follows one named without "--").
func FlagsFirst(app *cli.App, args []string) []string {
	i := commandIndex(app, args)
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

// commandIndex is the index in args of the command: the first token
// after the global flags (len(args) when there is none).
func commandIndex(app *cli.App, args []string) int {
	i := 1
	for i < len(args) && strings.HasPrefix(args[i], "-") {
		if takesValue(app.Flags, args[i]) {
			i++
		}
		i++
	}
	return i
}

// CheckShell catches a missing "--" in netjam shell: a flag after the
// command's name (netjam shell ping -c 1 10.99.0.2) would otherwise be
// taken for one of netjam's and refused with "flag provided but not
// defined", or, worse, be netjam's own flag with the same name. The
// error says the command line with the "--".
func CheckShell(app *cli.App, args []string) error {
	i := commandIndex(app, args)
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
					return fmt.Errorf("shell: %s follows the command %s: netjam's flags go before \"--\" and the command after it:\n  %s",
						b, a, strings.Join(fixed, " "))
				}
			}
			return nil
		default:
			positional = append(positional, a)
		}
	}
	return nil
}

// isFlag reports whether token (-x, --name or --name=value) names one of
// flags.
func isFlag(flags []cli.Flag, token string) bool {
	name, _, _ := strings.Cut(strings.TrimLeft(token, "-"), "=")
	for _, f := range flags {
		if slices.Contains(f.Names(), name) {
			return true
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
		if slices.Contains(f.Names(), name) {
			d, ok := f.(cli.DocGenerationFlag)
			return ok && d.TakesValue()
		}
	}
	return false
}

// ShellArgs splits netjam shell's arguments, as urfave/cli leaves them,
// into the scenario file ("" for none) and the command.
func ShellArgs(args []string) (file string, command []string, err error) {
	// The flag parser drops a "--" that directly follows the flags (no
	// scenario file) and keeps one after the file.
	dash := slices.Index(args, "--")
	var files []string
	switch {
	case dash >= 0:
		files, command = args[:dash], args[dash+1:]
	case len(args) > 0 && IsScenarioFile(args[0]):
		// netjam shell my.yaml, or netjam shell my.yaml ping 10.99.0.2:
		// the file is the scenario, never the command.
		files, command = args[:1], args[1:]
	default:
		command = args
	}
	if len(command) == 0 {
		return "", nil, errors.New("shell needs a command after --: netjam shell [SCENARIO.yaml] -- COMMAND [ARGS...]")
	}
	if len(files) > 1 {
		return "", nil, fmt.Errorf("shell takes at most one scenario file before --, got %d", len(files))
	}
	return strings.Join(files, ""), command, nil // one file, or none
}

// IsScenarioFile reports whether arg names a scenario file by its
// extension, as the first argument of netjam shell may.
func IsScenarioFile(arg string) bool {
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
	return len(positional) > 0 || !IsScenarioFile(arg)
}

// undefinedFlag is the flag package's error for a flag it does not know.
var undefinedFlag = regexp.MustCompile(`^flag provided but not defined: -+(.+)$`)

// UnknownFlag says, when err is the flag package's error for a flag
// where (netjam, netjam run) does not know, which flag it is, as given,
// with the nearest of the flags there (flags, and global ones, given
// after the command): --sed: not a flag of netjam run; did you mean
// --seed? ok is false for any other error.
func UnknownFlag(err error, where string, flags, global []cli.Flag) (msg string, ok bool) {
	m := undefinedFlag.FindStringSubmatch(err.Error())
	if m == nil {
		return "", false
	}
	var names []string
	for _, f := range append(slices.Clone(flags), global...) {
		names = append(names, f.Names()...)
	}
	names = append(names, "help")
	msg = fmt.Sprintf("%s: not a flag of %s", dashes(m[1]), where)
	if s := scenario.Suggest(m[1], names); s != "" {
		msg += fmt.Sprintf("; did you mean %s?", dashes(s))
	}
	return msg + " (" + where + " --help lists them)", true
}

// dashes is a flag's name as typed: -o, --seed.
func dashes(name string) string {
	if len([]rune(name)) == 1 {
		return "-" + name
	}
	return "--" + name
}

// UnknownCommand says that given is not a command of app, with the
// nearest of them, and which they are.
func UnknownCommand(app *cli.App, given string) string {
	var names []string
	for _, cmd := range app.VisibleCommands() {
		names = append(names, cmd.Name)
	}
	msg := fmt.Sprintf("%q is not a command", given)
	if s := scenario.Suggest(given, names); s != "" {
		msg += fmt.Sprintf("; did you mean %q?", s)
	}
	return fmt.Sprintf("%s (the commands are %s; netjam --help says more)", msg, strings.Join(names, ", "))
}
