package impair

import (
	"math"
	"strings"
	"testing"
	"time"
)

func ms(v ...int) []time.Duration {
	d := make([]time.Duration, len(v))
	for i, x := range v {
		d[i] = time.Duration(x) * time.Millisecond
	}
	return d
}

// departures sends packets of the given sizes into a trace-driven link at
// the given arrival offsets and returns when each left, as offsets from
// t0.
func departures(t *testing.T, tr *Trace, arrivals []time.Duration, sizes []int) []time.Duration {
	t.Helper()
	c, col, _ := newTestChain(t, Config{Rate: RateConfig{Trace: tr}, Queue: QueueConfig{LimitPackets: 1000}})
	pool := NewPool(4096)
	for i, a := range arrivals {
		c.Arrive(t0.Add(a), testPacket(pool, sizes[i], uint32(i)))
	}
	drain(c)
	if len(col.got) != len(sizes) {
		t.Fatalf("%d of %d packets left", len(col.got), len(sizes))
	}
	out := make([]time.Duration, len(col.got))
	for i, d := range col.got {
		if d.id != uint32(i) {
			t.Fatalf("packet %d left as the %d-th", d.id, i)
		}
		out[i] = d.at.Sub(t0)
	}
	return out
}

func TestTraceDeparturesAreTheOpportunities(t *testing.T) {
	tr := &Trace{Times: ms(1, 2, 2, 5, 10)} // repeats every 10 ms
	for _, c := range []struct {
		name     string
		arrivals []time.Duration
		sizes    []int
		want     []time.Duration
	}{
		// The trace starts with the first packet: opportunities at 1,
		// 2, 2, 5, 10, then 11, 12, 12, 15, 20...
		{"one per opportunity, equal times together", ms(0, 0, 0, 0, 0, 0, 0), []int{1500, 1500, 1500, 1500, 1500, 1500, 1500},
			ms(1, 2, 2, 5, 10, 11, 12)},
		// A 3000-byte packet takes two opportunities (1 and 2 ms); the
		// next takes the 8 bytes it left and 992 of the second one at
		// 2 ms, and the last fits in the rest.
		{"a packet spans opportunities", ms(0, 0, 0), []int{3000, 1000, 100}, ms(2, 2, 2)},
		{"and the next opportunity", ms(0, 0, 0), []int{3000, 1500, 100}, ms(2, 2, 5)},
		// What one leaves of an opportunity carries the next: 1504 =
		// 1000 + 504, so the second leaves with the first.
		{"a shared opportunity", ms(0, 0, 0), []int{1000, 504, 32}, ms(1, 1, 2)},
		// The link idles from 1 ms; what is left of that opportunity
		// and the ones at 2 and 5 ms are lost; the packet arriving at
		// 7 ms takes the next, at 10 ms, and one at 21 ms the one at
		// 22 ms (2 ms into the third round).
		{"idle opportunities are lost", ms(0, 7, 21), []int{100, 100, 100}, ms(1, 10, 22)},
		// Arriving exactly at an opportunity misses it (mahimahi's
		// rule: the link has used it before the packet is queued).
		{"at an opportunity, the next one", ms(0, 5), []int{100, 100}, ms(1, 10)},
	} {
		got := departures(t, tr, c.arrivals, c.sizes)
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("%s: departures %v, want %v", c.name, got, c.want)
				break
			}
		}
	}
}

func TestTraceBytesAndOverhead(t *testing.T) {
	// 100 bytes per opportunity, and 20 bytes of overhead per packet:
	// a 180-byte packet costs 200, two opportunities.
	tr := &Trace{Times: ms(1, 2, 3, 4), Bytes: 100}
	c, col, pool := newTestChain(t, Config{Rate: RateConfig{Trace: tr, PacketOverhead: 20}})
	c.Arrive(t0, testPacket(pool, 180, 0))
	c.Arrive(t0, testPacket(pool, 180, 1))
	drain(c)
	if got := []time.Duration{col.got[0].at.Sub(t0), col.got[1].at.Sub(t0)}; got[0] != 2*time.Millisecond || got[1] != 4*time.Millisecond {
		t.Errorf("departures %v, want 2ms and 4ms", got)
	}
}

// TestTraceLongRunThroughput: a saturated link delivers exactly what its
// opportunities carry, round after round, with no drift.
func TestTraceLongRunThroughput(t *testing.T) {
	// 3 opportunities in 4 ms: 3*1504*8 bits / 4 ms = 9.024 Mbit/s.
	tr := &Trace{Times: ms(1, 1, 4)}
	if got := tr.MeanBitrate(); math.Abs(got-9.024e6) > 1 {
		t.Fatalf("MeanBitrate %v, want 9.024e6", got)
	}
	const n = 30000 // 1504-byte packets: one per opportunity, 10000 rounds
	c, col, pool := newTestChain(t, Config{Rate: RateConfig{Trace: tr}, Queue: QueueConfig{LimitPackets: n}})
	for i := range n {
		c.Arrive(t0, testPacket(pool, 1504, uint32(i)))
	}
	drain(c)
	last := col.got[n-1].at.Sub(t0)
	if want := 10000 * 4 * time.Millisecond; last != want {
		t.Errorf("the last of %d packets left at %v, want %v", n, last, want)
	}
	if busy := c.Stats().Stages[0].BusyNs; busy != int64(40*time.Second) {
		t.Errorf("busy %v, want 40s: the link always had a packet", time.Duration(busy))
	}
}

func TestParseTrace(t *testing.T) {
	tr, err := ParseTrace(strings.NewReader("# a comment\n1\n1\n\n  3 \n10\n"))
	if err != nil {
		t.Fatal(err)
	}
	if want := ms(1, 1, 3, 10); len(tr.Times) != 4 || tr.Times[2] != want[2] || tr.Period() != 10*time.Millisecond {
		t.Errorf("times %v, want %v", tr.Times, want)
	}
	for in, want := range map[string]string{
		"":               "at least one",
		"# only\n":       "at least one",
		"0\n0\n":         "nonzero time",
		"1\n2\nx\n":      "line 3: \"x\" is not a time",
		"1\n-2\n":        "line 2: \"-2\" is not a time",
		"1.5\n":          "line 1",
		"5\n3\n":         "line 2: 3 ms comes after 5 ms",
		"99999999999999": "line 1: 99999999999999 ms is too far from the trace's start",
	} {
		_, err := ParseTrace(strings.NewReader(in))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error with %q", in, err, want)
		}
	}
}

func TestTraceConfigValidate(t *testing.T) {
	for name, c := range map[string]Config{
		"both":      {Rate: RateConfig{Bitrate: 1e6, Trace: &Trace{Times: ms(1)}}},
		"empty":     {Rate: RateConfig{Trace: &Trace{}}},
		"decreases": {Rate: RateConfig{Trace: &Trace{Times: ms(2, 1, 3)}}},
		"bytes":     {Rate: RateConfig{Trace: &Trace{Times: ms(1), Bytes: -1}}},
	} {
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if c := (Config{Rate: RateConfig{Trace: &Trace{Times: ms(1)}}}); c.KeepsSegments() {
		t.Error("a trace-driven link keeps GSO packets whole")
	}
}

func TestTraceAllocs(t *testing.T) {
	c, col, pool := newTestChain(t, Config{Rate: RateConfig{Trace: &Trace{Times: ms(1, 2, 3)}}})
	col.got = make([]delivery, 0, 2000)
	now := t0
	if a := testing.AllocsPerRun(1000, func() {
		c.Arrive(now, testPacket(pool, 1500, 1))
		now = now.Add(time.Millisecond)
		c.Advance(now)
	}); a != 0 {
		t.Errorf("%v allocations per packet", a)
	}
}

// BenchmarkChainTrace is BenchmarkChain with a trace-driven link instead
// of a fixed rate: 1000 opportunities a millisecond (12 Gbit/s), 1000-byte
// packets arriving every microsecond (8 Gbit/s).
func BenchmarkChainTrace(b *testing.B) {
	tr := &Trace{}
	for ms := 1; ms <= 10; ms++ {
		for range 1000 {
			tr.Times = append(tr.Times, time.Duration(ms)*time.Millisecond)
		}
	}
	c := benchChain(b, Config{
		Seed:  1,
		Loss:  LossConfig{Model: LossRandom, P: 0.01},
		Rate:  RateConfig{Trace: tr},
		Queue: QueueConfig{LimitPackets: 10000},
		Delay: DelayConfig{Time: time.Millisecond},
	}, time.Microsecond)
	if d := c.Stats().Drops["queue"]; d > uint64(b.N)/100 {
		b.Errorf("%d of %d packets dropped at the queue: the trace is the bottleneck", d, b.N)
	}
}

// TestTraceCapacity counts what the opportunities offered, used or not,
// from the first packet on, as the time series reports it.
func TestTraceCapacity(t *testing.T) {
	tr := &Trace{Times: ms(0, 1, 2, 2, 5, 10), Bytes: 100}
	c, _, pool := newTestChain(t, Config{Rate: RateConfig{Trace: tr}})
	b := c.Stages()[0].(interface {
		CapacityBytes(time.Time) (int64, bool)
	})
	if _, ok := b.CapacityBytes(t0.Add(time.Hour)); ok {
		t.Error("a capacity before the first packet")
	}
	start := t0.Add(3 * time.Millisecond)
	c.Arrive(start, testPacket(pool, 100, 1))
	drain(c)
	for _, w := range []struct {
		at   time.Duration
		want int64
	}{
		{0, 0},                        // the opportunity at 0 is the packet's own instant: not offered
		{2 * time.Millisecond, 300},   // 1, 2, 2
		{9 * time.Millisecond, 400},   // and 5
		{10 * time.Millisecond, 600},  // 10, and the second round's 0
		{25 * time.Millisecond, 1600}, // 5 of the first round, 6 of the second, 5 of the third
	} {
		if got, ok := b.CapacityBytes(start.Add(w.at)); !ok || got != w.want {
			t.Errorf("capacity %v after the start: %d (%v), want %d", w.at, got, ok, w.want)
		}
	}
}

// TestSetTraceHandover: a live change from a fixed rate to a trace starts
// the trace at the change (not at the next packet), the packet on the wire
// finishes at the old rate, and a change back to a rate leaves the trace
// for good; the capacity counts each trace once, the replaced one's up to
// its end. A change of another key keeps the trace where it is.
func TestSetTraceHandover(t *testing.T) {
	cfg := Config{Name: "up", Rate: RateConfig{Bitrate: 12_000_000}} // 1 ms per 1500 B
	c, col, pool := newTestChain(t, cfg)
	for i := range 3 {
		c.Arrive(t0, testPacket(pool, 1500, uint32(i)))
	}
	c.Advance(t0.Add(1500 * time.Microsecond)) // the first left at 1 ms; the second is on the wire until 2 ms
	lte := &Trace{Times: ms(3, 4, 10), Bytes: 1500, File: "lte.trace"}
	next := cfg
	next.Rate = RateConfig{Trace: lte}
	if err := c.Set(next); err != nil {
		t.Fatalf("switching to a trace: %v", err)
	}
	// The trace's time runs from 1.5 ms: opportunities at 4.5, 5.5,
	// 11.5, 14.5, ... The third packet starts at 2 ms and takes 4.5.
	c.Arrive(t0.Add(5*msec), testPacket(pool, 1500, 3)) // takes 5.5
	c.Arrive(t0.Add(6*msec), testPacket(pool, 1500, 4)) // takes 11.5
	c.Advance(t0.Add(7 * msec))
	same := next
	same.Rate.Trace = &Trace{Times: lte.Times, Bytes: 1500, File: "lte.trace"} // decoded again
	same.Loss = LossConfig{Model: LossRandom, P: 0}
	if err := c.Set(same); err != nil {
		t.Fatal(err)
	}
	c.Advance(t0.Add(12 * msec))
	b := c.Stages()[len(c.Stages())-1].(interface {
		CapacityBytes(time.Time) (int64, bool)
	})
	if got, ok := b.CapacityBytes(t0.Add(12 * msec)); !ok || got != 3*1500 {
		t.Errorf("capacity at 12 ms: %d (%v), want 3 opportunities, 4500 B", got, ok)
	}
	back := cfg
	back.Rate.Bitrate = 1_500_000 // 8 ms per 1500 B
	if err := c.Set(back); err != nil {
		t.Fatal(err)
	}
	c.Arrive(t0.Add(13*msec), testPacket(pool, 1500, 5)) // 13 + 8 = 21 ms, not the trace's 14.5
	c.Advance(t0.Add(30 * msec))
	want := []time.Duration{1 * msec, 2 * msec, 4500 * time.Microsecond, 5500 * time.Microsecond, 11500 * time.Microsecond, 21 * msec}
	if len(col.got) != len(want) {
		t.Fatalf("%d delivered, want %d", len(col.got), len(want))
	}
	for i, w := range want {
		if got := col.got[i].at.Sub(t0); got != w {
			t.Errorf("packet %d left at %v, want %v", i, got, w)
		}
	}
	if got, ok := b.CapacityBytes(t0.Add(30 * msec)); ok || got != 3*1500 {
		t.Errorf("capacity at a fixed rate again: %d (%v), want the trace's 4500 B and false", got, ok)
	}
}
