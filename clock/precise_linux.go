package clock

import (
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// Coarse is the granularity of Go's own timers on Linux: the scheduler
// waits in epoll_wait, whose timeout is in whole milliseconds, so a timer
// can fire up to this late. Schedulers that must be on time sleep the last
// Coarse before an event with PreciseSleep.
const Coarse = time.Millisecond

// PreciseThread prepares the calling goroutine's thread for PreciseSleep:
// it pins the goroutine to its thread and sets the thread's timer slack to
// 1 ns (Linux's default of 50 us would be most of the error avoided). The
// returned function undoes the pinning. Meant for a goroutine that owns a
// scheduler loop.
func PreciseThread() func() {
	runtime.LockOSThread()
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0) // best effort: without it the sleep is 50 us coarser
	return runtime.UnlockOSThread
}

// PreciseSleep blocks the calling thread for d with nanosleep(2): within
// microseconds on a thread prepared by PreciseThread.
func PreciseSleep(d time.Duration) {
	ts := unix.NsecToTimespec(int64(d))
	for unix.Nanosleep(&ts, &ts) == unix.EINTR {
	}
}
