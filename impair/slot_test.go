package impair

import (
	"testing"
	"time"
)

// The slot gate: packets leave in bursts, when slots open, a random gap
// in [Min, Max] apart, each slot up to its packet or byte budget
// (netem's "slot").

func TestSlotReleasesBursts(t *testing.T) {
	c, col, pool := newTestChain(t, Config{Slot: SlotConfig{Min: 10 * time.Millisecond, Max: 10 * time.Millisecond, Packets: 2}})
	for i := range 5 {
		c.Arrive(t0, testPacket(pool, 100, uint32(i)))
	}
	drain(c)
	want := []time.Duration{10, 10, 20, 20, 30}
	for i, d := range col.got {
		if d.at.Sub(t0) != want[i]*time.Millisecond {
			t.Fatalf("packet %d at %v, want %vms", i, d.at.Sub(t0), want[i])
		}
	}
	// An arrival at an idle gate long after waits a full new gap.
	c.Arrive(t0.Add(time.Second), testPacket(pool, 100, 9))
	drain(c)
	if got := col.got[len(col.got)-1].at.Sub(t0); got != 1010*time.Millisecond {
		t.Fatalf("late packet at %v, want 1.01s", got)
	}
}

func TestSlotByteBudgetAndRandomGap(t *testing.T) {
	c, col, pool := newTestChain(t, Config{Seed: 9, Slot: SlotConfig{Min: 1 * time.Millisecond, Max: 5 * time.Millisecond, Bytes: 1000}})
	for i := range 100 {
		c.Arrive(t0, testPacket(pool, 400, uint32(i)))
	}
	drain(c)
	// 400-byte packets against a 1000-byte budget: 3 per slot (the third
	// overdraws it, as in netem), gaps within [1ms, 5ms].
	for i := 0; i+3 < len(col.got); i += 3 {
		if !col.got[i].at.Equal(col.got[i+2].at) {
			t.Fatalf("packets %d..%d not in one slot", i, i+2)
		}
		gap := col.got[i+3].at.Sub(col.got[i].at)
		if gap < time.Millisecond || gap > 5*time.Millisecond {
			t.Fatalf("gap %v outside [1ms, 5ms]", gap)
		}
	}
}

// fixedSlots are slots 10 ms apart.
func fixedSlots(packets int, bytes int64) Config {
	return Config{Slot: SlotConfig{Min: 10 * time.Millisecond, Max: 10 * time.Millisecond, Packets: packets, Bytes: bytes}}
}

// TestSlotLeavesAtTheSlotsOpening: what waits leaves when the slot opens,
// whenever the gate is woken; without a budget a slot releases all, with
// one the next slot opens a gap after it.
func TestSlotLeavesAtTheSlotsOpening(t *testing.T) {
	s := newSlotGate(fixedSlots(0, 0))
	pool, out := NewPool(2048), &deliverySink{}
	for i := range 3 {
		s.Push(t0.Add(time.Duration(2*i)*time.Millisecond), testPacket(pool, 100, uint32(i)), out)
	}
	if next, ok := s.Next(); !ok || !next.Equal(t0.Add(10*time.Millisecond)) {
		t.Fatalf("Next %v %v, want 10ms", next.Sub(t0), ok)
	}
	s.Wake(t0.Add(15*time.Millisecond), out) // late
	checkDeliveries(t, out.got, []delivery{left(10*time.Millisecond, 0), left(10*time.Millisecond, 1), left(10*time.Millisecond, 2)})
	if _, ok := s.Next(); ok || s.c.QueueLen.Load() != 0 {
		t.Errorf("still holds %d", s.c.QueueLen.Load())
	}

	// A slot spent, the next opens a gap after the spent one opened,
	// however late the gate was woken.
	s, out = newSlotGate(fixedSlots(1, 0)), &deliverySink{}
	s.Push(t0, testPacket(pool, 100, 0), out)
	s.Push(t0, testPacket(pool, 100, 1), out)
	s.Wake(t0.Add(15*time.Millisecond), out)
	if next, ok := s.Next(); len(out.got) != 1 || !ok || !next.Equal(t0.Add(20*time.Millisecond)) {
		t.Errorf("a slot of one packet woken at 15 ms: %d out, next slot at %v; want 1, 20ms", len(out.got), next.Sub(t0))
	}
}

// TestSlotBudgetIsNotSavedUp: an arrival while the open slot has budget
// left leaves in it, at its opening time, and spends the rest of its
// budget; an arrival at an idle gate after that slot waits a whole gap,
// though the last slot had budget left.
func TestSlotBudgetIsNotSavedUp(t *testing.T) {
	got := runStage(newSlotGate(fixedSlots(2, 0)), NewPool(2048), []arrival{
		{0, 100, 0},
		{10 * time.Millisecond, 100, 1}, // the slot of 10 ms, its second packet
		{10 * time.Millisecond, 100, 2}, // that slot is spent: the next, 10 ms on
		{25 * time.Millisecond, 100, 3}, // the slot of 20 ms had room: not kept
	})
	checkDeliveries(t, got, []delivery{
		left(10*time.Millisecond, 0), left(10*time.Millisecond, 1), left(20*time.Millisecond, 2), left(35*time.Millisecond, 3),
	})
}

// TestSlotEndsAtTheFirstBudgetSpent: with both budgets, the first spent
// ends the slot; the packet that overdraws the byte budget still leaves
// in it, as in netem.
func TestSlotEndsAtTheFirstBudgetSpent(t *testing.T) {
	for _, c := range []struct {
		name    string
		packets int
		bytes   int64
		want    []time.Duration // of packets 0 to 4, 600 bytes each
	}{
		{"bytes first", 5, 1000, []time.Duration{10, 10, 20, 20, 30}},
		{"packets first", 1, 10000, []time.Duration{10, 20, 30, 40, 50}},
		{"bytes exactly", 5, 1200, []time.Duration{10, 10, 20, 20, 30}},
		{"packets only", 3, 0, []time.Duration{10, 10, 10, 20, 20}},
	} {
		var in []arrival
		var want []delivery
		for i := range 5 {
			in = append(in, arrival{0, 600, uint32(i)})
			want = append(want, left(c.want[i]*time.Millisecond, uint32(i)))
		}
		t.Run(c.name, func(t *testing.T) {
			checkDeliveries(t, runStage(newSlotGate(fixedSlots(c.packets, c.bytes)), NewPool(2048), in), want)
		})
	}
}

// TestSlotGapsAreOfTheSeed: the random gaps are in [Min, Max], spread
// over it, and the same from the same seed.
func TestSlotGapsAreOfTheSeed(t *testing.T) {
	run := func(seed uint64) []delivery {
		s := newSlotGate(Config{Seed: seed, Name: "up", Slot: SlotConfig{Min: time.Millisecond, Max: 3 * time.Millisecond, Packets: 1}})
		var in []arrival
		for i := range 500 {
			in = append(in, arrival{0, 100, uint32(i)})
		}
		return runStage(s, NewPool(2048), in)
	}
	a, b, c := run(1), run(1), run(2)
	seen := map[time.Duration]bool{}
	same := true
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("packet %d: %v and %v from one seed", i, a[i].at.Sub(t0), b[i].at.Sub(t0))
		}
		same = same && a[i] == c[i]
		gap := a[i].at.Sub(t0)
		if i > 0 {
			gap = a[i].at.Sub(a[i-1].at)
		}
		if gap < time.Millisecond || gap > 3*time.Millisecond {
			t.Fatalf("gap %v before packet %d, outside [1ms, 3ms]", gap, i)
		}
		seen[gap.Round(500*time.Microsecond)] = true
	}
	if same || len(seen) < 5 {
		t.Errorf("seeds 1 and 2 gave the same gaps (%v), or few (%d values to 0.5 ms)", same, len(seen))
	}
}

// TestSlotInflightAndFlush: a gate at its limit, of packets or of bytes,
// drops what comes (DropInflight) until a packet leaves; Flush drops what
// it holds (DropFlushed), and the gate takes as many again, in the slots
// set before.
func TestSlotInflightAndFlush(t *testing.T) {
	pool, out := NewPool(2048), &deliverySink{}
	cfg := fixedSlots(1, 0)
	cfg.InflightLimit, cfg.InflightBytes = 2, 2*testPacket(pool, 100, 0).mem()
	s := newSlotGate(cfg)
	for i := range 3 {
		s.Push(t0, testPacket(pool, 100, uint32(i)), out)
	}
	wakeUntil(s, t0.Add(10*time.Millisecond), out) // 0 leaves
	s.Push(t0.Add(10*time.Millisecond), testPacket(pool, 100, 3), out)
	c := s.Counters()
	if c.Drops[DropInflight].Load() != 1 || c.QueueLen.Load() != 2 {
		t.Errorf("inflight drops %d, queue %d; want 1 (packet 2), 2", c.Drops[DropInflight].Load(), c.QueueLen.Load())
	}
	s.Flush()
	if _, ok := s.Next(); ok || c.Drops[DropFlushed].Load() != 2 || c.QueueLen.Load() != 0 {
		t.Errorf("after Flush: held %v, flushed %d, queue %d", ok, c.Drops[DropFlushed].Load(), c.QueueLen.Load())
	}
	s.Push(t0.Add(11*time.Millisecond), testPacket(pool, 100, 4), out)
	s.Push(t0.Add(11*time.Millisecond), testPacket(pool, 100, 5), out)
	wakeUntil(s, t0.Add(time.Second), out)
	checkDeliveries(t, out.got, []delivery{left(10*time.Millisecond, 0), left(20*time.Millisecond, 4), left(30*time.Millisecond, 5)})
}
