//go:build !linux

package main

import (
	"github.com/urfave/cli/v2"

	"github.com/netjam/netjam/scenario"
)

// A rootless run needs Linux's user and network namespaces: elsewhere a
// run in TUN mode goes on in this process and fails at its device with
// the one error of package hostnet ("TUN mode needs Linux: ...").

// rootlessRunEnv marks netjam run started again in its namespaces.
const rootlessRunEnv = "NETJAM_ROOTLESS_RUN"

// needsRootless reports false: there is no rootless run here.
func needsRootless(*scenario.Plan) bool { return false }

// rerunRootless is never called (needsRootless is false).
func rerunRootless(*cli.Context) (err error, ok bool) { return nil, false }
