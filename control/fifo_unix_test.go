//go:build unix

package control

import "syscall"

// mkfifo makes a FIFO at path, which a reader of results must not block
// on.
func mkfifo(path string) error { return syscall.Mkfifo(path, 0o644) }
