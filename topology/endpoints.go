package topology

import (
	"sync/atomic"
	"time"

	"github.com/netjam/netjam/impair"
	"github.com/netjam/netjam/netif"
)

// Source is where packets enter the graph from outside it (a host's
// output, a device's read loop): a node without input whose owner pushes
// into it, or has it copy what it hands over (Copy).
type Source struct {
	name      string
	emits     Emits
	out       Port
	pool, big *impair.Pool // for Copy
	tooLarge  atomic.Uint64
}

// NewSource returns a source from which e may leave; Copy copies into
// packets of pool, or of big for a GSO packet larger than pool's.
func NewSource(name string, e Emits, pool, big *impair.Pool) *Source {
	return &Source{name: name, emits: e, pool: pool, big: big}
}

// Node returns the source as a node of a graph.
func (s *Source) Node() Node { return Node{Name: s.name, Out: &s.out, Emits: s.emits} }

// Push puts p into the graph at now; safe on any goroutine, as every
// edge is (a node with state of its own, a direction, takes packets
// through a channel).
func (s *Source) Push(now time.Time, p *impair.Packet) { s.out.Push(now, p) }

// Copy puts what a sender hands over as slices, described by g, into the
// graph at now, copied into a pooled packet: a large TCP segment
// becomes a GSO packet (whose checksum may stay partial), any other
// partial checksum is completed. A packet larger than the pools' buffers
// is dropped and counted (TooLarge; never with a sane MTU).
func (s *Source) Copy(now time.Time, slices [][]byte, g netif.GSO) {
	if p := s.copy(slices, g); p != nil {
		s.out.Push(now, p)
	}
}

// CopyHeld is Copy for a sender that may be held back until the
// direction it enters has room (impair.Packet.SetMayWait): a netstack
// host's TCP (stack.HostConfig.OutputHeld). It may block.
func (s *Source) CopyHeld(now time.Time, slices [][]byte, g netif.GSO) {
	if p := s.copy(slices, g); p != nil {
		p.SetMayWait(true)
		s.out.Push(now, p)
	}
}

// ReadBuffer returns a packet of the source's pool of GSO packets, its
// Data as long as the buffer: for a read loop to read into and hand to
// Take, without the copy Copy makes.
func (s *Source) ReadBuffer() *impair.Packet {
	return s.big.Get(s.big.Size())
}

// Take is Copy for a packet read into p, a buffer ReadBuffer returned,
// its first n bytes: a GSO packet larger than the source's pool of
// MTU-sized packets goes into the graph in p itself, and Take reports
// true (p is the graph's now); anything else is copied into a packet of
// its size, as Copy does, and p stays the caller's.
func (s *Source) Take(now time.Time, p *impair.Packet, n int, g netif.GSO) bool {
	if g.MSS == 0 || n <= s.pool.Size() {
		b := [1][]byte{p.Data[:n]}
		s.Copy(now, b[:], g)
		return false
	}
	p.Data = p.Data[:n]
	fromSender(p, g)
	s.out.Push(now, p)
	return true
}

// copy returns what Copy puts into the graph; nil when it is too large.
func (s *Source) copy(slices [][]byte, g netif.GSO) *impair.Packet {
	n := 0
	for _, b := range slices {
		n += len(b)
	}
	pool := s.pool
	if n > pool.Size() && g.MSS > 0 {
		pool = s.big
	}
	if n > pool.Size() {
		s.tooLarge.Add(1)
		return nil
	}
	p := pool.Get(n)
	off := 0
	for _, b := range slices {
		off += copy(p.Data[off:], b)
	}
	fromSender(p, g)
	return p
}

// fromSender makes p, a packet a sender handed over as g describes, what
// the graph takes: a large TCP segment a GSO packet (whose checksum may
// stay partial), any other partial checksum completed.
func fromSender(p *impair.Packet, g netif.GSO) {
	switch {
	case g.MSS > 0 && p.SetGSO(g.MSS, g.NeedsCsum):
	case !g.NeedsCsum:
	case impair.CompleteChecksum(p.Data):
	default:
		impair.CompletePartial(p.Data, g.CsumStart, g.CsumOffset)
	}
}

// TooLarge returns how many packets Copy dropped as larger than the
// pools' buffers.
func (s *Source) TooLarge() uint64 { return s.tooLarge.Load() }

// SinkFunc is a function as the input of a node: where packets leave the
// graph (a host taking them, a device writing them). It owns each packet
// it is given.
type SinkFunc func(now time.Time, p *impair.Packet)

// Push calls f.
func (f SinkFunc) Push(now time.Time, p *impair.Packet) { f(now, p) }
