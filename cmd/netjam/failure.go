package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/netjam/netjam/emulator"
	"github.com/urfave/cli/v2"
)

// failure is a run's error as netjam's last words: a missing privilege in
// plain words with its advice, once however many runs it stopped (each
// run's table line has said which), after any other error as it is.
func failure(err error) error {
	var others []string
	var privs []*emulator.PrivilegeError
	for _, e := range leaves(err) {
		var pe *emulator.PrivilegeError
		if errors.As(e, &pe) {
			privs = append(privs, pe)
		} else {
			others = append(others, e.Error())
		}
	}
	if len(privs) == 0 {
		return cli.Exit(err, exitCodeOf(err))
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
	code := exitBadUsage
	if len(others) > 0 {
		code = exitFailed
	}
	return cli.Exit(b.String(), code)
}

// leaves splits the errors.Join of the runs' errors into one error per
// run.
func leaves(err error) []error {
	if _, pe := err.(*emulator.PrivilegeError); pe {
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
