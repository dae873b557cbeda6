package impair

import (
	"testing"
	"time"
)

// The delay line: every packet held for the delay plus its jitter, in
// order unless AllowReorder, at most the inflight limit of them.

func TestDelayIsExact(t *testing.T) {
	c, col, pool := newTestChain(t, Config{Delay: DelayConfig{Time: 20 * time.Millisecond}})
	for i := range 100 {
		c.Arrive(t0.Add(time.Duration(i)*137*time.Microsecond), testPacket(pool, 100, uint32(i)))
	}
	drain(c)
	if len(col.got) != 100 {
		t.Fatalf("delivered %d packets, want 100", len(col.got))
	}
	for i, d := range col.got {
		want := t0.Add(time.Duration(i)*137*time.Microsecond + 20*time.Millisecond)
		if d.id != uint32(i) || !d.at.Equal(want) {
			t.Fatalf("packet %d: id %d at %v, want id %d at %v", i, d.id, d.at.Sub(t0), i, want.Sub(t0))
		}
	}
	st := c.Stats()
	if st.Transit.Min != 20e6 || st.Transit.Max != 20e6 {
		t.Fatalf("transit %+v, want exactly 20ms", st.Transit)
	}
}

func TestJitterKeepsOrderUnlessAllowed(t *testing.T) {
	for _, allow := range []bool{false, true} {
		c, col, pool := newTestChain(t, Config{Seed: 3, Delay: DelayConfig{
			Time: 50 * time.Millisecond, Jitter: 10 * time.Millisecond, Distribution: Normal, AllowReorder: allow,
		}})
		for i := range 2000 {
			c.Arrive(t0.Add(time.Duration(i)*time.Millisecond), testPacket(pool, 100, uint32(i)))
		}
		drain(c)
		inversions := 0
		for i := 1; i < len(col.got); i++ {
			if col.got[i].at.Before(col.got[i-1].at) {
				t.Fatalf("allow=%v: delivered out of time order", allow)
			}
			if col.got[i].id < col.got[i-1].id {
				inversions++
			}
		}
		if len(col.got) != 2000 {
			t.Fatalf("allow=%v: delivered %d", allow, len(col.got))
		}
		// With sd 10 ms and 1 ms spacing, netem-style jitter reorders
		// most neighbours; order-keeping must reorder none.
		if allow && inversions < 100 || !allow && inversions != 0 {
			t.Fatalf("allow=%v: %d inversions", allow, inversions)
		}
	}
}

func TestInflightLimit(t *testing.T) {
	c, col, pool := newTestChain(t, Config{Delay: DelayConfig{Time: time.Second}, InflightLimit: 10})
	for i := range 15 {
		c.Arrive(t0, testPacket(pool, 100, uint32(i)))
	}
	drain(c)
	if len(col.got) != 10 || c.Stats().Drops["inflight"] != 5 {
		t.Fatalf("delivered %d, drops %v", len(col.got), c.Stats().Drops)
	}
}

// TestDelayLineLeavesAtItsDueTime: a packet leaves at its arrival plus
// the delay, whenever the line is woken: woken late, it forwards each
// packet due by then at its own due time, and no more.
func TestDelayLineLeavesAtItsDueTime(t *testing.T) {
	d := newDelayLine(Config{Delay: DelayConfig{Time: 20 * time.Millisecond}})
	pool, out := NewPool(2048), &deliverySink{}
	d.Push(t0, testPacket(pool, 100, 1), out)
	d.Push(t0.Add(3*time.Millisecond), testPacket(pool, 100, 2), out)
	d.Push(t0.Add(9*time.Millisecond), testPacket(pool, 100, 3), out)
	if next, ok := d.Next(); !ok || !next.Equal(t0.Add(20*time.Millisecond)) {
		t.Fatalf("Next %v %v, want 20ms", next.Sub(t0), ok)
	}
	d.Wake(t0.Add(19*time.Millisecond), out)
	if len(out.got) != 0 {
		t.Fatalf("woken before the first is due: %+v", out.got)
	}
	d.Wake(t0.Add(25*time.Millisecond), out) // late
	checkDeliveries(t, out.got, []delivery{left(20*time.Millisecond, 1), left(23*time.Millisecond, 2)})
	if next, ok := d.Next(); !ok || !next.Equal(t0.Add(29*time.Millisecond)) || d.c.QueueLen.Load() != 1 {
		t.Errorf("after: Next %v %v, queue %d; want 29ms, 1 held", next.Sub(t0), ok, d.c.QueueLen.Load())
	}
}

// TestDelayLineAtOneTimeKeepsArrivalOrder: with AllowReorder, packets due
// at one instant leave in their arrival order, and the others by due
// time.
func TestDelayLineAtOneTimeKeepsArrivalOrder(t *testing.T) {
	d := newDelayLine(Config{Delay: DelayConfig{Time: 10 * time.Millisecond, AllowReorder: true}})
	var in []arrival
	for i := range 12 {
		in = append(in, arrival{at: time.Duration(i/4) * time.Millisecond, size: 100, id: uint32(i)})
	}
	var want []delivery
	for i := range 12 {
		want = append(want, left(10*time.Millisecond+time.Duration(i/4)*time.Millisecond, uint32(i)))
	}
	checkDeliveries(t, runStage(d, NewPool(2048), in), want)
}

// TestDelayLineNeverBeforeArrival: a jitter draw below minus the delay
// holds a packet for no time (as netem), never less; with AllowReorder
// that packet then leaves at its arrival.
func TestDelayLineNeverBeforeArrival(t *testing.T) {
	for _, allow := range []bool{false, true} {
		d := newDelayLine(Config{Seed: 5, Name: "up", Delay: DelayConfig{Time: time.Millisecond, Jitter: 10 * time.Millisecond, Distribution: Normal, AllowReorder: allow}})
		var in []arrival
		for i := range 1000 {
			in = append(in, arrival{at: time.Duration(i) * 100 * time.Microsecond, size: 100, id: uint32(i)})
		}
		got := runStage(d, NewPool(2048), in)
		if len(got) != len(in) {
			t.Fatalf("allow=%v: %d out of %d", allow, len(got), len(in))
		}
		atOnce := 0
		for _, g := range got {
			arrived := t0.Add(in[g.id].at)
			if g.at.Before(arrived) {
				t.Fatalf("allow=%v: packet %d left at %v, before its arrival at %v", allow, g.id, g.at.Sub(t0), arrived.Sub(t0))
			}
			if g.at.Equal(arrived) {
				atOnce++
			}
		}
		// P(jitter < -1ms) = P(z < -0.1) = 46%.
		if allow && (atOnce < 400 || atOnce > 520) {
			t.Errorf("allow=%v: %d of 1000 left at their arrival, want about 460", allow, atOnce)
		}
	}
}

// TestDelayLineInflightAndFlush: a line at its limit, of packets or of
// bytes, drops what comes (DropInflight) until a packet leaves; Flush
// drops what it holds (DropFlushed), and the line takes as many again.
func TestDelayLineInflightAndFlush(t *testing.T) {
	for _, allow := range []bool{false, true} {
		pool, out := NewPool(2048), &deliverySink{}
		d := newDelayLine(Config{InflightLimit: 2, InflightBytes: 2 * testPacket(pool, 100, 0).mem(), Delay: DelayConfig{Time: 10 * time.Millisecond, AllowReorder: allow}})
		for i := range 3 {
			d.Push(t0, testPacket(pool, 100, uint32(i)), out)
		}
		wakeUntil(d, t0.Add(10*time.Millisecond), out)
		d.Push(t0.Add(10*time.Millisecond), testPacket(pool, 100, 3), out)
		d.Push(t0.Add(10*time.Millisecond), testPacket(pool, 100, 4), out)
		d.Push(t0.Add(10*time.Millisecond), testPacket(pool, 100, 5), out)
		c := d.Counters()
		if c.InPackets.Load() != 6 || c.OutPackets.Load() != 2 || c.Drops[DropInflight].Load() != 2 || c.QueueLen.Load() != 2 {
			t.Errorf("allow=%v: in %d out %d inflight drops %d queue %d; want 6, 2, 2, 2", allow,
				c.InPackets.Load(), c.OutPackets.Load(), c.Drops[DropInflight].Load(), c.QueueLen.Load())
		}
		d.Flush()
		if _, ok := d.Next(); ok || c.Drops[DropFlushed].Load() != 2 || c.QueueLen.Load() != 0 {
			t.Errorf("allow=%v: after Flush: held %v, flushed %d, queue %d", allow, ok, c.Drops[DropFlushed].Load(), c.QueueLen.Load())
		}
		d.Push(t0.Add(11*time.Millisecond), testPacket(pool, 100, 6), out)
		d.Push(t0.Add(11*time.Millisecond), testPacket(pool, 100, 7), out)
		wakeUntil(d, t0.Add(time.Second), out)
		checkDeliveries(t, out.got, []delivery{left(10*time.Millisecond, 0), left(10*time.Millisecond, 1), left(21*time.Millisecond, 6), left(21*time.Millisecond, 7)})
	}
}
