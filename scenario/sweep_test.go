package scenario

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func TestSweep(t *testing.T) {
	src := `link: {delay: 5ms}
flows: [{name: bulk, type: tcp, size: 1MB}]
sweep:
  grid:
    link.loss: [0%, 2%]
    link.queue:
      - {limit: 100}
      - discipline: fq_codel
    flows.bulk.cc: [reno, cubic]
  seeds: 2
variants:
  - name: a
  - name: b
    set: {link.delay: 50ms}
`
	p, err := Parse("x.yaml", []byte(src), Options{Sets: []string{"duration=3s"}})
	if err != nil {
		t.Fatal(err)
	}
	s := p.Sweep
	want := []Axis{
		{Key: "link.loss", Values: []string{"0%", "2%"}},
		{Key: "link.queue", Values: []string{"{limit: 100}", "{discipline: fq_codel}"}},
		{Key: "flows.bulk.cc", Values: []string{"reno", "cubic"}},
	}
	if !reflect.DeepEqual(s.Axes, want) || !reflect.DeepEqual(s.Seeds, []uint64{1, 2}) || s.Len() != 16 {
		t.Fatalf("sweep %+v, want axes %+v, seeds [1 2], 16 points", s, want)
	}
	if len(p.Runs) != 2 || p.Runs[0].Uplink.Loss.P != 0 {
		t.Errorf("the plan's runs are the file as written: %d runs", len(p.Runs))
	}
	// The seed varies fastest, then the last axis.
	if pt := s.Point(0); !reflect.DeepEqual(pt, Point{0, []string{"0%", "{limit: 100}", "reno"}, 1}) {
		t.Errorf("point 0: %+v", pt)
	}
	pt := s.Point(11) // 11 = ((1*2 + 0)*2 + 1)*2 + 1
	if !reflect.DeepEqual(pt, Point{11, []string{"2%", "{limit: 100}", "cubic"}, 2}) {
		t.Errorf("point 11: %+v", pt)
	}
	at, err := p.At(s, pt)
	if err != nil {
		t.Fatal(err)
	}
	if len(at.Runs) != 2 {
		t.Fatalf("point 11: %d runs, want one per variant", len(at.Runs))
	}
	for _, r := range at.Runs {
		if r.Uplink.Loss.P != 0.02 || r.Uplink.Queue.LimitPackets != 100 || r.Flows[0].CC != "cubic" || r.Seed != 2 || r.Duration.Seconds() != 3 {
			t.Errorf("point 11, variant %s: loss %v, queue %v, cc %s, seed %d, duration %v", r.Variant, r.Uplink.Loss.P, r.Uplink.Queue.LimitPackets, r.Flows[0].CC, r.Seed, r.Duration)
		}
		if y, _ := r.YAML(); strings.Contains(string(y), "sweep") {
			t.Errorf("a point's resolved scenario still has the sweep:\n%s", y)
		}
	}
	if at.Runs[1].Uplink.Delay.Time.Milliseconds() != 50 {
		t.Errorf("variant b's delay: %v", at.Runs[1].Uplink.Delay.Time)
	}
}

func TestSweepErrors(t *testing.T) {
	src := `sweep:
  grid:
    link.loss: [0%, 150%, 0%]
    seed: [1, 2]
    link.delay: 5ms
    variants.x: [1]
  seeds: 0
  every: 1
`
	want := `x.yaml:3: sweep.grid.link.loss: "0%" is listed twice
x.yaml:4: sweep.grid.seed: seeds are swept with sweep.seeds
x.yaml:5: sweep.grid.link.delay: expected a non-empty list of values, got the string "5ms"
x.yaml:6: sweep.grid.variants.x: variants cannot be overridden
x.yaml:7: sweep.seeds: 0 is out of range (expected 1 to 10000)
x.yaml:8: sweep.every: unknown key`
	if _, err := parse(src); err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("Parse error:\n%v\nwant:\n%s", err, want)
	}
	// A value valid as YAML but not for its key: the point says so.
	p, err := Parse("x.yaml", []byte("sweep: {grid: {link.loss: [1%, 150%]}}\n"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.At(p.Sweep, p.Sweep.Point(1))
	if err == nil || err.Error() != "sweep point link.loss=150%: link.loss: 150% is out of range (expected 0% to 100%)" {
		t.Errorf("point 2: %v", err)
	}
	axes, err := ParseGrid([]string{"link.queue={limit: 10},{limit: 20}", "link.loss=1%,2%"})
	if err != nil || !reflect.DeepEqual(axes, []Axis{{"link.queue", []string{"{limit: 10}", "{limit: 20}"}}, {"link.loss", []string{"1%", "2%"}}}) {
		t.Errorf("ParseGrid: %+v, %v", axes, err)
	}
	if _, err := ParseGrid([]string{"link.loss", "name=a,b"}); err == nil || err.Error() != `--grid: "link.loss" is not KEY=V1,V2,...
--grid: name: all runs of a sweep share the scenario's name` {
		t.Errorf("ParseGrid errors: %v", err)
	}
}

// BenchmarkCheckSweep checks a sweep of 100 x 100 points, per point. Each
// point parsed the whole file and decoded the whole grid again until
// session 13 (the time grew as the square of the grid: a 1000 x 100 grid
// took 175 s to check, 4.4 s after).
//
//	go test -run XXX -bench CheckSweep ./scenario/
func BenchmarkCheckSweep(b *testing.B) {
	var loss, delay []string
	for i := range 100 {
		loss = append(loss, fmt.Sprintf("%d%%", i))
		delay = append(delay, fmt.Sprintf("%dms", i+1))
	}
	src := fmt.Sprintf("link: {delay: 2ms}\nflows: [{name: p, type: udp, interval: 1ms, count: 10}]\nsweep:\n  grid:\n    link.loss: [%s]\n    link.delay: [%s]\n",
		strings.Join(loss, ", "), strings.Join(delay, ", "))
	p, err := Parse("x.yaml", []byte(src), Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if err := p.CheckSweep(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*p.Sweep.Len()), "ns/point")
}
