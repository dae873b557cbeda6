package main

import (
	"errors"
	"io"
	"os"

	"github.com/urfave/cli/v2"
	"go.uber.org/zap"

	"github.com/netjam/netjam/emulator"
	"github.com/netjam/netjam/internal/logging"
)

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
