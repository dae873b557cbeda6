package impair

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/netjam/netjam/clock"
)

const msec = time.Millisecond

// TestSetLoss: a loss change applies from the next packet, and the
// counters run on across it.
func TestSetLoss(t *testing.T) {
	cfg := Config{Name: "up", Seed: 1}
	c, col, pool := newTestChain(t, cfg)
	send := func(n int, from uint32) {
		for i := range n {
			c.Arrive(c.Now(), testPacket(pool, 100, from+uint32(i)))
		}
	}
	send(100, 0)
	cfg.Loss = LossConfig{Model: LossRandom, P: 1}
	if err := c.Set(cfg); err != nil {
		t.Fatal(err)
	}
	send(50, 100)
	cfg.Loss = LossConfig{}
	if err := c.Set(cfg); err != nil {
		t.Fatal(err)
	}
	send(10, 150)
	if len(col.got) != 110 || col.got[99].id != 99 || col.got[100].id != 150 {
		t.Errorf("%d delivered (want 110: the 50 sent at 100%% loss lost)", len(col.got))
	}
	if st := c.Stats(); st.Drops["loss"] != 50 || st.InPackets != 160 || st.OutPackets != 110 {
		t.Errorf("stats: in %d, out %d, drops %v", st.InPackets, st.OutPackets, st.Drops)
	}
}

// TestSetRate: the packet on the wire finishes at the old rate; the queued
// ones leave at the new one, exactly; an unlimited rate drains the queue
// at once.
func TestSetRate(t *testing.T) {
	cfg := Config{Name: "up", Rate: RateConfig{Bitrate: 10_000_000}}
	c, col, pool := newTestChain(t, cfg)
	for i := range 8 {
		c.Arrive(t0, testPacket(pool, 1500, uint32(i))) // 1.2 ms each at 10 Mbit/s
	}
	c.Advance(t0.Add(3 * msec)) // two left at 1.2 and 2.4 ms; the third is on the wire until 3.6
	cfg.Rate.Bitrate = 1_000_000
	if err := c.Set(cfg); err != nil {
		t.Fatal(err)
	}
	c.Advance(t0.Add(40 * msec)) // then 12 ms each: 15.6, 27.6, 39.6; the 7th on the wire until 51.6
	cfg.Rate.Bitrate = 0
	if err := c.Set(cfg); err != nil {
		t.Fatal(err)
	}
	c.Advance(t0.Add(52 * msec)) // the 8th: 1500 B at 1 Tbit/s after it
	us := time.Microsecond
	want := []time.Duration{1200 * us, 2400 * us, 3600 * us, 15600 * us, 27600 * us, 39600 * us, 51600 * us, 51600*us + 12}
	if len(col.got) != len(want) {
		t.Fatalf("%d delivered, want %d", len(col.got), len(want))
	}
	for i, w := range want {
		if got := col.got[i].at.Sub(t0); got != w {
			t.Errorf("packet %d left at %v, want %v", i, got, w)
		}
	}
	if !c.TakesSegments() {
		t.Error("an unlimited direction without other stages keeps segments whole")
	}
}

// TestSetDelay: a new delay applies to packets that enter from then on;
// none overtakes one ahead of it. A delay a change brings in starts empty.
func TestSetDelay(t *testing.T) {
	cfg := Config{Name: "up"}
	c, col, pool := newTestChain(t, cfg)
	c.Arrive(t0, testPacket(pool, 100, 1)) // no delay: out at once
	cfg.Delay.Time = 10 * msec
	if err := c.Set(cfg); err != nil {
		t.Fatal(err)
	}
	c.Arrive(t0.Add(1*msec), testPacket(pool, 100, 2)) // due 11 msec
	cfg.Delay.Time = 2 * msec
	if err := c.Set(cfg); err != nil {
		t.Fatal(err)
	}
	c.Arrive(t0.Add(2*msec), testPacket(pool, 100, 3))  // due 4 msec, kept behind: 11 msec
	c.Arrive(t0.Add(20*msec), testPacket(pool, 100, 4)) // due 22 msec
	c.Advance(t0.Add(30 * msec))
	want := []time.Duration{0, 11 * msec, 11 * msec, 22 * msec}
	for i, w := range want {
		if i >= len(col.got) || col.got[i].at.Sub(t0) != w || col.got[i].id != uint32(i+1) {
			t.Fatalf("deliveries %+v, want packets 1-4 at %v", col.got, want)
		}
	}
}

// TestSetRefused: what cannot change is refused, and nothing changes.
func TestSetRefused(t *testing.T) {
	cfg := Config{Name: "up", Rate: RateConfig{Bitrate: 1e6}, Loss: LossConfig{Model: LossRandom, P: 0.5}}
	c, _, _ := newTestChain(t, cfg)
	for _, tc := range []struct {
		change func(*Config)
		want   string
	}{
		{func(c *Config) { c.Queue.Discipline = CoDel; c.Loss.P = 1 }, "the queue's discipline and its settings other than the limits cannot change"},
		{func(c *Config) { c.Queue.Target = msec; c.Queue.LimitPackets = 10 }, "the queue's discipline and its settings other than the limits cannot change"},
		{func(c *Config) { c.Slot = SlotConfig{Min: msec, Max: msec} }, ""},
		{func(c *Config) { c.Name = "down" }, `cannot become "down"`},
		{func(c *Config) { c.Loss.P = 2 }, "loss"},
	} {
		next := cfg
		tc.change(&next)
		err := c.Set(next)
		if tc.want == "" {
			if err != nil {
				t.Errorf("adding slots: %v", err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Set: %v, want an error saying %q", err, tc.want)
		}
	}
	next := cfg
	next.Slot = SlotConfig{Min: 2 * msec, Max: 2 * msec}
	if err := c.Set(next); err == nil || !strings.Contains(err.Error(), "slots cannot change") {
		t.Errorf("changing slots: %v", err)
	}
	if g := c.stages[0].(*lossStage).gen.(*randomLoss); g.c.p != 0.5 {
		t.Errorf("a refused change changed the loss to %v", g.c.p)
	}
}

// TestSetRepeats: the same changes at the same moments make the same
// decisions.
func TestSetRepeats(t *testing.T) {
	run := func() []uint32 {
		cfg := Config{Name: "up", Seed: 7, Loss: LossConfig{Model: LossRandom, P: 0.3}}
		c, col, pool := newTestChain(t, cfg)
		for i := range 300 {
			if i%100 == 50 {
				cfg.Loss.P += 0.1
				if err := c.Set(cfg); err != nil {
					t.Fatal(err)
				}
			}
			c.Arrive(t0, testPacket(pool, 100, uint32(i)))
		}
		var ids []uint32
		for _, d := range col.got {
			ids = append(ids, d.id)
		}
		return ids
	}
	a, b := run(), run()
	if len(a) == 0 || len(a) != len(b) {
		t.Fatalf("%d and %d delivered", len(a), len(b))
	}
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("delivery %d: packet %d, then %d", i, a[i], b[i])
		}
	}
}

// TestRunnerSet changes a running Runner, and a closed one refuses.
func TestRunnerSet(t *testing.T) {
	cfg := Config{Name: "up", Delay: DelayConfig{Time: msec}}
	got := make(chan time.Duration, 10)
	pool := NewPool(2048)
	r, err := NewRunner(cfg, clock.Real{}, func(now time.Time, p *Packet) {
		got <- now.Sub(p.Arrival)
		p.Release()
	})
	if err != nil {
		t.Fatal(err)
	}
	r.Start(context.Background())
	r.Send(testPacket(pool, 100, 1))
	if d := <-got; d != msec {
		t.Errorf("before: %v in the direction, want 1ms", d)
	}
	cfg.Delay.Time = 30 * msec
	if err := r.Set(cfg); err != nil {
		t.Fatal(err)
	}
	r.Send(testPacket(pool, 100, 2))
	if d := <-got; d != 30*msec {
		t.Errorf("after: %v in the direction, want 30ms", d)
	}
	cfg.InputLimit = 5
	if err := r.Set(cfg); err == nil {
		t.Error("the input limit changed")
	}
	r.Close()
	cfg.InputLimit = 0
	if err := r.Set(cfg); !errors.Is(err, ErrClosed) {
		t.Errorf("Set after Close: %v", err)
	}
}
