package report

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/netjam/netjam/outdir"
)

// The files of a sweep (netjam sweep): SweepPlanFile in its output folder,
// SweepRunFile in the folder of each run once it finished; netjam merge
// writes SweepJSONFile and SweepCSVFile.
const (
	SweepPlanFile = "sweep-plan.json"
	SweepRunFile  = "sweep-run.json"
	SweepJSONFile = "sweep.json"
	SweepCSVFile  = "sweep.csv"
)

// SweepPlan is a sweep as a whole: what sweep-plan.json holds.
type SweepPlan struct {
	Scenario string      `json:"scenario"`
	Axes     []SweepAxis `json:"axes"`
	Seeds    []uint64    `json:"seeds"`
	Variants []string    `json:"variants,omitempty"`
	// Runs is the number of runs of the whole sweep, every shard's.
	Runs int `json:"runs"`
	// Shard is "I/N" when the folder holds one shard's runs.
	Shard string `json:"shard,omitempty"`
}

// SweepAxis is one swept key and its values (YAML, as --set takes them).
type SweepAxis struct {
	Key    string   `json:"key"`
	Values []string `json:"values"`
}

// SweepRun is one finished run of a sweep: what sweep-run.json holds.
type SweepRun struct {
	Index    int               `json:"index"` // its place among all the sweep's runs
	ID       string            `json:"id"`    // its folder's name
	Params   map[string]string `json:"params"`
	Seed     uint64            `json:"seed"`
	Variant  string            `json:"variant,omitempty"`
	Scenario string            `json:"scenario"`
}

// SweepResult is a merged sweep: every finished run found, with its
// figures, in the sweep's order.
type SweepResult struct {
	SweepPlan
	// Columns are the figures' names, as paths in a run of summary.json
	// (flows.bulk.throughput_bps), in the order of sweep.csv.
	Columns []string `json:"columns"`
	// Found is how many runs were found; Missing names the runs of the
	// plan that were not (a shard not run, or not finished).
	Found   int              `json:"found"`
	Missing []int            `json:"missing,omitempty"`
	Results []SweepRunResult `json:"results"`
}

// SweepRunResult is one run and its figures.
type SweepRunResult struct {
	SweepRun
	Dir     string             `json:"dir"`
	Figures map[string]float64 `json:"figures"`
}

// maxSweepDepth bounds how deep Merge looks for runs below a folder.
const maxSweepDepth = 3

// Merge gathers the finished runs of one sweep from dirs: the output
// folders of netjam sweep, whole or its shards, or folders that hold
// them. Every folder's sweep must be the same (scenario, axes, seeds,
// variants); a run found twice is an error.
func Merge(dirs []string) (*SweepResult, error) {
	var res SweepResult
	var planFrom string
	byIndex := map[int]string{}
	for _, dir := range dirs {
		st, err := os.Stat(dir)
		if err != nil || !st.IsDir() {
			if err == nil || errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("%w: %s is not a folder", ErrNotRun, dir)
			}
			return nil, err
		}
		root := strings.Count(filepath.Clean(dir), string(filepath.Separator))
		err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if strings.Count(path, string(filepath.Separator))-root > maxSweepDepth {
					return filepath.SkipDir
				}
				return nil
			}
			switch d.Name() {
			case SweepPlanFile:
				var p SweepPlan
				if err := readJSON(path, &p); err != nil {
					return err
				}
				p.Shard = ""
				if planFrom == "" {
					res.SweepPlan, planFrom = p, path
				} else if !samePlan(res.SweepPlan, p) {
					return fmt.Errorf("%s and %s are different sweeps", planFrom, path)
				}
			case SweepRunFile:
				r, err := readSweepRun(path)
				if err != nil {
					return err
				}
				if prev, dup := byIndex[r.Index]; dup {
					return fmt.Errorf("run %s is in two folders: %s and %s", r.ID, prev, r.Dir)
				}
				byIndex[r.Index] = r.Dir
				res.Results = append(res.Results, r)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	if planFrom == "" {
		return nil, fmt.Errorf("%w: no %s in %s (expected the output folders of netjam sweep)", ErrNotRun, SweepPlanFile, strings.Join(dirs, ", "))
	}
	sort.Slice(res.Results, func(i, j int) bool { return res.Results[i].Index < res.Results[j].Index })
	res.Found = len(res.Results)
	for i := range res.Runs {
		if _, ok := byIndex[i]; !ok {
			res.Missing = append(res.Missing, i)
		}
	}
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
	return &res, nil
}

// samePlan reports whether two folders hold runs of one sweep.
func samePlan(a, b SweepPlan) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// readSweepRun reads a run's sweep-run.json and the figures of its
// summary.json.
func readSweepRun(path string) (SweepRunResult, error) {
	r := SweepRunResult{Dir: filepath.Dir(path)}
	if err := readJSON(path, &r.SweepRun); err != nil {
		return r, err
	}
	var sum summary
	if err := readJSON(filepath.Join(r.Dir, SummaryFile), &sum); err != nil {
		return r, err
	}
	if len(sum.Runs) != 1 {
		return r, fmt.Errorf("%s: %d runs, expected the one of a sweep's run", filepath.Join(r.Dir, SummaryFile), len(sum.Runs))
	}
	r.Figures = figuresOf(sum.Runs[0])
	return r, nil
}

// figuresOf picks a run's figures for a sweep's table, named by their
// path in summary.json.
func figuresOf(ri runInfo) map[string]float64 {
	m := map[string]float64{"duration_s": ri.DurationS}
	if ri.Fairness != nil {
		m["fairness"] = *ri.Fairness
	}
	for _, f := range ri.Flows {
		p := "flows." + f.Name + "."
		m[p+"throughput_bps"] = f.ThroughputBps
		switch f.Type {
		case typeTCP:
			if f.CompletionS > 0 {
				m[p+"completion_s"] = f.CompletionS
			}
			m[p+"bytes_received"] = float64(f.BytesReceived)
			m[p+"retransmissions"] = float64(f.Retransmissions)
			m[p+"timeouts"] = float64(f.Timeouts)
			if f.RTTMs.Count > 0 {
				m[p+"rtt_ms.p50"] = f.RTTMs.P50
			}
		case typeUDP:
			m[p+"packets_sent"] = float64(f.PacketsSent)
			m[p+"packets_received"] = float64(f.PacketsReceived)
			m[p+"loss_ratio"] = f.LossRatio
			m[p+"jitter_ms"] = f.JitterMs
			if f.DelayMs.Count > 0 {
				m[p+"delay_ms.p50"] = f.DelayMs.P50
				m[p+"delay_ms.p95"] = f.DelayMs.P95
			}
		}
	}
	for _, l := range ri.Links {
		p := "links." + l.Name + "."
		m[p+"packets_out"] = float64(l.PacketsOut)
		m[p+"achieved.loss_ratio"] = l.Achieved.LossRatio
		var drops uint64
		for _, n := range l.Drops {
			drops += n
		}
		m[p+"drops"] = float64(drops)
		if l.QueueDelayMs.Count > 0 {
			m[p+"queue_delay_ms.p95"] = l.QueueDelayMs.P95
		}
	}
	for _, e := range ri.Expectations {
		if e.Pass {
			m["expect."+e.Expect] = 1
		} else {
			m["expect."+e.Expect] = 0
		}
	}
	return m
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

// WriteSweep writes sweep.json and sweep.csv of res into the folder d: one row per
// run, its parameters as columns, then its figures (empty where a run has
// no such figure).
func WriteSweep(d *outdir.Dir, res *SweepResult) error {
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	if err := d.WriteFile(SweepJSONFile, append(b, '\n')); err != nil {
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
	return d.WriteFile(SweepCSVFile, []byte(sb.String()))
}
