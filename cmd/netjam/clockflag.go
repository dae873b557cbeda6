package main

import (
	"fmt"

	"github.com/netjam/netjam/scenario"
	"github.com/urfave/cli/v2"
)

// clockFlag is --clock of run and sweep.
var clockFlag = &cli.StringFlag{
	Name:  "clock",
	Value: "real",
	Usage: "real, or virtual: run a lab scenario (netstack hosts, no tun section) on a virtual clock, as fast as the CPU allows and the same from the same seed (docs/virtual-time.md)",
}

// checkClock checks --clock's value before the scenario is loaded with
// it (planOptions), so that a wrong one is named as the flag's.
func checkClock(c *cli.Context) error {
	switch v := c.String("clock"); v {
	case scenario.ClockReal, scenario.ClockVirtual:
		return nil
	default:
		return cli.Exit(fmt.Sprintf("--clock: %q is not a clock (expected real or virtual)", v), exitBadUsage)
	}
}
