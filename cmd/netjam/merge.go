package main

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/urfave/cli/v2"

	"github.com/netjam/netjam/report"
	"github.com/netjam/netjam/sweep"
)

func mergeCommand() *cli.Command {
	return &cli.Command{
		Name:      "merge",
		Usage:     "gather the runs of a sweep (one folder, or the folders of its shards) into one table and report",
		ArgsUsage: "DIR...",
		Description: `Reads every finished run of a sweep below the folders given (the output
folders of netjam sweep, whole or one per shard) and writes into --out
(default: the first folder given) sweep.json and sweep.csv, one row per run with
its parameters as columns and its figures (throughput, completion time,
retransmissions, loss, delays, drops, expectations met), and the sweep's
plots and sweep.html: each figure's mean and 95% confidence interval across
seeds against the first swept key, one line per value of the others.
Runs of the sweep that were not found are listed, the exit status is then
1: when the folders are shards, by shard, with its batch engine's task
index and its folder or that it was not given, then the commands that run
them again (for a Slurm array, an sbatch of deploy/slurm-array.sh with the
tasks to submit again; they are also in sweep.json, under rerun); else as
ranges of indexes. A sweep-plan.json is checked first: its runs must be
what its axes, seeds and variants make, at most 100000 (the sweep's cap),
and every run's index one of them; sweep-plan.json and sweep-run.json are
read up to 16 MiB, summary.json up to 64 MiB.

Examples:
   netjam merge /tmp/sweep
   netjam merge results/shard-* --out results/merged`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "out", Usage: "where to write the merged files (default: the first folder)"},
		},
		OnUsageError: usageError,
		Action: func(c *cli.Context) error {
			if c.NArg() == 0 {
				return cli.Exit("merge takes the folders of a sweep", exitBadUsage)
			}
			res, err := sweep.Merge(c.Args().Slice())
			if errors.Is(err, report.ErrNotRun) {
				return cli.Exit(err, exitBadUsage)
			}
			if err != nil {
				return cli.Exit(fmt.Sprintf("merge: %v", err), exitFailed)
			}
			out := c.String("out")
			if out == "" {
				out = c.Args().First()
			}
			dir, _, err := openOutput(out)
			if err != nil {
				return err
			}
			defer dir.Close()
			names, err := sweep.WriteReport(dir, res, versionString())
			if err != nil {
				return cli.Exit(fmt.Sprintf("merge: %v", err), exitFailed)
			}
			for _, n := range names {
				fmt.Fprintln(c.App.Writer, filepath.Join(out, n))
			}
			if n := res.MissingCount(); n > 0 {
				return cli.Exit(res.MissingMessage(), exitFailed)
			}
			return nil
		},
	}
}
