//go:build !linux

package clock

import "time"

// Coarse is the granularity assumed for Go's timers.
const Coarse = time.Millisecond

// Pinning and the extra processor are Linux's (see precise_linux.go).
func pinPrecise()         {}
func unpinPrecise()       {}
func preciseSlot() func() { return func() {} }

// PreciseSleep sleeps d with time.Sleep outside Linux.
func PreciseSleep(d time.Duration) { time.Sleep(d) }
