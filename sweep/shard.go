package sweep

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/netjam/netjam/outdir"
)

// Shard is the part of a sweep's runs that one netjam sweep runs: those
// whose index is I modulo N. Shard 0 of 1 is the whole sweep.
type Shard struct {
	I, N int
	// Batch is the batch engine whose task index --shard auto took as I
	// (batchSlurm, batchKubernetes); "" when the shard was given.
	Batch string
}

// Has reports whether the run of index i is in s.
func (s Shard) Has(i int) bool { return i%s.N == s.I }

// Of returns the runs of runs that are in s.
func (s Shard) Of(runs []Run) []Run {
	var mine []Run
	for _, r := range runs {
		if s.Has(r.Index) {
			mine = append(mine, r)
		}
	}
	return mine
}

// Name is s as sweep-plan.json writes it: "I/N", or "" for the whole
// sweep given as such (a batch engine's 0/1 is written: merge names the
// task).
func (s Shard) Name() string {
	if s.N <= 1 && s.Batch == "" {
		return ""
	}
	return fmt.Sprintf("%d/%d", s.I, s.N)
}

// ShardsEnv is the variable that gives --shard auto the sweep's number of
// shards. A batch engine's own count cannot: a Slurm array's
// SLURM_ARRAY_TASK_COUNT is how many tasks one submission has, so a task
// submitted again (sbatch --array=5) is an array of one, and a strided or
// listed array (--array=0-7:2, --array=1,3,6) has fewer tasks than shards.
const ShardsEnv = "NETJAM_SHARDS"

// The batch engines --shard auto knows, as sweep-plan.json names them.
const (
	batchSlurm      = "slurm"
	batchKubernetes = "kubernetes"
)

// ParseShard reads --shard: "" (everything), "I/N", or "auto" (from the
// batch engine's environment, see autoShard).
func ParseShard(s string) (Shard, error) {
	switch s {
	case "":
		return Shard{I: 0, N: 1}, nil
	case "auto":
		return autoShard(os.LookupEnv)
	}
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil {
		return Shard{}, fmt.Errorf("--shard: %q is not I/N or auto", s)
	}
	if n < 1 || i < 0 || i >= n {
		return Shard{}, fmt.Errorf("--shard: shard %d of %d does not exist (shards count from 0 to N-1)", i, n)
	}
	return Shard{I: i, N: n}, nil
}

// autoShard is --shard auto: the shard is the task's index, from
// JOB_COMPLETION_INDEX (a Kubernetes Indexed Job's pod) or
// SLURM_ARRAY_TASK_ID (a Slurm job array's task), and the number of
// shards is fixed for the sweep, NETJAM_SHARDS (for Kubernetes also
// JOB_COMPLETIONS, which older manifests set). So a task submitted again
// runs the same shard, whatever else its submission holds, and an index
// that is not a shard is refused.
func autoShard(lookup func(string) (string, bool)) (Shard, error) {
	var indexVar, batch string
	switch {
	case has(lookup, "JOB_COMPLETION_INDEX"):
		indexVar, batch = "JOB_COMPLETION_INDEX", batchKubernetes
	case has(lookup, "SLURM_ARRAY_TASK_ID"):
		indexVar, batch = "SLURM_ARRAY_TASK_ID", batchSlurm
	default:
		return Shard{}, errors.New("--shard auto: neither JOB_COMPLETION_INDEX (Kubernetes Indexed Job) nor SLURM_ARRAY_TASK_ID (Slurm job array) is set")
	}
	index, err := envInt(lookup, indexVar)
	if err != nil {
		return Shard{}, err
	}
	countVar := ShardsEnv
	if !has(lookup, ShardsEnv) && batch == batchKubernetes && has(lookup, "JOB_COMPLETIONS") {
		countVar = "JOB_COMPLETIONS"
	}
	if !has(lookup, countVar) {
		return Shard{}, fmt.Errorf("--shard auto: %s is %d, but %s, the sweep's number of shards, is not set: set it in the task's environment (deploy/ does); the array's own count of tasks is not the sweep's (a task submitted again is an array of one)", indexVar, index, ShardsEnv)
	}
	n, err := envInt(lookup, countVar)
	if err != nil {
		return Shard{}, err
	}
	if n < 1 {
		return Shard{}, fmt.Errorf("--shard auto: %s=%d: a sweep has 1 shard or more", countVar, n)
	}
	if index < 0 || index >= n {
		hint := fmt.Sprintf("submit indexes 0 to %d only (sbatch --array=0-%d, or some of them)", n-1, n-1)
		if batch == batchKubernetes {
			hint = fmt.Sprintf("the Job's completions must be %d", n)
		}
		return Shard{}, fmt.Errorf("--shard auto: %s is %d, but the sweep's shards are 0 to %d (%s=%d): a task's index is its shard, so %s", indexVar, index, n-1, countVar, n, hint)
	}
	return Shard{I: index, N: n, Batch: batch}, nil
}

// has reports whether the variable name is set.
func has(lookup func(string) (string, bool), name string) bool {
	_, ok := lookup(name)
	return ok
}

// envInt reads the variable name as a decimal number.
func envInt(lookup func(string) (string, bool), name string) (int, error) {
	v, _ := lookup(name)
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		return 0, fmt.Errorf("--shard auto: %s is %q, not a number", name, v)
	}
	return n, nil
}

// CheckFolder refuses to run sp into a folder that holds another sweep's
// runs, or another shard of the same sweep (or the whole of it): a run
// whose folder has a sweep-run.json is taken as done, so another sweep's
// run of the same name would be taken for this one's, and another shard's
// runs would be there twice when the folders are merged.
func CheckFolder(dir *outdir.Dir, sp Plan) error {
	b, err := dir.ReadFileMax(PlanFile, MaxFileSize)
	if err != nil {
		return nil // none yet (or unreadable: written anew)
	}
	var old Plan
	if json.Unmarshal(b, &old) != nil {
		return nil
	}
	if !old.SameSweep(sp) {
		return fmt.Errorf("%s holds the runs of another sweep (%s, %d runs; its %s says so): give this one another --out, or move that one away",
			dir.Path(), old.Scenario, old.Runs, PlanFile)
	}
	whole := func(s string) string { // shard 0 of 1 is the whole sweep
		if s == "0/1" {
			return ""
		}
		return s
	}
	if whole(old.Shard) == whole(sp.Shard) {
		return nil
	}
	name := func(s string) string {
		if s == "" {
			return "the whole sweep"
		}
		return "shard " + s
	}
	keep := "run it with the number of shards it had"
	if _, n, ok := strings.Cut(old.Shard, "/"); ok {
		keep = fmt.Sprintf("keep its number of shards, %s (--shard I/%s, or %s=%s for --shard auto)", n, n, ShardsEnv, n)
	}
	return fmt.Errorf("%s holds %s of this sweep (its %s says so), and this is %s: its runs would be there twice when the folders are merged; %s, or give another --out",
		dir.Path(), name(old.Shard), PlanFile, name(sp.Shard), keep)
}
