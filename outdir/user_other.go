//go:build !linux

package outdir

import (
	"errors"
	"io/fs"
	"os"
)

// errNoUser is the error for an Owner where Linux's per-thread
// file-system ids are missing.
var errNoUser = errors.New("outdir: writing for another user needs Linux")

func asUser(*Owner, func() error) error { return errNoUser }

func mayWrite(*os.Root) error { return errNoUser }

// fileOwner reports no owner: an Owner needs Linux (asUser), so nothing
// here asks.
func fileOwner(fs.FileInfo) (uid int, nlink uint64, ok bool) { return 0, 0, false }
