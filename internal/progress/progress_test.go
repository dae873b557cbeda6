package progress

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/netjam/netjam/sweep"
)

// TestProgressEndsAt100 checks that the bar shows the run whole at its
// end, not the last tick's figure (one refresh short of it).
func TestProgressEndsAt100(t *testing.T) {
	var b bytes.Buffer
	p := NewRun(&b)
	p.Begin("run", time.Hour, nil)
	p.End()
	if !strings.Contains(b.String(), "100%") {
		t.Errorf("the bar never showed 100%%:\n%q", b.String())
	}
}

// TestSweepLines: off a terminal, each run of a sweep that ends is a
// line saying how it ended and how long it took.
func TestSweepLines(t *testing.T) {
	var b bytes.Buffer
	ended := SweepLines(&b, 3)
	ended(1, sweep.Run{ID: "loss=1pct,seed=1"}, 1500*time.Millisecond, nil)
	ended(2, sweep.Run{ID: "loss=2pct,seed=1"}, time.Second, errors.New("broken"))
	if want := "[1/3] loss=1pct,seed=1: done in 1.5 s\n[2/3] loss=2pct,seed=1: failed in 1.0 s\n"; b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
	if _, ok := Terminal(&b); ok {
		t.Error("a buffer taken for a terminal")
	}
}
