package impair

import (
	"math/bits"
	"sync/atomic"
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
	// trace replays RateConfig.Trace. Set only on the chain's goroutine
	// (a live change may switch it), read by CapacityBytes on others.
	trace atomic.Pointer[traceState]
}

// traceState is the trace a bottleneck replays, with what the traces
// before it offered, swapped as one so that CapacityBytes never counts a
// trace twice or misses one.
type traceState struct {
	link   *traceLink // nil at a fixed bit rate
	before int64      // bytes the traces live changes replaced offered
}

func newBottleneck(cfg Config) *bottleneck {
	b := &bottleneck{rate: cfg.Rate, qcfg: cfg.Queue}
	st := &traceState{}
	if cfg.Rate.Trace != nil {
		st.link = newTraceLink(cfg.Rate.Trace)
	}
	b.trace.Store(st)
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
	if tl := b.trace.Load().link; tl != nil {
		// Busy from the start to the opportunity that carries the
		// last byte, waiting for opportunities included.
		b.doneAt = tl.depart(now, int64(b.rate.wireBytes(len(p.Data))))
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
// or lost, those of the traces live changes replaced included; false at a
// fixed rate, or before the first packet, with what earlier traces
// offered. Safe on any goroutine.
func (b *bottleneck) CapacityBytes(t time.Time) (int64, bool) {
	st := b.trace.Load()
	if st.link == nil {
		return st.before, false
	}
	c, ok := st.link.capacity(t)
	return st.before + c, ok
}

// switchTrace replaces the trace being replayed by t (nil: the fixed
// rate of the change), started at now; a zero now (a change before the
// run starts) starts it with the first packet, as a trace of the file.
func (b *bottleneck) switchTrace(t *Trace, now time.Time) {
	old := b.trace.Load()
	st := &traceState{before: old.before}
	if old.link != nil {
		if c, ok := old.link.capacity(now); ok {
			st.before += c
		}
	}
	if t != nil {
		st.link = newTraceLink(t)
		if !now.IsZero() {
			st.link.startAt(now)
		}
	}
	b.trace.Store(st)
}

func (b *bottleneck) Flush() {
	if b.cur != nil {
		b.c.drop(b.cur, DropFlushed)
		b.cur = nil
	}
	b.q.Flush()
}
