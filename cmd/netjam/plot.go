package main

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/urfave/cli/v2"

	"github.com/netjam/netjam/report"
)

func plotCommand() *cli.Command {
	return &cli.Command{
		Name:      "plot",
		Usage:     "redraw the plots and report.html of a saved run, without running it again",
		ArgsUsage: "DIR",
		Description: `Reads summary.json, timeseries.csv and the scenario*.yaml files of DIR, the
output folder of netjam run, and writes into it the plots (each as PNG and
SVG: throughput, one-way delay and its CDF, RTT, cwnd, and the bottleneck
queue of each direction) and report.html, one self-contained page with the
tables, the plots and the scenario as run. Prints the files written.

Examples:
   netjam plot results/bottleneck-coexistence-20260101-120000
   netjam run configs/bottleneck-coexistence.yaml --out /tmp/bc -q && netjam plot /tmp/bc`,
		OnUsageError: usageError,
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return cli.Exit(fmt.Sprintf("plot takes one output folder, got %d arguments", c.NArg()), exitBadUsage)
			}
			dir := c.Args().First()
			owner, err := resultsOwner()
			if err != nil {
				return cli.Exit(fmt.Sprintf("plot %s: %v", dir, err), exitFailed)
			}
			names, err := report.Redraw(dir, owner, versionString())
			if errors.Is(err, report.ErrNotRun) {
				return cli.Exit(err, exitBadUsage)
			}
			if err != nil {
				return cli.Exit(fmt.Sprintf("plot %s: %v", dir, err), exitFailed)
			}
			for _, n := range names {
				if _, err := fmt.Fprintln(c.App.Writer, filepath.Join(dir, n)); err != nil {
					return cli.Exit(err, exitFailed)
				}
			}
			return nil
		},
	}
}
