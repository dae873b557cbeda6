package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/urfave/cli/v2"
	"go.uber.org/zap"

	"github.com/netjam/netjam/confine"
	"github.com/netjam/netjam/emulator"
	"github.com/netjam/netjam/internal/logging"
	"github.com/netjam/netjam/outdir"
)

// A command's output folder, opened once for the user who ran sudo, and
// its log, which netjam.log in the folder keeps.

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

// newLogger is logging.New whose logger also takes gVisor's own lines
// (martian packets from the path), which would otherwise go to standard
// error, into a shell's terminal.
func newLogger(level, format string, stderr, logFile io.Writer) (*zap.Logger, error) {
	log, err := logging.New(level, format, stderr, logFile)
	if err == nil {
		emulator.RouteLogs(log)
	}
	return log, err
}

// commandLog is the logger of run, shell and sweep: at --log-level, or,
// when quiet and none is given, warnings and errors only (--quiet; a
// shell's terminal is its command's; a sweep's console shows its
// progress); with open (nil for none) also into netjam.log, the file open
// makes in the output folder. closeLog flushes it and closes the file.
func commandLog(c *cli.Context, quiet bool, open func(name string) (*os.File, error)) (log *zap.Logger, closeLog func(), err error) {
	level := c.String("log-level")
	if quiet && !c.IsSet("log-level") {
		level = "warn"
	}
	log, closeLog, err = logging.Open(level, c.String("log-format"), c.App.ErrWriter, open)
	var fe *logging.FileError
	switch {
	case errors.As(err, &fe):
		return nil, nil, cli.Exit(err, exitFailed)
	case err != nil:
		return nil, nil, cli.Exit(err, exitBadUsage)
	}
	emulator.RouteLogs(log)
	return log, closeLog, nil
}
