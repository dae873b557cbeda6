package impair

import (
	"testing"
	"time"
)

// The reorderer: after every Gap-1 packets that take the delay, the next
// skips the delay line with probability P (netem's "reorder P gap G").

func TestReorderGap(t *testing.T) {
	c, col, pool := newTestChain(t, Config{
		Delay:   DelayConfig{Time: 10 * time.Millisecond},
		Reorder: ReorderConfig{P: 1, Gap: 5},
	})
	for i := range 20 {
		c.Arrive(t0.Add(time.Duration(i)*time.Millisecond), testPacket(pool, 100, uint32(i)))
	}
	drain(c)
	sent := map[uint32]time.Duration{}
	for _, d := range col.got {
		sent[d.id] = d.at.Sub(t0)
	}
	for i := range 20 {
		want := time.Duration(i)*time.Millisecond + 10*time.Millisecond
		if i%5 == 4 { // every 5th packet goes at once
			want -= 10 * time.Millisecond
		}
		if sent[uint32(i)] != want {
			t.Fatalf("packet %d left at %v, want %v", i, sent[uint32(i)], want)
		}
	}
	if n := c.Stats().Stages[0].Reordered; n != 4 {
		t.Fatalf("reordered %d, want 4", n)
	}
}

// TestReordererGap: with P = 1 every Gap-th packet skips the line, every
// packet with a gap of 1 (or none given), none with P = 0.
func TestReordererGap(t *testing.T) {
	for _, c := range []struct {
		cfg  ReorderConfig
		want string
	}{
		{ReorderConfig{P: 1, Gap: 3}, "..x..x..x."},
		{ReorderConfig{P: 1, Gap: 1}, "xxxxxxxxxx"},
		{ReorderConfig{P: 1}, "xxxxxxxxxx"},
		{ReorderConfig{P: 0, Gap: 1}, ".........."},
	} {
		r := newReorderer(Config{Reorder: c.cfg}, newRand(1, "up", "reorder"))
		got := ""
		for range len(c.want) {
			if r.next() {
				got += "x"
			} else {
				got += "."
			}
		}
		if got != c.want {
			t.Errorf("%+v: %s, want %s", c.cfg, got, c.want)
		}
	}
}

// TestReordererDrawsAtTheGapsEndOnly: a packet is a candidate only once
// Gap-1 packets took the delay since the last one that skipped it, and
// only a candidate draws from the chance, as netem's: the candidates'
// decisions are the chance's draws in turn, which a correlated chance
// tells from draws for every packet.
func TestReordererDrawsAtTheGapsEndOnly(t *testing.T) {
	const gap, n = 4, 10000
	cfg := ReorderConfig{P: 0.5, Correlation: 0.7, Gap: gap}
	r := newReorderer(Config{Reorder: cfg}, newRand(7, "up", "reorder"))
	draws := newChance(Chance{P: cfg.P, Correlation: cfg.Correlation}, newRand(7, "up", "reorder"))
	since, skipped := 0, 0 // packets that took the delay since the last skip
	for i := range n {
		got := r.next()
		want := since >= gap-1 && draws.next()
		if got != want {
			t.Fatalf("packet %d (%d since the last skip): skips %v, want %v", i, since, got, want)
		}
		if got {
			since, skipped = 0, skipped+1
		} else {
			since++
		}
	}
	if skipped < n/10 {
		t.Errorf("%d of %d skipped", skipped, n)
	}
}

// TestReorderSkipsTheDelayLine: a packet the reorderer picks leaves at
// its arrival, ahead of those in the line, is counted as reordered, and
// takes no room in the line.
func TestReorderSkipsTheDelayLine(t *testing.T) {
	d := newDelayLine(Config{InflightLimit: 2, Delay: DelayConfig{Time: 10 * time.Millisecond}, Reorder: ReorderConfig{P: 1, Gap: 2}})
	var in []arrival
	for i := range 6 {
		in = append(in, arrival{at: time.Duration(i) * time.Millisecond, size: 100, id: uint32(i)})
	}
	got := runStage(d, NewPool(2048), in)
	// 1, 3 and 5 skip the line; 0 and 2 fill it, and 4 finds it full.
	checkDeliveries(t, got, []delivery{
		left(1*time.Millisecond, 1), left(3*time.Millisecond, 3), left(5*time.Millisecond, 5),
		left(10*time.Millisecond, 0), left(12*time.Millisecond, 2),
	})
	c := d.Counters()
	if c.Reordered.Load() != 3 || c.Drops[DropInflight].Load() != 1 || c.OutPackets.Load() != 5 {
		t.Errorf("reordered %d, inflight drops %d, out %d; want 3, 1, 5", c.Reordered.Load(), c.Drops[DropInflight].Load(), c.OutPackets.Load())
	}
}
