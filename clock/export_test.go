package clock

import (
	"runtime/metrics"
	"slices"
	"sync/atomic"
	"time"
)

// SlowReadings makes every nth reading of the runtime's counts take d
// longer, as if the thread were descheduled in it, until undo.
func SlowReadings(n int, d time.Duration) (undo func()) {
	var i atomic.Int64
	readCounts = func(s []metrics.Sample) {
		metrics.Read(s)
		if i.Add(1)%int64(n) == 0 {
			time.Sleep(d)
		}
	}
	return func() { readCounts = metrics.Read }
}

// DumpState is what the clock makes of a dump of every goroutine's stack
// (runtime.Stack's text, the caller's first): "idle", "in syscall",
// "running", or "runtime" when none runs and some wait for the runtime.
func DumpState(dump string) string {
	var q quietness
	q.stuck = map[uint64]bool{}
	d := q.readDump([]byte(dump))
	if d.inRuntime && d.st != running {
		return "runtime"
	}
	return [...]string{idle: "idle", inSyscall: "in syscall", running: "running"}[d.st]
}

// RuntimeWaitAlso makes a goroutine in state (a stack dump's "[chan
// receive" say) count as waiting for the runtime, until undo.
func RuntimeWaitAlso(state string) (undo func()) {
	old := runtimeWaits
	runtimeWaits = append(slices.Clone(old), []byte(state))
	return func() { runtimeWaits = old }
}
