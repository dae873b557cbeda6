// Package sweep runs a scenario over a grid of parameters and seeds, and
// gathers the runs: it lists a sweep's runs (plan.go), cuts them into
// shards for a batch engine (shard.go), runs them, each in its own folder,
// resumable (run.go), and merges the folders of a sweep, whole or in
// shards, into one table (merge.go, rerun.go) and a page of figures
// (page.go). The files it writes and reads are in files.go.
package sweep

import (
	"encoding/json"
	"strconv"

	"github.com/netjam/netjam/scenario"
)

// The files of a sweep (netjam sweep): PlanFile in its output folder,
// RunFile in the folder of each run once it finished; netjam merge
// writes JSONFile and CSVFile.
const (
	PlanFile = "sweep-plan.json"
	RunFile  = "sweep-run.json"
	JSONFile = "sweep.json"
	CSVFile  = "sweep.csv"
)

// Plan is a sweep as a whole: what sweep-plan.json holds.
type Plan struct {
	Scenario string   `json:"scenario"`
	Axes     []Axis   `json:"axes"`
	Seeds    []uint64 `json:"seeds"`
	Variants []string `json:"variants,omitempty"`
	// Runs is the number of runs of the whole sweep, every shard's.
	Runs int `json:"runs"`
	// Shard is "I/N" when the folder holds one shard's runs.
	Shard string `json:"shard,omitempty"`

	// What follows says how the folder's runs were started, for the
	// commands that run missing ones again (netjam merge prints them). It
	// is not part of the sweep: the folders of its shards may differ in it.

	// Batch is the batch engine whose task index --shard auto took as the
	// shard: "slurm" (SLURM_ARRAY_TASK_ID) or "kubernetes"
	// (JOB_COMPLETION_INDEX); "" when the shard was given.
	Batch string `json:"batch,omitempty"`
	// Args are netjam sweep's arguments that make the sweep's runs: the
	// scenario file, then --grid, --seeds, --set, --duration and --clock.
	Args []string `json:"args,omitempty"`
	// Out is the output folder as netjam sweep was given it (--out), Dir
	// the working directory it ran in (in a Slurm task, the folder the
	// array was submitted from).
	Out string `json:"out,omitempty"`
	Dir string `json:"dir,omitempty"`
}

// sweep is p without what one folder of the sweep says of itself (its
// shard and how it was started): what every folder of the sweep shares.
func (p Plan) sweep() Plan {
	p.Shard, p.Batch, p.Args, p.Out, p.Dir = "", "", nil, "", ""
	return p
}

// SameSweep reports whether p and q are plans of one sweep (its shards,
// or the whole), whatever their shards and however they were started.
func (p Plan) SameSweep(q Plan) bool {
	return samePlan(p.sweep(), q.sweep())
}

// Axis is one swept key and its values (YAML, as --set takes them).
type Axis struct {
	Key    string   `json:"key"`
	Values []string `json:"values"`
}

// Run is one run of a sweep: what its sweep-run.json holds once it
// finished.
type Run struct {
	Index    int               `json:"index"` // its place among all the sweep's runs
	ID       string            `json:"id"`    // its folder's name
	Params   map[string]string `json:"params"`
	Seed     uint64            `json:"seed"`
	Variant  string            `json:"variant,omitempty"`
	Scenario string            `json:"scenario"`

	// The run's point of the grid and variant (of Runs, to run it).
	point   scenario.Point
	variant int
}

// Result is a merged sweep: every finished run found, with its
// figures, in the sweep's order.
type Result struct {
	Plan
	// Columns are the figures' names, as paths in a run of summary.json
	// (flows.bulk.throughput_bps), in the order of sweep.csv.
	Columns []string `json:"columns"`
	// Found is how many runs were found; Missing names the runs of the
	// plan that were not (a shard not run, or not finished), as ranges of
	// indexes.
	Found   int        `json:"found"`
	Missing []RunRange `json:"missing,omitempty"`
	// Shards is N when every folder merged held a shard I/N of the sweep;
	// MissingShards are the shards I of N whose folders were not among
	// them (a shard that holds no run, I past the last run, is not
	// missing), ShardsMissingRuns every shard of N that lacks runs, with
	// them. 0 and none otherwise.
	Shards            int            `json:"shards,omitempty"`
	MissingShards     []int          `json:"missing_shards,omitempty"`
	ShardsMissingRuns []ShardMissing `json:"shards_missing_runs,omitempty"`
	// Rerun are the shell commands that run the missing runs again, made
	// from what the folders' sweep-plan.json say of how they were started
	// (see Plan.Batch); none when they do not say.
	Rerun   []string    `json:"rerun,omitempty"`
	Results []RunResult `json:"results"`
}

// ShardMissing is a shard of a sweep that lacks runs.
type ShardMissing struct {
	Shard int `json:"shard"`
	// Batch is the engine that ran the shard's folder, or, for a shard
	// whose folder was not merged, the other shards' (Plan.Batch).
	// The engine's task index is the shard.
	Batch string `json:"batch,omitempty"`
	// Folder is the shard's folder, "" when it was not among those merged.
	Folder string `json:"folder,omitempty"`
	// Runs are the indexes of its runs not found.
	Runs []int `json:"runs"`
}

// RunRange is the runs of a sweep from index First to Last, both included.
type RunRange struct {
	First int `json:"first"`
	Last  int `json:"last"`
}

// String writes r as "3-5", or "9" for one run.
func (r RunRange) String() string {
	if r.First == r.Last {
		return strconv.Itoa(r.First)
	}
	return strconv.Itoa(r.First) + "-" + strconv.Itoa(r.Last)
}

// RunResult is one run and its figures.
type RunResult struct {
	Run
	Dir     string             `json:"dir"`
	Figures map[string]float64 `json:"figures"`
}

// samePlan reports whether two folders hold runs of one sweep.
func samePlan(a, b Plan) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}
