package main

import (
	"github.com/urfave/cli/v2"

	"github.com/netjam/netjam/emulator"
)

// failure is a run's error as netjam's last words (emulator.Advice): exit
// 2 when all it says is a missing privilege, else 1.
func failure(err error) error {
	msg, privilege, only := emulator.Advice(err)
	switch {
	case only:
		return cli.Exit(msg, exitBadUsage)
	case privilege:
		return cli.Exit(msg, exitFailed)
	case emulator.IsPrivilege(err):
		return cli.Exit(err, exitBadUsage)
	}
	return cli.Exit(err, exitFailed)
}
