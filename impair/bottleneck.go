package impair

import (
	"math/bits"
	"time"
)

// bottleneck is the queue in front of a serializer at a fixed bit rate, or
// replaying a trace of delivery opportunities: the place where a path's
// capacity is set and where queueing delay builds up.
//
// One packet at a time is "on the wire": it started transmission when the
// previous one finished (or when it arrived at an idle link) and leaves when
// its last bit is sent. The discipline chooses which queued packet goes next
// at that moment, which is when AQMs measure sojourn time.
type bottleneck struct {
	c    Counters
	q    Queue
	qcfg QueueConfig // what q was made of (see Chain.Set)
	rate RateConfig

	cur    *Packet   // on the wire; nil when idle
	doneAt time.Time // when cur's last bit is sent
	// rem carries the sub-nanosecond remainder of transmission times
	// (in units of 1/Bitrate ns) so that their sum never drifts from
	// bytes*8/rate, whatever the rate.
	rem uint64
	// trace replays RateConfig.Trace; nil at a fixed bit rate.
	trace *traceLink
}

func newBottleneck(cfg Config) *bottleneck {
	b := &bottleneck{rate: cfg.Rate, qcfg: cfg.Queue}
	if cfg.Rate.Trace != nil {
		b.trace = newTraceLink(cfg.Rate.Trace)
	}
	b.q = newQueue(cfg.Queue, &b.c, newRand(cfg.Seed, cfg.Name, "queue"))
	return b
}

func (b *bottleneck) Name() string        { return "queue" }
func (b *bottleneck) Counters() *Counters { return &b.c }

func (b *bottleneck) Push(now time.Time, p *Packet, out Sink) {
	b.c.in(p)
	p.Enqueued = now
	b.q.Enqueue(now, p)
	if b.cur == nil {
		b.start(now)
	}
}

func (b *bottleneck) Next() (time.Time, bool) { return b.doneAt, b.cur != nil }

func (b *bottleneck) Wake(now time.Time, out Sink) {
	p, t := b.cur, b.doneAt
	b.cur = nil
	b.c.out(p)
	out.Push(t, p)
	b.start(t)
}

// start puts the next packet the discipline picks on the wire at now.
func (b *bottleneck) start(now time.Time) {
	p := b.q.Dequeue(now)
	if p == nil {
		return
	}
	b.c.Sojourn.RecordDuration(now.Sub(p.Enqueued))
	b.cur = p
	if b.trace != nil {
		// Busy from the start to the opportunity that carries the
		// last byte, waiting for opportunities included.
		b.doneAt = b.trace.depart(now, int64(b.rate.wireBytes(len(p.Data))))
		b.c.BusyNs.Add(int64(b.doneAt.Sub(now)))
		return
	}
	tx := b.txTime(len(p.Data))
	b.c.BusyNs.Add(int64(tx))
	b.doneAt = now.Add(tx)
}

// wireBytes is what a packet of n bytes costs on the wire: its length plus
// the per-packet overhead, rounded up to whole cells when cells are set.
func (r RateConfig) wireBytes(n int) uint64 {
	n += r.PacketOverhead
	if r.CellSize > 0 {
		cells := (n + r.CellSize - 1) / r.CellSize
		n = cells * (r.CellSize + r.CellOverhead)
	}
	if n < 0 {
		return 0
	}
	return uint64(n)
}

// txTime returns the transmission time of a packet of n bytes, carrying the
// rounding remainder to the next packet.
func (b *bottleneck) txTime(n int) time.Duration {
	hi, lo := bits.Mul64(b.rate.wireBytes(n)*8, uint64(time.Second))
	lo, carry := bits.Add64(lo, b.rem, 0)
	hi += carry
	ns, rem := bits.Div64(hi, lo, b.rate.Bitrate)
	b.rem = rem
	return time.Duration(ns)
}

// CapacityBytes returns, for a trace-driven link, the bytes its delivery
// opportunities offered from its start (its first packet) up to t, used
// or lost; false at a fixed rate, or before the first packet. Safe on any
// goroutine.
func (b *bottleneck) CapacityBytes(t time.Time) (int64, bool) {
	if b.trace == nil {
		return 0, false
	}
	return b.trace.capacity(t)
}

func (b *bottleneck) Flush() {
	if b.cur != nil {
		b.c.drop(b.cur, DropFlushed)
		b.cur = nil
	}
	b.q.Flush()
}
