package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
	"go.uber.org/zap"

	"github.com/netjam/netjam/emulator"
	"github.com/netjam/netjam/internal/progress"
	"github.com/netjam/netjam/outdir"
	"github.com/netjam/netjam/report"
	"github.com/netjam/netjam/scenario"
	"github.com/netjam/netjam/sweep"
)

func sweepCommand() *cli.Command {
	return &cli.Command{
		Name:      "sweep",
		Usage:     "run a scenario over a grid of parameters and seeds, each run in its own folder, resumable and shardable",
		ArgsUsage: "SCENARIO.yaml",
		Description: `Runs every combination of the scenario's sweep grid (its sweep key, or
--grid), once per seed and per variant, each in a folder of the output
folder named from its parameters (loss=1pct,cc=reno,seed=2). A run that
finished is not run again: after an interruption, run the same command
again. --shard runs only one shard of the runs, for a batch engine
(Kubernetes Indexed Jobs, Slurm job arrays); netjam merge gathers the
shards' folders into one table and report. --shard auto runs the shard
that is the task's index, of NETJAM_SHARDS shards, fixed for the sweep: a
task submitted again runs the same shard. A folder that holds another
sweep, or another shard of this one, is refused. A sweep has at most 100000
runs: its combinations, times its seeds, times the scenario's variants,
with --grid and --seeds counted.

The sweep key of a scenario:
   sweep:
     grid:
       link.loss: [0%, 1%, 2%, 5%]
       link.delay: [10ms, 50ms]
       flows.bulk.cc: [reno, cubic]
     seeds: 5            # seeds 1 to 5, or a list: [7, 11, 13]

Examples:
   netjam sweep configs/sweep-cc-loss.yaml --out /tmp/sweep
   netjam sweep my.yaml --grid link.loss=0%,1%,2% --grid flows.bulk.cc=reno,cubic --seeds 3
   netjam sweep my.yaml --shard 2/8 --out /results       # shard 2 of 8 (counted from 0)
   NETJAM_SHARDS=8 netjam sweep my.yaml --shard auto --out /results/shard-$SLURM_ARRAY_TASK_ID
   netjam merge /tmp/sweep`,
		Flags: []cli.Flag{
			&cli.StringSliceFlag{Name: "grid", Usage: "sweep KEY over values V1,V2,... (repeatable; each VALUE is YAML; replaces the file's values of KEY)"},
			&cli.IntFlag{Name: "seeds", Usage: "run every combination with seeds 1 to `N` (replaces the file's sweep.seeds)"},
			&cli.StringSliceFlag{Name: "set", Usage: "override a scenario key for every run: KEY=VALUE (repeatable); VALUE is YAML"},
			&cli.StringFlag{Name: "duration", Usage: "upper bound of each run, such as 10s (default: the scenario's duration, else 30s)"},
			&cli.StringFlag{Name: "out", Usage: "output folder (default results/<scenario>-sweep)"},
			&cli.IntFlag{Name: "parallel", Value: 1, Usage: "how many runs may run at once (real-time runs compete for the CPU: at most one per core)"},
			&cli.StringFlag{Name: "shard", Usage: "run only shard `I/N` of the runs (I from 0), or auto: I the task's index, JOB_COMPLETION_INDEX (Kubernetes) or SLURM_ARRAY_TASK_ID (Slurm), and N from NETJAM_SHARDS"},
			&cli.BoolFlag{Name: "plots", Usage: "also draw each run's plots and report.html (slower)"},
			clockFlag,
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "print nothing but errors"},
		},
		OnUsageError: usageError,
		Action:       doSweep,
	}
}

func doSweep(c *cli.Context) error {
	if c.NArg() != 1 {
		return cli.Exit(fmt.Sprintf("sweep takes one scenario file, got %d arguments", c.NArg()), exitBadUsage)
	}
	plan, runs, err := sweepRuns(c)
	if err != nil {
		return err
	}
	shard, err := sweep.ParseShard(c.String("shard"))
	if err != nil {
		return cli.Exit(err, exitBadUsage)
	}
	if c.Int("parallel") < 1 {
		return cli.Exit(fmt.Sprintf("--parallel: %d is out of range (expected 1 or more)", c.Int("parallel")), exitBadUsage)
	}
	mine := shard.Of(runs)
	out := c.String("out")
	if out == "" {
		out = filepath.Join("results", plan.Name+"-sweep")
	}
	dir, _, err := openOutput(out)
	if err != nil {
		return err
	}
	defer dir.Close()
	sp := sweep.PlanOf(plan, len(runs), shard)
	sp.Args, sp.Out = sweepArgs(c), out
	sp.Dir, _ = os.Getwd()
	if err := sweep.CheckFolder(dir, sp); err != nil {
		return cli.Exit(err, exitBadUsage)
	}
	if err := sweep.WritePlan(dir, sp); err != nil {
		return cli.Exit(fmt.Sprintf("output folder: %v", err), exitFailed)
	}
	log, closeLog, err := commandLog(c, true, dir.Append) // netjam.log added to, for a sweep run again
	if err != nil {
		return err
	}
	defer closeLog()

	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	log.Info("netjam sweep", zap.String("scenario", plan.Path), zap.Int("runs", len(runs)), zap.Int("shard_runs", len(mine)),
		zap.String("shard", sp.Shard), zap.String("out", out))
	todo := sweep.Todo(dir, mine)
	if !c.Bool("quiet") {
		fmt.Fprintf(c.App.Writer, "sweep %s: %d runs", plan.Name, len(runs))
		if shard.N > 1 {
			fmt.Fprintf(c.App.Writer, ", %d in shard %s", len(mine), sp.Shard)
		}
		fmt.Fprintf(c.App.Writer, ", %d done before, %d to run, into %s\n", len(mine)-len(todo), len(todo), out)
	}
	ended, finishBar := sweepProgress(c, len(todo))
	rn := &sweep.Runner{Plan: plan, Out: dir, Log: log, Parallel: c.Int("parallel"), RunOne: emulator.SweepRun(versionString(), plotSweepPoint(c)), Ended: ended}
	res := rn.RunAll(ctx, todo)
	finishBar()
	return sweepExit(c, ctx, res, len(mine)-len(todo), len(mine), out)
}

// sweepExit is how netjam sweep ends once its runs ran (res): done runs
// of the shard's mine had finished before.
func sweepExit(c *cli.Context, ctx context.Context, res sweep.Outcome, done, mine int, out string) error {
	switch {
	case ctx.Err() != nil:
		return cli.Exit(fmt.Sprintf("interrupted: %d of %d runs done; run the same command again to resume", done+res.Finished, mine), exitFailed)
	case len(res.Failed) > 0:
		return cli.Exit(fmt.Sprintf("%d run(s) failed (run the same command again to retry them):\n  %s", len(res.Failed), strings.Join(res.Failed, "\n  ")), exitFailed)
	case len(res.Unmet) > 0:
		return cli.Exit(fmt.Sprintf("%d expectation(s) not met:\n  %s", len(res.Unmet), strings.Join(res.Unmet, "\n  ")), exitExpect)
	}
	if !c.Bool("quiet") {
		fmt.Fprintf(c.App.Writer, "results in %s (netjam merge %s gathers them)\n", out, out)
	}
	return nil
}

// sweepRuns loads the scenario and lists every run of its sweep, with
// --grid, --seeds and --set applied (sweep.Runs).
func sweepRuns(c *cli.Context) (*scenario.Plan, []sweep.Run, error) {
	o, err := planOptions(c)
	if err != nil {
		return nil, nil, err
	}
	plan, err := scenario.Load(c.Args().First(), o)
	if err == nil {
		err = emulator.CheckExpectations(plan)
	}
	if err != nil {
		return nil, nil, cli.Exit(err, exitBadUsage)
	}
	over := sweep.Overrides{Grid: c.StringSlice("grid"), Sets: c.StringSlice("set")}
	if c.IsSet("seeds") {
		n := c.Int("seeds")
		over.Seeds = &n
	}
	runs, err := sweep.Runs(plan, over)
	if err != nil {
		return nil, nil, cli.Exit(err, exitBadUsage)
	}
	return plan, runs, nil
}

// sweepArgs are the arguments of netjam sweep that make its runs, as
// netjam merge writes them into the command that runs missing runs again:
// the scenario file, then --grid, --seeds, --set, --duration and --clock
// as given.
func sweepArgs(c *cli.Context) []string {
	args := []string{c.Args().First()}
	for _, g := range c.StringSlice("grid") {
		args = append(args, "--grid", g)
	}
	if c.IsSet("seeds") {
		args = append(args, "--seeds", strconv.Itoa(c.Int("seeds")))
	}
	for _, s := range c.StringSlice("set") {
		args = append(args, "--set", s)
	}
	for _, f := range []string{"duration", "clock"} {
		if c.IsSet(f) {
			args = append(args, "--"+f, c.String(f))
		}
	}
	return args
}

// sweepProgress shows the sweep's progress over n runs: on a terminal a
// progress bar with its estimated end, elsewhere a line per run that
// ended, nothing with --quiet. finish ends the bar.
func sweepProgress(c *cli.Context, n int) (ended func(int, sweep.Run, time.Duration, error), finish func()) {
	if c.Bool("quiet") {
		return nil, func() {}
	}
	if f, ok := progress.Terminal(c.App.ErrWriter); ok {
		return progress.Sweep(f, n)
	}
	return progress.SweepLines(c.App.Writer, n), func() {}
}

// plotSweepPoint is what netjam sweep --plots does after each run: its
// plots and report.html; nil without.
func plotSweepPoint(c *cli.Context) func(*outdir.Dir) error {
	if !c.Bool("plots") {
		return nil
	}
	return func(dir *outdir.Dir) error {
		if _, err := report.Plot(dir); err != nil {
			return err
		}
		return report.HTML(dir, versionString())
	}
}
