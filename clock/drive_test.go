package clock

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// echoModel is a model whose every arrival leaves delay later: a delay
// line. It records when each left, by the clock.
type echoModel struct {
	mu     sync.Mutex
	clk    *Manual
	delay  time.Duration
	due    []time.Time
	left   chan time.Time
	wakeup chan time.Time // each Advance, when not nil
}

func (e *echoModel) model() (Model[int], chan<- int) {
	in := make(chan int, 8)
	return Model[int]{
		In: in,
		Arrive: func(int) {
			e.mu.Lock()
			e.due = append(e.due, e.clk.Now().Add(e.delay))
			e.mu.Unlock()
		},
		Advance: func(now time.Time) (time.Time, bool) {
			if e.wakeup != nil {
				e.wakeup <- now
			}
			e.mu.Lock()
			defer e.mu.Unlock()
			for len(e.due) > 0 && !e.due[0].After(now) {
				e.left <- now
				e.due = e.due[1:]
			}
			if len(e.due) == 0 {
				return time.Time{}, false
			}
			return e.due[0], true
		},
	}, in
}

func (e *echoModel) pending() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.due)
}

// waitArmed waits until Drive has armed its timer (the manual clock has a
// deadline), so that advancing the clock fires it.
func waitArmed(t *testing.T, m *Manual, want time.Time) {
	t.Helper()
	for range 10000 {
		if next, ok := m.Next(); ok && next.Equal(want) {
			return
		}
		time.Sleep(100 * time.Microsecond)
	}
	t.Fatalf("Drive never armed its timer for %v", want.Sub(Epoch))
}

// startDrive runs Drive on its own goroutine; stop ends it and waits.
func startDrive(clk *Manual, m Model[int]) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		Drive(ctx, clk, m)
	}()
	return func() {
		cancel()
		<-done
	}
}

func TestDriveRunsEventsAtTheirTime(t *testing.T) {
	clk := NewManual()
	e := &echoModel{clk: clk, delay: 30 * time.Millisecond, left: make(chan time.Time, 8)}
	m, in := e.model()
	stop := startDrive(clk, m)
	in <- 1
	waitArmed(t, clk, Epoch.Add(30*time.Millisecond))
	clk.Advance(10 * time.Millisecond)
	in <- 2 // due at 40 ms
	for e.pending() < 2 {
		time.Sleep(100 * time.Microsecond)
	}
	clk.Advance(20 * time.Millisecond)
	if got := (<-e.left).Sub(Epoch); got != 30*time.Millisecond {
		t.Fatalf("first left at %v, want 30ms", got)
	}
	waitArmed(t, clk, Epoch.Add(40*time.Millisecond))
	clk.Advance(10 * time.Millisecond)
	if got := (<-e.left).Sub(Epoch); got != 40*time.Millisecond {
		t.Fatalf("second left at %v, want 40ms", got)
	}
	stop()
	if _, ok := clk.Next(); ok {
		t.Fatal("Drive left its timer armed")
	}
}

func TestDriveRefreshesAnIdleModel(t *testing.T) {
	clk := NewManual()
	e := &echoModel{clk: clk, left: make(chan time.Time, 8), wakeup: make(chan time.Time, 8)}
	m, _ := e.model()
	m.Refresh = 10 * time.Millisecond
	stop := startDrive(clk, m)
	<-e.wakeup // the first Advance, at the start
	for i := 1; i <= 3; i++ {
		waitArmed(t, clk, Epoch.Add(time.Duration(i)*10*time.Millisecond))
		clk.Advance(10 * time.Millisecond)
		if got := (<-e.wakeup).Sub(Epoch); got != time.Duration(i)*10*time.Millisecond {
			t.Fatalf("refresh %d at %v", i, got)
		}
	}
	stop()
}

func TestDriveWithoutRefreshSleepsUntilAnArrival(t *testing.T) {
	clk := NewManual()
	e := &echoModel{clk: clk, left: make(chan time.Time, 8), wakeup: make(chan time.Time, 8)}
	m, in := e.model()
	stop := startDrive(clk, m)
	<-e.wakeup
	clk.Advance(time.Hour)
	select {
	case <-e.wakeup:
		t.Fatal("an idle model without Refresh was woken")
	case <-time.After(10 * time.Millisecond):
	}
	in <- 1
	<-e.wakeup
	stop()
}

func TestPreciseSlotsAreAProcMore(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("preciseSlot does nothing outside Linux")
	}
	base := runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	start, stop := make(chan struct{}), make(chan struct{})
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			undo := preciseSlot()
			start <- struct{}{}
			<-stop
			undo()
		}()
	}
	for range 4 {
		<-start
	}
	if got := runtime.GOMAXPROCS(0); got != base+1 {
		t.Errorf("4 precise slots: GOMAXPROCS %d, want %d", got, base+1)
	}
	close(stop)
	wg.Wait()
	if got := runtime.GOMAXPROCS(0); got != base {
		t.Errorf("after they ended: GOMAXPROCS %d, want %d", got, base)
	}
}

// TestDriveStopsWhileBusy runs, on the real clock, a model that always has
// an event a microsecond away (a cell with full queues): Drive must still
// return promptly once ctx is done, not when the model runs out of events.
func TestDriveStopsWhileBusy(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	m := Model[int]{
		In:      make(chan int),
		Arrive:  func(int) {},
		Advance: func(now time.Time) (time.Time, bool) { return now.Add(time.Microsecond), true },
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Drive(ctx, Real{}, m)
	}()
	time.Sleep(20 * time.Millisecond)
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Drive still running 5 s after its context was done, with events always due")
	}
}

// TestDrivePinsOnlyToSleepPrecisely checks, on the real clock, that Drive
// pins its goroutine to a thread, and holds an extra processor, only
// while it sleeps precisely: a model whose arrivals leave at once (a
// direction with nothing to delay) is never pinned and takes no
// processor, whatever the arrivals, and a model that goes idle after an
// event unpins before it waits and gives the processor back slotLinger
// later. A pinned goroutine is woken by handing its thread a processor,
// which cost a sixth of netjam's CPU when every datagram woke one; the
// extra processor made the runtime look for work on more threads.
func TestDrivePinsOnlyToSleepPrecisely(t *testing.T) {
	var pins, unpins, takes, gives atomic.Int64
	pinThread = func() { pins.Add(1); pinPrecise() }
	unpinThread = func() { unpins.Add(1); unpinPrecise() }
	takeSlot = func() func() {
		takes.Add(1)
		give := preciseSlot()
		return func() { gives.Add(1); give() }
	}
	slotLinger = 20 * time.Millisecond
	defer func() {
		pinThread, unpinThread, takeSlot = pinPrecise, unpinPrecise, preciseSlot
		slotLinger = 100 * time.Millisecond
	}()

	var mu sync.Mutex
	var due []time.Time
	in := make(chan time.Duration)
	left := make(chan struct{}, 100)
	m := Model[time.Duration]{
		In: in,
		Arrive: func(d time.Duration) {
			if d == 0 {
				left <- struct{}{}
				return
			}
			mu.Lock()
			due = append(due, time.Now().Add(d))
			mu.Unlock()
		},
		Advance: func(now time.Time) (time.Time, bool) {
			mu.Lock()
			defer mu.Unlock()
			for len(due) > 0 && !due[0].After(now) {
				due = due[1:]
				left <- struct{}{}
			}
			if len(due) == 0 {
				return time.Time{}, false
			}
			return due[0], true
		},
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		Drive(ctx, Real{}, m)
	}()
	for range 100 {
		in <- 0
		<-left
	}
	if n, s := pins.Load(), takes.Load(); n != 0 || s != 0 {
		t.Errorf("100 arrivals that left at once: pinned %d times, took %d processors, want 0 and 0", n, s)
	}
	in <- 200 * time.Microsecond
	<-left
	for deadline := time.Now().Add(5 * time.Second); (unpins.Load() < 1 || gives.Load() < 1) && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if p, u := pins.Load(), unpins.Load(); p != 1 || u != 1 {
		t.Errorf("an event 200 us away, then idle: pinned %d times, unpinned %d, want 1 and 1", p, u)
	}
	if s, g := takes.Load(), gives.Load(); s != 1 || g != 1 {
		t.Errorf("an event 200 us away, then idle: took %d processors, gave %d back, want 1 and 1", s, g)
	}
	in <- 200 * time.Microsecond
	<-left
	cancel()
	<-done
	if p, u := pins.Load(), unpins.Load(); p != u {
		t.Errorf("after Drive returned: pinned %d times, unpinned %d", p, u)
	}
	if s, g := takes.Load(), gives.Load(); s != g || s != 2 {
		t.Errorf("after Drive returned: took %d processors, gave %d back, want 2 and 2", s, g)
	}
}
