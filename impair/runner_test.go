package impair

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/netjam/netjam/clock"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type timed struct {
	at time.Time
	id uint32
}

// waitFor polls cond; it fails the test if cond does not hold within a
// generous bound. It synchronizes with the Runner's goroutine; it asserts
// nothing about speed.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestRunnerOnManualClock(t *testing.T) {
	clk := clock.NewManual()
	out := make(chan timed, 16)
	r, err := NewRunner(Config{Name: "up", Delay: DelayConfig{Time: 20 * time.Millisecond}, Rate: RateConfig{Bitrate: 8e6}}, clk,
		func(now time.Time, p *Packet) {
			out <- timed{now, pktID(p)}
			p.Release()
		})
	if err != nil {
		t.Fatal(err)
	}
	r.Start(context.Background())
	defer r.Close()
	pool := NewPool(2048)
	for i := range 3 {
		r.Send(testPacket(pool, 1000, uint32(i))) // 1 ms each on the wire
	}
	waitFor(t, "arrivals", func() bool { return r.Stats().InPackets == 3 })
	// Step the clock from timer to timer, as the real clock would pass,
	// waiting after each step until the Runner has re-armed its timer (or
	// delivered everything).
	var got []timed
	for len(got) < 3 {
		next, ok := clk.Next()
		if !ok {
			t.Fatalf("no timer armed with %d of 3 delivered", len(got))
		}
		clk.Set(next)
		waitFor(t, "the runner to handle its timer", func() bool {
			for {
				select {
				case d := <-out:
					got = append(got, d)
					continue
				default:
				}
				break
			}
			n, ok := clk.Next()
			return len(got) == 3 || ok && n.After(next)
		})
	}
	for i, d := range got {
		want := clock.Epoch.Add(time.Duration(i+1)*time.Millisecond + 20*time.Millisecond)
		if !d.at.Equal(want) || d.id != uint32(i) {
			t.Fatalf("delivery %d: id %d at %v, want at %v", i, d.id, d.at.Sub(clock.Epoch), want.Sub(clock.Epoch))
		}
	}
	if l := r.Stats().Lateness; l.Max != 0 {
		t.Fatalf("lateness on a manual clock stepped exactly: %+v", l)
	}
}

func TestRunnerCloseFlushesAndCounts(t *testing.T) {
	clk := clock.NewManual()
	r, err := NewRunner(Config{Name: "up", Delay: DelayConfig{Time: time.Second}, InputLimit: 4}, clk,
		func(_ time.Time, p *Packet) { p.Release() })
	if err != nil {
		t.Fatal(err)
	}
	pool := NewPool(2048)
	// Not started: the channel fills up and the rest are input drops.
	accepted := 0
	for i := range 6 {
		if r.Send(testPacket(pool, 100, uint32(i))) {
			accepted++
		}
	}
	if accepted != 4 {
		t.Fatalf("accepted %d, want 4", accepted)
	}
	r.Start(context.Background())
	waitFor(t, "arrivals", func() bool { return r.Stats().InPackets == 6 })
	r.Close()
	r.Close() // idempotent
	if r.Send(testPacket(pool, 100, 9)) {
		t.Fatal("Send after Close accepted a packet")
	}
	st := r.Stats()
	if st.Drops["input"] != 2 || st.Drops["flushed"] != 5 || st.OutPackets != 0 {
		t.Fatalf("drops %v out %d", st.Drops, st.OutPackets)
	}
}

func TestRunnerStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	r, err := NewRunner(Config{}, clock.Real{}, func(_ time.Time, p *Packet) { p.Release() })
	if err != nil {
		t.Fatal(err)
	}
	r.Start(ctx)
	cancel()
	r.Close() // returns once the goroutine has ended; goleak checks the rest
}

// TestRunnerRealClock sends through a real-time Runner and checks only
// what cannot flake: every packet arrives, none before its logical time.
func TestRunnerRealClock(t *testing.T) {
	out := make(chan time.Time, 100)
	r, err := NewRunner(Config{Delay: DelayConfig{Time: 5 * time.Millisecond}}, clock.Real{},
		func(now time.Time, p *Packet) {
			if time.Now().Before(now) {
				t.Errorf("delivered before its departure time")
			}
			if now.Sub(p.Arrival) != 5*time.Millisecond {
				t.Errorf("logical delay %v", now.Sub(p.Arrival))
			}
			out <- now
			p.Release()
		})
	if err != nil {
		t.Fatal(err)
	}
	r.Start(context.Background())
	defer r.Close()
	pool := NewPool(2048)
	for i := range 50 {
		r.Send(testPacket(pool, 100, uint32(i)))
	}
	for range 50 {
		select {
		case <-out:
		case <-time.After(10 * time.Second):
			t.Fatal("packets lost in a lossless direction")
		}
	}
}

// AfterPass runs at the end of each pass, after every packet due by then
// has left: three packets due at one instant leave in one pass, one due
// later in another; and once more at Close.
func TestRunnerAfterPass(t *testing.T) {
	clk := clock.NewManual()
	var mu sync.Mutex
	var log []string
	add := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		log = append(log, s)
	}
	r, err := NewRunner(Config{Name: "down", Delay: DelayConfig{Time: time.Millisecond}}, clk,
		func(_ time.Time, p *Packet) {
			add("p")
			p.Release()
		})
	if err != nil {
		t.Fatal(err)
	}
	delivered := 0
	r.AfterPass(func() {
		if n := int(r.Stats().OutPackets); n > delivered {
			delivered = n
			add("|")
		}
	})
	r.Start(context.Background())
	pool := NewPool(2048)
	for i := range 3 {
		r.Send(testPacket(pool, 1000, uint32(i)))
	}
	waitFor(t, "arrivals", func() bool { return r.Stats().InPackets == 3 && clk.Armed() == 1 })
	clk.Set(t0.Add(time.Millisecond))
	waitFor(t, "the three", func() bool { return r.Stats().OutPackets == 3 })
	r.Send(testPacket(pool, 1000, 3))
	waitFor(t, "the fourth", func() bool { return r.Stats().InPackets == 4 && clk.Armed() == 1 })
	clk.Set(t0.Add(2 * time.Millisecond))
	waitFor(t, "the fourth's pass", func() bool { mu.Lock(); defer mu.Unlock(); return len(log) == 6 })
	r.Close()
	mu.Lock()
	defer mu.Unlock()
	if got := strings.Join(log, ""); got != "ppp|p|" {
		t.Errorf("deliveries and pass ends %q, want %q", got, "ppp|p|")
	}
}

// A packet that may wait, sent to a Runner whose input is three quarters
// full, waits until the Runner has taken the input down (here: until it
// starts) instead of being dropped, then arrives; a packet that may not
// wait is dropped at the full input as before. The wait is counted.
func TestRunnerHoldsBackASenderThatMayWait(t *testing.T) {
	clk := clock.NewManual()
	r, err := NewRunner(Config{Name: "up", Delay: DelayConfig{Time: time.Second}, InputLimit: 8}, clk,
		func(_ time.Time, p *Packet) { p.Release() })
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	pool := NewPool(2048)
	for i := range 6 { // not started: the input holds 6 of 8, its share for waiting senders
		r.Send(testPacket(pool, 100, uint32(i)))
	}
	p := testPacket(pool, 100, 6)
	p.SetMayWait(true)
	sent := make(chan bool)
	go func() { sent <- r.Send(p) }()
	waitFor(t, "the sender to wait", func() bool { return r.Stats().InputWaits == 1 })
	for i := 7; i < 9; i++ { // the last quarter is for those that may not wait
		if !r.Send(testPacket(pool, 100, uint32(i))) {
			t.Fatalf("packet %d refused with the input not full", i)
		}
	}
	if r.Send(testPacket(pool, 100, 9)) {
		t.Fatal("a packet that may not wait was taken by a full input")
	}
	r.Start(context.Background())
	if !<-sent {
		t.Fatal("the waiting packet was dropped")
	}
	waitFor(t, "arrivals", func() bool { return r.Stats().InPackets == 10 })
	st := r.Stats()
	if st.Drops[DropInput.String()] != 1 || st.InputWaits != 1 {
		t.Errorf("input drops %d, waits %d; want 1 and 1", st.Drops[DropInput.String()], st.InputWaits)
	}
}
