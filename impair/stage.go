package impair

import (
	"sync/atomic"
	"time"

	"github.com/netjam/netjam/stats"
)

// Stage is one step of a Chain. A stage is used by one goroutine at a time
// (the chain's) and needs no locking; only its Counters are read
// concurrently.
//
// Time only moves forward: the chain calls Push and Wake with
// non-decreasing times, and never with a time after a pending Next.
type Stage interface {
	// Name identifies the stage in counters and logs: "loss", "queue", ...
	Name() string
	// Push hands p to the stage at time now. From then on the stage owns
	// p: it forwards it at once through out, holds it until a later Wake,
	// or drops it (counting the reason and releasing it).
	Push(now time.Time, p *Packet, out Sink)
	// Next reports when the stage next has something to do; ok is false
	// while it holds nothing.
	Next() (t time.Time, ok bool)
	// Wake is called at the time Next reported; the stage forwards through
	// out what is due by now.
	Wake(now time.Time, out Sink)
	// Flush releases every packet the stage holds, counting each as
	// DropFlushed. The chain calls it when it shuts down.
	Flush()
	// Counters returns the stage's counters.
	Counters() *Counters
}

// Sink receives the packets a stage forwards. now is the logical time at
// which the packet leaves the stage.
type Sink interface {
	Push(now time.Time, p *Packet)
}

// DropReason says why a packet was dropped.
type DropReason uint8

// Drop reasons, one counter each. The names are what reports print.
const (
	DropLoss     DropReason = iota // random loss; the good state of gemodel; isolated losses of the 4-state model
	DropBurst                      // the bad (burst) state of gemodel and the 4-state model
	DropQueue                      // bottleneck queue over its packet or byte limit
	DropAQM                        // CoDel, FQ-CoDel or PIE decided to drop
	DropInflight                   // delay line or slot gate at its inflight limit
	DropInput                      // the direction's input channel was full (the sender outran the scheduler)
	DropFlushed                    // still in flight when the direction was closed
	NumDropReasons
)

var dropNames = [NumDropReasons]string{"loss", "burst", "queue", "aqm", "inflight", "input", "flushed"}

// DropReasonNames returns the report names of every reason, in order.
func DropReasonNames() []string { return append([]string(nil), dropNames[:]...) }

// String returns the reason's report name.
func (r DropReason) String() string {
	if r < NumDropReasons {
		return dropNames[r]
	}
	return "unknown"
}

// Counters are one stage's statistics. The chain's goroutine writes them;
// anyone may read them at any time (all fields are atomic).
type Counters struct {
	InPackets, InBytes   atomic.Uint64
	OutPackets, OutBytes atomic.Uint64
	Drops                [NumDropReasons]atomic.Uint64

	// Duplicated counts extra copies made, Corrupted packets with a flipped
	// bit, Marked packets ECN-marked CE instead of dropped, Reordered
	// packets sent past the delay line.
	Duplicated, Corrupted, Marked, Reordered atomic.Uint64

	// WholeGSO counts GSO packets that entered whole (see SetGSO); their
	// segments are in InPackets.
	WholeGSO atomic.Uint64

	// QueueLen and QueueBytes are the stage's current backlog.
	QueueLen, QueueBytes atomic.Int64
	// Sojourn records, for the bottleneck, each packet's time in the queue
	// (nanoseconds), measured when it starts transmission.
	Sojourn stats.Histogram
	// BusyNs is, for the bottleneck, the total time it spent transmitting;
	// OutBytes*8/BusyNs is the rate it delivered while backlogged.
	BusyNs atomic.Int64
}

// in counts a packet entering the stage (a GSO packet as its segments,
// here and in out and drop).
func (c *Counters) in(p *Packet) {
	if p.segs > 0 {
		c.WholeGSO.Add(1)
	}
	c.InPackets.Add(uint64(p.Segments()))
	c.InBytes.Add(uint64(p.WireLen()))
}

// out counts a packet leaving the stage.
func (c *Counters) out(p *Packet) {
	c.OutPackets.Add(uint64(p.Segments()))
	c.OutBytes.Add(uint64(p.WireLen()))
}

// drop counts p as dropped for reason r and releases it.
func (c *Counters) drop(p *Packet, r DropReason) {
	c.Drops[r].Add(uint64(p.Segments()))
	p.Release()
}

// StageStats is a point-in-time copy of a stage's Counters.
type StageStats struct {
	Name       string            `json:"name"`
	InPackets  uint64            `json:"packets_in"`
	InBytes    uint64            `json:"bytes_in"`
	OutPackets uint64            `json:"packets_out"`
	OutBytes   uint64            `json:"bytes_out"`
	Drops      map[string]uint64 `json:"drops,omitempty"`
	Duplicated uint64            `json:"duplicated,omitempty"`
	Corrupted  uint64            `json:"corrupted,omitempty"`
	Marked     uint64            `json:"ecn_marked,omitempty"`
	Reordered  uint64            `json:"reordered,omitempty"`
	// WholeGSO counts the large TCP segments (segmentation offload) that
	// crossed whole, each counted in the packets as its segments.
	WholeGSO   uint64         `json:"whole_gso,omitempty"`
	QueueLen   int64          `json:"queue_packets,omitempty"`
	QueueBytes int64          `json:"queue_bytes,omitempty"`
	Sojourn    *stats.Summary `json:"sojourn_ns,omitempty"`
	BusyNs     int64          `json:"busy_ns,omitempty"`
}

// Snapshot copies the counters. It allocates and is meant for reporting,
// not for the packet path.
func (c *Counters) Snapshot(name string) StageStats {
	s := StageStats{
		Name:       name,
		InPackets:  c.InPackets.Load(),
		InBytes:    c.InBytes.Load(),
		OutPackets: c.OutPackets.Load(),
		OutBytes:   c.OutBytes.Load(),
		Duplicated: c.Duplicated.Load(),
		Corrupted:  c.Corrupted.Load(),
		Marked:     c.Marked.Load(),
		Reordered:  c.Reordered.Load(),
		WholeGSO:   c.WholeGSO.Load(),
		QueueLen:   c.QueueLen.Load(),
		QueueBytes: c.QueueBytes.Load(),
		BusyNs:     c.BusyNs.Load(),
	}
	for r := DropReason(0); r < NumDropReasons; r++ {
		if n := c.Drops[r].Load(); n > 0 {
			if s.Drops == nil {
				s.Drops = make(map[string]uint64)
			}
			s.Drops[r.String()] = n
		}
	}
	if c.Sojourn.Count() > 0 {
		sum := c.Sojourn.Snapshot()
		s.Sojourn = &sum
	}
	return s
}

// passive provides the holding half of Stage for stages that decide on each
// packet at once and never hold one.
type passive struct{ c Counters }

// isPassive tells the chain it need not ask the stage for events.
func (*passive) isPassive()              {}
func (*passive) Next() (time.Time, bool) { return time.Time{}, false }
func (*passive) Wake(time.Time, Sink)    {}
func (*passive) Flush()                  {}
func (s *passive) Counters() *Counters   { return &s.c }
func (s *passive) forward(now time.Time, p *Packet, out Sink) {
	s.c.out(p)
	out.Push(now, p)
}
