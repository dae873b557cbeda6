package sweep

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/netjam/netjam/internal/sweepcap"
	"github.com/netjam/netjam/outdir"
	"github.com/netjam/netjam/report"
)

// maxDepth bounds how deep Merge looks for runs below a folder.
const maxDepth = 3

// MaxFileSize bounds sweep-plan.json and sweep-run.json: the plan
// holds the sweep's values, from a scenario file of at most 1 MiB or the
// command line, which JSON's escapes may make up to 6 times longer.
const MaxFileSize = 16 << 20

// Merge gathers the finished runs of one sweep from dirs: the output
// folders of netjam sweep, whole or its shards, or folders that hold
// them. Every folder's sweep must be the same (scenario, axes, seeds,
// variants); a run found twice is an error. A plan is checked before its
// runs are counted: its runs must be what its axes, seeds and variants
// make, at most sweepcap.Max, and every run's index one of them.
func Merge(dirs []string) (*Result, error) {
	g := &gathering{dirs: dirs, byIndex: map[int]string{}, shards: map[string]bool{}}
	for _, dir := range dirs {
		if err := g.walk(dir); err != nil {
			return nil, err
		}
	}
	if g.planFrom == "" {
		return nil, fmt.Errorf("%w: no %s in %s (expected the output folders of netjam sweep)", report.ErrNotRun, PlanFile, strings.Join(dirs, ", "))
	}
	res := &g.res
	sort.Slice(res.Results, func(i, j int) bool { return res.Results[i].Index < res.Results[j].Index })
	res.Found = len(res.Results)
	for _, r := range res.Results {
		if r.Index < 0 || r.Index >= res.Runs {
			return nil, fmt.Errorf("%s: index %d is not a run of the sweep (0 to %d)", filepath.Join(r.Dir, RunFile), r.Index, res.Runs-1)
		}
	}
	res.Missing = missingRanges(res.Runs, g.byIndex)
	res.Shards, res.MissingShards = missingShards(g.shards, res.Runs)
	res.ShardsMissingRuns = shardsMissingRuns(*res, g.folders)
	res.Rerun = rerun(*res, g.folders)
	cols := map[string]bool{}
	for _, r := range res.Results {
		if r.Scenario != res.Scenario {
			return nil, fmt.Errorf("%s is a run of %s, not of the sweep of %s", r.Dir, r.Scenario, res.Scenario)
		}
		for k := range r.Figures {
			cols[k] = true
		}
	}
	res.Columns = columnOrder(cols)
	return res, nil
}

// gathering is what Merge found so far below the folders dirs.
type gathering struct {
	dirs     []string
	res      Result          // the first plan's sweep, and the runs found
	planFrom string          // the path of the first plan found
	byIndex  map[int]string  // the folder of each run found, by index
	shards   map[string]bool // the plans' shards, "I/N"; "" for a whole sweep
	folders  []folderPlan    // every plan found, as written
}

// walk gathers the plans and runs below dir, at most maxDepth down.
func (g *gathering) walk(dir string) error {
	st, err := os.Stat(dir)
	if err != nil || !st.IsDir() {
		if err == nil || errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%w: %s is not a folder", report.ErrNotRun, dir)
		}
		return err
	}
	root := strings.Count(filepath.Clean(dir), string(filepath.Separator))
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && strings.Count(path, string(filepath.Separator))-root > maxDepth:
			return filepath.SkipDir
		case d.IsDir():
			return nil
		case d.Name() == PlanFile:
			return g.addPlan(path)
		case d.Name() == RunFile:
			return g.addRun(path)
		}
		return nil
	})
}

// addPlan reads the plan at path, which must be of the same sweep as the
// others.
func (g *gathering) addPlan(path string) error {
	var p Plan
	if err := readJSON(path, MaxFileSize, &p); err != nil {
		return err
	}
	if err := p.check(path); err != nil {
		return err
	}
	g.shards[p.Shard] = true
	g.folders = append(g.folders, folderPlan{filepath.Dir(path), p})
	p = p.sweep()
	if g.planFrom == "" {
		g.res.Plan, g.planFrom = p, path
	} else if !samePlan(g.res.Plan, p) {
		return fmt.Errorf("%s and %s are different sweeps", g.planFrom, path)
	}
	return nil
}

// addRun reads the finished run whose sweep-run.json is at path: one of
// an index not found before, and at most sweepcap.Max of them.
func (g *gathering) addRun(path string) error {
	r, err := readSweepRun(path)
	if err != nil {
		return err
	}
	if prev, dup := g.byIndex[r.Index]; dup {
		return fmt.Errorf("run %s is in two folders: %s and %s", r.ID, prev, r.Dir)
	}
	g.byIndex[r.Index] = r.Dir
	g.res.Results = append(g.res.Results, r)
	if len(g.res.Results) > sweepcap.Max {
		return fmt.Errorf("more than %d runs below %s: a sweep has at most %d", sweepcap.Max, strings.Join(g.dirs, ", "), sweepcap.Max)
	}
	return nil
}

// missingRanges returns the indexes of a sweep of runs runs not in found,
// as ranges.
func missingRanges(runs int, found map[int]string) []RunRange {
	var out []RunRange
	for i := range runs {
		if _, ok := found[i]; ok {
			continue
		}
		if n := len(out); n > 0 && out[n-1].Last == i-1 {
			out[n-1].Last = i
		} else {
			out = append(out, RunRange{i, i})
		}
	}
	return out
}

// check returns why the plan read from path is not one netjam sweep
// writes: its runs are not what its axes, seeds and variants make, or
// more than sweepcap.Max, or its shard is not I/N. A plan that claimed
// 50,000,000 runs had merge list them all as missing (43 s, 4.8 GB).
func (p *Plan) check(path string) error {
	values := make([]int, len(p.Axes))
	for i, a := range p.Axes {
		values[i] = len(a.Values)
	}
	n, err := sweepcap.Runs(values, len(p.Seeds), max(1, len(p.Variants)))
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if p.Runs != n {
		return fmt.Errorf(`%s: "runs" is %d, but its axes, seeds and variants make %d`, path, p.Runs, n)
	}
	if p.Shard != "" {
		if _, _, ok := parsePlanShard(p.Shard); !ok {
			return fmt.Errorf(`%s: "shard" is %q, expected I/N (0 <= I < N)`, path, p.Shard)
		}
	}
	return nil
}

// parsePlanShard reads a plan's shard, "I/N".
func parsePlanShard(s string) (i, n int, ok bool) {
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || i < 0 || i >= n {
		return 0, 0, false
	}
	return i, n, true
}

// missingShards returns N when every plan found was a shard I/N of one N
// (the plans' shards, checked), and the shards of N not found that hold
// runs of a sweep of runs runs: 0 and nil otherwise.
func missingShards(found map[string]bool, runs int) (int, []int) {
	n := 0
	have := map[int]bool{}
	for s := range found {
		i, m, ok := parsePlanShard(s)
		if !ok || n != 0 && m != n {
			return 0, nil // a whole sweep, or shards of two counts: any run may be anywhere
		}
		n = m
		have[i] = true
	}
	var out []int
	for i := range min(n, runs) {
		if !have[i] {
			out = append(out, i)
		}
	}
	return n, out
}

// maxMissingRanges bounds the ranges MissingText writes out.
const maxMissingRanges = 10

// MissingCount returns the number of runs of the sweep not found.
func (r *Result) MissingCount() int {
	n := 0
	for _, m := range r.Missing {
		n += m.Last - m.First + 1
	}
	return n
}

// MissingText says which runs were not found, for a person. When the
// folders are shards of one sweep, a line per shard that lacks runs, with
// the task index of its batch engine and its folder: "shard 1/3 (Slurm
// array task 1), whose folder was not among those merged: runs 1, 4, 7,
// 10", at most maxMissingRanges shards and runs each. Otherwise the runs
// as ranges of indexes ("runs 3-5, 9, 12-40"), at most maxMissingRanges
// of them. "" when none is missing.
func (r *Result) MissingText() string {
	if len(r.ShardsMissingRuns) > 0 {
		lines := make([]string, 0, maxMissingRanges+1)
		for _, m := range r.ShardsMissingRuns[:min(len(r.ShardsMissingRuns), maxMissingRanges)] {
			var b strings.Builder
			fmt.Fprintf(&b, "shard %d/%d", m.Shard, r.Shards)
			switch m.Batch {
			case "slurm":
				fmt.Fprintf(&b, " (Slurm array task %d)", m.Shard)
			case "kubernetes":
				fmt.Fprintf(&b, " (Kubernetes completion index %d)", m.Shard)
			}
			if m.Folder == "" {
				b.WriteString(", whose folder was not among those merged")
			} else {
				fmt.Fprintf(&b, ", in %s", m.Folder)
			}
			fmt.Fprintf(&b, ": %s ", plural(len(m.Runs), "run"))
			for j, i := range m.Runs[:min(len(m.Runs), maxMissingRanges)] {
				if j > 0 {
					b.WriteString(", ")
				}
				b.WriteString(strconv.Itoa(i))
			}
			if more := len(m.Runs) - maxMissingRanges; more > 0 {
				fmt.Fprintf(&b, ", and %d more", more)
			}
			lines = append(lines, b.String())
		}
		if more := len(r.ShardsMissingRuns) - maxMissingRanges; more > 0 {
			lines = append(lines, fmt.Sprintf("and %d more %s (%s lists them all)", more, plural(more, "shard"), JSONFile))
		}
		return strings.Join(lines, "\n")
	}
	if len(r.Missing) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString(plural(r.MissingCount(), "run") + " ")
	for j, m := range r.Missing[:min(len(r.Missing), maxMissingRanges)] {
		if j > 0 {
			b.WriteString(", ")
		}
		b.WriteString(m.String())
	}
	if more := len(r.Missing) - maxMissingRanges; more > 0 {
		fmt.Fprintf(&b, ", and %d more %s (%s lists them all)", more, plural(more, "range"), JSONFile)
	}
	return b.String()
}

// maxRerunLines bounds the commands merge prints; sweep.json has them all.
const maxRerunLines = 10

// MissingMessage says which runs of res are missing, by shard when the
// folders are shards, and the commands that run them again (at most
// maxRerunLines): what netjam merge ends with.
func (res *Result) MissingMessage() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d of the sweep's %d runs missing:", res.MissingCount(), res.Runs)
	text := res.MissingText()
	if len(res.ShardsMissingRuns) > 0 {
		b.WriteString("\n  " + strings.ReplaceAll(text, "\n", "\n  "))
	} else {
		b.WriteString(" " + text)
	}
	switch {
	case len(res.Rerun) == 0 && len(res.ShardsMissingRuns) == 0:
		b.WriteString("; run the shards that hold them, or the sweep again to resume")
		return b.String()
	case len(res.Rerun) == 0:
		b.WriteString("\nrun those shards again (finished runs are not run again), then merge again")
		return b.String()
	}
	b.WriteString("\nrun them again (finished runs are not run again), then merge again:")
	for _, c := range res.Rerun[:min(len(res.Rerun), maxRerunLines)] {
		b.WriteString("\n  " + c)
	}
	if more := len(res.Rerun) - maxRerunLines; more > 0 {
		fmt.Fprintf(&b, "\n  and %d more (%s lists them all under rerun)", more, JSONFile)
	}
	return b.String()
}

func plural(n int, s string) string {
	if n == 1 {
		return s
	}
	return s + "s"
}

// readJSON decodes the JSON file at path, of at most max bytes
// (readFile), into v.
func readJSON(path string, max int64, v any) error {
	b, err := readFile(path, max)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// readFile reads a file netjam wrote, refusing one of more than max
// bytes (a whole number of MiB) before reading it, or, for a pipe or a
// device, after max+1 bytes: the files are netjam's own, but a folder
// given to merge, plot or junit may come from anywhere. An error opening
// the file is returned as it is.
func readFile(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tooBig := fmt.Errorf("%s: more than %d bytes (%d MiB): netjam writes none that big", path, max, max>>20)
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() && st.Size() > max {
		return nil, tooBig
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, tooBig
	}
	return b, nil
}

// readSweepRun reads a run's sweep-run.json and the figures of its
// summary.json.
func readSweepRun(path string) (RunResult, error) {
	r := RunResult{Dir: filepath.Dir(path)}
	if err := readJSON(path, MaxFileSize, &r.Run); err != nil {
		return r, err
	}
	sumPath := filepath.Join(r.Dir, report.SummaryFile)
	b, err := readFile(sumPath, report.MaxSummarySize)
	if err != nil {
		return r, err
	}
	figures, err := report.RunFigures(b)
	if err != nil {
		return r, fmt.Errorf("%s: %w", sumPath, err)
	}
	if len(figures) != 1 {
		return r, fmt.Errorf("%s: %d runs, expected the one of a sweep's run", sumPath, len(figures))
	}
	r.Figures = figures[0]
	return r, nil
}

// columnOrder orders figure names: the run's own first, then flows, links
// and expectations, each sorted.
func columnOrder(cols map[string]bool) []string {
	rank := func(c string) int {
		for i, p := range []string{"flows.", "links.", "expect."} {
			if strings.HasPrefix(c, p) {
				return i + 1
			}
		}
		return 0
	}
	out := make([]string, 0, len(cols))
	for c := range cols {
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b string) int {
		if ra, rb := rank(a), rank(b); ra != rb {
			return ra - rb
		}
		return strings.Compare(a, b)
	})
	return out
}

// WriteTable writes sweep.json and sweep.csv of res into the folder d: one row per
// run, its parameters as columns, then its figures (empty where a run has
// no such figure).
func WriteTable(d *outdir.Dir, res *Result) error {
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	if err := d.WriteFile(JSONFile, append(b, '\n')); err != nil {
		return err
	}
	var sb strings.Builder
	w := csv.NewWriter(&sb)
	head := []string{"index", "id"}
	for _, a := range res.Axes {
		head = append(head, a.Key)
	}
	head = append(head, "variant", "seed")
	head = append(head, res.Columns...)
	w.Write(head)
	for _, r := range res.Results {
		row := []string{strconv.Itoa(r.Index), r.ID}
		for _, a := range res.Axes {
			row = append(row, r.Params[a.Key])
		}
		row = append(row, r.Variant, strconv.FormatUint(r.Seed, 10))
		for _, c := range res.Columns {
			if v, ok := r.Figures[c]; ok {
				row = append(row, strconv.FormatFloat(v, 'g', -1, 64))
			} else {
				row = append(row, "")
			}
		}
		w.Write(row)
	}
	w.Flush()
	if err := w.Error(); err != nil {
		return err
	}
	return d.WriteFile(CSVFile, []byte(sb.String()))
}
