package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/netjam/netjam/emulator"
	"github.com/netjam/netjam/scenario"
)

func validateCommand() *cli.Command {
	return &cli.Command{
		Name:      "validate",
		Usage:     "check scenario files without running them",
		ArgsUsage: "SCENARIO.yaml...",
		Description: `Reports every error of every file (file:line: key: what is expected) and
exits 2 if any file has one.

Examples:
   netjam validate configs/*.yaml
   netjam validate my.yaml --set link.uplink.rate=10Mbps`,
		Flags: []cli.Flag{
			&cli.StringSliceFlag{Name: "set", Usage: "validate with this override applied: KEY=VALUE (repeatable)"},
		},
		OnUsageError: usageError,
		Action: func(c *cli.Context) error {
			if c.NArg() == 0 {
				return cli.Exit("validate needs at least one scenario file", exitBadUsage)
			}
			bad := 0
			for _, path := range c.Args().Slice() {
				plan, err := scenario.Load(path, scenario.Options{Sets: c.StringSlice("set")})
				if err == nil {
					err = plan.CheckSweep()
				}
				if err == nil {
					err = emulator.CheckExpectations(plan)
				}
				if err != nil {
					bad++
					fmt.Fprintln(c.App.ErrWriter, err)
					continue
				}
				for _, w := range plan.Warnings {
					fmt.Fprintf(c.App.ErrWriter, "%s: warning: %s\n", path, w)
				}
				sweep := ""
				if n, _ := plan.SweepRuns(); plan.Sweep != nil {
					sweep = fmt.Sprintf("; a sweep of %d %s", n, plural(n, "run")) // CheckSweep counted them
				}
				fmt.Fprintf(c.App.Writer, "%s: ok (%s, %d %s%s)\n", path, plan.Name, len(plan.Runs), plural(len(plan.Runs), "run"), sweep)
			}
			if bad > 0 {
				return cli.Exit(fmt.Sprintf("%d of %d %s invalid", bad, c.NArg(), plural(c.NArg(), "file")), exitBadUsage)
			}
			return nil
		},
	}
}

func plural(n int, s string) string {
	if n == 1 {
		return s
	}
	return s + "s"
}
