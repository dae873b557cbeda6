package topology_test

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/icmp"

	"github.com/netjam/netjam/impair"
	"github.com/netjam/netjam/topology"
)

// rawSink keeps a copy of every packet it takes.
type rawSink struct {
	mu   sync.Mutex
	name string
	got  [][]byte
}

func (s *rawSink) Node() topology.Node {
	return topology.Node{Name: s.name, In: s, Accepts: topology.Accepts{GSO: topology.Yes, Partial: true}}
}

func (s *rawSink) Push(_ time.Time, p *impair.Packet) {
	s.mu.Lock()
	s.got = append(s.got, bytes.Clone(p.Data))
	s.mu.Unlock()
	p.Release()
}

func (s *rawSink) take() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.got
	s.got = nil
	return g
}

var (
	hop4    = netip.MustParseAddr("10.99.0.254")
	hop6    = netip.MustParseAddr("fd99::fffe")
	client4 = netip.MustParseAddr("10.99.0.1")
	node4   = netip.MustParseAddr("10.99.0.2")
	client6 = netip.MustParseAddr("fd99::1")
	node6   = netip.MustParseAddr("fd99::2")
)

// hopGraph is a source feeding a hop of MTU 1400, its packets and errors
// each into a sink.
func hopGraph(t *testing.T) (*topology.Source, *topology.Hop, *rawSink, *rawSink) {
	var g topology.Graph
	src := topology.NewSource("client", topology.Emits{GSO: true, Partial: true}, pool, big)
	h := topology.NewHop("hop", 1400, []netip.Addr{hop4, hop6}, pool)
	out, errs := &rawSink{name: "node"}, &rawSink{name: "errors"}
	g.Chain(g.Add(src.Node()), g.Add(h.Node()), g.Add(out.Node()))
	g.Link(g.Add(h.Errors()), g.Add(errs.Node()))
	mustCompile(t, &g)
	return src, h, out, errs
}

// udp4 is an IPv4 UDP datagram of n bytes in all, with ttl and the
// Don't Fragment flag as asked, its header checksum right.
func udp4(n int, ttl byte, df bool) []byte {
	b := make([]byte, n)
	b[0], b[8], b[9] = 0x45, ttl, 17
	binary.BigEndian.PutUint16(b[2:], uint16(n))
	binary.BigEndian.PutUint16(b[4:], 0x1234)
	if df {
		b[6] = 0x40
	}
	c, nd := client4.As4(), node4.As4()
	copy(b[12:], c[:])
	copy(b[16:], nd[:])
	binary.BigEndian.PutUint16(b[20:], 40000)
	binary.BigEndian.PutUint16(b[22:], 5201)
	binary.BigEndian.PutUint16(b[24:], uint16(n-20))
	for i := 28; i < n; i++ {
		b[i] = byte(i)
	}
	binary.BigEndian.PutUint16(b[10:], inetChecksum(b[:20]))
	return b
}

// udp6 is an IPv6 UDP datagram of n bytes in all with hop limit hl.
func udp6(n int, hl byte) []byte {
	b := make([]byte, n)
	b[0], b[6], b[7] = 0x60, 17, hl
	binary.BigEndian.PutUint16(b[4:], uint16(n-40))
	c, nd := client6.As16(), node6.As16()
	copy(b[8:], c[:])
	copy(b[24:], nd[:])
	return b
}

func inetChecksum(b []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	return ^uint16(s)
}

// TestHopForwardsWithOneTTLLess: a packet that fits goes on, its TTL (hop
// limit) one lower and its IPv4 header checksum right.
func TestHopForwardsWithOneTTLLess(t *testing.T) {
	src, h, out, errs := hopGraph(t)
	src.Push(t0, pool.Copy(udp4(100, 64, true)))
	src.Push(t0, pool.Copy(udp6(1400, 2)))
	got := out.take()
	if len(got) != 2 || got[0][8] != 63 || inetChecksum(got[0][:20]) != 0 || got[1][7] != 1 {
		t.Fatalf("forwarded %d packets (TTL %d, hop limit %d), want both with one less", len(got), got[0][8], got[1][7])
	}
	if e := errs.take(); len(e) != 0 || h.Stats() != (topology.HopStats{}) {
		t.Errorf("errors %d, stats %+v: want none", len(e), h.Stats())
	}
}

// TestHopAnswersAnExpiredTTL: TTL 1 (hop limit 1) is dropped and answered
// with time exceeded, from the hop's address to the sender, quoting the
// packet, its checksums right.
func TestHopAnswersAnExpiredTTL(t *testing.T) {
	src, h, out, errs := hopGraph(t)
	p4 := udp4(100, 1, false)
	src.Push(t0, pool.Copy(p4))
	src.Push(t0, pool.Copy(udp6(100, 1)))
	if got := out.take(); len(got) != 0 {
		t.Fatalf("%d expired packets forwarded", len(got))
	}
	e := errs.take()
	if len(e) != 2 {
		t.Fatalf("%d errors, want 2", len(e))
	}
	e4 := e[0]
	if netip.AddrFrom4([4]byte(e4[12:16])) != hop4 || netip.AddrFrom4([4]byte(e4[16:20])) != client4 || e4[9] != 1 || inetChecksum(e4[:20]) != 0 || inetChecksum(e4[20:]) != 0 {
		t.Errorf("the IPv4 error's header or checksums: % x", e4[:28])
	}
	m, err := icmp.ParseMessage(1, e4[20:])
	if err != nil || m.Type.Protocol() != 1 || e4[20] != 11 || e4[21] != 0 || !bytes.Equal(e4[28:], p4) {
		t.Errorf("IPv4 error: type %d code %d (%v), want 11/0 quoting the packet", e4[20], e4[21], err)
	}
	e6 := e[1]
	if netip.AddrFrom16([16]byte(e6[8:24])) != hop6 || netip.AddrFrom16([16]byte(e6[24:40])) != client6 || e6[6] != 58 || e6[40] != 3 {
		t.Errorf("the IPv6 error: % x", e6[:48])
	}
	if !icmp6ChecksumOK(e6) {
		t.Error("the ICMPv6 error's checksum is wrong")
	}
	if st := h.Stats(); st.Expired != 2 || st.ErrorsSent != 2 {
		t.Errorf("stats %+v", st)
	}
}

// icmp6ChecksumOK checks an ICMPv6 packet's checksum over its
// pseudo-header (RFC 4443 §2.3).
func icmp6ChecksumOK(b []byte) bool {
	ph := make([]byte, 0, 40+len(b)-40)
	ph = append(ph, b[8:40]...)
	ph = binary.BigEndian.AppendUint32(ph, uint32(len(b)-40))
	ph = append(ph, 0, 0, 0, 58)
	ph = append(ph, b[40:]...)
	return inetChecksum(ph) == 0
}

// TestHopTooBig: a packet larger than the MTU that must not be fragmented
// (IPv4 with DF, any IPv6) is dropped and answered with fragmentation
// needed (code 4, next-hop MTU 1400) or packet too big (MTU 1400).
func TestHopTooBig(t *testing.T) {
	src, h, out, errs := hopGraph(t)
	src.Push(t0, big.Copy(udp4(1500, 64, true)))
	src.Push(t0, big.Copy(udp6(1500, 64)))
	if got := out.take(); len(got) != 0 {
		t.Fatalf("%d packets larger than the MTU forwarded", len(got))
	}
	e := errs.take()
	if len(e) != 2 {
		t.Fatalf("%d errors, want 2", len(e))
	}
	if e[0][20] != 3 || e[0][21] != 4 || binary.BigEndian.Uint16(e[0][26:]) != 1400 || inetChecksum(e[0][20:]) != 0 {
		t.Errorf("IPv4: type %d code %d MTU %d, want 3/4 with 1400", e[0][20], e[0][21], binary.BigEndian.Uint16(e[0][26:]))
	}
	if e[1][40] != 2 || binary.BigEndian.Uint32(e[1][44:]) != 1400 || !icmp6ChecksumOK(e[1]) || len(e[1]) > 1280 {
		t.Errorf("IPv6: type %d MTU %d (%d bytes), want 2 with 1400, at most 1280 bytes", e[1][40], binary.BigEndian.Uint32(e[1][44:]), len(e[1]))
	}
	if st := h.Stats(); st.TooBig != 2 || st.ErrorsSent != 2 {
		t.Errorf("stats %+v", st)
	}
}

// TestHopFragments: an IPv4 packet larger than the MTU without DF is cut
// into fragments that fit, each with a right header, whose payloads put
// together at their offsets are the packet's.
func TestHopFragments(t *testing.T) {
	src, h, out, errs := hopGraph(t)
	p := udp4(3000, 64, false)
	src.Push(t0, big.Copy(p))
	frags := out.take()
	if len(frags) != 3 || len(errs.take()) != 0 || h.Stats().Fragmented != 1 {
		t.Fatalf("%d fragments, want 3 (1376 + 1376 + 228 bytes of payload)", len(frags))
	}
	whole := make([]byte, 3000-20)
	for i, f := range frags {
		fl := binary.BigEndian.Uint16(f[6:8])
		more, off := fl&0x2000 != 0, int(fl&0x1fff)*8
		if len(f) > 1400 || inetChecksum(f[:20]) != 0 || f[8] != 63 || int(binary.BigEndian.Uint16(f[2:])) != len(f) || more != (i < 2) {
			t.Errorf("fragment %d: %d bytes, MF %v, TTL %d, header checksum ok %v", i, len(f), more, f[8], inetChecksum(f[:20]) == 0)
		}
		copy(whole[off:], f[20:])
	}
	if !bytes.Equal(whole, p[20:]) {
		t.Error("the fragments' payloads do not make the packet's")
	}
}

// TestHopDoesNotAnswerErrors: an ICMP error that expires is dropped
// without an answer, and answers are rate limited: of 60 expired packets
// at one instant, errorBurst (50) are answered.
func TestHopDoesNotAnswerErrors(t *testing.T) {
	src, h, _, errs := hopGraph(t)
	e := udp4(56, 1, false)
	e[9], e[20] = 1, 11 // an ICMP time exceeded
	binary.BigEndian.PutUint16(e[10:], 0)
	binary.BigEndian.PutUint16(e[10:], inetChecksum(e[:20]))
	src.Push(t0, pool.Copy(e))
	if got := errs.take(); len(got) != 0 {
		t.Fatalf("an ICMP error was answered")
	}
	for range 60 {
		src.Push(t0, pool.Copy(udp4(100, 1, false)))
	}
	if got, st := len(errs.take()), h.Stats(); got != 50 || st.ErrorsLimited != 10 {
		t.Errorf("%d errors sent, %d limited; want 50 and 10", got, st.ErrorsLimited)
	}
}
