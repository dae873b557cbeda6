package sweep

import (
	"image/png"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestMeanCI(t *testing.T) {
	mean, half := meanCI([]float64{1, 2, 3})
	// Student's t for 2 degrees of freedom at 97.5%: 4.302653; s = 1.
	if mean != 2 || math.Abs(half-4.302653/math.Sqrt(3)) > 1e-5 {
		t.Errorf("meanCI(1, 2, 3) = %v ± %v, want 2 ± %v", mean, half, 4.302653/math.Sqrt(3))
	}
	if _, half := meanCI([]float64{5}); half != 0 {
		t.Errorf("one value: ± %v, want 0", half)
	}
}

func TestXPositions(t *testing.T) {
	if xs, unit, ok := xPositions([]string{"0.5%", "1%", "5%"}); !ok || unit != "%" || xs[2] != 5 {
		t.Errorf("percentages: %v %q %v", xs, unit, ok)
	}
	if xs, _, ok := xPositions([]string{"reno", "cubic"}); ok || xs[1] != 1 {
		t.Errorf("names: %v %v", xs, ok)
	}
	if _, _, ok := xPositions([]string{"10ms", "1s"}); ok {
		t.Error("two units placed on one numeric axis")
	}
}

// TestWriteSweepReport draws a small sweep: a figure per flow figure, as
// PNG and SVG, in sweep.html, with a line per value of the second key and
// the Mathis model beside TCP throughput against loss.
func TestWriteSweepReport(t *testing.T) {
	res := &Result{Plan: Plan{Scenario: "s", Seeds: []uint64{1, 2},
		Axes: []Axis{{Key: "link.loss", Values: []string{"1%", "2%"}}, {Key: "flows.bulk.cc", Values: []string{"reno", "cubic"}}}, Runs: 8}}
	i := 0
	for _, loss := range []string{"1%", "2%"} {
		for _, cc := range []string{"reno", "cubic"} {
			for seed := uint64(1); seed <= 2; seed++ {
				res.Results = append(res.Results, RunResult{
					Run:     Run{Index: i, ID: "r", Params: map[string]string{"link.loss": loss, "flows.bulk.cc": cc}, Seed: seed, Scenario: "s"},
					Figures: map[string]float64{"flows.bulk.throughput_bps": 4e6 + float64(seed)*1e5, "flows.bulk.rtt_ms.p50": 30, "flows.bulk.retransmissions": 10}})
				i++
			}
		}
	}
	res.Columns = []string{"flows.bulk.retransmissions", "flows.bulk.rtt_ms.p50", "flows.bulk.throughput_bps"}
	res.Found = len(res.Results)
	dir := t.TempDir()
	names, err := WriteReport(openDir(t, dir), res, "test")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"sweep.json", "sweep.csv", "sweep-flows.bulk.retransmissions.png", "sweep-flows.bulk.throughput_bps.svg", "sweep.html"}
	for _, w := range want {
		if _, err := os.Stat(filepath.Join(dir, w)); err != nil {
			t.Errorf("%s: %v (wrote %v)", w, err, names)
		}
	}
	f, err := os.Open(filepath.Join(dir, "sweep-flows.bulk.throughput_bps.png"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := png.Decode(f); err != nil {
		t.Errorf("the throughput plot: %v", err)
	}
	svg, _ := os.ReadFile(filepath.Join(dir, "sweep-flows.bulk.throughput_bps.svg"))
	for _, w := range []string{"cc=reno", "cc=cubic", "Mathis", "link.loss (%)"} {
		if !strings.Contains(string(svg), w) {
			t.Errorf("the throughput plot lacks %q", w)
		}
	}
	page, _ := os.ReadFile(filepath.Join(dir, "sweep.html"))
	if n := strings.Count(string(page), "<figure"); n != 3 {
		t.Errorf("sweep.html has %d figures, want 3", n)
	}
}

// TestSweepFigureGaps: a figure only some runs have (a flow bounded by a
// duration completes in few of them) is drawn from those and says so, or,
// left with one point, is not drawn and the page says why; a count's axis
// has whole numbers only.
func TestSweepFigureGaps(t *testing.T) {
	res := &Result{Plan: Plan{Scenario: "s", Seeds: []uint64{1, 2},
		Axes: []Axis{{Key: "link.loss", Values: []string{"1%", "2%", "3%"}}}, Runs: 6}}
	for i, loss := range []string{"1%", "1%", "2%", "2%", "3%", "3%"} {
		f := map[string]float64{"flows.bulk.throughput_bps": 4e6, "flows.bulk.retransmissions": float64(i / 2 % 2)}
		if i == 0 {
			f["flows.bulk.completion_s"] = 9.5 // the one run whose flow completed
		}
		res.Results = append(res.Results, RunResult{
			Run:     Run{Index: i, ID: "r", Params: map[string]string{"link.loss": loss}, Seed: uint64(1 + i%2), Scenario: "s"},
			Figures: f})
	}
	res.Columns = []string{"flows.bulk.completion_s", "flows.bulk.retransmissions", "flows.bulk.throughput_bps"}
	res.Found = len(res.Results)
	dir := t.TempDir()
	if _, err := WriteReport(openDir(t, dir), res, "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "sweep-flows.bulk.completion_s.png")); err == nil {
		t.Error("a completion-time plot of one point is drawn")
	}
	page, _ := os.ReadFile(filepath.Join(dir, "sweep.html"))
	if want := "Not drawn: completion time (s) against link.loss, 1 point(s) to draw; 5 of the 6 runs with flow bulk have no completion time (s): a flow has a completion time only when it completed before the run ended"; !strings.Contains(string(page), want) {
		t.Errorf("sweep.html does not say why the completion time is not drawn:\n%s", page)
	}
	if n := strings.Count(string(page), "<figure"); n != 2 {
		t.Errorf("sweep.html has %d figures, want 2", n)
	}
	svg, _ := os.ReadFile(filepath.Join(dir, "sweep-flows.bulk.retransmissions.svg"))
	labels := regexp.MustCompile(`>([0-9.]+)</text>`).FindAllStringSubmatch(string(svg), -1)
	var ys []string
	for _, l := range labels {
		ys = append(ys, l[1])
		if strings.Contains(l[1], ".") {
			t.Errorf("the retransmissions plot has a tick %s: a count's ticks are whole", l[1])
		}
	}
	if len(ys) == 0 {
		t.Errorf("no tick labels found in the SVG")
	}
}
