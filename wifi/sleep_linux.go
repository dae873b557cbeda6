package wifi

import (
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// preciseThread prepares the calling goroutine's thread for preciseSleep:
// it pins the goroutine to its thread and sets the thread's timer slack to
// 1 ns (Linux's default of 50 us would be most of the error we avoid). The
// returned function undoes the pinning. It repeats package impair's
// unexported helper of the same name.
func preciseThread() func() {
	runtime.LockOSThread()
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0) // best effort: without it the sleep is 50 us coarser
	return runtime.UnlockOSThread
}

// preciseSleep blocks the thread for d with nanosleep(2). Go's own timers
// wake up to a millisecond late: the scheduler waits in epoll with a
// timeout in whole milliseconds.
func preciseSleep(d time.Duration) {
	ts := unix.NsecToTimespec(int64(d))
	for unix.Nanosleep(&ts, &ts) == unix.EINTR {
	}
}
