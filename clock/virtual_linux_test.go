package clock_test

import (
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netjam/netjam/clock"
)

// The virtual clock's waits for goroutines blocked in system calls, with
// pipes read and written by raw system calls (not through Go's poller)
// and a child process pinned to one CPU: Linux's calls.

// blockingPipe returns a pipe whose ends block in their system calls (not
// in Go's poller), closed at the test's end.
func blockingPipe(t *testing.T) (r, w int) {
	t.Helper()
	var p [2]int
	if err := syscall.Pipe(p[:]); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(p[0]); syscall.Close(p[1]) })
	return p[0], p[1]
}

// A write that blocks in its system call (a disk far behind, here a full
// pipe drained after 600 ms of wall time) is the run's work: time waits
// for it, however long. Before, time moved on after 200 ms, and the next
// timer fired while the write was still under way.
func TestVirtualWaitsForAWrite(t *testing.T) {
	v := clock.NewVirtual()
	r, w := blockingPipe(t)
	done := make(chan struct{})
	var wrote atomic.Int64 // no lock orders the two timers' goroutines
	var next time.Duration
	v.AfterFunc(time.Millisecond, func() {
		syscall.Write(w, make([]byte, 1<<20)) // the pipe holds 64 KiB
		wrote.Store(int64(v.Now().Sub(clock.Epoch)))
	})
	v.AfterFunc(2*time.Millisecond, func() {
		next = v.Now().Sub(clock.Epoch)
		if wrote.Load() == 0 {
			t.Error("the next timer fired while the write was blocked")
		}
		close(done)
	})
	drainLater(r, 600*time.Millisecond)
	runVirtual(t, v, done)
	if d := time.Duration(wrote.Load()); d != time.Millisecond || next != 2*time.Millisecond {
		t.Errorf("the write ended at %v and the next timer fired at %v, want 1ms and 2ms", d, next)
	}
	if g := v.Stats().GaveUp; g != 0 {
		t.Errorf("gave up %d times on a write", g)
	}
}

// writesChildEnv names, in a child of TestVirtualWaitsForWritesOnOneCPU,
// how many rounds of writes it runs.
const writesChildEnv = "NETJAM_TEST_CLOCK_WRITES"

// A write whose processor the runtime took away while it was blocked is
// the run's work until it has returned, on a crowded CPU too. Leaving its
// system call, such a goroutine stops counting as in the call before it
// is queued to run, and it waits for the scheduler's lock in between, a
// lock the clock's readings take over and over: the readings found the
// process idle, and the next timer fired while the write had not come
// back (5 to 15 rounds of 300 in CI's load; 7 of 60 in three processes
// sharing one CPU). Three children share one CPU here, each running
// rounds of a write blocked for a few milliseconds.
func TestVirtualWaitsForWritesOnOneCPU(t *testing.T) {
	if n, err := strconv.Atoi(os.Getenv(writesChildEnv)); err == nil {
		for range n {
			waitForAWrite(t)
		}
		return
	}
	var cpus unix.CPUSet
	if err := unix.SchedGetaffinity(0, &cpus); err != nil {
		t.Skip("no CPU affinity here:", err)
	}
	one := -1
	for c := 0; c < 1024 && one < 0; c++ {
		if cpus.IsSet(c) {
			one = c
		}
	}
	// The children inherit the affinity of the thread that starts them;
	// that thread ends with this goroutine, locked.
	children := make(chan []*exec.Cmd)
	go func() {
		runtime.LockOSThread()
		var set unix.CPUSet
		set.Set(one)
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			t.Error(err)
			children <- nil
			return
		}
		var cmds []*exec.Cmd
		for range 3 {
			cmd := exec.Command(os.Args[0], "-test.run=^TestVirtualWaitsForWritesOnOneCPU$", "-test.count=1")
			cmd.Env = append(os.Environ(), writesChildEnv+"=20")
			var out strings.Builder
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Error(err)
				break
			}
			cmds = append(cmds, cmd)
		}
		children <- cmds
	}()
	for i, cmd := range <-children {
		if err := cmd.Wait(); err != nil {
			t.Errorf("child %d: %v\n%s", i, err, cmd.Stdout)
		}
	}
}

// waitForAWrite runs a virtual clock with two timers 1 ms apart: the first
// writes 1 MiB to a pipe that holds 64 KiB and is drained after 5 ms of
// wall time, the second checks that the write has returned.
func waitForAWrite(t *testing.T) {
	v := clock.NewVirtual()
	r, w := blockingPipe(t)
	done := make(chan struct{})
	var wrote atomic.Int64
	v.AfterFunc(time.Millisecond, func() {
		syscall.Write(w, make([]byte, 1<<20))
		wrote.Store(int64(v.Now().Sub(clock.Epoch)))
	})
	v.AfterFunc(2*time.Millisecond, func() {
		if wrote.Load() == 0 {
			t.Error("the next timer fired while the write had not returned")
		}
		close(done)
	})
	drained := drainLater(r, 5*time.Millisecond)
	runVirtual(t, v, done)
	<-drained
}

// drainLater reads 1 MiB from the pipe r after wall time d, and closes
// the channel it returns once done (or r fails).
func drainLater(r int, d time.Duration) <-chan struct{} {
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		time.Sleep(d)
		b := make([]byte, 1<<16)
		for n := 0; n < 1<<20; {
			k, err := syscall.Read(r, b)
			if err != nil {
				return
			}
			n += k
		}
	}()
	return drained
}

// A read given up on does not make a later write look idle: once the
// reader has left its system call, another goroutine's blocked write holds
// time as it would have before. Before, the give-up raised the count of
// goroutines allowed in system calls to include the reader, and the write
// took its place unseen: the next timer fired while it was blocked.
func TestVirtualWaitsForAWriteAfterAGiveUp(t *testing.T) {
	v := clock.NewVirtual()
	r1, w1 := blockingPipe(t)
	r2, w2 := blockingPipe(t)
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		syscall.Read(r1, make([]byte, 1)) // given up on, then woken at 2 ms
	}()
	done := make(chan struct{})
	var wrote atomic.Int64
	var next time.Duration
	v.AfterFunc(time.Millisecond, func() {}) // the reader is given up on here
	v.AfterFunc(2*time.Millisecond, func() {
		syscall.Write(w1, []byte{1})
		<-readDone
	})
	v.AfterFunc(3*time.Millisecond, func() {
		syscall.Write(w2, make([]byte, 1<<20)) // the pipe holds 64 KiB
		wrote.Store(int64(v.Now().Sub(clock.Epoch)))
	})
	v.AfterFunc(4*time.Millisecond, func() {
		next = v.Now().Sub(clock.Epoch)
		if wrote.Load() == 0 {
			t.Error("the next timer fired while the write was blocked")
		}
		close(done)
	})
	drainLater(r2, time.Second)
	runVirtual(t, v, done)
	if d := time.Duration(wrote.Load()); d != 3*time.Millisecond || next != 4*time.Millisecond {
		t.Errorf("the write ended at %v and the next timer fired at %v, want 3ms and 4ms", d, next)
	}
	if g := v.Stats().GaveUp; g != 1 {
		t.Errorf("gave up %d times, want 1 (on the read)", g)
	}
}

// A read that waits on the outside world (an empty pipe nobody writes),
// or a wait for a child process, holds time for 200 ms of wall time at
// most: then time moves on without it, and the wait is counted as given
// up.
func TestVirtualGivesUpOnARead(t *testing.T) {
	r, w := blockingPipe(t)
	givesUpOn(t, "a read", func() { syscall.Read(r, make([]byte, 1)) }, func() { syscall.Write(w, []byte{1}) })
	child := exec.Command("sleep", "30")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	givesUpOn(t, "a wait for a child", func() { child.Wait() }, func() { child.Process.Kill() })
}

// givesUpOn runs 100 timers 1 ms apart on a virtual clock while block
// blocks in a system call, checks that the clock gave up waiting for it,
// and ends the block with end.
func givesUpOn(t *testing.T, what string, block, end func()) {
	v := clock.NewVirtual()
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		block()
	}()
	runVirtual(t, v, ticks(v, 100))
	if g := v.Stats().GaveUp; g < 1 {
		t.Errorf("%s: gave up %d times, want at least 1 (it waits on the outside world)", what, g)
	}
	end()
	<-readDone
}
