package sweep

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/netjam/netjam/scenario"
)

// gridYAML is a sweep of 2 x 2 points, 2 seeds and 2 variants: 16 runs.
const gridYAML = `name: grid
duration: 1s
link: {delay: 5ms}
flows: [{name: a, type: udp, interval: 1ms, count: 1}, {name: b, type: udp, interval: 1ms, count: 1}]
sweep:
  grid:
    link.loss: [1%, 2%]
    link.queue: [{limit: 100}, {discipline: fq_codel}]
  seeds: 2
variants:
  - name: near
  - name: far
    set: {link.delay: 50ms}
`

// parse parses src as the file grid.yaml, with sets.
func parse(t *testing.T, src string, sets ...string) *scenario.Plan {
	t.Helper()
	p, err := scenario.Parse("grid.yaml", []byte(src), scenario.Options{Sets: sets})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRuns: a sweep's runs in its order (the seed fastest, then the
// variant, then the last key), each named for its folder from its
// parameters, with the point and variant it runs.
func TestRuns(t *testing.T) {
	runs, err := Runs(parse(t, gridYAML), Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 16 {
		t.Fatalf("%d runs, want 16", len(runs))
	}
	want := []string{
		"loss=1pct,queue=limit_100,variant=near,seed=1",
		"loss=1pct,queue=limit_100,variant=far,seed=1",
		"loss=1pct,queue=limit_100,variant=near,seed=2",
	}
	for i, w := range want {
		if runs[i].ID != w || runs[i].Index != i {
			t.Errorf("run %d: %d %s, want %s", i, runs[i].Index, runs[i].ID, w)
		}
	}
	last := runs[15]
	if last.ID != "loss=2pct,queue=discipline_fq_codel,variant=far,seed=2" || last.Seed != 2 || last.Variant != "far" ||
		last.Params["link.queue"] != "{discipline: fq_codel}" || last.Scenario != "grid" || last.variant != 1 || last.point.Index != 7 {
		t.Errorf("run 15: %+v", last)
	}
}

// TestRunsOverrides: --grid replaces a key's values or adds a key, --seeds
// the seeds; a --set of a swept key, a file without a sweep given no
// --grid, and a point the scenario refuses are errors before anything
// runs.
func TestRunsOverrides(t *testing.T) {
	one := 1
	p := parse(t, gridYAML)
	runs, err := Runs(p, Overrides{Grid: []string{"link.loss=5%", "flows.a.count=1,2"}, Seeds: &one})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 8 || runs[0].ID != "loss=5pct,queue=limit_100,count=1,variant=near,seed=1" {
		t.Errorf("%d runs, the first %s", len(runs), runs[0].ID)
	}
	if len(p.Sweep.Axes) != 3 || !slices.Equal(p.Sweep.Seeds, []uint64{1}) {
		t.Errorf("the plan's sweep is not the sweep as run: %+v", p.Sweep)
	}
	noSweep := "name: x\nduration: 1s\nflows: [{name: a, type: udp, interval: 1ms, count: 1}]\n"
	for _, c := range []struct {
		src  string
		o    Overrides
		want string
	}{
		{gridYAML, Overrides{Sets: []string{"link.loss=3%"}}, "--set link.loss: the key is swept; sweep it over one value with --grid link.loss=3%"},
		{noSweep, Overrides{}, "grid.yaml has no sweep: give it a sweep key or use --grid KEY=V1,V2"},
		{noSweep, Overrides{Grid: []string{"link.loss=1%,150%"}}, "150%"},
		{gridYAML, Overrides{Grid: []string{"seed=1,2"}}, "seeds are swept with sweep.seeds"},
	} {
		if _, err := Runs(parse(t, c.src), c.o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %s", c.o, err, c.want)
		}
	}
	runs, err = Runs(parse(t, noSweep), Overrides{Grid: []string{"link.loss=1%,2%"}})
	if err != nil || len(runs) != 2 || runs[1].ID != "loss=2pct,seed=1" {
		t.Errorf("a sweep of --grid alone: %v, %+v", err, runs)
	}
}

// TestRunNames: keys that end alike are named by more of their key (all
// keys alike, so that the names line up), and
// values that read the same in a folder name are told apart.
func TestRunNames(t *testing.T) {
	src := "name: x\nduration: 1s\nflows: [{name: a, type: tcp, size: 1KB}, {name: b, type: tcp, size: 1KB}]\n"
	runs, err := Runs(parse(t, src), Overrides{Grid: []string{"flows.a.cc=reno,cubic", "flows.b.cc=reno", `link.delay={time: 1ms},{"time": 1ms}`}})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range runs {
		ids = append(ids, r.ID)
	}
	want := []string{
		"a.cc=reno,b.cc=reno,link.delay=time_1ms,seed=1",
		"a.cc=reno,b.cc=reno,link.delay=time_1ms,seed=1,run=1",
		"a.cc=cubic,b.cc=reno,link.delay=time_1ms,seed=1",
		"a.cc=cubic,b.cc=reno,link.delay=time_1ms,seed=1,run=3",
	}
	if !slices.Equal(ids, want) {
		t.Errorf("names:\n%s\nwant\n%s", strings.Join(ids, "\n"), strings.Join(want, "\n"))
	}
}

// TestFitName: a run's folder name longer than a file name may be gets
// its head and a hash of the whole, the same each time (a sweep run again
// finds its runs), cut between two characters.
func TestFitName(t *testing.T) {
	if a, b := fitName(strings.Repeat("é", 200)), fitName(strings.Repeat("é", 200)); a != b || len(a) > MaxRunName || !utf8.ValidString(a) {
		t.Errorf("fitName: %q and %q", a, b)
	}
}

// TestPlanOf: sweep-plan.json names a shard when the sweep is cut, and
// when a batch engine gave it, shard 0 of 1 too (merge names the task).
func TestPlanOf(t *testing.T) {
	p := parse(t, gridYAML)
	if _, err := Runs(p, Overrides{}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		shard Shard
		want  string
	}{
		{Shard{I: 0, N: 1}, ""},
		{Shard{I: 2, N: 3}, "2/3"},
		{Shard{I: 0, N: 1, Batch: batchSlurm}, "0/1"},
	} {
		sp := PlanOf(p, 16, c.shard)
		if sp.Shard != c.want || sp.Batch != c.shard.Batch || sp.Runs != 16 || len(sp.Axes) != 2 || !slices.Equal(sp.Variants, []string{"near", "far"}) {
			t.Errorf("%+v: %+v, want shard %q", c.shard, sp, c.want)
		}
	}
}
