package impair

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/netjam/netjam/clock"
)

// qdAt returns the instant d after clock.Epoch.
func qdAt(d time.Duration) time.Time { return clock.Epoch.Add(d) }

// qdUDP returns an IPv4 UDP packet of size bytes from source port sport
// (one flow per port), enqueued at t. It has no pool, so dropping it
// leaves it intact for the test to inspect.
func qdUDP(sport uint16, size int, t time.Time) *Packet {
	return &Packet{Data: qdIPv4(qdSrc4, qdDst4, 17, sport, 9, 0, size), Enqueued: t}
}

// qdECT returns p with its ECN field set to ECT(0) and its checksum fixed.
func qdECT(p *Packet) *Packet {
	p.Data[1] = p.Data[1]&^3 | ecnECT0
	p.Data[10], p.Data[11] = 0, 0
	c := qdIPv4Checksum(p.Data[:20])
	p.Data[10], p.Data[11] = byte(c>>8), byte(c)
	return p
}

// qdDisciplines builds every discipline, for the tests they all must pass.
var qdDisciplines = []struct {
	name string
	new  func(cfg QueueConfig, c *Counters) Queue
}{
	{"droptail", newDropTail},
	{"headdrop", newHeadDrop},
	{"codel", newCoDelQueue},
	{"fq_codel", func(cfg QueueConfig, c *Counters) Queue {
		return newFQCoDel(cfg, c, rand.New(rand.NewPCG(1, 2)))
	}},
	{"pie", func(cfg QueueConfig, c *Counters) Queue {
		return newPIE(cfg, c, rand.New(rand.NewPCG(1, 2)))
	}},
}

// qdCheckBacklog fails t unless q's backlog and c's gauges agree with the
// packets and bytes expected.
func qdCheckBacklog(t *testing.T, q Queue, c *Counters, n int, b int64) {
	t.Helper()
	if q.Len() != n || q.Bytes() != b {
		t.Errorf("backlog %d packets %d bytes, want %d, %d", q.Len(), q.Bytes(), n, b)
	}
	if gl, gb := c.QueueLen.Load(), c.QueueBytes.Load(); gl != int64(n) || gb != b {
		t.Errorf("gauges %d packets %d bytes, want %d, %d", gl, gb, n, b)
	}
}

// qdDrain dequeues everything at now.
func qdDrain(q Queue, now time.Time) []*Packet {
	var out []*Packet
	for p := q.Dequeue(now); p != nil; p = q.Dequeue(now) {
		out = append(out, p)
	}
	return out
}

// TestQueueOverflow checks, for every discipline, that a burst over the
// limits loses exactly the excess. For FQ-CoDel every packet is its own
// flow, so that its fattest flow holds one packet and each overflow drops
// one (see TestFQCoDelOverflow for its batches).
func TestQueueOverflow(t *testing.T) {
	for _, d := range qdDisciplines {
		for _, lc := range []struct {
			name string
			cfg  QueueConfig
		}{
			{"packets", QueueConfig{LimitPackets: 10}},
			{"bytes", QueueConfig{LimitBytes: 10000}},
			{"both", QueueConfig{LimitPackets: 10, LimitBytes: 20000}},
		} {
			t.Run(d.name+"/"+lc.name, func(t *testing.T) {
				var c Counters
				q := d.new(lc.cfg, &c)
				now := qdAt(0)
				for i := range 15 {
					q.Enqueue(now, qdUDP(uint16(1000+i), 1000, now))
				}
				if got := c.Drops[DropQueue].Load(); got != 5 {
					t.Errorf("%d overflow drops, want 5", got)
				}
				if got := c.Drops[DropAQM].Load(); got != 0 {
					t.Errorf("%d AQM drops, want 0", got)
				}
				qdCheckBacklog(t, q, &c, 10, 10000)
				if got := len(qdDrain(q, now)); got != 10 {
					t.Errorf("drained %d packets, want 10", got)
				}
				qdCheckBacklog(t, q, &c, 0, 0)
			})
		}
	}
}

// TestQueueDefaultLimit checks that a queue built with no limit at all is
// bounded by DefaultQueueLimit.
func TestQueueDefaultLimit(t *testing.T) {
	for _, d := range qdDisciplines {
		t.Run(d.name, func(t *testing.T) {
			var c Counters
			q := d.new(QueueConfig{}, &c)
			now := qdAt(0)
			for i := range DefaultQueueLimit + 1 {
				q.Enqueue(now, qdUDP(uint16(i), 40, now))
			}
			if q.Len() > DefaultQueueLimit {
				t.Errorf("%d packets queued, over the default limit %d", q.Len(), DefaultQueueLimit)
			}
		})
	}
}

func TestQueueFlush(t *testing.T) {
	for _, d := range qdDisciplines {
		t.Run(d.name, func(t *testing.T) {
			var c Counters
			q := d.new(QueueConfig{LimitPackets: 100}, &c)
			now := qdAt(0)
			for i := range 7 {
				q.Enqueue(now, qdUDP(uint16(i%3), 500, now))
			}
			q.Flush()
			if got := c.Drops[DropFlushed].Load(); got != 7 {
				t.Errorf("%d flushed, want 7", got)
			}
			qdCheckBacklog(t, q, &c, 0, 0)
			if p := q.Dequeue(now); p != nil {
				t.Errorf("Dequeue after Flush returned a packet")
			}
			// The queue works after a flush.
			q.Enqueue(now, qdUDP(1, 500, now))
			if p := q.Dequeue(now); p == nil {
				t.Errorf("Dequeue after Flush and Enqueue returned nil")
			}
		})
	}
}

// TestDropTailDropsNewest and TestHeadDropDropsOldest enqueue 15 numbered
// packets into a queue of 10.
func TestDropTailDropsNewest(t *testing.T) {
	var c Counters
	q := newDropTail(QueueConfig{LimitPackets: 10}, &c)
	in := qdFill(q, 15)
	qdCheckOrder(t, qdDrain(q, qdAt(0)), in[:10])
}

func TestHeadDropDropsOldest(t *testing.T) {
	var c Counters
	q := newHeadDrop(QueueConfig{LimitPackets: 10}, &c)
	in := qdFill(q, 15)
	if got := c.Drops[DropQueue].Load(); got != 5 {
		t.Errorf("%d drops, want 5", got)
	}
	qdCheckOrder(t, qdDrain(q, qdAt(0)), in[5:])
}

func TestHeadDropBytes(t *testing.T) {
	var c Counters
	q := newHeadDrop(QueueConfig{LimitBytes: 3000}, &c)
	now := qdAt(0)
	a, b, d := qdUDP(1, 1000, now), qdUDP(1, 1000, now), qdUDP(1, 1000, now)
	for _, p := range []*Packet{a, b, d} {
		q.Enqueue(now, p)
	}
	big := qdUDP(1, 2000, now)
	q.Enqueue(now, big) // needs 2000 bytes: a and b go
	if got := c.Drops[DropQueue].Load(); got != 2 {
		t.Errorf("%d drops, want 2", got)
	}
	qdCheckBacklog(t, q, &c, 2, 3000)
	q.Enqueue(now, qdUDP(1, 3001, now)) // can never fit: dropped alone
	if got := c.Drops[DropQueue].Load(); got != 3 {
		t.Errorf("%d drops, want 3", got)
	}
	qdCheckOrder(t, qdDrain(q, now), []*Packet{d, big})
}

func TestDropTailBytesMixed(t *testing.T) {
	var c Counters
	q := newDropTail(QueueConfig{LimitBytes: 3000}, &c)
	now := qdAt(0)
	a, b := qdUDP(1, 1000, now), qdUDP(1, 1500, now)
	q.Enqueue(now, a)
	q.Enqueue(now, b)
	q.Enqueue(now, qdUDP(1, 600, now)) // 3100: dropped
	small := qdUDP(1, 500, now)        // 3000: fits exactly
	q.Enqueue(now, small)
	if got := c.Drops[DropQueue].Load(); got != 1 {
		t.Errorf("%d drops, want 1", got)
	}
	qdCheckOrder(t, qdDrain(q, now), []*Packet{a, b, small})
}

// qdFill enqueues n 100-byte packets at Epoch and returns them in order.
func qdFill(q Queue, n int) []*Packet {
	in := make([]*Packet, n)
	for i := range in {
		in[i] = qdUDP(uint16(i), 100, qdAt(0))
		q.Enqueue(qdAt(0), in[i])
	}
	return in
}

func qdCheckOrder(t *testing.T, got, want []*Packet) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d packets, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("packet %d out is not the expected one", i)
		}
	}
}

// qdCheckNoAllocs fails t if an enqueue and a dequeue on q allocate, with
// a standing queue of 50 packets.
func qdCheckNoAllocs(t *testing.T, q Queue) {
	t.Helper()
	now := qdAt(0)
	for i := range 50 {
		q.Enqueue(now, qdUDP(uint16(i), 1000, now))
	}
	p := qdUDP(7, 1000, now)
	if n := testing.AllocsPerRun(1000, func() {
		now = now.Add(time.Microsecond)
		p.Enqueued, p.hash = now, 0
		q.Enqueue(now, p)
		p = q.Dequeue(now)
	}); n != 0 {
		t.Errorf("%v allocations per enqueue and dequeue", n)
	}
}

func TestQueueNoAllocs(t *testing.T) {
	for _, d := range qdDisciplines {
		t.Run(d.name, func(t *testing.T) {
			var c Counters
			qdCheckNoAllocs(t, d.new(QueueConfig{LimitPackets: 1000}, &c))
		})
	}
}

// qdBenchQueue measures one enqueue and one dequeue on q with a standing
// queue of 64 packets.
func qdBenchQueue(b *testing.B, q Queue) {
	now := qdAt(0)
	for i := range 64 {
		q.Enqueue(now, qdUDP(uint16(i), 1500, now))
	}
	p := qdUDP(7, 1500, now)
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Microsecond)
		p.Enqueued, p.hash = now, 0
		q.Enqueue(now, p)
		p = q.Dequeue(now)
	}
}

func BenchmarkDropTail(b *testing.B) {
	var c Counters
	qdBenchQueue(b, newDropTail(QueueConfig{LimitPackets: 1000}, &c))
}

func BenchmarkHeadDrop(b *testing.B) {
	var c Counters
	qdBenchQueue(b, newHeadDrop(QueueConfig{LimitPackets: 1000}, &c))
}
