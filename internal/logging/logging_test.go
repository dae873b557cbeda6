package logging

import (
	"bytes"
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
