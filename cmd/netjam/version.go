package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/urfave/cli/v2"
)

// version is set at build time: go build -ldflags "-X main.version=v0.1.0".
// When it is not, versionString falls back to what the Go toolchain
// recorded.
var version = ""

// versionString is the version plus the VCS revision the binary was built
// from, when the build recorded one. Without -X main.version it is the
// main module's version as the toolchain stamped it: a module version for
// go install of a published release, a pseudo-version for a build from a
// git checkout (Go 1.24 and later), or "(devel)" when the toolchain knew
// none, which is what it is: an unversioned development build.
func versionString() string {
	bi, ok := debug.ReadBuildInfo()
	return formatVersion(version, bi, ok)
}

// formatVersion is versionString for a given build.
func formatVersion(stamped string, bi *debug.BuildInfo, ok bool) string {
	v := stamped
	if v == "" && ok {
		v = bi.Main.Version
	}
	if v == "" {
		v = "(devel)"
	}
	if !ok {
		return v
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev != "" && !strings.Contains(v, rev) {
		v += " (" + rev + dirty + ")"
	}
	return v
}

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
