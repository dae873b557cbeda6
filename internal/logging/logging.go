// Package logging builds netjam's logger: console or JSON lines on
// standard error at the level asked for (--log-level, --log-format), and
// a run's netjam.log, which has at least the info level whatever the
// terminal shows, so that a saved run has its full log.
package logging

import (
	"fmt"
	"io"
	"os"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// ParseLevel is the level --log-level names: debug, info, warn or error.
func ParseLevel(s string) (zapcore.Level, error) {
	switch s {
	case "debug", "info", "warn", "error":
		var l zapcore.Level
		err := l.UnmarshalText([]byte(s))
		return l, err
	}
	return 0, fmt.Errorf("--log-level: %q is not a log level (expected debug, info, warn or error)", s)
}

// New builds the run's logger: console or JSON lines on stderr at
// the chosen level, and, when logFile is not nil, JSON lines into it too
// (netjam.log of a run) at that level or info, whichever says more, so a
// saved run has its full log whatever the terminal showed.
func New(level, format string, stderr, logFile io.Writer) (*zap.Logger, error) {
	lvl, err := ParseLevel(level)
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
	return zap.New(zapcore.NewTee(cores...)), nil
}

// Open is New whose log also goes into netjam.log, the file open makes
// (in a run's output folder; open nil: no file). close flushes the log
// and closes the file. An error of open is returned as *FileError.
func Open(level, format string, stderr io.Writer, open func(name string) (*os.File, error)) (log *zap.Logger, close func(), err error) {
	var w io.Writer
	var file *os.File
	if open != nil {
		if file, err = open("netjam.log"); err != nil {
			return nil, nil, &FileError{err}
		}
		w = file
	}
	if log, err = New(level, format, stderr, w); err != nil {
		if file != nil {
			file.Close()
		}
		return nil, nil, err
	}
	return log, func() {
		log.Sync() //nolint:errcheck // nothing to do about a failed flush at exit
		if file != nil {
			file.Close()
		}
	}, nil
}

// FileError is Open's error making netjam.log.
type FileError struct{ Err error }

func (e *FileError) Error() string { return fmt.Sprintf("output folder: %v", e.Err) }

func (e *FileError) Unwrap() error { return e.Err }
