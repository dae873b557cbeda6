package logging

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFileHasInfo: the terminal shows the level asked for, the file at
// least info; a level netjam does not know is refused.
func TestFileHasInfo(t *testing.T) {
	var term, file bytes.Buffer
	log, err := New("warn", "console", &term, &file)
	if err != nil {
		t.Fatal(err)
	}
	log.Info("run start")
	log.Warn("slow")
	if strings.Contains(term.String(), "run start") || !strings.Contains(term.String(), "WARN") {
		t.Errorf("terminal: %q", term.String())
	}
	if !strings.Contains(file.String(), `"msg":"run start"`) || !strings.Contains(file.String(), `"msg":"slow"`) {
		t.Errorf("file: %q", file.String())
	}
	if _, err := New("loud", "json", &term, nil); err == nil || err.Error() != `--log-level: "loud" is not a log level (expected debug, info, warn or error)` {
		t.Errorf("a bad level: %v", err)
	}
}

// TestOpen: a run's log goes into the file open makes too, closed by
// close; a file that cannot be made is a *FileError.
func TestOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "netjam.log")
	log, closeLog, err := Open("warn", "json", io.Discard, func(string) (*os.File, error) { return os.Create(path) })
	if err != nil {
		t.Fatal(err)
	}
	log.Info("run start")
	closeLog()
	if b, _ := os.ReadFile(path); !strings.Contains(string(b), "run start") {
		t.Errorf("netjam.log: %q", b)
	}
	_, _, err = Open("info", "json", io.Discard, func(string) (*os.File, error) { return nil, os.ErrPermission })
	var fe *FileError
	if !errors.As(err, &fe) || err.Error() != "output folder: permission denied" {
		t.Errorf("a file not made: %v", err)
	}
}
