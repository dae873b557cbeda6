package control

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/netjam/netjam/summary"
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
	rows := make([]summary.SeriesRow, 0, 24)
	const samples = 200000
	for i := range samples {
		rows = rows[:0]
		for k, name := range names {
			if k >= 12 && i < k*1000 { // series appearing later
				continue
			}
			rows = append(rows, summary.SeriesRow{Kind: "throughput_bps", Name: name, Value: float64(i % 1000)})
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
	many := make([]summary.SeriesRow, 600)
	for i := range many {
		many[i] = summary.SeriesRow{Kind: "link_bps", Name: fmt.Sprintf("link-%d.uplink", i), Value: 1}
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
		rows := []summary.SeriesRow{{Kind: "k", Name: "ramp", Value: float64(i)}}
		if i%2 == 0 {
			rows = append(rows, summary.SeriesRow{Kind: "k", Name: "even", Value: float64(2 * i)})
		}
		if i >= 700 {
			rows = append(rows, summary.SeriesRow{Kind: "k", Name: "late", Value: float64(1 + 2*(i%2))})
		}
		if i == 500 {
			rows = append(rows, summary.SeriesRow{Kind: "k", Name: "ramp", Value: math.NaN()})
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

// TestSeriesTimelineSummarizesRamps: three or more changes of the same
// keys, each within a ramp's step of the one before, are one entry (its
// first old, its last new); a refused change, another key or a longer
// step is not; past maxTimelineEntries the oldest of the later half
// are dropped and counted.
func TestSeriesTimelineSummarizesRamps(t *testing.T) {
	var l changeLog
	change := func(at float64, key, old, new, err string) {
		l.add([]summary.TimelineEvent{{TimeS: at, Key: key, Old: old, New: new, Error: err}})
	}
	change(0.5, "link.loss", "", "1%", "")
	for i := range 100 { // a ramp of 1 s: 100 steps of 10 ms
		change(1+float64(i)*0.01, "link.delay", fmt.Sprint(i, "ms"), fmt.Sprint(i+1, "ms"), "")
	}
	change(2.0, "link.delay", "100ms", "5ms", "")        // 10 ms after the last step, but...
	change(2.005, "link.delay", "5ms", "6ms", "refused") // refused: its own entry
	change(2.01, "link.delay", "5ms", "7ms", "")         // after a refused one
	change(3, "link.rate", "", "1Mbps", "")              // single steps, far apart
	change(3.5, "link.rate", "1Mbps", "2Mbps", "")
	var got []string
	for _, e := range l.entries {
		got = append(got, fmt.Sprintf("%g-%g x%d %s %s>%s", e.TimeS, e.ToS, e.Steps, e.Changes[0].Key, e.Changes[0].Old, e.Changes[0].New))
	}
	want := []string{
		"0.5-0.5 x1 link.loss >1%",
		"1-2 x101 link.delay 0ms>5ms",
		"2.005-2.005 x1 link.delay 5ms>6ms",
		"2.01-2.01 x1 link.delay 5ms>7ms",
		"3-3 x1 link.rate >1Mbps",
		"3.5-3.5 x1 link.rate 1Mbps>2Mbps",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") || l.taken != 106 {
		t.Errorf("entries (of %d changes):\n%s\nwant\n%s", l.taken, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	var b changeLog
	for i := range maxTimelineEntries + 10 {
		b.add([]summary.TimelineEvent{{TimeS: float64(i), Key: "link.loss", New: "1%"}})
	}
	half := maxTimelineEntries / 2
	if len(b.entries) != maxTimelineEntries || b.omitted != 10 || b.omittedFrom != float64(half) || b.omittedTo != float64(half+9) ||
		b.entries[half-1].TimeS != float64(half-1) || b.entries[half].TimeS != float64(half+10) {
		t.Errorf("past the bound: %d entries, %d omitted from %v to %v", len(b.entries), b.omitted, b.omittedFrom, b.omittedTo)
	}
}

// TestSeriesEndpoint: after a run with a ramp, GET /v1/series has every
// sample of the stream from the run's start, each series' value as the
// sample had it (no halving in a short run), and GET /v1/timeline the
// ramp's 100 changes as one entry; GET /v1/events?after=N continues
// with event N+1; both need the token as every request of the API.
func TestSeriesEndpoint(t *testing.T) {
	tr := startRun(t, `name: series
duration: 3s
sample_interval: 100ms
link: {delay: 5ms}
flows: [{name: probe, type: udp, rate: 1Mbps, packet_size: 1000, duration: 3s}]
timeline:
  - {at: 500ms, ramp: 1s, set: {link.delay: 50ms}}
`)
	stream := tr.events(t)
	tr.wait(t)
	type sample struct {
		t    float64
		rows []summary.SeriesRow
	}
	var samples []sample
	var changes []summary.TimelineEvent
	for e := range stream {
		var ev summary.LiveEvent
		json.Unmarshal([]byte(e.data), &ev)
		switch e.typ {
		case "sample":
			samples = append(samples, sample{ev.TimeS, ev.Rows})
		case "change":
			changes = append(changes, ev.Changes...)
		}
		if e.typ == "end" {
			break
		}
	}
	code, b := tr.do(t, "GET", "/v1/series", "")
	var s SeriesSnapshot
	if err := json.Unmarshal(b, &s); code != 200 || err != nil {
		t.Fatalf("GET /v1/series: %d %v %.200s", code, err, b)
	}
	if s.Level != 0 || s.Samples != uint64(len(samples)) || len(s.ToS) != len(samples) || len(samples) < 25 || s.SampleIntervalS != 0.1 {
		t.Fatalf("GET /v1/series: level %d, %d samples, %d points; the stream had %d samples", s.Level, s.Samples, len(s.ToS), len(samples))
	}
	values := map[string][]float64{}
	for _, sr := range s.Series {
		values[sr.Kind+"|"+sr.Name] = sr.Mean
	}
	for i, smp := range samples {
		if s.FromS[i] != smp.t || s.ToS[i] != smp.t || s.N[i] != 1 {
			t.Fatalf("point %d: %v..%v s (n %d), the sample's time %v s", i, s.FromS[i], s.ToS[i], s.N[i], smp.t)
		}
		for _, r := range smp.rows {
			if got := values[r.Kind+"|"+r.Name]; got == nil || got[i] != r.Value {
				t.Errorf("sample %d (%v s): %s %s is %v, the stream had %v", i, smp.t, r.Kind, r.Name, got, r.Value)
			}
		}
	}

	code, b = tr.do(t, "GET", "/v1/timeline", "")
	var tl TimelineSnapshot
	if err := json.Unmarshal(b, &tl); code != 200 || err != nil {
		t.Fatalf("GET /v1/timeline: %d %v %.200s", code, err, b)
	}
	if len(changes) != 100 || len(tl.Changes) != 1 || tl.ChangesTaken != 100 || tl.Run == nil || tl.EndS == nil || tl.RunSeq != s.RunSeq || tl.Seq != s.Seq {
		t.Fatalf("GET /v1/timeline: %d entries of %d changes (the stream had %d), run %v, end %v, seq %d/%d, run_seq %d/%d",
			len(tl.Changes), tl.ChangesTaken, len(changes), tl.Run != nil, tl.EndS, tl.Seq, s.Seq, tl.RunSeq, s.RunSeq)
	}
	r := tl.Changes[0]
	first, last := changes[0], changes[len(changes)-1]
	if r.Steps != 100 || r.TimeS != first.TimeS || r.ToS != last.TimeS || r.Changes[0].Old != first.Old || r.Changes[0].New != last.New {
		t.Errorf("the ramp's entry: %+v; its first change %+v, its last %+v", r, first, last)
	}

	// The stream after an event.
	ids := func(query string) []string {
		req, _ := http.NewRequest("GET", tr.base+"/v1/events"+query, nil)
		resp, err := tr.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			return []string{strconv.Itoa(resp.StatusCode)}
		}
		var out []string
		timer := time.AfterFunc(2*time.Second, func() { resp.Body.Close() })
		defer timer.Stop()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() && len(out) < 3 {
			if id, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
				out = append(out, id)
			}
		}
		return out
	}
	want := []string{fmt.Sprint(s.Seq - 2), fmt.Sprint(s.Seq - 1), fmt.Sprint(s.Seq)}
	if got := ids(fmt.Sprintf("?after=%d", s.Seq-3)); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("GET /v1/events?after=%d: ids %q, want %q", s.Seq-3, got, want)
	}
	if got := ids("?after=x"); len(got) != 1 || got[0] != "400" {
		t.Errorf("GET /v1/events?after=x: %q, want 400", got)
	}

	// The token.
	ln, err := Listen("127.0.0.1:0", ListenOptions{HasToken: true})
	if err != nil {
		t.Fatal(err)
	}
	srv := Serve(ln, Endpoint{Token: "s3cret"}, func() {})
	defer srv.Close()
	for _, path := range []string{"/v1/series", "/v1/timeline"} {
		for auth, want := range map[string]int{"": 401, "Bearer nope": 401, "Bearer s3cret": 200} {
			req, _ := http.NewRequest("GET", "http://"+ln.Addr().String()+path, nil)
			if auth != "" {
				req.Header.Set("Authorization", auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != want {
				t.Errorf("GET %s with %q: %d, want %d", path, auth, resp.StatusCode, want)
			}
		}
	}
	http.DefaultClient.CloseIdleConnections()
}
