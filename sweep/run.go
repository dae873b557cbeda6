package sweep

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/netjam/netjam/outdir"
	"github.com/netjam/netjam/scenario"
)

// RunFunc runs one run of a sweep, the plan one (one scenario: the
// point's values applied, one variant), into its folder dir, logging to
// log. It returns the expectations the run did not meet, or an error when
// the run failed or ctx ended: the run is then not done. netjam's command
// line runs the emulator with it; the sweep knows nothing of how a run
// runs.
type RunFunc func(ctx context.Context, one *scenario.Plan, dir *outdir.Dir, log *zap.Logger) (unmet []string, err error)

// Runner runs runs of a sweep, each in its folder of Out, and marks each
// that finished with its sweep-run.json, so that a sweep run again after
// an interruption runs only what did not finish (Todo). A Runner runs
// once.
type Runner struct {
	// Plan is the scenario, its sweep as Runs left it.
	Plan *scenario.Plan
	Out  *outdir.Dir
	Log  *zap.Logger
	// Parallel is how many runs may run at once, 1 or more.
	Parallel int
	RunOne   RunFunc
	// Ended, when not nil, is told of each run that ended (not of one
	// that ctx interrupted), one at a time: how many ended so far, the
	// run, how long it took, and its error (nil: it finished).
	Ended func(ended int, r Run, took time.Duration, err error)

	mu  sync.Mutex // guards out
	out Outcome
}

// Outcome is how the runs of a Runner went.
type Outcome struct {
	Finished int
	Failed   []string // "ID: error"
	Unmet    []string // the expectations not met, "ID: expectation"
}

// Todo returns the runs of runs that did not finish: those without a
// sweep-run.json in their folder of out.
func Todo(out *outdir.Dir, runs []Run) []Run {
	var todo []Run
	for _, r := range runs {
		if _, err := out.Stat(filepath.Join(r.ID, RunFile)); err == nil {
			continue // done before an interruption
		}
		todo = append(todo, r)
	}
	return todo
}

// RunAll runs todo, Parallel at a time, until done or ctx ends, and says
// how they went.
func (rn *Runner) RunAll(ctx context.Context, todo []Run) Outcome {
	sem := make(chan struct{}, rn.Parallel)
	var wg sync.WaitGroup
	for _, r := range todo {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			start := time.Now()
			unmet, err := rn.runInFolder(ctx, r)
			rn.ended(ctx, r, time.Since(start), unmet, err)
		}()
	}
	wg.Wait()
	return rn.out
}

// ended records how run r went and tells Ended.
func (rn *Runner) ended(ctx context.Context, r Run, took time.Duration, unmet []string, err error) {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	switch {
	case ctx.Err() != nil:
		return // interrupted: not done
	case err != nil:
		rn.out.Failed = append(rn.out.Failed, fmt.Sprintf("%s: %v", r.ID, err))
		rn.Log.Error("sweep run failed", zap.String("run", r.ID), zap.Error(err))
	default:
		rn.out.Finished++
		rn.out.Unmet = append(rn.out.Unmet, unmet...)
	}
	if rn.Ended != nil {
		rn.Ended(rn.out.Finished+len(rn.out.Failed), r, took, err)
	}
}

// runInFolder runs r into its folder of Out, and marks it done. It returns the
// expectations the run did not meet, each with the run's ID.
func (rn *Runner) runInFolder(ctx context.Context, r Run) ([]string, error) {
	at, err := rn.Plan.At(rn.Plan.Sweep, r.point)
	if err != nil {
		return nil, err
	}
	one := &scenario.Plan{Name: at.Name, Path: at.Path, Runs: at.Runs[r.variant : r.variant+1]}
	dir, err := rn.Out.Sub(r.ID)
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	unmet, err := rn.RunOne(ctx, one, dir, rn.Log.With(zap.String("run", r.ID)))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, u := range unmet {
		out = append(out, r.ID+": "+u)
	}
	return out, writeJSON(dir, RunFile, r)
}

// WritePlan writes sp into out's sweep-plan.json.
func WritePlan(out *outdir.Dir, sp Plan) error { return writeJSON(out, PlanFile, sp) }

// writeJSON writes v as the file name of dir atomically: a reader sees
// all of it or none.
func writeJSON(dir *outdir.Dir, name string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return dir.WriteFile(name, append(b, '\n'))
}
