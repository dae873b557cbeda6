package impair

import "time"

// delayLine holds each packet for the propagation delay plus its jitter.
//
// By default a packet never leaves before the one ahead of it: its due time
// is at least the previous packet's, as on a real path where jitter comes
// from queues that do not reorder. That is not what netem does: netem sorts
// packets by their own jittered time, so any jitter larger than the packet
// spacing reorders packets, a common surprise that makes TCP see
// reordering as loss. AllowReorder selects netem's behaviour. Either way
// the packets the reorderer picks skip the line altogether.
//
// In order-keeping mode due times are non-decreasing, so the line is a ring
// of (due, packet) pairs: checking the next departure reads the ring, not
// the packet, which at high rates is long out of cache. With AllowReorder
// the line is a binary heap on (due, seq).
type delayLine struct {
	c       Counters
	cfg     DelayConfig
	jit     *jitter    // nil without jitter
	reorder *reorderer // nil without reordering
	limit   int
	maxMem  int64 // bound of mem
	mem     int64 // the held packets' buffers, in bytes

	ring ring      // order-keeping mode
	heap []*Packet // AllowReorder mode
	last time.Time // latest due time handed out (order-keeping mode)
	seq  uint64
}

func newDelayLine(cfg Config) *delayLine {
	d := &delayLine{cfg: cfg.Delay, limit: inflightLimit(cfg), maxMem: inflightBytes(cfg)}
	if cfg.Delay.Jitter > 0 {
		d.jit = newJitter(cfg.Delay, newRand(cfg.Seed, cfg.Name, "jitter"))
	}
	if cfg.Reorder.P > 0 {
		d.reorder = newReorderer(cfg, newRand(cfg.Seed, cfg.Name, "reorder"))
	}
	return d
}

func (d *delayLine) Name() string        { return "delay" }
func (d *delayLine) Counters() *Counters { return &d.c }

func (d *delayLine) len() int {
	if d.cfg.AllowReorder {
		return len(d.heap)
	}
	return d.ring.n
}

func (d *delayLine) Push(now time.Time, p *Packet, out Sink) {
	d.c.in(p)
	if d.reorder != nil && d.reorder.next() {
		d.c.Reordered.Add(1)
		d.c.out(p)
		out.Push(now, p)
		return
	}
	if d.len() >= d.limit || d.mem+p.mem() > d.maxMem {
		d.c.drop(p, DropInflight)
		return
	}
	d.mem += p.mem()
	delay := d.cfg.Time
	if d.jit != nil {
		delay += d.jit.next()
	}
	if delay < 0 {
		delay = 0 // as netem: a packet cannot leave before it arrived
	}
	p.due = now.Add(delay)
	if d.cfg.AllowReorder {
		d.seq++
		p.seq = d.seq
		d.heapPush(p)
	} else {
		if p.due.Before(d.last) {
			p.due = d.last
		}
		d.last = p.due
		d.ring.push(p.due, p)
	}
	d.c.QueueLen.Store(int64(d.len()))
}

func (d *delayLine) Next() (time.Time, bool) {
	if d.cfg.AllowReorder {
		if len(d.heap) == 0 {
			return time.Time{}, false
		}
		return d.heap[0].due, true
	}
	return d.ring.peek()
}

func (d *delayLine) Wake(now time.Time, out Sink) {
	for {
		t, ok := d.Next()
		if !ok || t.After(now) {
			break
		}
		var p *Packet
		if d.cfg.AllowReorder {
			p = d.heapPop()
		} else {
			p = d.ring.pop()
		}
		d.mem -= p.mem()
		d.c.out(p)
		out.Push(p.due, p)
	}
	d.c.QueueLen.Store(int64(d.len()))
}

func (d *delayLine) Flush() {
	for d.ring.n > 0 {
		d.c.drop(d.ring.pop(), DropFlushed)
	}
	for _, p := range d.heap {
		d.c.drop(p, DropFlushed)
	}
	clear(d.heap)
	d.heap = d.heap[:0]
	d.mem = 0
	d.c.QueueLen.Store(0)
}

func less(a, b *Packet) bool {
	if a.due.Equal(b.due) {
		return a.seq < b.seq
	}
	return a.due.Before(b.due)
}

func (d *delayLine) heapPush(p *Packet) {
	h := append(d.heap, p)
	i := len(h) - 1
	for i > 0 {
		parent := (i - 1) / 2
		if !less(h[i], h[parent]) {
			break
		}
		h[i], h[parent] = h[parent], h[i]
		i = parent
	}
	d.heap = h
}

func (d *delayLine) heapPop() *Packet {
	h := d.heap
	top := h[0]
	n := len(h) - 1
	h[0] = h[n]
	h[n] = nil
	h = h[:n]
	i := 0
	for {
		l, r, m := 2*i+1, 2*i+2, i
		if l < n && less(h[l], h[m]) {
			m = l
		}
		if r < n && less(h[r], h[m]) {
			m = r
		}
		if m == i {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	d.heap = h
	return top
}

// ring is a FIFO of packets with their due times, in a circular buffer
// that doubles when full (its length is bounded by the line's limit, so it
// stops growing after warm-up).
type ring struct {
	due  []time.Time
	pkts []*Packet
	head int // index of the oldest entry
	n    int
}

func (r *ring) push(due time.Time, p *Packet) {
	if r.n == len(r.pkts) {
		r.grow()
	}
	i := (r.head + r.n) & (len(r.pkts) - 1)
	r.due[i], r.pkts[i] = due, p
	r.n++
}

func (r *ring) grow() {
	size := max(2*len(r.pkts), 64) // powers of two: indices wrap with a mask
	due, pkts := make([]time.Time, size), make([]*Packet, size)
	for i := range r.n {
		j := (r.head + i) & (len(r.pkts) - 1)
		due[i], pkts[i] = r.due[j], r.pkts[j]
	}
	r.due, r.pkts, r.head = due, pkts, 0
}

func (r *ring) peek() (time.Time, bool) {
	if r.n == 0 {
		return time.Time{}, false
	}
	return r.due[r.head], true
}

func (r *ring) pop() *Packet {
	p := r.pkts[r.head]
	r.pkts[r.head] = nil
	r.head = (r.head + 1) & (len(r.pkts) - 1)
	r.n--
	return p
}
