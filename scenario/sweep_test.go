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

// TestSweepCap: a sweep of more than MaxSweepRuns runs is refused, its
// runs counted once every source of them is combined (the file's grid and
// seeds, the command line's --grid and --seeds, the variants), without
// overflow. Eight keys of 512 values made 2^72 points, which overflowed to
// "a sweep of 0 runs"; --grid and --seeds, and the variants, were not
// counted at all.
func TestSweepCap(t *testing.T) {
	// list is n values, as --grid takes them: "1ms, 2ms, ...".
	list := func(n int, format string) string {
		var out []string
		for i := range n {
			out = append(out, fmt.Sprintf(format, i+1))
		}
		return strings.Join(out, ", ")
	}
	eightKeys := []string{"link.delay", "link.uplink.delay", "link.downlink.delay", "link.uplink.jitter",
		"link.downlink.jitter", "link.loss", "link.uplink.loss", "link.downlink.loss"}
	eightFile, eightGrid := "sweep:\n  grid:\n", []string(nil)
	for _, k := range eightKeys {
		f := "%dms"
		if strings.HasSuffix(k, "loss") {
			f = "0.%04d"
		}
		eightFile += "    " + k + ": [" + list(512, f) + "]\n"
		eightGrid = append(eightGrid, k+"="+list(512, f))
	}
	const flow = "flows: [{name: p, type: udp, interval: 1ms, count: 10}]\n"
	grid100x100 := "sweep:\n  grid:\n    link.delay: [" + list(100, "%dms") + "]\n    link.loss: [" + list(100, "0.%04d") + "]\n"
	for _, c := range []struct {
		name  string
		src   string
		grid  []string // as --grid gives them
		seeds int      // as --seeds gives them; 0: the file's
		want  string   // "": a valid sweep
	}{
		{name: "eight keys of 512 values", src: flow + eightFile,
			want: "x.yaml:3: sweep: 4722366482869645213696 runs (4722366482869645213696 combinations of 8 keys, times 1 seed), more than 100000"},
		{name: "the variants count", src: flow + "variants: [{name: a}, {name: b}, {name: c}]\n" + grid100x100 + "  seeds: 5\n",
			want: "x.yaml:4: sweep: 150000 runs (10000 combinations of 2 keys, times 5 seeds, times 3 variants), more than 100000"},
		{name: "at the cap", src: flow + grid100x100 + "  seeds: 10\n"},
		{name: "--grid and --seeds", src: flow, grid: []string{"link.delay=" + list(200, "%dms")}, seeds: 1000,
			want: "x.yaml: sweep: 200000 runs (200 values of one key, times 1000 seeds), more than 100000"},
		{name: "--seeds and the file's grid", src: flow + "sweep: {grid: {link.delay: [" + list(20, "%dms") + "]}}\n", seeds: 10000,
			want: "x.yaml: sweep: 200000 runs (20 values of one key, times 10000 seeds), more than 100000"},
		{name: "--grid and --seeds times the variants", src: flow + "variants: [{name: a}, {name: b}]\n", grid: []string{"link.delay=" + list(6, "%dms")}, seeds: 10000,
			want: "x.yaml: sweep: 120000 runs (6 values of one key, times 10000 seeds, times 2 variants), more than 100000"},
		{name: "--grid of eight keys of 512 values", src: flow, grid: eightGrid,
			want: "x.yaml: sweep: 4722366482869645213696 runs (4722366482869645213696 combinations of 8 keys, times 1 seed), more than 100000"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := parse(c.src)
			if err == nil && (c.grid != nil || c.seeds > 0) {
				// As netjam sweep combines them.
				if p.Sweep == nil {
					p.Sweep = &Sweep{Seeds: []uint64{1}}
				}
				axes, err := ParseGrid(c.grid)
				if err != nil {
					t.Fatal(err)
				}
				p.Sweep.Axes = append(p.Sweep.Axes, axes...)
				if c.seeds > 0 {
					if p.Sweep.Seeds, err = SeedList(c.seeds); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err == nil {
				err = p.CheckSweep()
			}
			if got := fmt.Sprint(err); (c.want == "" && err != nil) || (c.want != "" && got != c.want) {
				t.Errorf("got  %s\nwant %s", got, c.want)
			}
		})
	}
}
