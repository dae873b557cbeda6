package main

import (
	"fmt"

	"github.com/netjam/netjam/emulator"
	"github.com/netjam/netjam/scenario"
	"github.com/urfave/cli/v2"
)

// clockFlag is --clock of run and sweep.
var clockFlag = &cli.StringFlag{
	Name:  "clock",
	Value: "real",
	Usage: "real, or virtual: run a lab scenario (netstack hosts, no tun section) on a virtual clock, as fast as the CPU allows and the same from the same seed (docs/virtual-time.md)",
}

// checkClock checks --clock's value, and that every run of plan can run
// on the clock it names.
func checkClock(c *cli.Context, plan *scenario.Plan) error {
	switch v := c.String("clock"); v {
	case "real":
		return nil
	case "virtual":
		if err := emulator.CheckVirtual(plan); err != nil {
			return cli.Exit(fmt.Sprintf("--clock virtual: %v\n(run those with --clock real, or leave them out with --variant)", err), exitBadUsage)
		}
		return nil
	default:
		return cli.Exit(fmt.Sprintf("--clock: %q is not a clock (expected real or virtual)", v), exitBadUsage)
	}
}
