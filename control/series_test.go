package control

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/netjam/netjam/emulator"
)

// checkBudget fails t unless s holds what its budget allows: the bytes it
// counts within the budget, the points within maxPoints, and what it
// counts being what it allocated (every array's capacity).
func checkBudget(t *testing.T, s *seriesStore, when string) {
	t.Helper()
	if b := s.bytes(); b > s.budget || len(s.points) > s.maxPoints {
		t.Fatalf("%s: %d bytes (budget %d), %d points (at most %d)", when, b, s.budget, len(s.points), s.maxPoints)
	}
	allocated := s.names + cap(s.points)*pointBytes
	for _, c := range s.cols {
		allocated += cap(c.cells) * cellBytes
		if len(c.cells) != len(s.points) {
			t.Fatalf("%s: series %s|%s has %d cells for %d points", when, c.kind, c.name, len(c.cells), len(s.points))
		}
	}
	if allocated != s.bytes() {
		t.Fatalf("%s: %d bytes allocated, %d counted", when, allocated, s.bytes())
	}
}

// TestSeriesStoreBoundedForALongRun feeds the store 200000 samples (5 h
// 33 min at 100 ms) of 24 series, more appearing over the run:
// memory stays within the budget and maxSeriesPoints throughout, its
// points halve as it fills, and every sample is still counted in them.
// Then 600 series at once: the store keeps maxSeries, within its budget,
// and counts the rows it drops.
func TestSeriesStoreBoundedForALongRun(t *testing.T) {
	s := newSeriesStore()
	var names []string
	for k := range 24 {
		names = append(names, fmt.Sprintf("flow-%d", k))
	}
	rows := make([]emulator.SeriesRow, 0, 24)
	const samples = 200000
	for i := range samples {
		rows = rows[:0]
		for k, name := range names {
			if k >= 12 && i < k*1000 { // series appearing later
				continue
			}
			rows = append(rows, emulator.SeriesRow{Kind: "throughput_bps", Name: name, Value: float64(i % 1000)})
		}
		s.add(float64(i)/10, rows)
		if i%4096 == 0 || i == samples-1 {
			checkBudget(t, s, fmt.Sprintf("after %d samples", i+1))
		}
	}
	var n uint64
	for _, p := range s.points {
		n += p.N
	}
	if n != samples || s.samples != samples || s.rowsDropped != 0 {
		t.Errorf("the points hold %d samples, the store counted %d (dropped %d rows), want %d", n, s.samples, s.rowsDropped, samples)
	}
	// Each point holds 2^level samples but the last: the run at one
	// resolution, from its start (0 s) to its last sample.
	if s.points[0].From != 0 || s.points[len(s.points)-1].To != float64(samples-1)/10 || s.halvings != uint64(s.level) {
		t.Errorf("points from %v s to %v s, level %d after %d halvings", s.points[0].From, s.points[len(s.points)-1].To, s.level, s.halvings)
	}
	if len(s.points) < s.maxPoints/2 {
		t.Errorf("%d points after %d halvings: the store halves before it is full", len(s.points), s.halvings)
	}
	t.Logf("%d samples: %d points of up to %d samples, %d bytes of %d", samples, len(s.points), 1<<s.level, s.bytes(), s.budget)

	// Many series: each takes its share of every point.
	wide := newSeriesStore()
	many := make([]emulator.SeriesRow, 600)
	for i := range many {
		many[i] = emulator.SeriesRow{Kind: "link_bps", Name: fmt.Sprintf("link-%d.uplink", i), Value: 1}
	}
	for i := range 3000 {
		wide.add(float64(i), many)
		if i%100 == 0 {
			checkBudget(t, wide, fmt.Sprintf("600 series, after %d samples", i+1))
		}
	}
	checkBudget(t, wide, "600 series")
	if len(wide.cols) != maxSeries || wide.rowsDropped != 3000*(600-maxSeries) || wide.halvings == 0 {
		t.Errorf("600 series: %d kept (want %d), %d rows dropped (want %d), %d halvings", len(wide.cols), maxSeries, wide.rowsDropped, 3000*(600-maxSeries), wide.halvings)
	}
}

// TestSeriesStoreAggregates: each point's min, max and mean are those of
// the samples it merges, and a series with no sample in a point is a gap
// there (null), after several halvings; a value not a number is
// dropped and counted, not averaged in.
func TestSeriesStoreAggregates(t *testing.T) {
	s := newSeriesStore()
	s.maxPoints = 16 // halve often
	// Sample i at time i: "ramp" is i; "even" only on even samples,
	// 2i; "late" from sample 700 on, its value 1 or 3.
	const samples = 1000
	for i := range samples {
		rows := []emulator.SeriesRow{{Kind: "k", Name: "ramp", Value: float64(i)}}
		if i%2 == 0 {
			rows = append(rows, emulator.SeriesRow{Kind: "k", Name: "even", Value: float64(2 * i)})
		}
		if i >= 700 {
			rows = append(rows, emulator.SeriesRow{Kind: "k", Name: "late", Value: float64(1 + 2*(i%2))})
		}
		if i == 500 {
			rows = append(rows, emulator.SeriesRow{Kind: "k", Name: "ramp", Value: math.NaN()})
		}
		s.add(float64(i), rows)
	}
	snap := s.snapshot()
	if snap.Level != 6 || snap.RowsDropped != 1 || len(snap.FromS) > 16 {
		t.Fatalf("level %d, %d points, %d rows dropped; want level 6 (1000 samples in at most 16 points), the NaN dropped", snap.Level, len(snap.FromS), snap.RowsDropped)
	}
	series := map[string]Series{}
	for _, sr := range snap.Series {
		series[sr.Name] = sr
	}
	for p := range snap.FromS {
		from, to := int(snap.FromS[p]), int(snap.ToS[p])
		if want := 64; p < len(snap.FromS)-1 && to-from+1 != want || snap.N[p] != uint64(to-from+1) {
			t.Errorf("point %d: samples %d to %d, n %d; want 64 a point but the last", p, from, to, snap.N[p])
		}
		// ramp: the mean of from..to, its least from, its greatest to.
		if r := series["ramp"]; r.Min[p] != float64(from) || r.Max[p] != float64(to) || math.Abs(r.Mean[p]-float64(from+to)/2) > 1e-9 {
			t.Errorf("point %d (%d..%d): ramp min %v max %v mean %v", p, from, to, r.Min[p], r.Max[p], r.Mean[p])
		}
		// even: the mean of 2i over the even i of from..to.
		var sum, n float64
		for i := from; i <= to; i++ {
			if i%2 == 0 {
				sum, n = sum+float64(2*i), n+1
			}
		}
		if e := series["even"]; math.Abs(e.Mean[p]-sum/n) > 1e-9 {
			t.Errorf("point %d: even mean %v, want %v", p, e.Mean[p], sum/n)
		}
		l := series["late"]
		switch {
		case to < 700:
			if !math.IsNaN(l.Mean[p]) || !math.IsNaN(l.Min[p]) || !math.IsNaN(l.Max[p]) {
				t.Errorf("point %d (%d..%d), before late's first sample: %v %v %v, want a gap", p, from, to, l.Mean[p], l.Min[p], l.Max[p])
			}
		case from >= 700:
			if l.Min[p] != 1 || l.Max[p] != 3 || math.Abs(l.Mean[p]-2) > 1e-9 {
				t.Errorf("point %d: late min %v max %v mean %v, want 1, 3, 2", p, l.Min[p], l.Max[p], l.Mean[p])
			}
		}
	}
	if b, err := json.Marshal(snap); err != nil || !strings.Contains(string(b), `"mean":[null`) {
		t.Errorf("the snapshot's JSON: %v (a gap is null)", err)
	}
}
