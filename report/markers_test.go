package report

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/netjam/netjam/summary"
)

// TestMarkersOf: a step is a line, a change and its change back a band,
// a ramp's steps one band to its last value.
func TestMarkersOf(t *testing.T) {
	tl := []summary.TimelineEvent{
		{TimeS: 2, Key: "link.uplink.rate", Old: "10Mbps", New: "2Mbps"},
		{TimeS: 3, Key: "link.loss", Old: "", New: "100%"},
		{TimeS: 4, Key: "link.loss", Old: "100%", New: ""},
		{TimeS: 5.01, Key: "link.delay", Old: "20ms", New: "40ms"},
		{TimeS: 5.02, Key: "link.delay", Old: "40ms", New: "60ms"},
		{TimeS: 5.03, Key: "link.delay", Old: "60ms", New: "80ms"},
		{TimeS: 6, Key: "link.loss", Old: "", New: "5%"},
	}
	want := []marker{
		{2, 2, "link.uplink.rate=2Mbps"},
		{3, 4, "link.loss=100%"},
		{6, 6, "link.loss=5%"},
		{5.01, 5.03, "link.delay → 80ms"},
	}
	if got := markersOf(tl); !slices.Equal(got, want) {
		t.Errorf("markers %v, want %v", got, want)
	}
}

// TestPlotDrawsTimeline: the panels over time carry the run's changes.
func TestPlotDrawsTimeline(t *testing.T) {
	dir := t.TempDir()
	writeSynth(t, dir, synthRun{tcp: true})
	p := filepath.Join(dir, SummaryFile)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var sum map[string]any
	if err := json.Unmarshal(b, &sum); err != nil {
		t.Fatal(err)
	}
	sum["runs"].([]any)[0].(map[string]any)["timeline"] = []map[string]any{
		{"time_s": 3, "key": "link.loss", "old": "", "new": "100%"},
		{"time_s": 4, "key": "link.loss", "old": "100%", "new": ""},
	}
	b, _ = json.Marshal(sum)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Plot(openDir(t, dir)); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"throughput.svg", "rtt.svg", "queue-uplink.svg"} {
		if texts := svgTexts(t, dir, f); !slices.Contains(texts, "link.loss=100%") {
			t.Errorf("%s has no marker: %q", f, texts)
		}
	}
}
