package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/netjam/netjam/confine"
	"github.com/netjam/netjam/emulator"
	"github.com/netjam/netjam/outdir"
)

// resultsOwner is the user netjam writes results for: under sudo, the
// user who ran it, whose rights decide where netjam may write and who gets
// what it makes (package outdir); nil otherwise. A run started again in a
// user namespace of its own (rootless) is that user already.
func resultsOwner() (*outdir.Owner, error) {
	if os.Getenv(emulator.RootlessRunEnv) == "1" {
		return nil, nil
	}
	u, err := confine.InvokingUser(os.Getenv)
	if err != nil || u == nil {
		return nil, err
	}
	o := &outdir.Owner{UID: int(u.UID), GID: int(u.GID)}
	for _, g := range u.Groups {
		o.Groups = append(o.Groups, int(g))
	}
	return o, nil
}

// openOutput makes and opens the output folder path, for the user
// resultsOwner names, and returns it with that user.
func openOutput(path string) (*outdir.Dir, *outdir.Owner, error) {
	owner, err := resultsOwner()
	if err != nil {
		return nil, nil, cli.Exit(err, exitBadUsage)
	}
	d, err := outdir.Make(path, owner)
	if err != nil {
		return nil, nil, outputError(err, owner)
	}
	return d, owner, nil
}

// outputError is the exit for an output folder that could not be opened,
// saying, under sudo, whose rights were missing.
func outputError(err error, owner *outdir.Owner) error {
	msg := fmt.Sprintf("output folder: %v", err)
	if owner != nil && errors.Is(err, fs.ErrPermission) {
		msg += fmt.Sprintf(" (under sudo netjam writes as the user who ran it, uid %d: give a folder that user may write into)", owner.UID)
	}
	return cli.Exit(msg, exitFailed)
}
