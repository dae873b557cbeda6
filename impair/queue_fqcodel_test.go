package impair

import (
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func qdNewFQ(cfg QueueConfig, c *Counters) *fqCoDel {
	return newFQCoDel(cfg, c, rand.New(rand.NewPCG(1, 2))).(*fqCoDel)
}

// qdSport returns the UDP source port of a packet built by qdUDP.
func qdSport(p *Packet) uint16 { return binary.BigEndian.Uint16(p.Data[20:22]) }

// qdDistinctFlows fails t unless the given ports land in distinct buckets
// of fq, a precondition of the tests that compare flows.
func qdDistinctFlows(t *testing.T, fq *fqCoDel, ports ...uint16) {
	t.Helper()
	seen := map[*fqFlow]uint16{}
	for _, port := range ports {
		f := fq.flowOf(qdUDP(port, 100, qdAt(0)))
		if other, ok := seen[f]; ok {
			t.Fatalf("test setup: ports %d and %d share a bucket; pick others", other, port)
		}
		seen[f] = port
	}
}

// qdPortsApart returns n source ports, from 1000 up, whose flows land in
// distinct buckets of fq.
func qdPortsApart(fq *fqCoDel, n int) []uint16 {
	var ports []uint16
	seen := map[*fqFlow]bool{}
	for port := uint16(1000); len(ports) < n; port++ {
		if f := fq.flowOf(qdUDP(port, 100, qdAt(0))); !seen[f] {
			seen[f] = true
			ports = append(ports, port)
		}
	}
	return ports
}

// TestFQCoDelSparseFlow: a flow sending a small packet every 20 ms shares
// the link with a bulk flow arriving twice as fast as the link serves.
// The sparse flow's packets go out ahead of the bulk backlog (RFC 8290
// §4.2): their sojourn stays at zero while the bulk flow's grows.
func TestFQCoDelSparseFlow(t *testing.T) {
	var c Counters
	fq := qdNewFQ(QueueConfig{LimitPackets: 1000}, &c)
	const bulk, sparse = 1000, 2000
	qdDistinctFlows(t, fq, bulk, sparse)
	var sparseMax, bulkSum time.Duration
	var sparseN, bulkN int
	for ms := range 3000 {
		now := qdAt(time.Duration(ms) * time.Millisecond)
		q := Queue(fq)
		q.Enqueue(now, qdUDP(bulk, 1500, now))
		q.Enqueue(now, qdUDP(bulk, 1500, now))
		if ms%20 == 10 { // once the bulk flow is on the old list
			q.Enqueue(now, qdUDP(sparse, 200, now))
		}
		p := q.Dequeue(now) // the link sends one packet per ms
		s := now.Sub(p.Enqueued)
		switch qdSport(p) {
		case sparse:
			sparseN++
			sparseMax = max(sparseMax, s)
		case bulk:
			bulkN++
			bulkSum += s
		}
	}
	if sparseN != 150 {
		t.Errorf("%d sparse packets sent, want all 150", sparseN)
	}
	if sparseMax != 0 {
		t.Errorf("sparse flow's worst sojourn %v, want 0", sparseMax)
	}
	if mean := bulkSum / time.Duration(bulkN); mean < 50*time.Millisecond {
		t.Errorf("bulk flow's mean sojourn %v: no standing queue, the test shows nothing", mean)
	}
	if c.Drops[DropAQM].Load() == 0 {
		t.Errorf("CoDel never dropped from the bulk flow")
	}
}

// TestFQCoDelByteFairness: two backlogged flows, one of 1500-byte packets
// and one of 300-byte packets, get the same bytes: DRR grants each a
// quantum per round whatever its packet size, so the gap stays within a
// quantum plus a packet.
func TestFQCoDelByteFairness(t *testing.T) {
	for _, quantum := range []int{0, 300, 1000, 4500} {
		var c Counters
		fq := qdNewFQ(QueueConfig{LimitPackets: 10000, Quantum: quantum}, &c)
		const big, small = 1000, 2000
		qdDistinctFlows(t, fq, big, small)
		now := qdAt(0) // no time passes: no CoDel drops
		for range 1000 {
			fq.Enqueue(now, qdUDP(big, 1500, now))
			fq.Enqueue(now, qdUDP(small, 300, now))
			fq.Enqueue(now, qdUDP(small, 300, now))
			fq.Enqueue(now, qdUDP(small, 300, now))
		}
		bound := int64(fq.quantum + 1500)
		var sent [2]int64
		for i := range 1500 {
			p := fq.Dequeue(now)
			if qdSport(p) == big {
				sent[0] += int64(p.Len())
			} else {
				sent[1] += int64(p.Len())
			}
			if d := sent[0] - sent[1]; i > 10 && (d > bound || d < -bound) {
				t.Fatalf("quantum %d: after %d packets big sent %d bytes, small %d", fq.quantum, i+1, sent[0], sent[1])
			}
		}
	}
}

// TestFQCoDelOverflowFattest: over the limit, FQ-CoDel drops from the head
// of the flow with the most bytes, half its backlog at most 64 packets
// (Linux's batch), and nothing from the others.
func TestFQCoDelOverflowFattest(t *testing.T) {
	for _, tc := range []struct {
		name        string
		cfg         QueueConfig
		fatN        int // packets of the fat flow, before the overflow
		fatSize     int
		thinN       int // packets of the thin flow, the arrival included
		wantDropped int
	}{
		// 20 x 1000 bytes: threshold 10000 bytes, 10 packets.
		{"packets", QueueConfig{LimitPackets: 25}, 20, 1000, 6, 10},
		{"bytes", QueueConfig{LimitBytes: 25000}, 20, 1000, 6, 10},
		// 200 x 100 bytes: half is 100 packets, capped at 64.
		{"batch cap", QueueConfig{LimitPackets: 205}, 200, 100, 6, 64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c Counters
			fq := qdNewFQ(tc.cfg, &c)
			const fat, thin = 1000, 2000
			qdDistinctFlows(t, fq, fat, thin)
			now := qdAt(0)
			var fatIn, thinIn []*Packet
			for range tc.fatN {
				p := qdUDP(fat, tc.fatSize, now)
				fatIn = append(fatIn, p)
				fq.Enqueue(now, p)
			}
			for range tc.thinN {
				p := qdUDP(thin, 1000, now)
				thinIn = append(thinIn, p)
				fq.Enqueue(now, p)
			}
			if got := c.Drops[DropQueue].Load(); got != uint64(tc.wantDropped) {
				t.Errorf("%d drops, want %d", got, tc.wantDropped)
			}
			if got := fq.flowOf(fatIn[0]).v.count; got != uint32(tc.wantDropped) {
				t.Errorf("fat flow's CoDel count %d, want %d", got, tc.wantDropped)
			}
			fatLeft := tc.fatN - tc.wantDropped
			qdCheckBacklog(t, fq, &c, fatLeft+tc.thinN, int64(fatLeft*tc.fatSize+tc.thinN*1000))
			var fatOut, thinOut []*Packet
			for _, p := range qdDrain(fq, now) {
				if qdSport(p) == fat {
					fatOut = append(fatOut, p)
				} else {
					thinOut = append(thinOut, p)
				}
			}
			qdCheckOrder(t, fatOut, fatIn[tc.wantDropped:])
			qdCheckOrder(t, thinOut, thinIn)
		})
	}
}

// TestFQCoDelOverflowOneFlow: with a single flow, one overflow drops half
// of it, as Linux does, not just the excess.
func TestFQCoDelOverflowOneFlow(t *testing.T) {
	var c Counters
	fq := qdNewFQ(QueueConfig{LimitPackets: 10}, &c)
	now := qdAt(0)
	for range 11 {
		fq.Enqueue(now, qdUDP(1, 1000, now))
	}
	// 11000 bytes, threshold 5500: six packets.
	if got := c.Drops[DropQueue].Load(); got != 6 {
		t.Errorf("%d drops, want 6", got)
	}
	qdCheckBacklog(t, fq, &c, 5, 5000)
}

// TestFQCoDelListRules follows RFC 8290 §4.2 step by step: a flow with
// credit left is served again, an exhausted one goes to the end of the
// old list with a new quantum, a new flow goes first, and a new flow that
// empties moves to the old list, so a packet arriving for it then waits
// its turn among the old flows instead of jumping the queue again.
func TestFQCoDelListRules(t *testing.T) {
	var c Counters
	fq := qdNewFQ(QueueConfig{LimitPackets: 100}, &c)
	const a, s = 1000, 2000
	qdDistinctFlows(t, fq, a, s)
	now := qdAt(0)
	for range 10 {
		fq.Enqueue(now, qdUDP(a, 1000, now))
	}
	next := func() uint16 { return qdSport(fq.Dequeue(now)) }
	fa, fs := fq.flowOf(qdUDP(a, 1, now)), fq.flowOf(qdUDP(s, 1, now))

	// A is new with 1514 bytes of credit: two packets (1514 -> 514 -> -486).
	seq := []uint16{next(), next()}
	// S arrives: new, behind A on the new list.
	fq.Enqueue(now, qdUDP(s, 100, now))
	// A, out of credit, moves to old with 1028; S goes.
	seq = append(seq, next())
	if fa.list != fqOld || fs.list != fqNew {
		t.Fatalf("after S's first packet: A on list %d, S on %d; want old, new", fa.list, fs.list)
	}
	// S is empty: moved to the old list behind A, A goes (1028 -> 28).
	seq = append(seq, next())
	if fs.list != fqOld {
		t.Fatalf("S emptied on the new list: on list %d, want old", fs.list)
	}
	// S's next packet finds it listed: it stays old, A goes first (28 -> -972).
	fq.Enqueue(now, qdUDP(s, 100, now))
	seq = append(seq, next())
	// A is exhausted: to the end with 542. S's turn.
	seq = append(seq, next())
	if want := []uint16{a, a, s, a, a, s}; !slices.Equal(seq, want) {
		t.Errorf("served %v, want %v", seq, want)
	}
	// S empty on the old list: removed for good. A goes on alone.
	seq = seq[:0]
	for range 6 {
		seq = append(seq, next())
	}
	if want := []uint16{a, a, a, a, a, a}; !slices.Equal(seq, want) || fs.list != fqIdle {
		t.Errorf("served %v with S on list %d, want %v with S idle", seq, fs.list, want)
	}
	if p := fq.Dequeue(now); p != nil || fa.list != fqIdle || fq.newList.head != nil || fq.oldList.head != nil {
		t.Errorf("empty queue: Dequeue %v, A on list %d", p, fa.list)
	}
}

// TestFQCoDelBacklogIsGlobal: CoDel's "more than one MTU queued" test
// looks at the whole queue, as in Linux. Twenty flows each keep a single
// packet queued; each waits for the nineteen others, 19 ms, well over
// target. Every flow's own backlog is empty behind its packet, yet the
// link has a standing queue, and CoDel drops.
func TestFQCoDelBacklogIsGlobal(t *testing.T) {
	var c Counters
	fq := qdNewFQ(QueueConfig{LimitPackets: 1000}, &c)
	ports := qdPortsApart(fq, 20)
	for ms := range 1000 {
		now := qdAt(time.Duration(ms) * time.Millisecond)
		for _, port := range ports {
			if p := qdUDP(port, 1500, now); fq.flowOf(p).q.n == 0 {
				fq.Enqueue(now, p)
			}
		}
		fq.Dequeue(now)
	}
	if c.Drops[DropAQM].Load() == 0 {
		t.Errorf("no CoDel drop with a standing queue of one packet per flow")
	}
}

// TestFQCoDelECN: with ECN on, CoDel marks the bulk flow's ECN-capable
// packets instead of dropping them.
func TestFQCoDelECN(t *testing.T) {
	var c Counters
	fq := qdNewFQ(QueueConfig{LimitPackets: 1000, ECN: true}, &c)
	for ms := range 1000 {
		now := qdAt(time.Duration(ms) * time.Millisecond)
		fq.Enqueue(now, qdECT(qdUDP(1, 1500, now)))
		fq.Enqueue(now, qdECT(qdUDP(1, 1500, now)))
		fq.Dequeue(now)
	}
	if c.Marked.Load() == 0 || c.Drops[DropAQM].Load() != 0 {
		t.Errorf("%d marked, %d AQM drops; want some marks and no drops", c.Marked.Load(), c.Drops[DropAQM].Load())
	}
}

// TestFQCoDelPreallocated checks that the flow table is built once: many
// flows come and go without a single allocation.
func TestFQCoDelPreallocated(t *testing.T) {
	var c Counters
	fq := qdNewFQ(QueueConfig{LimitPackets: 1000, Flows: 64}, &c)
	pkts := make([]*Packet, 512)
	for i := range pkts {
		pkts[i] = qdUDP(uint16(i), 200, qdAt(0))
	}
	now := qdAt(0)
	if n := testing.AllocsPerRun(20, func() {
		now = now.Add(time.Millisecond)
		for _, p := range pkts {
			p.Enqueued, p.hash = now, 0
			fq.Enqueue(now, p)
		}
		for fq.Dequeue(now) != nil {
		}
	}); n != 0 {
		t.Errorf("%v allocations per round of 512 packets", n)
	}
}

func BenchmarkFQCoDel(b *testing.B) {
	var c Counters
	qdBenchQueue(b, newFQCoDel(QueueConfig{LimitPackets: 1000}, &c, rand.New(rand.NewPCG(1, 2))))
}
