package topology

import (
	"time"

	"github.com/netjam/netjam/impair"
)

// Writer is where a tap writes what it sees (a pcap file,
// capture.Writer). It must be safe for concurrent use: senders on
// several goroutines may cross one tap. It does not keep pkt.
type Writer interface {
	WritePacket(t time.Time, pkt []byte) error
}

// Tap is a capture point: it writes each packet crossing it as it is on
// the wire, then forwards it. On the wire a GSO packet is its segments,
// each with its final checksum, so the tap writes those, from a copy,
// and forwards the GSO packet whole: a capture does not make the path
// split what it would carry whole. An MTU-sized packet with a partial
// checksum is completed in place (whoever takes it next would complete
// it, or take it complete).
type Tap struct {
	name string
	w    Writer
	pool *impair.Pool // the segments written
	big  *impair.Pool // the copy of a GSO packet
	out  Port
}

// NewTap returns a tap writing to w; pool holds MTU-sized packets, big GSO
// packets.
func NewTap(name string, w Writer, pool, big *impair.Pool) *Tap {
	return &Tap{name: name, w: w, pool: pool, big: big}
}

// Node returns the tap as a node of a graph: it takes anything and
// passes it on unchanged, but for a completed checksum.
func (t *Tap) Node() Node {
	return Node{Name: t.name, In: t, Accepts: Accepts{GSO: Yes, Partial: true}, Out: &t.out}
}

// Push writes p as on the wire at now, then forwards it.
func (t *Tap) Push(now time.Time, p *impair.Packet) {
	mss, partial, ok := p.GSO()
	if !ok {
		p.FinishChecksum()
		t.w.WritePacket(now, p.Data) // a full capture counts what it skips
		t.out.Push(now, p)
		return
	}
	c := t.big.Copy(p.Data)
	c.SetGSO(mss, partial)
	t.pool.SplitTo(now, c, (*wire)(t))
	t.out.Push(now, p)
}

// wire writes each segment of a GSO packet's copy, then releases it.
type wire Tap

func (w *wire) Push(now time.Time, s *impair.Packet) {
	s.FinishChecksum()
	w.w.WritePacket(now, s.Data)
	s.Release()
}
