package impair

import (
	"sync"
	"time"
)

// Packet is one IP packet in flight through a Chain.
//
// A Packet is owned by one party at a time (see the package comment). Stages
// may rewrite Data in place (corrupt flips a bit, ECN marking rewrites the
// traffic class), but never grow it beyond its capacity.
type Packet struct {
	// Data holds the IP packet, header first.
	Data []byte
	// Arrival is when the packet entered the chain, set by Runner.Send or the
	// caller of Chain.Arrive.
	Arrival time.Time
	// Enqueued is when the packet entered the bottleneck queue; the queue's
	// sojourn time is measured from it.
	Enqueued time.Time

	// due is when the packet leaves the stage holding it (delay line, slot
	// gate); seq orders packets with equal due times in arrival order.
	due time.Time
	seq uint64
	// hash caches the packet's flow hash (0: not computed yet).
	hash uint32
	// segs, mss and hdrLen describe a GSO packet (see SetGSO): its
	// segments (0: not a GSO packet), their payload size and the length
	// of the headers each repeats; partial says its TCP checksum is not
	// final.
	segs, mss, hdrLen uint16
	partial           bool
	// mayWait: the goroutine holding p may be held back (SetMayWait).
	mayWait bool
	// next links packets in the intrusive queues of the stage holding it.
	next *Packet
	pool *Pool
	buf  []byte
}

// Len returns the packet's length in bytes.
func (p *Packet) Len() int { return len(p.Data) }

// mem returns the bytes p's buffer takes, whatever its length: what p
// costs a stage that holds it (a pooled 64 KiB buffer holding an ACK
// still takes 64 KiB).
func (p *Packet) mem() int64 {
	if p.buf != nil {
		return int64(cap(p.buf))
	}
	return int64(cap(p.Data))
}

// BufferSize returns the bytes p's buffer takes, whatever its length (see
// Lendable).
func (p *Packet) BufferSize() int { return int(p.mem()) }

// Lendable reports whether p's bytes are worth lending as they are to
// something that keeps them a while (stack.Host.InjectLent) rather than
// copied: its buffer is at most twice its length, so what keeps it holds
// at most twice what it counts.
func (p *Packet) Lendable() bool { return 2*len(p.Data) >= p.BufferSize() }

// SetMayWait says whether the goroutine handing p on is a sender that may
// be held back until the goroutine it hands p to has room (Runner.Send
// then waits rather than drop p at a full input): one that nothing on
// p's way waits for, such as a netstack host's TCP sender (never the
// goroutine delivering the host's arrivals, see stack.HostConfig.Held).
// Whatever hands p to a goroutine of its own clears it, so that only its
// sender ever waits for it; a split's segments inherit it.
func (p *Packet) SetMayWait(may bool) { p.mayWait = may }

// MayWait reports what SetMayWait set.
func (p *Packet) MayWait() bool { return p.mayWait }

// Release returns p to its pool. p must not be used afterwards.
func (p *Packet) Release() {
	if p.pool != nil {
		p.pool.put(p)
	}
}

// segmentPool holds the segments the stages split GSO packets into
// (lossStage, bottleneck, Chain.Arrive): MTU-sized packets of the usual
// MTUs. A larger segment comes from its GSO packet's own pool (SplitTo).
var segmentPool = NewPool(2048)

// partPools hold the parts of GSO packets the bottleneck puts on the wire
// (cutHead, fit), by size, so that a part's buffer is at most twice its
// length: what a part costs the stages behind (a delay line's bound on
// the memory it holds, Packet.mem) is near what it carries, not a whole
// 64 KiB GSO buffer.
var partPools = [...]*Pool{segmentPool, NewPool(4 << 10), NewPool(8 << 10), NewPool(16 << 10), NewPool(32 << 10)}

// partPool returns the smallest of partPools whose buffers hold n bytes,
// or nil.
func partPool(n int) *Pool {
	for _, pl := range partPools {
		if n <= pl.size {
			return pl
		}
	}
	return nil
}

// Pool recycles packets and their buffers. It is safe for concurrent use.
type Pool struct {
	size int
	p    sync.Pool
}

// NewPool returns a pool of packets whose buffers hold size bytes.
func NewPool(size int) *Pool {
	pl := &Pool{size: size}
	pl.p.New = func() any {
		b := make([]byte, size)
		return &Packet{buf: b, pool: pl}
	}
	return pl
}

// Size returns the capacity of the pool's packet buffers.
func (pl *Pool) Size() int { return pl.size }

// Get returns a packet whose Data has length n (at most Size) and undefined
// contents; all other fields are zero.
func (pl *Pool) Get(n int) *Packet {
	p := pl.p.Get().(*Packet)
	p.Data = p.buf[:n]
	return p
}

// Copy returns a new packet from the pool holding a copy of data.
func (pl *Pool) Copy(data []byte) *Packet {
	p := pl.Get(len(data))
	copy(p.Data, data)
	return p
}

func (pl *Pool) put(p *Packet) {
	*p = Packet{buf: p.buf, pool: pl}
	pl.p.Put(p)
}

// clone returns a copy of p from p's pool (or a fresh packet when p has
// none), carrying the same timestamps.
func (p *Packet) clone() *Packet {
	var c *Packet
	if p.pool != nil && len(p.Data) <= p.pool.size {
		c = p.pool.Copy(p.Data)
	} else {
		c = &Packet{Data: append([]byte(nil), p.Data...)}
	}
	c.Arrival, c.Enqueued, c.hash = p.Arrival, p.Enqueued, p.hash
	c.segs, c.mss, c.hdrLen, c.partial = p.segs, p.mss, p.hdrLen, p.partial
	return c
}

// fifo is an intrusive first-in first-out list of packets. n and bytes
// count what it holds on the wire: a GSO packet as its segments.
type fifo struct {
	head, tail *Packet
	n          int
	bytes      int64
}

func (f *fifo) push(p *Packet) {
	p.next = nil
	if f.tail == nil {
		f.head = p
	} else {
		f.tail.next = p
	}
	f.tail = p
	f.n += p.Segments()
	f.bytes += int64(p.WireLen())
}

// pushFront puts p back at the head: the rest of a GSO packet whose
// first segments went on the wire (bottleneck.start).
func (f *fifo) pushFront(p *Packet) {
	p.next = f.head
	f.head = p
	if f.tail == nil {
		f.tail = p
	}
	f.n += p.Segments()
	f.bytes += int64(p.WireLen())
}

func (f *fifo) pop() *Packet {
	p := f.head
	if p == nil {
		return nil
	}
	f.head = p.next
	if f.head == nil {
		f.tail = nil
	}
	p.next = nil
	f.n -= p.Segments()
	f.bytes -= int64(p.WireLen())
	return p
}

func (f *fifo) peek() *Packet { return f.head }
