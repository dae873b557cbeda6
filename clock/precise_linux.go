package clock

import (
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Coarse is the granularity of Go's own timers on Linux: the scheduler
// waits in epoll_wait, whose timeout is in whole milliseconds, so a timer
// can fire up to this late. Schedulers that must be on time sleep the last
// Coarse before an event with PreciseSleep.
const Coarse = time.Millisecond

// PreciseThread prepares the calling goroutine's thread for PreciseSleep:
// it pins the goroutine to its thread, sets the thread's timer slack to
// 1 ns (Linux's default of 50 us would be most of the error avoided), and
// raises GOMAXPROCS by one. The returned function undoes all three. Meant
// for a goroutine that owns a scheduler loop.
//
// The extra P is the thread's own. A goroutine in nanosleep keeps its P
// (the runtime treats it as a syscall that may return at once), and the
// runtime takes the P back only after the sleep has lasted a tick of its
// monitor, 20 us or more. A scheduler at a high packet rate sleeps a few
// microseconds between departures, so it never gives its P back: on a
// 2-core machine, the two directions of a path held both Ps and every
// other goroutine (the TUN writer, the netstack) waited for sysmon, which
// measured as a TCP transfer out of a 10 Gbit/s path at 1.2 Gbit/s instead
// of 2.2. The thread is asleep in the kernel most of the time, so the
// operating system still shares the cores fairly.
func PreciseThread() func() {
	runtime.LockOSThread()
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0) // best effort: without it the sleep is 50 us coarser
	addProcs(1)
	return func() {
		addProcs(-1)
		runtime.UnlockOSThread()
	}
}

// procsMu serializes the read-modify-write of GOMAXPROCS by precise
// threads starting and ending at the same time.
var procsMu sync.Mutex

func addProcs(n int) {
	procsMu.Lock()
	defer procsMu.Unlock()
	runtime.GOMAXPROCS(max(1, runtime.GOMAXPROCS(0)+n))
}

// PreciseSleep blocks the calling thread for d with nanosleep(2): within
// microseconds on a thread prepared by PreciseThread.
func PreciseSleep(d time.Duration) {
	ts := unix.NsecToTimespec(int64(d))
	for unix.Nanosleep(&ts, &ts) == unix.EINTR {
	}
}
