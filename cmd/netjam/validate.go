package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/netjam/netjam/emulator"
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
				ok, warnings, err := emulator.Validate(path, c.StringSlice("set"))
				if err != nil {
					bad++
					fmt.Fprintln(c.App.ErrWriter, err)
					continue
				}
				for _, w := range warnings {
					fmt.Fprintf(c.App.ErrWriter, "%s: warning: %s\n", path, w)
				}
				fmt.Fprintf(c.App.Writer, "%s: %s\n", path, ok)
			}
			if bad > 0 {
				files := "files"
				if c.NArg() == 1 {
					files = "file"
				}
				return cli.Exit(fmt.Sprintf("%d of %d %s invalid", bad, c.NArg(), files), exitBadUsage)
			}
			return nil
		},
	}
}
