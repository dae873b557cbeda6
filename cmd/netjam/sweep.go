package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/schollz/progressbar/v3"
	"github.com/urfave/cli/v2"
	"go.uber.org/zap"
	"golang.org/x/term"

	"github.com/netjam/netjam/emulator"
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

// sweepRun is one run of a sweep: a point of the grid and a variant, and
// what its sweep-run.json says of it once it finished.
type sweepRun struct {
	sweep.Run
	point   scenario.Point
	variant int
}

func doSweep(c *cli.Context) error {
	if c.NArg() != 1 {
		return cli.Exit(fmt.Sprintf("sweep takes one scenario file, got %d arguments", c.NArg()), exitBadUsage)
	}
	plan, runs, err := sweepRuns(c)
	if err != nil {
		return err
	}
	shard, shards, batch, err := parseShard(c.String("shard"))
	if err != nil {
		return cli.Exit(err, exitBadUsage)
	}
	if c.Int("parallel") < 1 {
		return cli.Exit(fmt.Sprintf("--parallel: %d is out of range (expected 1 or more)", c.Int("parallel")), exitBadUsage)
	}
	total := len(runs)
	var mine []sweepRun
	for _, r := range runs {
		if r.Index%shards == shard {
			mine = append(mine, r)
		}
	}
	out := c.String("out")
	if out == "" {
		out = filepath.Join("results", plan.Name+"-sweep")
	}
	dir, _, err := openOutput(out)
	if err != nil {
		return err
	}
	defer dir.Close()
	sp := sweepPlanOf(plan, total, shard, shards)
	if batch != "" {
		sp.Shard = fmt.Sprintf("%d/%d", shard, shards) // 0/1 too: merge names the task
	}
	sp.Batch, sp.Args, sp.Out = batch, sweepArgs(c), out
	sp.Dir, _ = os.Getwd()
	if err := checkFolder(dir, sp); err != nil {
		return err
	}
	if err := writeJSON(dir, sweep.PlanFile, sp); err != nil {
		return cli.Exit(fmt.Sprintf("output folder: %v", err), exitFailed)
	}
	log, closeLog, err := sweepLogger(c, dir)
	if err != nil {
		return err
	}
	defer closeLog()

	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	log.Info("netjam sweep", zap.String("scenario", plan.Path), zap.Int("runs", total), zap.Int("shard_runs", len(mine)),
		zap.String("shard", sp.Shard), zap.String("out", out))

	var todo []sweepRun
	for _, r := range mine {
		if _, err := dir.Stat(filepath.Join(r.ID, sweep.RunFile)); err == nil {
			continue // done before an interruption
		}
		todo = append(todo, r)
	}
	quiet := c.Bool("quiet")
	if !quiet {
		fmt.Fprintf(c.App.Writer, "sweep %s: %d runs", plan.Name, total)
		if shards > 1 {
			fmt.Fprintf(c.App.Writer, ", %d in shard %s", len(mine), sp.Shard)
		}
		fmt.Fprintf(c.App.Writer, ", %d done before, %d to run, into %s\n", len(mine)-len(todo), len(todo), out)
	}
	sr := &sweeper{c: c, plan: plan, out: dir, log: log, bar: sweepBar(c, len(todo)), quiet: quiet, total: len(todo)}
	sr.runAll(ctx, todo, c.Int("parallel"))
	switch {
	case ctx.Err() != nil:
		return cli.Exit(fmt.Sprintf("interrupted: %d of %d runs done; run the same command again to resume", len(mine)-len(todo)+sr.finished, len(mine)), exitFailed)
	case len(sr.failed) > 0:
		return cli.Exit(fmt.Sprintf("%d run(s) failed (run the same command again to retry them):\n  %s", len(sr.failed), strings.Join(sr.failed, "\n  ")), exitFailed)
	case len(sr.unmet) > 0:
		return cli.Exit(fmt.Sprintf("%d expectation(s) not met:\n  %s", len(sr.unmet), strings.Join(sr.unmet, "\n  ")), exitExpect)
	}
	if !quiet {
		fmt.Fprintf(c.App.Writer, "results in %s (netjam merge %s gathers them)\n", out, out)
	}
	return nil
}

// sweepPlanOf is what sweep-plan.json says of plan's sweep, of total runs,
// as shard of shards.
func sweepPlanOf(plan *scenario.Plan, total, shard, shards int) sweep.Plan {
	sp := sweep.Plan{Scenario: plan.Name, Seeds: plan.Sweep.Seeds, Runs: total}
	for _, a := range plan.Sweep.Axes {
		sp.Axes = append(sp.Axes, sweep.Axis{Key: a.Key, Values: a.Values})
	}
	for _, s := range plan.Runs {
		if s.Variant != "" {
			sp.Variants = append(sp.Variants, s.Variant)
		}
	}
	if shards > 1 {
		sp.Shard = fmt.Sprintf("%d/%d", shard, shards)
	}
	return sp
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

// checkFolder refuses to run sp into a folder that holds another sweep's
// runs, or another shard of the same sweep (or the whole of it): a run
// whose folder has a sweep-run.json is taken as done, so another sweep's
// run of the same name would be taken for this one's, and another shard's
// runs would be there twice when the folders are merged.
func checkFolder(dir *outdir.Dir, sp sweep.Plan) error {
	b, err := dir.ReadFileMax(sweep.PlanFile, sweep.MaxFileSize)
	if err != nil {
		return nil // none yet (or unreadable: written anew)
	}
	var old sweep.Plan
	if json.Unmarshal(b, &old) != nil {
		return nil
	}
	if !old.SameSweep(sp) {
		return cli.Exit(fmt.Sprintf("%s holds the runs of another sweep (%s, %d runs; its %s says so): give this one another --out, or move that one away",
			dir.Path(), old.Scenario, old.Runs, sweep.PlanFile), exitBadUsage)
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
		keep = fmt.Sprintf("keep its number of shards, %s (--shard I/%s, or %s=%s for --shard auto)", n, n, shardsEnv, n)
	}
	return cli.Exit(fmt.Sprintf("%s holds %s of this sweep (its %s says so), and this is %s: its runs would be there twice when the folders are merged; %s, or give another --out",
		dir.Path(), name(old.Shard), sweep.PlanFile, name(sp.Shard), keep), exitBadUsage)
}

// sweepLogger logs into out's netjam.log (added to, for a sweep run
// again), and on the console only warnings and errors unless --log-level
// says otherwise: a sweep's console shows its progress. close flushes and
// closes the file.
func sweepLogger(c *cli.Context, out *outdir.Dir) (log *zap.Logger, close func(), err error) {
	logFile, err := out.Append("netjam.log")
	if err != nil {
		return nil, nil, cli.Exit(fmt.Sprintf("output folder: %v", err), exitFailed)
	}
	level := c.String("log-level")
	if !c.IsSet("log-level") {
		level = "warn"
	}
	log, err = newLogger(level, c.String("log-format"), c.App.ErrWriter, logFile)
	if err != nil {
		logFile.Close()
		return nil, nil, cli.Exit(err, exitBadUsage)
	}
	return log, func() { log.Sync(); logFile.Close() }, nil
}

// sweepBar is the sweep's progress bar over n runs, with its estimated
// end, on a terminal; nil elsewhere and with --quiet.
func sweepBar(c *cli.Context, n int) *progressbar.ProgressBar {
	f, ok := c.App.ErrWriter.(*os.File)
	if !ok || c.Bool("quiet") || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	return progressbar.NewOptions(n, progressbar.OptionSetWriter(f), progressbar.OptionSetDescription("sweep"),
		progressbar.OptionShowCount(), progressbar.OptionSetPredictTime(true), progressbar.OptionShowElapsedTimeOnFinish(),
		progressbar.OptionSetWidth(30))
}

// sweeper runs a sweep's runs and gathers how they went.
type sweeper struct {
	c     *cli.Context
	plan  *scenario.Plan
	out   *outdir.Dir
	log   *zap.Logger
	bar   *progressbar.ProgressBar // nil: a line per run instead, unless quiet
	quiet bool
	total int

	mu       sync.Mutex // guards what follows
	finished int
	failed   []string // "ID: error"
	unmet    []string // expectations not met, with their run
}

// runAll runs todo, parallel at a time, until done or ctx ends.
func (sr *sweeper) runAll(ctx context.Context, todo []sweepRun, parallel int) {
	sem := make(chan struct{}, parallel)
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
			unmet, err := runSweepPoint(ctx, sr.c, sr.plan, r, sr.out, sr.log)
			sr.done(ctx, r, start, unmet, err)
		}()
	}
	wg.Wait()
	if sr.bar != nil {
		sr.bar.Finish()
	}
}

// done records how run r went and shows it.
func (sr *sweeper) done(ctx context.Context, r sweepRun, start time.Time, unmet []string, err error) {
	sr.mu.Lock()
	defer sr.mu.Unlock()
	switch {
	case ctx.Err() != nil:
		return // interrupted: not done
	case err != nil:
		sr.failed = append(sr.failed, fmt.Sprintf("%s: %v", r.ID, err))
		sr.log.Error("sweep run failed", zap.String("run", r.ID), zap.Error(err))
	default:
		sr.finished++
		sr.unmet = append(sr.unmet, unmet...)
	}
	switch {
	case sr.bar != nil:
		sr.bar.Add(1)
	case !sr.quiet:
		what := "done"
		if err != nil {
			what = "failed"
		}
		fmt.Fprintf(sr.c.App.Writer, "[%d/%d] %s: %s in %.1f s\n", sr.finished+len(sr.failed), sr.total, r.ID, what, time.Since(start).Seconds())
	}
}

// sweepRuns loads the scenario and lists every run of its sweep, in the
// sweep's order, each checked: an invalid point stops the sweep before
// anything runs.
func sweepRuns(c *cli.Context) (*scenario.Plan, []sweepRun, error) {
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
	sw := plan.Sweep
	if sw == nil {
		sw = &scenario.Sweep{Seeds: []uint64{1}}
	}
	grid, err := scenario.ParseGrid(c.StringSlice("grid"))
	if err != nil {
		return nil, nil, cli.Exit(err, exitBadUsage)
	}
	for _, a := range grid {
		if i := slices.IndexFunc(sw.Axes, func(b scenario.Axis) bool { return b.Key == a.Key }); i >= 0 {
			sw.Axes[i] = a
		} else {
			sw.Axes = append(sw.Axes, a)
		}
	}
	if c.IsSet("seeds") {
		if sw.Seeds, err = scenario.SeedList(c.Int("seeds")); err != nil {
			return nil, nil, cli.Exit(err, exitBadUsage)
		}
	}
	if len(sw.Axes) == 0 {
		return nil, nil, cli.Exit(fmt.Sprintf("%s has no sweep: give it a sweep key or use --grid KEY=V1,V2", plan.Path), exitBadUsage)
	}
	for _, s := range c.StringSlice("set") {
		key, _, _ := strings.Cut(s, "=")
		for _, a := range sw.Axes {
			if strings.TrimSpace(key) == a.Key {
				return nil, nil, cli.Exit(fmt.Sprintf("--set %s: the key is swept; sweep it over one value with --grid %s", key, s), exitBadUsage)
			}
		}
	}
	plan.Sweep = sw
	if err := plan.CheckSweep(); err != nil {
		return nil, nil, cli.Exit(err, exitBadUsage)
	}
	labels := axisLabels(sw.Axes)
	var runs []sweepRun
	// Every point has the plan's variants: CheckSweep resolved each
	// combination already, and a point's seed changes no value. (Resolving
	// every point again here took 17 s and 148 MB for 100000 runs.)
	for i := range sw.Len() {
		pt := sw.Point(i)
		params := map[string]string{}
		var name []string
		for j, a := range sw.Axes {
			params[a.Key] = pt.Values[j]
			name = append(name, labels[j]+"="+fileValue(pt.Values[j]))
		}
		for v, s := range plan.Runs {
			id := slices.Clone(name)
			if s.Variant != "" {
				id = append(id, "variant="+s.Variant)
			}
			id = append(id, "seed="+strconv.FormatUint(pt.Seed, 10))
			runs = append(runs, sweepRun{Run: sweep.Run{Index: len(runs), ID: strings.Join(id, ","), Params: params,
				Seed: pt.Seed, Variant: s.Variant, Scenario: plan.Name}, point: pt, variant: v})
		}
	}
	seen := map[string]bool{}
	for i := range runs {
		runs[i].ID = fitName(runs[i].ID)
		if seen[runs[i].ID] {
			runs[i].ID += ",run=" + strconv.Itoa(runs[i].Index) // two values that read the same in a file name
		}
		seen[runs[i].ID] = true
	}
	return plan, runs, nil
}

// maxRunName bounds a run's folder name, below the 255 bytes a file name
// may have on Linux, with room for the ",run=N" of two equal names.
const maxRunName = 200

// fitName returns id, a run's folder name, whole when it fits
// maxRunName, else its head and a hash of the whole (the same for the
// same id, so that a sweep run again finds its runs' folders); its
// parameters are whole in sweep-run.json and sweep.csv.
func fitName(id string) string {
	if len(id) <= maxRunName {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	head := id[:maxRunName-17]
	for !utf8.ValidString(head) {
		head = head[:len(head)-1]
	}
	return head + "~" + hex.EncodeToString(sum[:8])
}

// runSweepPoint runs one run of the sweep into its folder in out, and
// marks it done. It returns the expectations the run did not meet.
func runSweepPoint(ctx context.Context, c *cli.Context, plan *scenario.Plan, r sweepRun, out *outdir.Dir, log *zap.Logger) ([]string, error) {
	at, err := plan.At(plan.Sweep, r.point)
	if err != nil {
		return nil, err
	}
	one := &scenario.Plan{Name: at.Name, Path: at.Path, Runs: at.Runs[r.variant : r.variant+1]}
	dir, err := out.Sub(r.ID)
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	sum, runErr := emulator.Run(ctx, one, emulator.Options{Log: log.Named("emulator").With(zap.String("run", r.ID)),
		Version: versionString(), OutDir: dir})
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if err := emulator.WriteResults(dir, one, sum); err != nil {
		return nil, err
	}
	if c.Bool("plots") {
		if _, err := report.Plot(dir); err != nil {
			return nil, err
		}
		if err := report.HTML(dir, versionString()); err != nil {
			return nil, err
		}
	}
	if runErr != nil {
		return nil, runErr
	}
	var unmet []string
	for _, u := range emulator.ExpectationFailures(sum) {
		unmet = append(unmet, r.ID+": "+u)
	}
	return unmet, writeJSON(dir, sweep.RunFile, r.Run)
}

// writeJSON writes v as the file name of dir atomically: a reader sees
// all of it or none.
func writeJSON(dir *outdir.Dir, name string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return dir.WriteFile(name, append(b, '\n'))
}

// axisLabels names each axis in run folders by the last part of its key,
// or more of it where two axes would read the same (flows.a.cc, flows.b.cc).
func axisLabels(axes []scenario.Axis) []string {
	labels := make([]string, len(axes))
	for depth := 1; ; depth++ {
		count := map[string]int{}
		for i, a := range axes {
			segs := strings.Split(a.Key, ".")
			labels[i] = strings.Join(segs[max(0, len(segs)-depth):], ".")
			count[labels[i]]++
		}
		unique := true
		for _, n := range count {
			unique = unique && n == 1
		}
		if unique {
			return labels
		}
	}
}

// unsafeInName are the characters a value loses in a folder name.
var unsafeInName = regexp.MustCompile(`[^A-Za-z0-9.+-]+`)

// fileValue writes a swept value for a folder name: 1% is 1pct,
// {discipline: fq_codel} is discipline_fq_codel.
func fileValue(v string) string {
	v = strings.ReplaceAll(v, "%", "pct")
	v = strings.Trim(unsafeInName.ReplaceAllString(v, "_"), "_")
	if v == "" {
		v = "_"
	}
	return v
}

// shardsEnv is the variable that gives --shard auto the sweep's number of
// shards. A batch engine's own count cannot: a Slurm array's
// SLURM_ARRAY_TASK_COUNT is how many tasks one submission has, so a task
// submitted again (sbatch --array=5) is an array of one, and a strided or
// listed array (--array=0-7:2, --array=1,3,6) has fewer tasks than shards.
const shardsEnv = "NETJAM_SHARDS"

// The batch engines --shard auto knows, as sweep-plan.json names them.
const (
	batchSlurm      = "slurm"
	batchKubernetes = "kubernetes"
)

// parseShard reads --shard: "" (everything), "I/N", or "auto" (from the
// batch engine's environment, see autoShard). batch names the engine
// --shard auto took the shard from, "" for the others.
func parseShard(s string) (shard, shards int, batch string, err error) {
	switch s {
	case "":
		return 0, 1, "", nil
	case "auto":
		return autoShard(os.LookupEnv)
	}
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil {
		return 0, 0, "", fmt.Errorf("--shard: %q is not I/N or auto", s)
	}
	shard, shards, err = checkShard(i, n)
	return shard, shards, "", err
}

// autoShard is --shard auto: the shard is the task's index, from
// JOB_COMPLETION_INDEX (a Kubernetes Indexed Job's pod) or
// SLURM_ARRAY_TASK_ID (a Slurm job array's task), and the number of
// shards is fixed for the sweep, NETJAM_SHARDS (for Kubernetes also
// JOB_COMPLETIONS, which older manifests set). So a task submitted again
// runs the same shard, whatever else its submission holds, and an index
// that is not a shard is refused.
func autoShard(lookup func(string) (string, bool)) (shard, shards int, batch string, err error) {
	var indexVar string
	switch {
	case has(lookup, "JOB_COMPLETION_INDEX"):
		indexVar, batch = "JOB_COMPLETION_INDEX", batchKubernetes
	case has(lookup, "SLURM_ARRAY_TASK_ID"):
		indexVar, batch = "SLURM_ARRAY_TASK_ID", batchSlurm
	default:
		return 0, 0, "", errors.New("--shard auto: neither JOB_COMPLETION_INDEX (Kubernetes Indexed Job) nor SLURM_ARRAY_TASK_ID (Slurm job array) is set")
	}
	index, err := envInt(lookup, indexVar)
	if err != nil {
		return 0, 0, "", err
	}
	countVar := shardsEnv
	if !has(lookup, shardsEnv) && batch == batchKubernetes && has(lookup, "JOB_COMPLETIONS") {
		countVar = "JOB_COMPLETIONS"
	}
	if !has(lookup, countVar) {
		return 0, 0, "", fmt.Errorf("--shard auto: %s is %d, but %s, the sweep's number of shards, is not set: set it in the task's environment (deploy/ does); the array's own count of tasks is not the sweep's (a task submitted again is an array of one)", indexVar, index, shardsEnv)
	}
	n, err := envInt(lookup, countVar)
	if err != nil {
		return 0, 0, "", err
	}
	if n < 1 {
		return 0, 0, "", fmt.Errorf("--shard auto: %s=%d: a sweep has 1 shard or more", countVar, n)
	}
	if index < 0 || index >= n {
		hint := fmt.Sprintf("submit indexes 0 to %d only (sbatch --array=0-%d, or some of them)", n-1, n-1)
		if batch == batchKubernetes {
			hint = fmt.Sprintf("the Job's completions must be %d", n)
		}
		return 0, 0, "", fmt.Errorf("--shard auto: %s is %d, but the sweep's shards are 0 to %d (%s=%d): a task's index is its shard, so %s", indexVar, index, n-1, countVar, n, hint)
	}
	return index, n, batch, nil
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

func checkShard(i, n int) (int, int, error) {
	if n < 1 || i < 0 || i >= n {
		return 0, 0, fmt.Errorf("--shard: shard %d of %d does not exist (shards count from 0 to N-1)", i, n)
	}
	return i, n, nil
}
