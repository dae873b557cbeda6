package main

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/urfave/cli/v2"

	"github.com/netjam/netjam/report"
)

func mergeCommand() *cli.Command {
	return &cli.Command{
		Name:      "merge",
		Usage:     "gather the runs of a sweep (one folder, or the folders of its shards) into one table and report",
		ArgsUsage: "DIR...",
		Description: `Reads every finished run of a sweep below the folders given (the output
folders of netjam sweep, whole or one per shard) and writes into --out
(default: the first folder) sweep.json and sweep.csv, one row per run with
its parameters as columns and its figures (throughput, completion time,
retransmissions, loss, delays, drops, expectations met), and the sweep's
plots and sweep.html: each figure's mean and 95% confidence interval across
seeds against the first swept key, one line per value of the others.
Runs of the sweep that were not found are listed, as ranges of indexes and
shards whose folders were not given; the exit status is then 1. A
sweep-plan.json is checked first: its runs must be what its axes, seeds and
variants make, at most 100000 (the sweep's cap), and every run's index one
of them; sweep-plan.json and sweep-run.json are read up to 16 MiB,
summary.json up to 64 MiB.

Examples:
   netjam merge /tmp/sweep
   netjam merge shard-0 shard-1 shard-2 --out merged`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "out", Usage: "where to write the merged files (default: the first folder)"},
		},
		OnUsageError: usageError,
		Action: func(c *cli.Context) error {
			if c.NArg() == 0 {
				return cli.Exit("merge takes the folders of a sweep", exitBadUsage)
			}
			res, err := report.Merge(c.Args().Slice())
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
			names, err := report.WriteSweepReport(dir, res, versionString())
			if err != nil {
				return cli.Exit(fmt.Sprintf("merge: %v", err), exitFailed)
			}
			for _, n := range names {
				fmt.Fprintln(c.App.Writer, filepath.Join(out, n))
			}
			if n := res.MissingCount(); n > 0 {
				return cli.Exit(fmt.Sprintf("%d of the sweep's %d runs missing: %s; run the shards that hold them, or the sweep again to resume", n, res.Runs, res.MissingText()), exitFailed)
			}
			return nil
		},
	}
}
