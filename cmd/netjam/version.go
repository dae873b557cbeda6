package main

import (
	"fmt"
	"runtime"

	"github.com/urfave/cli/v2"

	"github.com/netjam/netjam/internal/buildinfo"
)

// version is set at build time: go build -ldflags "-X main.version=v0.1.0".
// When it is not, versionString falls back to what the Go toolchain
// recorded.
var version = ""

// versionString is netjam's version, with the VCS revision the binary was
// built from (buildinfo.Version).
func versionString() string { return buildinfo.Version(version) }

func versionCommand() *cli.Command {
	return &cli.Command{
		Name:      "version",
		Usage:     "print netjam's version",
		UsageText: "netjam version",
		Action: func(c *cli.Context) error {
			_, err := fmt.Fprintf(c.App.Writer, "netjam %s %s/%s %s\n", versionString(), runtime.GOOS, runtime.GOARCH, runtime.Version())
			return err
		},
	}
}
