package clock

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A Loop's lifecycle, on the manual clock: arrivals wait in the bounded
// input before Start, are refused when it is full or the loop closed; a
// change runs on the caller's goroutine before Start and between two
// events after; Close hands back what the input still holds.
func TestLoopLifecycle(t *testing.T) {
	clk := NewManual()
	l := NewLoop[int](clk, 2)
	if ok, _ := l.Offer(1); !ok {
		t.Fatal("an arrival before Start was refused")
	}
	l.Offer(2)
	if ok, closed := l.Offer(3); ok || closed {
		t.Fatalf("a full input: ok %v, closed %v; want refused, not closed", ok, closed)
	}
	if err := l.Do(func(running bool) error {
		if running {
			return errors.New("running before Start")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	got := make(chan int, 4)
	l.Start(context.Background(), Model[int]{
		Arrive:  func(v int) { got <- v },
		Advance: func(time.Time) (time.Time, bool) { return time.Time{}, false },
	})
	for _, want := range []int{1, 2} {
		if v := <-got; v != want {
			t.Fatalf("arrival %d, want %d", v, want)
		}
	}
	if err := l.Do(func(running bool) error {
		if !running {
			return errors.New("not on the loop after Start")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	flushed := false
	l.Close(func() { flushed = true }, func(int) {})
	l.Close(func() { t.Error("a second Close flushed again") }, nil)
	if !flushed {
		t.Error("Close did not flush")
	}
	if ok, closed := l.Offer(4); ok || !closed {
		t.Errorf("after Close: ok %v, closed %v", ok, closed)
	}
	if err := l.Do(func(bool) error { return nil }); !errors.Is(err, ErrStopped) {
		t.Errorf("Do after Close: %v", err)
	}
}

// Close without Start hands back every arrival still in the input.
func TestLoopCloseWithoutStartDrains(t *testing.T) {
	l := NewLoop[int](NewManual(), 4)
	l.Offer(1)
	l.Offer(2)
	var dropped []int
	l.Close(func() {}, func(v int) { dropped = append(dropped, v) })
	if len(dropped) != 2 {
		t.Errorf("dropped %v, want 1 and 2", dropped)
	}
}

// TestLoopFull checks that Full says when an Offer would fail.
func TestLoopFull(t *testing.T) {
	l := NewLoop[int](NewManual(), 2)
	for i := range 2 {
		if l.Full() {
			t.Fatalf("full with %d of 2", i)
		}
		l.Offer(i)
	}
	if !l.Full() {
		t.Fatal("not full with 2 of 2")
	}
	if ok, _ := l.Offer(3); ok {
		t.Fatal("an Offer succeeded while Full")
	}
}

// waitRoom runs l.WaitRoom on a goroutine of its own and returns a
// channel closed when it returns, once the sender is waiting (or has
// returned already).
func waitRoom[T any](l *Loop[T]) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.WaitRoom()
	}()
	for l.waiters.Load() == 0 {
		select {
		case <-done:
			return done
		default:
			runtime.Gosched()
		}
	}
	return done
}

// A sender that may wait passes while the input is below three quarters
// full; at three quarters it waits until the loop has taken the input
// down to half of that, and not one arrival earlier. Arrive is gated, so
// what the input holds at each step is exact: the loop counts an arrival
// out just before handing it to Arrive.
func TestLoopWaitRoomMarks(t *testing.T) {
	l := NewLoop[int](NewManual(), 8) // high 6, low 3
	for i := range 5 {
		l.Offer(i)
	}
	l.WaitRoom() // 5 < 6: no wait
	if n := l.Waits(); n != 0 {
		t.Fatalf("waited %d times below the mark", n)
	}
	l.Offer(5)
	done := waitRoom(l)
	gate, taken := make(chan struct{}), make(chan int, 8)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l.Start(ctx, Model[int]{
		Arrive:  func(v int) { taken <- v; <-gate },
		Advance: func(time.Time) (time.Time, bool) { return time.Time{}, false },
	})
	for i := range 2 {
		<-taken // in Arrive: the input holds 5-i
		select {
		case <-done:
			t.Errorf("the sender went on with %d in the input, above half the mark (3)", 5-i)
		default:
		}
		gate <- struct{}{}
	}
	<-taken // the input holds 3: the take that wakes it
	<-done
	close(gate)
	if n := l.Waits(); n != 1 {
		t.Errorf("Waits %d, want 1", n)
	}
	l.Close(func() {}, func(int) {})
}

// A waiting sender is let go when the loop closes, and when its goroutine
// stops (its context ended): nothing would ever make room, and the sender
// may hold up others meanwhile. Its Offer then fails as closed. (Neither
// loop is started, so nothing but the end lets it go; a started one's
// goroutine calls stop as it returns.)
func TestLoopWaitRoomEndsWithTheLoop(t *testing.T) {
	for _, how := range []string{"close", "stop"} {
		t.Run(how, func(t *testing.T) {
			l := NewLoop[int](NewManual(), 4) // high 3
			for i := range 3 {
				l.Offer(i)
			}
			done := waitRoom(l)
			if how == "close" {
				l.Close(func() {}, func(int) {})
			} else {
				l.stop()
			}
			<-done
			if ok, closed := l.Offer(9); ok || !closed {
				t.Errorf("Offer after the loop ended: ok %v, closed %v", ok, closed)
			}
		})
	}
	l := NewLoop[int](NewManual(), 4)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	l.Start(ctx, Model[int]{Arrive: func(int) {}, Advance: func(time.Time) (time.Time, bool) { return time.Time{}, false }})
	<-l.done
	if !l.stopped.Load() {
		t.Error("a loop whose goroutine returned is not marked stopped")
	}
}

// Many senders that wait for room, each offering a burst far larger than
// the input, lose nothing: every arrival reaches the loop.
func TestLoopWaitingSendersLoseNothing(t *testing.T) {
	const senders, each = 4, 2000
	l := NewLoop[int](NewManual(), 16)
	var got atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l.Start(ctx, Model[int]{
		Arrive:  func(int) { got.Add(1) },
		Advance: func(time.Time) (time.Time, bool) { return time.Time{}, false },
	})
	var wg sync.WaitGroup
	var refused atomic.Int64
	for range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				l.WaitRoom()
				if ok, _ := l.Offer(i); !ok {
					refused.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	l.Close(func() {}, func(int) { got.Add(1) })
	if n := refused.Load(); n > 0 {
		t.Errorf("%d arrivals refused", n)
	}
	if n := got.Load(); n != senders*each {
		t.Errorf("the loop took %d arrivals, want %d", n, senders*each)
	}
}
