package clock

import (
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestPinnedThreadAsksForAShortSlice: while pinned to sleep precisely, the
// thread runs with the short scheduler slice, which makes the kernel run
// it at once when a sleep ends instead of after the running task's slice
// (BenchmarkPreciseLateness); unpinned, it has the kernel's default again,
// for whatever goroutine runs on it next. Its nice value is kept.
func TestPinnedThreadAsksForAShortSlice(t *testing.T) {
	runtime.LockOSThread() // stays on this thread across unpinPrecise
	defer runtime.UnlockOSThread()
	before, err := unix.SchedGetAttr(0, 0)
	if err != nil {
		t.Skipf("sched_getattr: %v", err)
	}
	if before.Runtime == 0 {
		t.Skip("this kernel has no slices of its own for SCHED_OTHER threads (Linux 6.12 and later)")
	}
	if time.Duration(before.Runtime) == shortSlice {
		t.Fatalf("the thread has the short slice before it was pinned")
	}
	pinPrecise()
	pinned, err := unix.SchedGetAttr(0, 0)
	unpinPrecise()
	if err != nil {
		t.Fatal(err)
	}
	after, err := unix.SchedGetAttr(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if time.Duration(pinned.Runtime) != shortSlice || pinned.Policy != before.Policy || pinned.Nice != before.Nice {
		t.Fatalf("pinned: %+v, want the slice %v and the policy and nice value of %+v", *pinned, shortSlice, *before)
	}
	if after.Runtime != before.Runtime || after.Nice != before.Nice {
		t.Fatalf("unpinned: %+v, want %+v again", *after, *before)
	}
}
