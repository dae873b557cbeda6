package sweep

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/netjam/netjam/outdir"
	"github.com/netjam/netjam/report"
)

// sweepFolder writes a sweep's output folder into dir: its plan (JSON
// text) and a finished run (sweep-run.json, summary.json) of each index
// in runs.
func sweepFolder(t *testing.T, dir, plan string, runs ...int) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, PlanFile), []byte(plan), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, i := range runs {
		run := filepath.Join(dir, "r"+strconv.Itoa(i))
		os.Mkdir(run, 0o755)
		os.WriteFile(filepath.Join(run, RunFile), fmt.Appendf(nil, `{"index": %d, "id": "r%d", "scenario": "s"}`, i, i), 0o644)
		os.WriteFile(filepath.Join(run, report.SummaryFile), []byte(`{"runs": [{"duration_s": 1}]}`), 0o644)
	}
}

// upTo returns the indexes 0 to n-1 but those in skip.
func upTo(n int, skip ...int) []int {
	var out []int
	for i := range n {
		if !slices.Contains(skip, i) {
			out = append(out, i)
		}
	}
	return out
}

// TestMergeChecks: merge believes no number of a folder it did not check
// (a plan of 89 bytes that claimed 50,000,000 runs took 46 s and 4.8 GB,
// and wrote a sweep.json of 689 MB and an error of 439 MB listing every
// run as missing), and says which runs are missing as ranges.
func TestMergeChecks(t *testing.T) {
	plan := func(values, seeds int, extra string) string {
		var vs, ss []string
		for i := range values {
			vs = append(vs, strconv.Quote(strconv.Itoa(i)+"%"))
		}
		for i := range seeds {
			ss = append(ss, strconv.Itoa(i+1))
		}
		return fmt.Sprintf(`{"scenario": "s", "axes": [{"key": "link.loss", "values": [%s]}], "seeds": [%s]%s}`,
			strings.Join(vs, ","), strings.Join(ss, ","), extra)
	}
	var eight []string
	for range 8 {
		eight = append(eight, `{"key": "k", "values": [`+strings.Repeat(`"v",`, 511)+`"v"]}`)
	}
	for _, c := range []struct {
		name  string
		build func(t *testing.T, dir string) // writes the folders below dir
		err   string                         // Merge's error, after "DIR/"
		text  string                         // else MissingText
		miss  []RunRange
	}{
		{name: "a plan that lies", build: func(t *testing.T, dir string) {
			sweepFolder(t, dir, `{"scenario":"x","axes":[{"key":"link.loss","values":["1%"]}],"seeds":[1],"runs":50000000}`)
		}, err: `sweep-plan.json: "runs" is 50000000, but its axes, seeds and variants make 1`},
		{name: "a negative count", build: func(t *testing.T, dir string) {
			sweepFolder(t, dir, plan(2, 1, `, "runs": -1`))
		}, err: `sweep-plan.json: "runs" is -1, but its axes, seeds and variants make 2`},
		{name: "the variants count", build: func(t *testing.T, dir string) {
			sweepFolder(t, dir, plan(2, 1, `, "variants": ["a", "b"], "runs": 2`))
		}, err: `sweep-plan.json: "runs" is 2, but its axes, seeds and variants make 4`},
		{name: "past the cap", build: func(t *testing.T, dir string) {
			sweepFolder(t, dir, plan(200, 1000, `, "runs": 200000`))
		}, err: "sweep-plan.json: 200000 runs (200 values of one key, times 1000 seeds), more than 100000"},
		{name: "past an int", build: func(t *testing.T, dir string) {
			sweepFolder(t, dir, `{"scenario": "s", "axes": [`+strings.Join(eight, ",")+`], "seeds": [1], "runs": 0}`)
		}, err: "sweep-plan.json: 4722366482869645213696 runs (4722366482869645213696 combinations of 8 keys, times 1 seed), more than 100000"},
		{name: "a shard that is not I/N", build: func(t *testing.T, dir string) {
			sweepFolder(t, dir, plan(2, 1, `, "runs": 2, "shard": "3/3"`))
		}, err: `sweep-plan.json: "shard" is "3/3", expected I/N (0 <= I < N)`},
		{name: "a plan too big", build: func(t *testing.T, dir string) {
			sweepFolder(t, dir, "")
			os.Truncate(filepath.Join(dir, PlanFile), MaxFileSize+1) // sparse: it is not read
		}, err: "sweep-plan.json: more than 16777216 bytes (16 MiB): netjam writes none that big"},
		{name: "a summary too big", build: func(t *testing.T, dir string) {
			sweepFolder(t, dir, plan(2, 1, `, "runs": 2`), 0, 1)
			os.Truncate(filepath.Join(dir, "r1", report.SummaryFile), report.MaxSummarySize+1)
		}, err: "r1/summary.json: more than 67108864 bytes (64 MiB): netjam writes none that big"},
		{name: "a run past the plan", build: func(t *testing.T, dir string) {
			sweepFolder(t, dir, plan(2, 1, `, "runs": 2`), 0, 1, 5)
		}, err: "r5/sweep-run.json: index 5 is not a run of the sweep (0 to 1)"},
		{name: "runs missing", build: func(t *testing.T, dir string) {
			sweepFolder(t, dir, plan(10, 5, `, "runs": 50`), upTo(50, append([]int{3, 4, 5, 9}, upTo(41)[12:]...)...)...)
		}, text: "runs 3-5, 9, 12-40", miss: []RunRange{{3, 5}, {9, 9}, {12, 40}}},
		{name: "one run missing", build: func(t *testing.T, dir string) {
			sweepFolder(t, dir, plan(10, 5, `, "runs": 50`), upTo(50, 49)...)
		}, text: "run 49", miss: []RunRange{{49, 49}}},
		{name: "many ranges", build: func(t *testing.T, dir string) {
			var odd []int
			for i := 1; i < 50; i += 2 {
				odd = append(odd, i)
			}
			sweepFolder(t, dir, plan(10, 5, `, "runs": 50`), odd...)
		}, text: "runs 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, and 15 more ranges (sweep.json lists them all)"},
		{name: "a shard missing", build: func(t *testing.T, dir string) {
			// Shard I of 3 holds the runs whose index is I modulo 3.
			sweepFolder(t, filepath.Join(dir, "s0"), plan(4, 3, `, "runs": 12, "shard": "0/3"`), 0, 3, 9)
			sweepFolder(t, filepath.Join(dir, "s2"), plan(4, 3, `, "runs": 12, "shard": "2/3"`), 2, 5, 8, 11)
		}, text: "shard 0/3, in DIR/s0: run 6\nshard 1/3, whose folder was not among those merged: runs 1, 4, 7, 10", miss: []RunRange{{1, 1}, {4, 4}, {6, 7}, {10, 10}}},
		{name: "shards missing, more shards than runs", build: func(t *testing.T, dir string) {
			sweepFolder(t, filepath.Join(dir, "s0"), plan(2, 1, `, "runs": 2, "shard": "0/1000000000"`), 0)
		}, text: "shard 1/1000000000, whose folder was not among those merged: run 1", miss: []RunRange{{1, 1}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			c.build(t, dir)
			res, err := Merge([]string{dir})
			if c.err != "" {
				if want := filepath.Join(dir, c.err); fmt.Sprint(err) != want {
					t.Errorf("got  %v\nwant %s", err, want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := res.MissingText(); got != strings.ReplaceAll(c.text, "DIR", dir) {
				t.Errorf("MissingText: got  %s\nwant %s", got, c.text)
			}
			if c.miss != nil && !slices.Equal(res.Missing, c.miss) {
				t.Errorf("Missing: %v, want %v", res.Missing, c.miss)
			}
		})
	}
}

// TestMergeRerun: merge names the shard and the batch engine's task of
// every missing run, and gives the commands that run them again, from
// what the folders' plans say of how they were started: one sbatch of
// the Slurm script with the tasks to submit again, netjam sweep of each
// shard otherwise, or of the whole sweep. (It said "run the shards that
// hold them", which for a Slurm array meant the whole sweep again.)
func TestMergeRerun(t *testing.T) {
	plan := func(extra string) string {
		return `{"scenario": "s", "axes": [{"key": "link.loss", "values": ["1%", "2%", "3%", "4%"]}], "seeds": [1, 2], "runs": 8` + extra + `}`
	}
	for _, c := range []struct {
		name  string
		build func(t *testing.T, dir string)
		text  string
		rerun []string
	}{
		{name: "slurm", build: func(t *testing.T, dir string) {
			// 4 shards of 8 runs: shard I holds I and I+4. Shard 0 lacks
			// run 4; shard 2 is whole; the folders of 1 and 3 are not given.
			how := `, "batch": "slurm", "args": ["my sweep.yaml", "--seeds", "2"], "dir": "/home/u/it's"`
			sweepFolder(t, filepath.Join(dir, "shard-0"), plan(`, "shard": "0/4", "out": "results/shard-0"`+how), 0)
			sweepFolder(t, filepath.Join(dir, "shard-2"), plan(`, "shard": "2/4", "out": "results/shard-2"`+how), 2, 6)
		}, text: "shard 0/4 (Slurm array task 0), in DIR/shard-0: run 4\n" +
			"shard 1/4 (Slurm array task 1), whose folder was not among those merged: runs 1, 5\n" +
			"shard 3/4 (Slurm array task 3), whose folder was not among those merged: runs 3, 7",
			rerun: []string{`cd '/home/u/it'\''s' && NETJAM_SHARDS=4 sbatch --array=0-1,3 deploy/slurm-array.sh 'my sweep.yaml' --seeds 2`}},
		{name: "by hand", build: func(t *testing.T, dir string) {
			how := `, "args": ["s.yaml", "--grid", "link.loss=1%,2%,3%,4%"], "dir": "/w"`
			sweepFolder(t, filepath.Join(dir, "a"), plan(`, "shard": "1/3", "out": "out/s1"`+how), 1, 7)
			sweepFolder(t, filepath.Join(dir, "b"), plan(`, "shard": "2/3", "out": "/tmp/elsewhere"`+how), 2)
		}, text: "shard 0/3, whose folder was not among those merged: runs 0, 3, 6\n" +
			"shard 1/3, in DIR/a: run 4\n" +
			"shard 2/3, in DIR/b: run 5",
			rerun: []string{
				"cd /w && netjam sweep s.yaml --grid link.loss=1%,2%,3%,4% --shard 0/3 --out out/s0",
				"cd /w && netjam sweep s.yaml --grid link.loss=1%,2%,3%,4% --shard 1/3 --out out/s1",
				"cd /w && netjam sweep s.yaml --grid link.loss=1%,2%,3%,4% --shard 2/3 --out /tmp/elsewhere"}},
		{name: "kubernetes", build: func(t *testing.T, dir string) {
			sweepFolder(t, filepath.Join(dir, "shard-0"), plan(`, "shard": "0/2", "batch": "kubernetes", "args": ["/configs/s.yaml"], "out": "/results/shard-0", "dir": "/"`), 0, 2, 4, 6)
		}, text: "shard 1/2 (Kubernetes completion index 1), whose folder was not among those merged: runs 1, 3, 5, 7",
			rerun: []string{"netjam sweep /configs/s.yaml --shard 1/2 --out /results/shard-1"}},
		{name: "whole", build: func(t *testing.T, dir string) {
			sweepFolder(t, dir, plan(`, "args": ["s.yaml"], "out": "res", "dir": "/w"`), upTo(8, 3, 4)...)
		}, text: "runs 3-4", rerun: []string{"cd /w && netjam sweep s.yaml --out res"}},
		{name: "a control character", build: func(t *testing.T, dir string) {
			sweepFolder(t, dir, plan(`, "args": ["s.yaml"], "out": "res\r", "dir": "/w"`), upTo(8, 3)...)
		}, text: "run 3"},
		{name: "a plan of an older netjam", build: func(t *testing.T, dir string) {
			sweepFolder(t, filepath.Join(dir, "s0"), plan(`, "shard": "0/2"`), 0, 2, 4)
		}, text: "shard 0/2, in DIR/s0: run 6\nshard 1/2, whose folder was not among those merged: runs 1, 3, 5, 7"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			c.build(t, dir)
			res, err := Merge([]string{dir})
			if err != nil {
				t.Fatal(err)
			}
			if got, want := res.MissingText(), strings.ReplaceAll(c.text, "DIR", dir); got != want {
				t.Errorf("MissingText:\ngot  %s\nwant %s", got, want)
			}
			if !slices.Equal(res.Rerun, c.rerun) {
				t.Errorf("Rerun:\ngot  %q\nwant %q", res.Rerun, c.rerun)
			}
			if res.Batch != "" || res.Args != nil || res.Dir != "" || res.Out != "" || res.Shard != "" {
				t.Errorf("the merged plan keeps one folder's own fields: %+v", res.Plan)
			}
		})
	}
}

// openDir opens the folder dir for a test, closed when it ends.
func openDir(t testing.TB, dir string) *outdir.Dir {
	t.Helper()
	d, err := outdir.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}
