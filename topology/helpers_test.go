package topology_test

import (
	"encoding/binary"
	"net/netip"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/netjam/netjam/clock"
	"github.com/netjam/netjam/impair"
	"github.com/netjam/netjam/topology"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	t0   = clock.Epoch
	pool = impair.NewPool(1500)
	big  = impair.NewPool(65535)
	opts = topology.Options{Pool: pool, Big: big}
)

// segment returns an IPv4 TCP segment to dst with payload bytes, its
// checksum complete, sequence number seq and ID id (recorded in the
// source port, to tell packets apart).
func segment(dst netip.Addr, payload int, seq uint32, id uint16) []byte {
	b := make([]byte, 40+payload)
	b[0] = 0x45
	binary.BigEndian.PutUint16(b[2:], uint16(len(b)))
	b[6] = 0x40
	b[8], b[9] = 64, 6
	copy(b[12:16], []byte{10, 99, 0, 1})
	d := dst.As4()
	copy(b[16:20], d[:])
	tcp := b[20:]
	binary.BigEndian.PutUint16(tcp[0:], id)
	binary.BigEndian.PutUint16(tcp[2:], 5201)
	binary.BigEndian.PutUint32(tcp[4:], seq)
	binary.BigEndian.PutUint32(tcp[8:], 1)
	tcp[12] = 5 << 4
	tcp[13] = 0x10 // ACK
	binary.BigEndian.PutUint16(tcp[14:], 512)
	for i := range payload {
		tcp[20+i] = byte(i*7 + i/251)
	}
	binary.BigEndian.PutUint16(b[10:], ipSum(b[:20]))
	impair.CompleteChecksum(b)
	return b
}

func ipSum(h []byte) uint16 {
	var s uint32
	for i := 0; i < len(h); i += 2 {
		if i != 10 {
			s += uint32(h[i])<<8 | uint32(h[i+1])
		}
	}
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	return ^uint16(s)
}

// packet returns a pooled copy of b.
func packet(b []byte) *impair.Packet {
	if len(b) > pool.Size() {
		return big.Copy(b)
	}
	return pool.Copy(b)
}

// gso returns a GSO packet to dst of n segments of mss bytes; partial
// leaves its checksum partial, as a sender with offload does.
func gso(dst netip.Addr, n, mss int, partial bool) *impair.Packet {
	p := big.Copy(segment(dst, n*mss, 1000, 1))
	if partial {
		impair.PseudoChecksum(p.Data)
	}
	if !p.SetGSO(mss, partial) {
		panic("not a GSO packet")
	}
	return p
}

// checksumOK reports whether b's TCP checksum is final and right.
func checksumOK(b []byte) bool {
	c := append([]byte(nil), b...)
	impair.CompleteChecksum(c)
	return string(c) == string(b)
}

// seen is a packet as a sink saw it.
type seen struct {
	at       time.Time
	len      int
	segs     int
	partial  bool
	checksum bool // final and right
	id       uint16
}

// sink collects what reaches it, as a node taking acc.
type sink struct {
	mu   sync.Mutex
	name string
	acc  topology.Accepts
	got  []seen
}

func newSink(name string, acc topology.Accepts) *sink { return &sink{name: name, acc: acc} }

func (s *sink) Node() topology.Node { return topology.Node{Name: s.name, In: s, Accepts: s.acc} }

func (s *sink) Push(now time.Time, p *impair.Packet) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, seen{at: now, len: len(p.Data), segs: p.Segments(), partial: p.Partial(),
		checksum: checksumOK(p.Data), id: binary.BigEndian.Uint16(p.Data[20:])})
	p.Release()
}

func (s *sink) seen() []seen {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]seen(nil), s.got...)
}

// link is a fake link: it forwards each packet at once, d later, and
// counts them. With tx set, it is also a bottleneck sending one packet
// every tx.
type link struct {
	name string
	d    time.Duration
	tx   time.Duration
	busy time.Time
	n    int
	out  topology.Port
}

func (l *link) Node() topology.Node {
	return topology.Node{Name: l.name, In: l, Out: &l.out, Accepts: topology.Accepts{GSO: topology.Yes, Partial: true}}
}

func (l *link) Push(now time.Time, p *impair.Packet) {
	l.n++
	if l.tx > 0 {
		if l.busy.After(now) {
			now = l.busy // queued behind the packet on the wire
		}
		l.busy = now.Add(l.tx)
		now = l.busy
	}
	l.out.Push(now.Add(l.d), p)
}

// waitFor polls cond; it fails the test if cond does not hold within a
// generous bound. It synchronizes with the runners' goroutines; it
// asserts nothing about speed.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func mustCompile(t testing.TB, g *topology.Graph) *topology.Net {
	t.Helper()
	n, err := g.Compile(opts)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

var (
	mtuChecked = topology.Accepts{GSO: topology.No}                 // a netstack host
	anything   = topology.Accepts{GSO: topology.Yes, Partial: true} // a device with offload
)
