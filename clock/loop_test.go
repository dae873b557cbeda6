package clock

import (
	"context"
	"errors"
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
