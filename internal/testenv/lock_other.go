//go:build !unix

package testenv

import (
	"errors"
	"os"
)

// lockFile fails: the lock orders tests that change /dev/net/tun, which
// only Linux has (RequireTUN skips them first).
func lockFile(*os.File, bool) error {
	return errors.New("testenv: no flock(2) here")
}
