package impair

import (
	"testing"
	"time"
)

// The bottleneck: a queue in front of a serializer at a bit rate (or a
// trace: trace_test.go; GSO packets: gso_test.go), one packet on the wire
// at a time.

// TestRateSpacingIsExact sends a burst into an idle 10 Mbit/s link: the
// packets must leave exactly size*8/rate apart, the first one transmitted
// at once.
func TestRateSpacingIsExact(t *testing.T) {
	c, col, pool := newTestChain(t, Config{Rate: RateConfig{Bitrate: 10_000_000}})
	for i := range 10 {
		c.Arrive(t0, testPacket(pool, 1500, uint32(i)))
	}
	drain(c)
	for i, d := range col.got {
		want := t0.Add(time.Duration(i+1) * 1200 * time.Microsecond)
		if !d.at.Equal(want) {
			t.Fatalf("packet %d left at %v, want %v", i, d.at.Sub(t0), want.Sub(t0))
		}
	}
	// Sojourn: packet i waited i transmission times.
	soj := c.Stats().Stages[0].Sojourn
	if soj.Min != 0 || soj.Max != float64(9*1200*time.Microsecond) {
		t.Fatalf("sojourn %+v, want 0 .. 10.8ms", soj)
	}
}

// TestRateDoesNotDrift uses a rate that does not divide the packet time
// into whole nanoseconds: after many packets the departure must still be
// floor(total bits / rate), not the sum of rounded-down times.
func TestRateDoesNotDrift(t *testing.T) {
	const n = 10000
	c, col, pool := newTestChain(t, Config{Rate: RateConfig{Bitrate: 7_000_000}, Queue: QueueConfig{LimitPackets: n}})
	for i := range n {
		c.Arrive(t0, testPacket(pool, 1500, uint32(i)))
	}
	drain(c)
	if len(col.got) != n {
		t.Fatalf("delivered %d, want %d", len(col.got), n)
	}
	for _, k := range []int{1, 7, 999, n} {
		want := time.Duration(uint64(k) * 1500 * 8 * 1e9 / 7_000_000)
		if got := col.got[k-1].at.Sub(t0); got != want {
			t.Fatalf("packet %d left at %v, want %v", k, got, want)
		}
	}
}

func TestRateOverheadAndCells(t *testing.T) {
	for _, tc := range []struct {
		name string
		rate RateConfig
		size int
		want time.Duration
	}{
		{"plain", RateConfig{Bitrate: 1e6}, 1000, 8 * time.Millisecond},
		{"overhead", RateConfig{Bitrate: 1e6, PacketOverhead: 14}, 1000, 8112 * time.Microsecond},
		{"negative overhead", RateConfig{Bitrate: 1e6, PacketOverhead: -20}, 1000, 7840 * time.Microsecond},
		// ATM: 1000+8 bytes need 21 cells of 48, each 53 bytes on the wire.
		{"atm cells", RateConfig{Bitrate: 1e6, PacketOverhead: 8, CellSize: 48, CellOverhead: 5}, 1000, 21 * 53 * 8 * time.Microsecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, col, pool := newTestChain(t, Config{Rate: tc.rate})
			c.Arrive(t0, testPacket(pool, tc.size, 1))
			drain(c)
			if got := col.got[0].at.Sub(t0); got != tc.want {
				t.Fatalf("left after %v, want %v", got, tc.want)
			}
		})
	}
}

// TestQueueOverflowCountsEveryDrop: a burst of 20 into a link with a
// 5-packet queue keeps 1 on the wire and 5 queued, and drops the other 14.
func TestQueueOverflowCountsEveryDrop(t *testing.T) {
	c, col, pool := newTestChain(t, Config{Rate: RateConfig{Bitrate: 1e6}, Queue: QueueConfig{LimitPackets: 5}})
	for i := range 20 {
		c.Arrive(t0, testPacket(pool, 500, uint32(i)))
	}
	drain(c)
	st := c.Stats()
	if len(col.got) != 6 || st.Drops["queue"] != 14 || st.InPackets != 20 || st.OutPackets != 6 {
		t.Fatalf("delivered %d, stats %+v", len(col.got), st)
	}
	for i, d := range col.got {
		if d.id != uint32(i) {
			t.Fatalf("drop-tail delivered id %d at %d", d.id, i)
		}
	}
}

func TestEqualTimeDepartureBeforeArrival(t *testing.T) {
	// A packet finishing transmission at t frees the wire for one arriving
	// at t: the newcomer must start at once, not wait.
	c, col, pool := newTestChain(t, Config{Rate: RateConfig{Bitrate: 8e6}, Queue: QueueConfig{LimitPackets: 1}})
	c.Arrive(t0, testPacket(pool, 1000, 1)) // 1 ms on the wire
	c.Arrive(t0.Add(time.Millisecond), testPacket(pool, 1000, 2))
	drain(c)
	if len(col.got) != 2 || col.got[1].at.Sub(t0) != 2*time.Millisecond {
		t.Fatalf("got %+v", col.got)
	}
}

// TestBottleneckSerializes: at 8 Mbit/s a packet of 1000 bytes is 1 ms on
// the wire; the next starts when the last bit of the one before is sent,
// however late the stage is woken, or at its arrival on an idle link.
func TestBottleneckSerializes(t *testing.T) {
	b := newBottleneck(Config{Rate: RateConfig{Bitrate: 8e6}})
	pool, out := NewPool(2048), &deliverySink{}
	b.Push(t0, testPacket(pool, 1000, 0), out)
	b.Push(t0, testPacket(pool, 1000, 1), out)
	if next, ok := b.Next(); !ok || !next.Equal(t0.Add(time.Millisecond)) {
		t.Fatalf("Next %v %v, want 1ms", next.Sub(t0), ok)
	}
	b.Wake(t0.Add(1500*time.Microsecond), out) // late
	if next, ok := b.Next(); len(out.got) != 1 || !ok || !next.Equal(t0.Add(2*time.Millisecond)) {
		t.Fatalf("woken late: %d out, next %v; want 1, and the second done at 2ms", len(out.got), next.Sub(t0))
	}
	wakeUntil(b, t0.Add(5*time.Millisecond), out)
	b.Push(t0.Add(5*time.Millisecond), testPacket(pool, 1000, 2), out) // an idle link
	wakeUntil(b, t0.Add(time.Second), out)
	checkDeliveries(t, out.got, []delivery{left(time.Millisecond, 0), left(2*time.Millisecond, 1), left(6*time.Millisecond, 2)})
	c := b.Counters()
	if c.BusyNs.Load() != int64(3*time.Millisecond) || c.OutBytes.Load() != 3000 {
		t.Errorf("busy %v for %d bytes, want 3ms for 3000", time.Duration(c.BusyNs.Load()), c.OutBytes.Load())
	}
	// Sojourns, to transmission: 0, 1 ms (behind the first), 0.
	if soj := c.Sojourn.Snapshot(); soj.Count != 3 || soj.Max != float64(time.Millisecond) || soj.Min != 0 {
		t.Errorf("sojourn %+v, want 3 of 0 to 1ms", soj)
	}
}

// TestBottleneckQueueDecidesWhatGoesNext: what waits goes on the wire in
// the discipline's order, the queue's limit counting what waits, not what
// is on the wire.
func TestBottleneckQueueDecidesWhatGoesNext(t *testing.T) {
	b := newBottleneck(Config{Rate: RateConfig{Bitrate: 8e6}, Queue: QueueConfig{LimitPackets: 2, Discipline: HeadDrop}})
	var in []arrival
	for i := range 5 {
		in = append(in, arrival{0, 1000, uint32(i)})
	}
	// 0 on the wire; 1 and 2 queued; 3 drops 1 at the head, 4 drops 2.
	checkDeliveries(t, runStage(b, NewPool(2048), in), []delivery{
		left(time.Millisecond, 0), left(2*time.Millisecond, 3), left(3*time.Millisecond, 4),
	})
	if d := b.Counters().Drops[DropQueue].Load(); d != 2 {
		t.Errorf("%d queue drops, want 2", d)
	}
}

// TestBottleneckFlush: Flush drops the packet on the wire and those
// queued (DropFlushed), and the link is idle.
func TestBottleneckFlush(t *testing.T) {
	b := newBottleneck(Config{Rate: RateConfig{Bitrate: 8e6}})
	pool, out := NewPool(2048), &deliverySink{}
	for i := range 3 {
		b.Push(t0, testPacket(pool, 1000, uint32(i)), out)
	}
	b.Flush()
	c := b.Counters()
	if _, ok := b.Next(); ok || c.Drops[DropFlushed].Load() != 3 || c.QueueLen.Load() != 0 || len(out.got) != 0 {
		t.Errorf("after Flush: busy %v, flushed %d, queue %d, out %d; want idle, 3, 0, 0", ok, c.Drops[DropFlushed].Load(), c.QueueLen.Load(), len(out.got))
	}
	b.Push(t0.Add(time.Millisecond), testPacket(pool, 1000, 3), out)
	wakeUntil(b, t0.Add(time.Second), out)
	checkDeliveries(t, out.got, []delivery{left(2*time.Millisecond, 3)})
}
