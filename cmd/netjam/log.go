package main

import (
	"fmt"
	"io"

	"github.com/netjam/netjam/emulator"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

func parseLevel(s string) (zapcore.Level, error) {
	switch s {
	case "debug", "info", "warn", "error":
		var l zapcore.Level
		err := l.UnmarshalText([]byte(s))
		return l, err
	}
	return 0, fmt.Errorf("--log-level: %q is not a log level (expected debug, info, warn or error)", s)
}

// newLogger builds the run's logger: console or JSON lines on stderr at
// the chosen level, and, when logFile is not nil, JSON lines into it too
// (netjam.log of a run) at that level or info, whichever says more, so a
// saved run has its full log whatever the terminal showed.
func newLogger(level, format string, stderr, logFile io.Writer) (*zap.Logger, error) {
	lvl, err := parseLevel(level)
	if err != nil {
		return nil, err
	}
	encCfg := zap.NewProductionEncoderConfig()
	encCfg.EncodeTime = zapcore.ISO8601TimeEncoder
	encCfg.EncodeDuration = zapcore.StringDurationEncoder
	var enc zapcore.Encoder
	if format == "json" {
		enc = zapcore.NewJSONEncoder(encCfg)
	} else {
		encCfg.EncodeLevel = zapcore.CapitalLevelEncoder
		enc = zapcore.NewConsoleEncoder(encCfg)
	}
	cores := []zapcore.Core{zapcore.NewCore(enc, zapcore.AddSync(stderr), lvl)}
	if logFile != nil {
		// The file has at least the info level: --quiet, or a shell's
		// default of warnings (its terminal is the command's), quiet the
		// terminal, not the record.
		cores = append(cores, zapcore.NewCore(zapcore.NewJSONEncoder(encCfg), zapcore.AddSync(logFile), min(lvl, zapcore.InfoLevel)))
	}
	log := zap.New(zapcore.NewTee(cores...))
	// gVisor prints its own lines (martian packets from the path) on
	// standard error, into a shell's terminal, unless routed here.
	emulator.RouteLogs(log)
	return log, nil
}
