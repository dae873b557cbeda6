package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestProgressEndsAt100 checks that the bar shows the run whole at its
// end, not the last tick's figure (one refresh short of it).
func TestProgressEndsAt100(t *testing.T) {
	var b bytes.Buffer
	p := &progress{w: &b}
	p.Begin("run", time.Hour, nil)
	p.End()
	if !strings.Contains(b.String(), "100%") {
		t.Errorf("the bar never showed 100%%:\n%q", b.String())
	}
}
