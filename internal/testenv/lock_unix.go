//go:build unix

package testenv

import (
	"os"

	"golang.org/x/sys/unix"
)

// lockFile takes flock(2)'s lock on f, exclusive or shared, waiting for it.
func lockFile(f *os.File, exclusive bool) error {
	how := unix.LOCK_SH
	if exclusive {
		how = unix.LOCK_EX
	}
	for {
		if err := unix.Flock(int(f.Fd()), how); err != unix.EINTR {
			return err
		}
	}
}
