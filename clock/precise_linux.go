package clock

import (
	"runtime"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Coarse is the granularity of Go's own timers on Linux: the scheduler
// waits in epoll_wait, whose timeout is in whole milliseconds, so a timer
// can fire up to this late. Schedulers that must be on time sleep the last
// Coarse before an event with PreciseSleep.
const Coarse = time.Millisecond

// pinPrecise pins the calling goroutine to its thread and sets the
// thread's timer slack to 1 ns (Linux's default of 50 us would be most of
// the error PreciseSleep avoids). unpinPrecise undoes the pin; the thread
// keeps its slack, which costs the goroutines it runs later nothing.
//
// A goroutine pinned to its thread is expensive to wake: the runtime must
// wake that thread and hand it a processor, two threads' work, where any
// idle thread can run an unpinned one. A scheduler loop (Drive) pins
// itself only while it sleeps precisely and unpins before it waits for
// an arrival: measured on UDP through TUN mode with no impairment, where
// the direction has no events and is woken by nearly every datagram, the
// pinned goroutine's hand-overs took a sixth of netjam's CPU.
//
// While pinned, the thread also asks the kernel's scheduler for a short
// slice (shortSlice): see setSlice.
func pinPrecise() {
	runtime.LockOSThread()
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0) // best effort: without it the sleep is 50 us coarser
	setSlice(shortSlice)
}

// unpinPrecise undoes pinPrecise, giving the thread the kernel's default
// slice again.
func unpinPrecise() {
	setSlice(0)
	runtime.UnlockOSThread()
}

// shortSlice is the slice a thread that sleeps precisely asks for: the
// shortest Linux grants (0.1 ms). 0 leaves the kernel's default (a
// variable for the benchmark that sets the two side by side).
var shortSlice = 100 * time.Microsecond

// setSlice sets the calling thread's scheduler slice (sched_setattr's
// sched_runtime for a SCHED_OTHER thread, Linux 6.12 and later), keeping
// its policy and nice value; 0 gives it the default again. Best effort:
// older kernels ignore the field, and any error leaves the thread as it
// was.
//
// A nanosleep that ends makes the thread runnable, but on a busy machine
// the kernel's EEVDF scheduler lets the task on the CPU finish its slice
// first (1.4 ms by default on this project's 2-core machine) unless the
// woken task's slice is shorter: then it runs at once. No privilege is
// needed. BenchmarkPreciseLateness, events every 3 ms beside three busy
// loops on 2 cores: 99th percentile of lateness 4.2 ms with the default
// slice, 0.16 ms with the short one (mean 164 and 70 us). The thread does
// little while pinned (a direction's pass), so the slice makes it switch
// no more often; it has the default again once unpinned.
func setSlice(d time.Duration) {
	// The raw calls: unix.SchedGetAttr puts its result on the heap.
	var a unix.SchedAttr
	p := uintptr(unsafe.Pointer(&a))
	if _, _, e := unix.Syscall6(unix.SYS_SCHED_GETATTR, 0, p, unix.SizeofSchedAttr, 0, 0, 0); e != 0 ||
		a.Policy != unix.SCHED_NORMAL || a.Runtime == uint64(d) {
		return
	}
	a.Size, a.Flags, a.Runtime = unix.SizeofSchedAttr, 0, uint64(d)
	_, _, _ = unix.Syscall(unix.SYS_SCHED_SETATTR, 0, p, 0)
}

// preciseSlot keeps GOMAXPROCS one above what it was while any caller
// holds a slot; the returned function gives it back. Meant for a
// goroutine that owns a scheduler loop which sleeps with PreciseSleep,
// while it does (Drive): where no direction sleeps precisely (a path with
// nothing to delay), the extra processor only made the runtime look for
// work on more threads: measured on TUN mode with no impairment, about a
// tenth more CPU per UDP datagram, and TCP out of the path at 8.0 to 9.4
// Gbit/s instead of 9.2 to 10.5.
//
// The extra P is for everything else. A goroutine in nanosleep keeps its
// P (the runtime treats it as a syscall that may return at once), and the
// runtime takes the P back only after the sleep has lasted a tick of its
// monitor, 20 us or more. A scheduler at a high packet rate sleeps a few
// microseconds between departures, so it never gives its P back: on a
// 2-core machine, the two directions of a path held both Ps and every
// other goroutine (the TUN writer, the netstack) waited for sysmon, which
// measured as a TCP transfer out of a 10 Gbit/s path at 1.2 Gbit/s instead
// of 2.1 to 2.6. One P more in all, not one per thread: one per thread was
// a little faster there (2.4 to 2.7 Gbit/s) but cost half as much CPU
// again at moderate rates, the runtime spinning up threads for
// the idle Ps (a lab flow at 100 Mbit/s: 0.72 CPU seconds per second
// against 0.48 without the extra P and 0.54 with one).
func preciseSlot() func() {
	preciseSlots(1)
	return func() { preciseSlots(-1) }
}

// precise counts the slots held; preciseMu serializes it with the
// read-modify-write of GOMAXPROCS.
var (
	preciseMu sync.Mutex
	precise   int
)

// preciseSlots adds n to the slots held, raising GOMAXPROCS by one
// when the first is taken and lowering it again when the last is given back.
func preciseSlots(n int) {
	preciseMu.Lock()
	defer preciseMu.Unlock()
	before := precise
	precise += n
	switch {
	case before == 0 && precise > 0:
		runtime.GOMAXPROCS(runtime.GOMAXPROCS(0) + 1)
	case before > 0 && precise == 0:
		runtime.GOMAXPROCS(max(1, runtime.GOMAXPROCS(0)-1))
	}
}

// PreciseSleep blocks the calling thread for d with nanosleep(2): within
// microseconds on a thread prepared by pinPrecise.
func PreciseSleep(d time.Duration) {
	ts := unix.NsecToTimespec(int64(d))
	for unix.Nanosleep(&ts, &ts) == unix.EINTR {
	}
}
