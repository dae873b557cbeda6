// Package buildinfo says which netjam a binary is: the version stamped at
// build time, else what the Go toolchain recorded, with the VCS revision
// it was built from. It is what netjam version, the logs, summary.json
// and the reports name.
package buildinfo

import (
	"runtime/debug"
	"strings"
)

// Version is the version plus the VCS revision the binary was built
// from, when the build recorded one. stamped is the version set at build
// time (go build -ldflags "-X main.version=v0.1.0"), "" when none: it is
// then the main module's version as the toolchain stamped it: a module
// version for go install of a published release, a pseudo-version for a
// build from a git checkout (Go 1.24 and later), or "(devel)" when the
// toolchain knew none, which is what it is: an unversioned development
// build.
func Version(stamped string) string {
	bi, ok := debug.ReadBuildInfo()
	return format(stamped, bi, ok)
}

// format is Version for a given build.
func format(stamped string, bi *debug.BuildInfo, ok bool) string {
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
