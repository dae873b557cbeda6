package main

import (
	"fmt"
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
	var w io.Writer
	var file *os.File
	if open != nil {
		if file, err = open("netjam.log"); err != nil {
			return nil, nil, cli.Exit(fmt.Sprintf("output folder: %v", err), exitFailed)
		}
		w = file
	}
	level := c.String("log-level")
	if quiet && !c.IsSet("log-level") {
		level = "warn"
	}
	if log, err = newLogger(level, c.String("log-format"), c.App.ErrWriter, w); err != nil {
		if file != nil {
			file.Close()
		}
		return nil, nil, cli.Exit(err, exitBadUsage)
	}
	return log, func() {
		log.Sync() //nolint:errcheck // nothing to do about a failed flush at exit
		if file != nil {
			file.Close()
		}
	}, nil
}
