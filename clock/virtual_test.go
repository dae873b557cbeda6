package clock_test

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/netjam/netjam/clock"
)

// runVirtual runs v until done is closed (or a wall-clock bound passes).
func runVirtual(t *testing.T, v *clock.Virtual, done <-chan struct{}) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		v.Run(ctx)
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Error("the virtual run did not finish in 20 s of wall time")
	}
	cancel()
	<-stopped
}

// Timers fire in deadline order, those of one deadline in the order they
// were set, and a virtual hour passes in far less than a wall-clock one.
func TestVirtualOrder(t *testing.T) {
	v := clock.NewVirtual()
	var mu sync.Mutex
	var got []string
	done := make(chan struct{})
	var wg sync.WaitGroup
	add := func(name string, d time.Duration) {
		wg.Add(1)
		v.AfterFunc(d, func() {
			defer wg.Done()
			mu.Lock()
			got = append(got, fmt.Sprintf("%s@%v", name, v.Now().Sub(clock.Epoch)))
			mu.Unlock()
		})
	}
	add("c", time.Hour)
	add("a", time.Second)
	add("b1", time.Minute)
	add("b2", time.Minute)
	stopped := v.AfterFunc(time.Second, func() { t.Error("a stopped timer fired") })
	if !stopped.Stop() {
		t.Error("Stop of an armed timer returned false")
	}
	go func() { wg.Wait(); close(done) }()
	start := time.Now()
	runVirtual(t, v, done)
	want := "a@1s b1@1m0s b2@1m0s c@1h0m0s"
	if s := strings.Join(got, " "); s != want {
		t.Errorf("fired %q, want %q", s, want)
	}
	if wall := time.Since(start); wall > 10*time.Second {
		t.Errorf("a virtual hour took %v of wall time", wall)
	}
}

// Run waits for what a timer sets off before it fires the next one: here a
// chain of goroutines handing a token along, which takes real CPU time,
// must finish before the clock moves, every time, while a ticker every
// 10 us would move it if Run did not wait.
func TestVirtualWaitsForWork(t *testing.T) {
	v := clock.NewVirtual()
	const hops, rounds = 50, 100
	done := make(chan struct{})
	var tick func()
	tick = func() {
		select {
		case <-done:
		default:
			v.AfterFunc(10*time.Microsecond, tick)
		}
	}
	v.AfterFunc(0, tick)
	var seen []time.Duration
	var round func()
	round = func() {
		at := v.Now()
		in := make(chan int)
		first := in
		for range hops {
			out := make(chan int)
			go func(in, out chan int) { out <- <-in + 1 }(in, out)
			in = out
		}
		go func() { first <- 0 }()
		n := <-in
		if n != hops || !v.Now().Equal(at) {
			t.Errorf("the chain ended at %v with %d hops; it started at %v", v.Now(), n, at)
		}
		seen = append(seen, v.Now().Sub(clock.Epoch))
		if len(seen) == rounds {
			close(done)
			return
		}
		v.AfterFunc(time.Millisecond, round)
	}
	v.AfterFunc(0, round)
	runVirtual(t, v, done)
	for i, d := range seen {
		if d != time.Duration(i)*time.Millisecond {
			t.Fatalf("round %d ran at %v, want %v", i, d, time.Duration(i)*time.Millisecond)
		}
	}
}

// A channel timer delivers its deadline, Reset moves it, and a goroutine
// waiting on it sees the clock at that deadline.
func TestVirtualTimerChannel(t *testing.T) {
	v := clock.NewVirtual()
	done := make(chan struct{})
	var got []time.Duration
	go func() {
		defer close(done)
		tm := v.NewTimer(time.Hour)
		tm.Reset(3 * time.Second) // replaces the hour
		for range 3 {
			at := <-tm.C()
			got = append(got, at.Sub(clock.Epoch), v.Now().Sub(clock.Epoch))
			tm.Reset(2 * time.Second)
		}
		tm.Stop()
	}()
	runVirtual(t, v, done)
	want := "[3s 3s 5s 5s 7s 7s]"
	if s := fmt.Sprint(got); s != want {
		t.Errorf("got %s, want %s", s, want)
	}
}

// WithTimeout cancels on the virtual clock's time with DeadlineExceeded
// as the cause, and its cancel function stops the timer.
func TestVirtualWithTimeout(t *testing.T) {
	v := clock.NewVirtual()
	done := make(chan struct{})
	go func() {
		defer close(done)
		ctx, cancel := clock.WithTimeout(context.Background(), v, 90*time.Second)
		defer cancel()
		<-ctx.Done()
		if d := v.Now().Sub(clock.Epoch); d != 90*time.Second {
			t.Errorf("cancelled at %v, want 1m30s", d)
		}
		if c := context.Cause(ctx); c != context.DeadlineExceeded {
			t.Errorf("cause %v, want DeadlineExceeded", c)
		}
	}()
	runVirtual(t, v, done)

	ctx, cancel := clock.WithTimeout(context.Background(), v, time.Hour)
	cancel()
	if ctx.Err() == nil || context.Cause(ctx) != context.Canceled {
		t.Errorf("after cancel: err %v, cause %v", ctx.Err(), context.Cause(ctx))
	}
	if steps := v.Stats().Events; steps != 1 {
		t.Errorf("%d timers fired, want 1 (the cancelled timeout's timer must be stopped)", steps)
	}
}

// Two virtual clocks driven at once take turns and both finish, each on
// its own time.
func TestVirtualTwoAtOnce(t *testing.T) {
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v := clock.NewVirtual()
			done := make(chan struct{})
			n := 0
			var tick func()
			tick = func() {
				if n++; n == 1000 {
					close(done)
					return
				}
				v.AfterFunc(time.Duration(i+1)*time.Millisecond, tick)
			}
			v.AfterFunc(0, tick)
			runVirtual(t, v, done)
			if d := v.Now().Sub(clock.Epoch); d != time.Duration(999*(i+1))*time.Millisecond {
				t.Errorf("clock %d ended at %v", i, d)
			}
		}()
	}
	wg.Wait()
}

// ticks sets n timers on v, each 1 ms after the last fired, and returns a
// channel closed when the nth fires.
func ticks(v *clock.Virtual, n int) <-chan struct{} {
	done := make(chan struct{})
	fired := 0
	var tick func()
	tick = func() {
		if fired++; fired == n {
			close(done)
			return
		}
		v.AfterFunc(time.Millisecond, tick)
	}
	v.AfterFunc(time.Millisecond, tick)
	return done
}

// A goroutine that hands another work at one instant and settles after
// each piece has each piece taken up on its own, before the next and
// before the next timer of that instant, every time; without Settle the
// worker finds several pieces queued, as the scheduler happens to run it.
func TestVirtualSettle(t *testing.T) {
	for round := range 20 {
		v := clock.NewVirtual()
		var mu sync.Mutex
		var queued int
		var batches []int
		wake := make(chan struct{}, 1)
		go func() { // the worker: takes whatever is queued at once
			for range wake {
				mu.Lock()
				if queued > 0 {
					batches = append(batches, queued)
					queued = 0
				}
				mu.Unlock()
			}
		}()
		defer close(wake)
		s := clock.NewSettler(v)
		var after string
		done := make(chan struct{})
		v.AfterFunc(time.Millisecond, func() {
			for range 5 {
				mu.Lock()
				queued++
				mu.Unlock()
				select {
				case wake <- struct{}{}:
				default:
				}
				s.Settle()
			}
		})
		v.AfterFunc(time.Millisecond, func() {
			mu.Lock()
			after = fmt.Sprint(batches)
			mu.Unlock()
			close(done)
		})
		runVirtual(t, v, done)
		if after != "[1 1 1 1 1]" {
			t.Fatalf("round %d: the worker took batches %s before the next timer; want [1 1 1 1 1]", round, after)
		}
	}
}

// Settle does nothing on the wall clock, and returns at once once the
// virtual clock's Run has returned.
func TestSettleWithoutRun(t *testing.T) {
	if s := clock.NewSettler(clock.Real{}); s != nil {
		t.Errorf("NewSettler(Real) = %v, want nil", s)
	}
	var none *clock.Settler
	none.Settle()
	v := clock.NewVirtual()
	s := clock.NewSettler(v)
	settled := make(chan struct{})
	go func() {
		s.Settle() // waits: nothing drives the clock yet
		s.Settle() // returns: Run has returned
		close(settled)
	}()
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { v.Run(ctx); close(ran) }()
	time.Sleep(10 * time.Millisecond)
	cancel()
	<-ran
	select {
	case <-settled:
	case <-time.After(5 * time.Second):
		t.Fatal("Settle still waits after Run returned")
	}
}

// Settle allocates nothing once its clock's list has grown.
func TestSettleAllocatesNothing(t *testing.T) {
	v := clock.NewVirtual()
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { v.Run(ctx); close(ran) }()
	defer func() { cancel(); <-ran }()
	s := clock.NewSettler(v)
	s.Settle()
	if n := testing.AllocsPerRun(100, s.Settle); n != 0 {
		t.Errorf("Settle allocated %.1f times per call, want 0", n)
	}
}

// A reading of the runtime's counts that took long (its thread was
// descheduled in it, perhaps holding the scheduler's lock that a goroutine
// leaving a system call waits for) is not trusted: the quiet readings
// after it are confirmed by a stack dump. Before, a run of quiet timers
// took as few stack dumps with slow readings as without (3 in 20 events).
func TestVirtualDoubtsASlowReading(t *testing.T) {
	for _, slow := range []bool{false, true} {
		if slow {
			undo := clock.SlowReadings(3, time.Millisecond)
			t.Cleanup(undo)
		}
		v := clock.NewVirtual()
		runVirtual(t, v, ticks(v, 20))
		st := v.Stats()
		t.Logf("slow readings %v: %d events, %d stack dumps", slow, st.Events, st.StackChecks)
		if slow && st.StackChecks < 10 {
			t.Errorf("every third reading slow: %d stack dumps in %d events, want one an event or so", st.StackChecks, st.Events)
		}
	}
}

// A goroutine the runtime holds for a while on its own counts as busy in
// a stack dump: it resumes with nothing else happening, and its work
// belongs to the instant. Found in a lab run (TestVirtualSameSeedSameFiles
// /wifi, one run in a few hundred under load): three flows' goroutines
// parked in "GC assist wait" while preparing their dials, the garbage
// collector's workers (which a dump does not show) kept the processors
// busy until a stack dump decided, and the dump found the process idle; a
// flow's SYN left at the next event's time, 60 µs, instead of 0. The
// dumps here are cut from that run's.
func TestVirtualStackDumpStates(t *testing.T) {
	const caller = "goroutine 6 [running]:\nmain.run()\n\t/x.go:1 +0x1\n"
	const waiting = "goroutine 40 [select]:\ngithub.com/netjam/netjam/stack.(*Host).DialTCPFrom(...)\n\t/work/main/stack/tcp.go:161 +0x7f2\n"
	for _, c := range []struct{ other, want string }{
		{waiting, "idle"},
		{"goroutine 38 [GC assist wait]:\ncontext.WithDeadlineCause({0xd234d8, 0x1831520}, ...)\n\t/usr/local/go/src/context/context.go:637 +0x1a6\n", "runtime"},
		{"goroutine 38 [GC assist marking]:\nruntime.systemstack_switch()\n", "runtime"},
		{"goroutine 12 [preempted]:\nmain.work()\n", "runtime"},
		{"goroutine 12 [garbage collection]:\nruntime.GC()\n", "runtime"},
		// An allocation waiting for a collection to start: the
		// runtime's frames are left out of the dump.
		{"goroutine 15 [semacquire]:\ngithub.com/netjam/netjam/third_party/gvisor/_pkg/tcpip/transport/tcp.newEndpoint(0x156846991008, ...)\n\t/x/endpoint.go:900 +0x1\n", "runtime"},
		{"goroutine 15 [semacquire]:\nsync.runtime_SemacquireWaitGroup(0x1?, 0x0?)\n\t/usr/local/go/src/runtime/sema.go:114 +0x2e\nsync.(*WaitGroup).Wait(0x1)\n", "idle"},
		{"goroutine 15 [semacquire]:\ngithub.com/netjam/netjam/third_party/gvisor/_pkg/sync.(*Gate).leaveClosed(0x1)\n\t/x/gate_unsafe.go:144 +0x1\n", "idle"},
		{"goroutine 15 [semacquire]:\ngithub.com/netjam/netjam/third_party/gvisor/_pkg/sync.(*CrossGoroutineMutex).Lock(...)\nsync.runtime_Semacquire(0x1)\n", "idle"},
		{"goroutine 12 [runnable]:\nmain.work()\n", "running"},
		{"goroutine 12 [sync.Mutex.Lock]:\ninternal/sync.runtime_SemacquireMutex(...)\n", "idle"},
		{"goroutine 12 [chan receive, 2 minutes]:\nmain.wait()\n", "idle"},
		{"goroutine 12 [syscall]:\nsyscall.Syscall(...)\nsyscall.write(...)\n", "running"},
		{"goroutine 12 [syscall]:\nsyscall.Syscall(...)\nsyscall.read(...)\n", "in syscall"},
		{"goroutine 21 [syscall]:\nruntime/pprof.readProfile()\n\t/usr/local/go/src/runtime/cpuprof.go:251 +0x4a\nruntime/pprof.profileWriter({0xd36340?, 0x2f2e70586730?})\n", "idle"},
		{"goroutine 5 [syscall, 3 minutes]:\nos/signal.signal_recv()\n\t/usr/local/go/src/runtime/sigqueue.go:152 +0x29\nos/signal.loop()\n", "idle"},
	} {
		dump := caller + "\n" + waiting + "\n" + c.other
		if c.want == "runtime" {
			// Another one running decides.
			if got := clock.DumpState(dump + "\ngoroutine 99 [runnable]:\nmain.f()\n"); got != "running" {
				t.Errorf("beside %q and a runnable one the process is %s, want running", strings.SplitN(c.other, "\n", 2)[0], got)
			}
		}
		if got := clock.DumpState(dump); got != c.want {
			t.Errorf("beside a goroutine in %q the process is %s, want %s", strings.SplitN(c.other, "\n", 2)[0], got, c.want)
		}
	}
}

// A goroutine counted as waiting for the runtime holds time up only for
// a while: should a wait of the program's look like the runtime's, time
// still moves, after 200 ms of wall time an event, counted as given up.
func TestVirtualRuntimeWaitBounded(t *testing.T) {
	t.Cleanup(clock.RuntimeWaitAlso("[chan receive"))
	t.Cleanup(clock.SlowReadings(1, 150*time.Microsecond)) // every reading doubted: a stack dump decides
	v := clock.NewVirtual()
	never := make(chan struct{})
	go func() { <-never }()
	t.Cleanup(func() { close(never) })
	start := time.Now()
	runVirtual(t, v, ticks(v, 3))
	st := v.Stats()
	t.Logf("3 events in %v, %d given up", time.Since(start), st.GaveUp)
	if st.GaveUp == 0 {
		t.Error("time moved without giving up on a goroutine waiting for the runtime")
	}
}

// A virtual run runs Go code on one processor, and gives the others back
// when it ends; two runs at once (a sweep's) give them back when the last
// ends.
func TestVirtualRunsOnOneProcessor(t *testing.T) {
	base := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(base)
	runtime.GOMAXPROCS(3)
	start := func() (procs <-chan int, stop func()) {
		v := clock.NewVirtual()
		ch := make(chan int, 1)
		v.AfterFunc(time.Second, func() { ch <- runtime.GOMAXPROCS(0) })
		ctx, cancel := context.WithCancel(context.Background())
		stopped := make(chan struct{})
		go func() {
			defer close(stopped)
			v.Run(ctx)
		}()
		return ch, func() { cancel(); <-stopped }
	}
	a, stopA := start()
	b, stopB := start()
	for _, ch := range []<-chan int{a, b} {
		select {
		case n := <-ch:
			if n != 1 {
				t.Errorf("GOMAXPROCS %d during a virtual run, want 1", n)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("the virtual run's timer did not fire in 20 s of wall time")
		}
	}
	stopA()
	if n := runtime.GOMAXPROCS(0); n != 1 {
		t.Errorf("GOMAXPROCS %d with one run of two ended, want 1", n)
	}
	stopB()
	if n := runtime.GOMAXPROCS(0); n != 3 {
		t.Errorf("GOMAXPROCS %d after the runs, want 3 as before", n)
	}
}

// Time moves while Go's CPU profiler runs: its reader of samples waits in
// the runtime, shown as a system call, and is no work of the run's.
func TestVirtualUnderCPUProfile(t *testing.T) {
	if err := pprof.StartCPUProfile(io.Discard); err != nil {
		t.Skipf("a CPU profile is already being taken (go test -cpuprofile): %v", err)
	}
	defer pprof.StopCPUProfile()
	time.Sleep(200 * time.Millisecond) // the reader waits for samples in its call
	v := clock.NewVirtual()
	start := time.Now()
	runVirtual(t, v, ticks(v, 100))
	t.Logf("100 events in %v, %d stack dumps, %d given up", time.Since(start), v.Stats().StackChecks, v.Stats().GaveUp)
}
