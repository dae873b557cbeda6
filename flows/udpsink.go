package flows

import (
	"encoding/binary"
	"math"
	"sync/atomic"
	"time"

	"github.com/netjam/netjam/stats"
)

// HeaderSize is the size of the header that starts every UDP datagram of a
// flow (see the package documentation for its layout); it is the smallest
// UDPSpec.PacketSize.
const HeaderSize = 24

// magic starts every datagram: "NJU1".
const magic = 0x4e4a5531

// putHeader writes a datagram header into b.
func putHeader(b []byte, flowID uint32, seq uint64, sent time.Duration) {
	binary.BigEndian.PutUint32(b[0:], magic)
	binary.BigEndian.PutUint32(b[4:], flowID)
	binary.BigEndian.PutUint64(b[8:], seq)
	binary.BigEndian.PutUint64(b[16:], uint64(sent))
}

// DupWindow is how many sequence numbers behind the highest one received
// the UDP receiver remembers, to tell duplicates from late datagrams. A
// datagram further behind than that (65536 datagrams: 6.5 s at 10,000
// datagrams/s) cannot be checked: it is counted as received and reordered,
// so a duplicate that late would count as a new datagram; the loss ratio is
// clamped at zero.
const DupWindow = 1 << 16

// sink is the receiving end of a UDP flow: it checks datagrams and keeps the
// measurements. receive runs on the flow's receiver goroutine only; the
// counters are atomics, readable at any time.
type sink struct {
	// Set before the receiver goroutine starts, read-only after.
	flowID uint32
	size   int       // the datagram size the sender writes
	base   time.Time // the flow's start: send times are offsets from it

	// issued is one more than the highest sequence number handed to
	// Write; a genuine datagram's is below it. The sender stores it
	// before each Write, so the datagram cannot arrive before it.
	issued atomic.Uint64

	// Receiver goroutine only.
	any       bool   // highest is set
	highest   uint64 // highest sequence number received
	seen      [DupWindow / 64]uint64
	prevDelay time.Duration // the previous unique datagram's delay, for jitter
	jitterNs  float64

	packets   atomic.Uint64 // unique, well-formed datagrams
	bytes     atomic.Uint64 // their bytes
	dups      atomic.Uint64
	reordered atomic.Uint64
	malformed atomic.Uint64
	delaySum  atomic.Int64  // nanoseconds, over packets
	jitter    atomic.Uint64 // math.Float64bits of jitterNs
	delay     stats.Histogram
	// firstAt and lastAt are when the first and the latest unique
	// datagram arrived (ns after base), firstAt -1 until one has;
	// highestSeq is highest+1, 0 until one has (readable from any
	// goroutine, unlike highest).
	firstAt, lastAt atomic.Int64
	highestSeq      atomic.Uint64
	// allIn is signalled (without blocking) when packets reaches expect,
	// the number of datagrams sent, which the sender stores when it is
	// done (0 until then).
	expect atomic.Uint64
	allIn  chan struct{}
}

// receive accounts for datagram b, received at now. It allocates nothing.
//
//   - Malformed: a datagram of the wrong size, magic or flow id, with a
//     sequence number never sent, or a send time outside [0, now]. It is
//     counted and otherwise ignored.
//   - Duplicate: a sequence number already received (within DupWindow);
//     counted and otherwise ignored, so it is in no other measurement.
//   - Reordered (RFC 4737): a unique datagram whose sequence number is
//     lower than the highest one received before it.
//   - Delay: now minus the send time, both on the flow's clock.
//   - Jitter (RFC 3550, 6.4.1): J += (|D| - J) / 16, where D is the
//     difference of the delays of consecutive unique datagrams, in order of
//     arrival. As sender and receiver share a clock, the transit time of
//     RFC 3550 is the one-way delay itself.
func (s *sink) receive(b []byte, now time.Time) {
	if len(b) != s.size || binary.BigEndian.Uint32(b[0:]) != magic || binary.BigEndian.Uint32(b[4:]) != s.flowID {
		s.malformed.Add(1)
		return
	}
	seq := binary.BigEndian.Uint64(b[8:])
	sent := time.Duration(binary.BigEndian.Uint64(b[16:]))
	at := now.Sub(s.base)
	if seq >= s.issued.Load() || sent < 0 || sent > at {
		s.malformed.Add(1)
		return
	}

	switch {
	case !s.any || seq > s.highest:
		s.advance(seq)
	case s.highest-seq < DupWindow:
		w, bit := seq/64%uint64(len(s.seen)), uint64(1)<<(seq%64)
		if s.seen[w]&bit != 0 {
			s.dups.Add(1)
			return
		}
		s.seen[w] |= bit
		s.reordered.Add(1)
	default:
		s.reordered.Add(1) // beyond the window: see DupWindow
	}

	d := at - sent
	if s.packets.Load() > 0 {
		diff := d - s.prevDelay
		if diff < 0 {
			diff = -diff
		}
		s.jitterNs += (float64(diff) - s.jitterNs) / 16
		s.jitter.Store(math.Float64bits(s.jitterNs))
	}
	s.prevDelay = d
	s.delay.RecordDuration(d)
	s.delaySum.Add(int64(d))
	if s.packets.Load() == 0 {
		s.firstAt.Store(int64(at))
	}
	s.lastAt.Store(int64(at))
	s.highestSeq.Store(s.highest + 1)
	s.bytes.Add(uint64(len(b)))
	if n := s.packets.Add(1); n == s.expect.Load() {
		select {
		case s.allIn <- struct{}{}:
		default:
		}
	}
}

// advance makes seq the highest sequence number received: it forgets the
// numbers that leave the window, which are those the ring's slots for
// highest+1 .. seq held, and marks seq.
func (s *sink) advance(seq uint64) {
	from := uint64(0)
	if s.any {
		from = s.highest + 1
	}
	if seq-from >= DupWindow {
		clear(s.seen[:])
	} else {
		for x := from; x <= seq; {
			pos := x % DupWindow
			n := min(64-pos%64, seq-x+1) // bits to clear in this word
			s.seen[pos/64] &^= (1<<n - 1) << (pos % 64)
			x += n
		}
	}
	s.seen[seq%DupWindow/64] |= 1 << (seq % 64)
	s.any, s.highest = true, seq
}

// jitterNanos returns the current jitter in nanoseconds.
func (s *sink) jitterNanos() float64 { return math.Float64frombits(s.jitter.Load()) }
