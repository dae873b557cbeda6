package impair

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/netjam/netjam/clock"
)

// TestSetAtExact: a change at 10 s applies to the packet arriving at 10 s
// and not to the one a nanosecond before; Next reports the change as an
// event, and Done runs at its time.
func TestSetAtExact(t *testing.T) {
	cfg := Config{Name: "up", Seed: 1}
	c, col, pool := newTestChain(t, cfg)
	at := t0.Add(10 * time.Second)
	lossy := cfg
	lossy.Loss = LossConfig{Model: LossRandom, P: 1}
	var doneAt time.Time
	if err := c.SetAt(Change{At: at, Config: lossy, Done: func(t time.Time, err error) {
		if err != nil {
			panic(err)
		}
		doneAt = t
	}}); err != nil {
		t.Fatal(err)
	}
	if n, ok := c.Next(); !ok || !n.Equal(at) {
		t.Fatalf("Next = %v, %v; want the change at 10 s", n.Sub(t0), ok)
	}
	c.Arrive(at.Add(-1), testPacket(pool, 100, 1))
	if !doneAt.IsZero() || c.Pending() != 1 {
		t.Fatal("the change applied before its time")
	}
	c.Arrive(at, testPacket(pool, 100, 2))
	if !doneAt.Equal(at) || c.Pending() != 0 {
		t.Fatalf("change applied at %v, want 10 s", doneAt.Sub(t0))
	}
	if len(col.got) != 1 || col.got[0].id != 1 {
		t.Fatalf("delivered %v: want packet 1 only (packet 2 arrived at the outage's start)", col.got)
	}
	if _, ok := c.Next(); ok {
		t.Error("Next reports an event after the last change")
	}
}

// TestSetAtRateBetweenSerializations: a rate change at t applies to the
// serialization that starts at t; the packet on the wire before keeps the
// old rate; changes interleave with departures in time order, and an
// earlier-scheduled change at the same instant applies first.
func TestSetAtRateBetweenSerializations(t *testing.T) {
	cfg := Config{Name: "up", Rate: RateConfig{Bitrate: 10_000_000}}
	c, col, pool := newTestChain(t, cfg)
	for i := range 4 {
		c.Arrive(t0, testPacket(pool, 1500, uint32(i))) // 1.2 ms each at 10 Mbit/s
	}
	us := time.Microsecond
	slow, fast := cfg, cfg
	slow.Rate.Bitrate, fast.Rate.Bitrate = 1_000_000, 2_000_000
	// At 2.4 ms the second packet leaves and the third starts: at 1 Mbit/s
	// (12 ms), since the change at the same instant applies first. At
	// 20 ms two changes: the later-scheduled one (2 Mbit/s) wins.
	for _, ch := range []Change{{At: t0.Add(2400 * us), Config: slow}, {At: t0.Add(20 * msec), Config: slow}, {At: t0.Add(20 * msec), Config: fast}} {
		if err := c.SetAt(ch); err != nil {
			t.Fatal(err)
		}
	}
	c.Advance(t0.Add(time.Second))
	// third: 2.4 + 12 = 14.4 ms; fourth starts at 14.4 at 1 Mbit/s: 26.4 ms
	// (the 20 ms change applies from the next serialization).
	want := []time.Duration{1200 * us, 2400 * us, 14400 * us, 26400 * us}
	for i, w := range want {
		if got := col.got[i].at.Sub(t0); got != w {
			t.Errorf("packet %d left at %v, want %v", i, got, w)
		}
	}
	c.Arrive(t0.Add(time.Second), testPacket(pool, 1500, 9))
	c.Advance(t0.Add(2 * time.Second))
	if got := col.got[4].at.Sub(t0); got != time.Second+6*msec {
		t.Errorf("after the changes at 20 ms a packet takes %v, want 6 ms at 2 Mbit/s", got-time.Second)
	}
}

// TestSetAtRefused: a scheduled change that cannot apply (a queue
// discipline) is reported to Done and leaves the chain as it was; an
// invalid one is refused at once; the schedule is bounded.
func TestSetAtRefused(t *testing.T) {
	cfg := Config{Name: "up", Rate: RateConfig{Bitrate: 10_000_000}}
	c, _, _ := newTestChain(t, cfg)
	bad := cfg
	bad.Queue.Discipline = CoDel
	var got error
	if err := c.SetAt(Change{At: t0.Add(msec), Config: bad, Done: func(_ time.Time, err error) { got = err }}); err != nil {
		t.Fatal(err)
	}
	c.Advance(t0.Add(2 * msec))
	if got == nil {
		t.Error("a discipline change applied")
	}
	invalid := cfg
	invalid.Loss = LossConfig{Model: LossRandom, P: 2}
	if err := c.SetAt(Change{At: t0, Config: invalid}); err == nil {
		t.Error("an invalid change was scheduled")
	}
	for i := range MaxScheduled {
		if err := c.SetAt(Change{At: t0.Add(time.Duration(i) * msec), Config: cfg}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.SetAt(Change{At: t0, Config: cfg}); err == nil {
		t.Errorf("more than %d changes pending", MaxScheduled)
	}
}

// TestRunnerSetAtManualClock: a Runner wakes for a scheduled change with
// nothing in flight, and applies it at its exact time on the manual clock.
func TestRunnerSetAtManualClock(t *testing.T) {
	clk := clock.NewManual()
	r, err := NewRunner(Config{Name: "up"}, clk, func(now time.Time, p *Packet) { p.Release() })
	if err != nil {
		t.Fatal(err)
	}
	applied := make(chan time.Time, 2)
	lossy := Config{Name: "up", Loss: LossConfig{Model: LossRandom, P: 1}}
	at := clock.Epoch.Add(10 * time.Second)
	if err := r.SetAt(Change{At: at, Config: lossy, Done: func(t time.Time, err error) { applied <- t }}); err != nil {
		t.Fatal(err)
	}
	r.Start(context.Background())
	defer r.Close()
	// A second change scheduled while it runs.
	if err := r.SetAt(Change{At: at.Add(time.Second), Config: Config{Name: "up"}, Done: func(t time.Time, err error) { applied <- t }}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []time.Time{at, at.Add(time.Second)} {
		waitFor(t, "the runner to arm its timer", func() bool { n, ok := clk.Next(); return ok && n.Equal(want) })
		clk.Set(want)
		if got := <-applied; !got.Equal(want) {
			t.Fatalf("applied at %v, want %v", got.Sub(clock.Epoch), want.Sub(clock.Epoch))
		}
	}
	r.Close()
	if err := r.SetAt(Change{At: at, Config: lossy}); !errors.Is(err, ErrClosed) {
		t.Errorf("SetAt after Close: %v", err)
	}
}
