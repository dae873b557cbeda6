package control

import "errors"

// mkfifo fails: Windows has no FIFOs in its file system.
func mkfifo(string) error { return errors.ErrUnsupported }
