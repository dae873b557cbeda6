//go:build !linux

package outdir

import (
	"errors"
	"os"
)

// errNoUser is the error for an Owner where Linux's per-thread
// file-system ids are missing.
var errNoUser = errors.New("outdir: writing for another user needs Linux")

func asUser(*Owner, func() error) error { return errNoUser }

func mayWrite(*os.Root) error { return errNoUser }
