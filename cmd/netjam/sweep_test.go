package main

import (
	"encoding/csv"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/netjam/netjam/sweep"
)

// sweepYAML is a 2x2x3 sweep of UDP flows on the virtual clock: a run
// repeats exactly, from its seed, whatever the machine's load (on the wall
// clock a loaded machine dropped datagrams at a direction's input: 99
// drops against 25 for one run of the grid, CI-like load).
const sweepYAML = `name: grid
clock: virtual
duration: 3s
link: {delay: 2ms}
flows: [{name: probe, type: udp, interval: 1ms, count: 300}]
sweep:
  grid:
    link.loss: [2%, 10%]
    link.delay: [1ms, 3ms]
  seeds: 3
`

// TestSweepShardsMergeAsWhole runs a sweep whole, and again as three
// shards in separate processes, merges both, and compares: the same runs
// with the same parameters and the same losses on the path. It also resumes an
// interrupted sweep: only the run that had not finished runs again.
func TestSweepShardsMergeAsWhole(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "grid.yaml")
	os.WriteFile(file, []byte(sweepYAML), 0o644)
	whole := filepath.Join(dir, "whole")
	code, stdout, stderr := netjam(t, "sweep", file, "--out", whole, "--parallel", "2")
	if code != exitOK {
		t.Fatalf("sweep: exit %d\n%s%s", code, stdout, stderr)
	}
	if !strings.HasPrefix(stdout, "sweep grid: 12 runs, 0 done before, 12 to run, into ") {
		t.Errorf("sweep's first line:\n%s", stdout)
	}
	// Shard 0 by hand, 1 as a Kubernetes Indexed Job's pod, 2 as a Slurm
	// array's task submitted again on its own (an array of one task).
	for i, env := range [][]string{nil, {"JOB_COMPLETION_INDEX=1", "NETJAM_SHARDS=3"},
		{"SLURM_ARRAY_TASK_ID=2", "SLURM_ARRAY_TASK_COUNT=1", "SLURM_ARRAY_TASK_MIN=2", "SLURM_ARRAY_TASK_MAX=2", "NETJAM_SHARDS=3"}} {
		shard := "auto"
		if env == nil {
			shard = "0/3"
		}
		cmd := netjamProcess(t, "sweep", file, "-q", "--out", filepath.Join(dir, "shards", "s"+strconv.Itoa(i)), "--shard", shard)
		cmd.Env = append(cmd.Env, env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("shard %d: %v\n%s", i, err, out)
		}
		ents, _ := os.ReadDir(filepath.Join(dir, "shards", "s"+strconv.Itoa(i)))
		var runs []string
		for _, e := range ents {
			if e.IsDir() {
				runs = append(runs, e.Name())
			}
		}
		if len(runs) != 4 {
			t.Errorf("shard %d ran %v, want 4 runs", i, runs)
		}
	}
	code, stdout, stderr = netjam(t, "merge", whole)
	if code != exitOK || !strings.Contains(stdout, filepath.Join(whole, "sweep.csv")) || !strings.Contains(stdout, "sweep.html") {
		t.Fatalf("merge whole: exit %d\n%s%s", code, stdout, stderr)
	}
	merged := filepath.Join(dir, "merged")
	if code, stdout, stderr = netjam(t, "merge", filepath.Join(dir, "shards"), "--out", merged); code != exitOK {
		t.Fatalf("merge shards: exit %d\n%s%s", code, stdout, stderr)
	}
	a, b := readCSV(t, filepath.Join(whole, "sweep.csv")), readCSV(t, filepath.Join(merged, "sweep.csv"))
	cols := []string{"index", "id", "link.loss", "link.delay", "seed", "flows.probe.packets_sent", "links.uplink.packets_out", "links.uplink.drops"}
	if len(a) != 13 || len(b) != 13 {
		t.Fatalf("sweep.csv: %d and %d lines, want a header and 12 runs", len(a), len(b))
	}
	for _, c := range cols {
		ia, ib := slices.Index(a[0], c), slices.Index(b[0], c)
		if ia < 0 || ib < 0 {
			t.Fatalf("column %s missing: %v / %v", c, a[0], b[0])
		}
		for r := 1; r < 13; r++ {
			if a[r][ia] != b[r][ib] {
				t.Errorf("run %s: %s is %s whole, %s from shards", a[r][1], c, a[r][ia], b[r][ib])
			}
		}
	}
	if t.Failed() {
		logVirtualClocks(t, whole, filepath.Join(dir, "shards", "*"))
	}
	if a[1][1] != "loss=2pct,delay=1ms,seed=1" || a[12][1] != "loss=10pct,delay=3ms,seed=3" {
		t.Errorf("run names: %s ... %s", a[1][1], a[12][1])
	}

	// An interrupted sweep: one run did not finish. Merge says so; the
	// sweep run again runs that one only.
	os.Remove(filepath.Join(whole, "loss=10pct,delay=1ms,seed=2", "sweep-run.json"))
	cwd, _ := os.Getwd()
	if code, _, stderr = netjam(t, "merge", whole); code != exitFailed || stderr != "netjam: 1 of the sweep's 12 runs missing: run 7\n"+
		"run them again (finished runs are not run again), then merge again:\n  cd "+cwd+" && netjam sweep "+file+" --out "+whole+"\n" {
		t.Errorf("merge of an unfinished sweep: exit %d\n%s", code, stderr)
	}
	code, stdout, stderr = netjam(t, "sweep", file, "--out", whole)
	if code != exitOK || !strings.Contains(stdout, "12 runs, 11 done before, 1 to run") || !strings.Contains(stdout, "[1/1] loss=10pct,delay=1ms,seed=2: done") {
		t.Errorf("resumed sweep: exit %d\n%s%s", code, stdout, stderr)
	}
}

// logVirtualClocks logs what each run's virtual clock said at its end
// (events, stack dumps, waits given up), from the logs of the sweeps in
// dirs (glob patterns): a run that parted from its twin shows why.
func logVirtualClocks(t *testing.T, dirs ...string) {
	for _, d := range dirs {
		logs, _ := filepath.Glob(filepath.Join(d, "netjam.log"))
		for _, l := range logs {
			b, _ := os.ReadFile(l)
			for _, line := range strings.Split(string(b), "\n") {
				if strings.Contains(line, `"virtual clock"`) {
					t.Logf("%s: %s", l, line)
				}
			}
		}
	}
}

func readCSV(t *testing.T, path string) [][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// TestSweepUsage: what a sweep refuses, with exit 2.
func TestSweepUsage(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "grid.yaml")
	os.WriteFile(file, []byte(sweepYAML), 0o644)
	plain := filepath.Join(dir, "plain.yaml")
	os.WriteFile(plain, []byte("flows: [{name: p, type: udp, interval: 1ms, count: 10}]\n"), 0o644)
	variants := filepath.Join(dir, "variants.yaml")
	os.WriteFile(variants, []byte("flows: [{name: p, type: udp, interval: 1ms, count: 10}]\nvariants: [{name: a}, {name: b}]\n"), 0o644)
	// list is n values for --grid: "1ms,2ms,...".
	list := func(n int) string {
		var out []string
		for i := range n {
			out = append(out, strconv.Itoa(i+1)+"ms")
		}
		return strings.Join(out, ",")
	}
	var eight []string // 512^8 = 2^72 runs, which wrapped to 0: the sweep ran nothing and exited 0
	for _, k := range []string{"link.delay", "link.uplink.delay", "link.downlink.delay", "link.uplink.jitter",
		"link.downlink.jitter", "link.uplink.delay.jitter", "flows.p.start", "flows.p.interval"} {
		eight = append(eight, "--grid", k+"="+list(512))
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"sweep", file, "--shard", "3/3"}, "--shard: shard 3 of 3 does not exist (shards count from 0 to N-1)"},
		{[]string{"sweep", file, "--shard", "x"}, `--shard: "x" is not I/N or auto`},
		{[]string{"sweep", file, "--shard", "auto"}, "--shard auto: neither JOB_COMPLETION_INDEX"},
		{[]string{"sweep", plain}, "has no sweep: give it a sweep key or use --grid KEY=V1,V2"},
		{[]string{"sweep", file, "--set", "link.loss=1%"}, "--set link.loss: the key is swept"},
		{[]string{"sweep", file, "--grid", "link.loss=1%,200%"}, "netjam: sweep point link.loss=200%, link.delay=1ms: link.loss: 200% is out of range (expected 0% to 100%)\nsweep point link.loss=200%, link.delay=3ms: link.loss: 200% is out of range (expected 0% to 100%)\n"},
		{[]string{"sweep", file, "--seeds", "0"}, "--seeds: 0 is out of range (expected 1 to 10000)"},
		// The cap counts what the command line adds, and the variants.
		// --parallel 0, refused after the runs are listed, keeps a sweep
		// the cap missed from running.
		{[]string{"sweep", plain, "--grid", "link.delay=" + list(200), "--seeds", "1000", "--parallel", "0"},
			"netjam: " + plain + ": sweep: 200000 runs (200 values of one key, times 1000 seeds), more than 100000\n"},
		{[]string{"sweep", file, "--grid", "flows.probe.count=1,2,3", "--seeds", "10000", "--parallel", "0"},
			"netjam: " + file + ": sweep: 120000 runs (12 combinations of 3 keys, times 10000 seeds), more than 100000\n"},
		{[]string{"sweep", variants, "--grid", "link.delay=" + list(6), "--seeds", "10000", "--parallel", "0"},
			"netjam: " + variants + ": sweep: 120000 runs (6 values of one key, times 10000 seeds, times 2 variants), more than 100000\n"},
		{append([]string{"sweep", plain, "--parallel", "0"}, eight...),
			"netjam: " + plain + ": sweep: 4722366482869645213696 runs (4722366482869645213696 combinations of 8 keys, times 1 seed), more than 100000\n"},
	} {
		code, stdout, stderr := netjam(t, append(c.args, "--out", filepath.Join(dir, "out"))...)
		if code != exitBadUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, want 2 saying %q\n%s%s", c.args, code, c.want, stdout, stderr)
		}
	}
}

// TestSweepLongValues: a run whose parameters make a folder name longer
// than a file name may be gets its name's head and a hash of the whole
// (every run failed: "file name too long").
func TestSweepLongValues(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "grid.yaml")
	os.WriteFile(file, []byte(sweepYAML), 0o644)
	out := filepath.Join(dir, "out")
	code, stdout, stderr := netjam(t, "sweep", file, "-q", "--out", out, "--seeds", "1",
		"--grid", "link.uplink.delay={time: 1ms, jitter: 1ms, distribution: paretonormal, correlation: 12.5%, allow_reorder: true}",
		"--grid", "link.downlink.queue={discipline: fq_codel, limit: 1000, ecn: true, target: 5ms, interval: 100ms, flows: 1024, quantum: 1514}",
		"--grid", "link.uplink.loss={model: state, p13: 1%, p31: 80%, p32: 5%, p23: 90%, p14: 0.1%}")
	if code != exitOK {
		t.Fatalf("sweep: exit %d\n%s%s", code, stdout, stderr)
	}
	ents, _ := os.ReadDir(out)
	runs := 0
	for _, e := range ents {
		if e.IsDir() {
			runs++
			if len(e.Name()) > sweep.MaxRunName {
				t.Errorf("a run's folder name of %d bytes: %s", len(e.Name()), e.Name())
			}
		}
	}
	if runs != 4 { // the file's 2x2 grid, at one point of the three long axes
		t.Errorf("%d run folders, want 4", runs)
	}
}

// TestMergeRefuses: merge checks a sweep-plan.json before it counts the
// runs it names: a plan of 89 bytes that claimed 50,000,000 runs took
// 46 s and 4.8 GB, and wrote a sweep.json of 689 MB and an error of
// 439 MB listing every run as missing. Missing runs are ranges.
func TestMergeRefuses(t *testing.T) {
	for _, c := range []struct {
		name string
		plan string
		runs []int // the runs found
		code int
		want string // stderr, after "netjam: "; DIR is the folder
	}{
		{"a plan that lies", `{"scenario":"x","axes":[{"key":"link.loss","values":["1%"]}],"seeds":[1],"runs":50000000}`, nil,
			exitFailed, `merge: DIR/sweep-plan.json: "runs" is 50000000, but its axes, seeds and variants make 1`},
		{"runs missing", `{"scenario":"s","axes":[{"key":"link.loss","values":["1%","2%"]}],"seeds":[1,2,3],"runs":6}`, []int{0, 1, 5},
			exitFailed, "3 of the sweep's 6 runs missing: runs 2-4; run the shards that hold them, or the sweep again to resume"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			os.WriteFile(filepath.Join(dir, "sweep-plan.json"), []byte(c.plan), 0o644)
			for _, i := range c.runs {
				run := filepath.Join(dir, "r"+strconv.Itoa(i))
				os.Mkdir(run, 0o755)
				os.WriteFile(filepath.Join(run, "sweep-run.json"), []byte(`{"index": `+strconv.Itoa(i)+`, "id": "r", "scenario": "s"}`), 0o644)
				os.WriteFile(filepath.Join(run, "summary.json"), []byte(`{"runs": [{"duration_s": 1}]}`), 0o644)
			}
			code, stdout, stderr := netjam(t, "merge", dir)
			if want := "netjam: " + strings.ReplaceAll(c.want, "DIR", dir) + "\n"; code != c.code || stderr != want {
				t.Errorf("exit %d, want %d\ngot  %swant %s%s", code, c.code, stderr, want, stdout)
			}
		})
	}
}

// TestSweepRefusesAnotherFolder: a shard is not run into the folder of
// another shard of its sweep (its runs would be there twice when merged),
// nor a sweep into another sweep's folder (a run of the same name there
// was taken as done: a Slurm sweep run after another from the same folder
// merged the first one's runs as its own).
func TestSweepRefusesAnotherFolder(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "grid.yaml")
	os.WriteFile(file, []byte(sweepYAML), 0o644)
	out := filepath.Join(dir, "shard-5")
	// 4 runs: shard 5 of 6 or 7 has none, so nothing runs.
	if code, stdout, stderr := netjam(t, "sweep", file, "--seeds", "1", "--shard", "5/6", "--out", out); code != exitOK {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	if code, stdout, stderr := netjam(t, "sweep", file, "--seeds", "1", "--shard", "5/6", "--out", out); code != exitOK {
		t.Fatalf("the same shard again: exit %d\n%s%s", code, stdout, stderr)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--seeds", "1", "--shard", "5/7"}, "netjam: " + out + " holds shard 5/6 of this sweep (its sweep-plan.json says so), and this is shard 5/7: its runs would be there twice when the folders are merged; keep its number of shards, 6 (--shard I/6, or NETJAM_SHARDS=6 for --shard auto), or give another --out\n"},
		{[]string{"--seeds", "1"}, "netjam: " + out + " holds shard 5/6 of this sweep (its sweep-plan.json says so), and this is the whole sweep: its runs would be there twice when the folders are merged; keep its number of shards, 6 (--shard I/6, or NETJAM_SHARDS=6 for --shard auto), or give another --out\n"},
		{[]string{"--seeds", "2", "--shard", "5/6"}, "netjam: " + out + " holds the runs of another sweep (grid, 4 runs; its sweep-plan.json says so): give this one another --out, or move that one away\n"},
	} {
		code, stdout, stderr := netjam(t, append([]string{"sweep", file, "--out", out}, c.args...)...)
		if code != exitBadUsage || stderr != c.want {
			t.Errorf("%v: exit %d, want 2\ngot  %swant %s%s", c.args, code, stderr, c.want, stdout)
		}
	}
}
