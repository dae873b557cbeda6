package stack

import (
	"bytes"
	"net"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/netjam/netjam/third_party/gvisor/_pkg/tcpip/header"

	"github.com/netjam/netjam/hostcfg"
)

// fastCases are UDP datagrams to port 5000 of the relay's peer address,
// well-formed and not, with whether the fast path takes them.
func fastCases() []struct {
	name string
	pkt  []byte
	fast bool
} {
	c4, c6 := netip.AddrPortFrom(relayClientAddrs[0].Addr(), 40000), netip.AddrPortFrom(relayClientAddrs[1].Addr(), 40000)
	p4, p6 := netip.AddrPortFrom(peer4, 5000), netip.AddrPortFrom(peer6, 5000)
	data := []byte("a datagram of the session")
	v4 := func(change func(b []byte)) []byte {
		b := udpDatagram(c4, p4, data)
		change(b)
		return b
	}
	fixIP := func(b []byte) {
		ip := header.IPv4(b)
		ip.SetChecksum(0)
		ip.SetChecksum(^ip.CalculateChecksum())
	}
	// withOptions moves the datagram behind 4 bytes of IPv4 options
	// (a no-op and an end of list), checksums right.
	withOptions := func() []byte {
		b := udpDatagram(c4, p4, data)
		o := slices.Concat(b[:20], []byte{1, 0, 0, 0}, b[20:])
		o[0] = 0x46
		header.IPv4(o).SetTotalLength(uint16(len(o)))
		fixIP(o)
		return o
	}
	// padded carries 4 bytes after the IPv4 packet.
	padded := func() []byte { return append(udpDatagram(c4, p4, data), 0, 0, 0, 0) }
	// shortUDP says the datagram is 4 bytes shorter than what carries
	// it, its checksum right for that length.
	shortUDP := func() []byte {
		b := udpDatagram(c4, p4, data[:len(data)-4])
		b = append(b, 'x', 'y', 'z', 'w')
		header.IPv4(b).SetTotalLength(uint16(len(b)))
		fixIP(b)
		return b
	}
	return []struct {
		name string
		pkt  []byte
		fast bool
	}{
		{"ipv4", udpDatagram(c4, p4, data), true},
		{"ipv6", udpDatagram(c6, p6, data), true},
		{"ipv4 empty", udpDatagram(c4, p4, nil), true},
		{"ipv4 no checksum", v4(func(b []byte) { header.UDP(b[20:]).SetChecksum(0) }), true},
		{"ipv6 no checksum", func() []byte { b := udpDatagram(c6, p6, data); header.UDP(b[40:]).SetChecksum(0); return b }(), false},
		{"ipv4 bad udp checksum", v4(func(b []byte) { b[len(b)-1] ^= 1 }), false},
		{"ipv6 bad udp checksum", func() []byte { b := udpDatagram(c6, p6, data); b[len(b)-1] ^= 1; return b }(), false},
		{"ipv4 bad header checksum", v4(func(b []byte) { b[10] ^= 1 }), false},
		{"ipv4 zero ttl", v4(func(b []byte) { b[8] = 0; fixIP(b) }), false},
		{"ipv4 udp length too long", v4(func(b []byte) { header.UDP(b[20:]).SetLength(uint16(len(b) - 20 + 1)) }), false},
		{"ipv4 udp length too short", v4(func(b []byte) { header.UDP(b[20:]).SetLength(7) }), false},
		{"ipv4 udp length shorter than the packet", shortUDP(), false},
		{"ipv4 options", withOptions(), false},
		{"ipv4 padded", padded(), false},
		{"ipv4 more fragments", v4(func(b []byte) { b[6] |= 0x20; fixIP(b) }), false},
		{"ipv4 fragment offset", v4(func(b []byte) { b[7] = 1; fixIP(b) }), false},
		{"ipv4 dont fragment", v4(func(b []byte) { b[6] |= 0x40; fixIP(b) }), true},
	}
}

// gvisorHost is a host with the relay's peer addresses, listening on
// port 5000: what gVisor makes of a datagram, for the fast path to match.
type gvisorHost struct {
	h *Host
	c net.PacketConn
}

func newGVisorHost(t testing.TB) *gvisorHost {
	h, err := NewHost(HostConfig{Name: "gvisor", Addrs: relayPeerAddrs, MTU: 1500, Clock: realClock, Output: func([][]byte) {}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	c, err := h.ListenUDP(5000)
	if err != nil {
		t.Fatal(err)
	}
	return &gvisorHost{h: h, c: c}
}

// take injects pkt and returns the payload gVisor delivered to port 5000,
// if it did (Inject queues a datagram before it returns).
func (g *gvisorHost) take(pkt []byte) ([]byte, bool) {
	n0 := g.h.s.Stats().UDP.PacketsReceived.Value()
	g.h.Inject(slices.Clone(pkt))
	if g.h.s.Stats().UDP.PacketsReceived.Value() == n0 {
		return nil, false
	}
	b := make([]byte, 65536)
	g.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, _, err := g.c.ReadFrom(b)
	if err != nil {
		return nil, false
	}
	return b[:n], true
}

// TestRelayUDPFastPathMatchesGVisor checks the fast path's parser against
// gVisor: a datagram it takes is one gVisor delivers, with the same
// payload; everything else (bad checksums and lengths, fragments, IPv4
// options, padding) it leaves to gVisor, which drops or trims it as it
// always did.
func TestRelayUDPFastPathMatchesGVisor(t *testing.T) {
	g := newGVisorHost(t)
	for _, c := range fastCases() {
		t.Run(c.name, func(t *testing.T) {
			_, payload, fast, _ := parseUDP(c.pkt)
			if fast != c.fast {
				t.Errorf("fast path %v, want %v", fast, c.fast)
			}
			got, delivered := g.take(c.pkt)
			if fast && (!delivered || !bytes.Equal(got, payload)) {
				t.Errorf("the fast path takes %q, gVisor delivers %q (%v)", payload, got, delivered)
			}
		})
	}
}

// FuzzRelayUDPFastPath feeds the fast path's parser any packet: it never
// panics, and what it takes gVisor delivers, with the same payload.
func FuzzRelayUDPFastPath(f *testing.F) {
	for _, c := range fastCases() {
		f.Add(c.pkt)
	}
	g := newGVisorHost(f)
	f.Fuzz(func(t *testing.T, pkt []byte) {
		if _, ok := networkProtocol(pkt, len(pkt)); !ok {
			return
		}
		k, payload, fast, _ := parseUDP(pkt)
		if !fast || k.dst.Port() != 5000 || !slices.ContainsFunc(relayPeerAddrs, func(p netip.Prefix) bool { return p.Addr() == k.dst.Addr() }) {
			return
		}
		if got, delivered := g.take(pkt); !delivered || !bytes.Equal(got, payload) {
			t.Errorf("the fast path takes %q, gVisor delivers %q (%v)", payload, got, delivered)
		}
	})
}

// TestRelayUDPFastPath relays a session's datagrams, most of them through
// the fast path and some through gVisor (IPv4 options, a length shorter
// than the packet), and datagrams gVisor drops (a bad checksum, a length
// past the packet): the target gets exactly what gVisor would have
// delivered, each once, and the relay loses nothing.
func TestRelayUDPFastPath(t *testing.T) {
	target, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()
	var mu sync.Mutex
	var got [][]byte
	done := make(chan struct{})
	go func() {
		defer close(done)
		b := make([]byte, 65536)
		for {
			n, err := target.Read(b)
			if err != nil {
				return
			}
			mu.Lock()
			got = append(got, slices.Clone(b[:n]))
			mu.Unlock()
		}
	}()
	_, r := newRelayPair(t, hostcfg.RelayConfig{
		Forwards: []hostcfg.Forward{{Proto: "udp", Listen: 5000, To: target.LocalAddr().(*net.UDPAddr).AddrPort()}},
		UDPIdle:  time.Minute,
	})
	g := newGVisorHost(t)
	var want [][]byte
	send := func(pkt []byte) {
		if p, ok := g.take(pkt); ok {
			want = append(want, p)
		}
		r.h.Inject(pkt)
	}
	cases := fastCases()
	send(cases[0].pkt) // opens the session
	waitFor(t, "the session", func() bool { return r.Stats().UDP.Relayed == 1 })
	for i := range 300 {
		c := cases[i%len(cases)]
		if c.pkt[0]>>4 == 4 {
			send(c.pkt)
		}
	}
	waitFor(t, "the datagrams to reach the target", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) >= len(want)
	})
	if r.fastIn.Load() == 0 {
		t.Errorf("no datagram took the fast path")
	}
	mu.Lock()
	defer mu.Unlock()
	key := func(a, b []byte) int { return bytes.Compare(a, b) }
	slices.SortFunc(got, key)
	slices.SortFunc(want, key)
	if !slices.EqualFunc(got, want, bytes.Equal) {
		t.Errorf("the target got %d datagrams, want the %d gVisor delivers", len(got), len(want))
	}
	if st := r.Stats().UDP; st.Dropped != 0 {
		t.Errorf("the relay dropped %d (%v)", st.Dropped, st.DroppedBy)
	}
	target.Close()
	<-done
}

// TestRelayUDPFastPathAllocs checks that a datagram of an open session
// crosses the fast path, Inject to the target's socket, without
// allocating.
func TestRelayUDPFastPathAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops objects under the race detector")
	}
	_, r := newRelayPair(t, hostcfg.RelayConfig{Forwards: []hostcfg.Forward{{Proto: "udp", Listen: 5000, To: udpSink(t)}}})
	pkt := fastCases()[0].pkt
	r.h.Inject(slices.Clone(pkt)) // opens the session
	waitFor(t, "the session", func() bool { return r.Stats().UDP.Relayed == 1 })
	r.h.Inject(slices.Clone(pkt))
	waitFor(t, "the fast path", func() bool { return r.fastIn.Load() == 1 })
	const runs = 200
	allocs := testing.AllocsPerRun(runs, func() { r.h.Inject(pkt) })
	if allocs != 0 {
		t.Errorf("%v allocations per datagram, want 0", allocs)
	}
	waitFor(t, "the datagrams to be relayed", func() bool { return r.Stats().UDP.BytesUp == (runs+3)*uint64(len(pkt)-28) })
}

// TestRelayUDPDownPackets checks the datagrams the down direction builds
// against gVisor: a host at the client's address takes each, with its
// payload, from the session's destination.
func TestRelayUDPDownPackets(t *testing.T) {
	client, err := NewHost(HostConfig{Name: "client", Addrs: relayClientAddrs, MTU: 1500, Clock: realClock, Output: func([][]byte) {}})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	c, err := client.ListenUDP(40000)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []udpKey{
		{netip.AddrPortFrom(relayClientAddrs[0].Addr(), 40000), netip.AddrPortFrom(peer4, 5000)},
		{netip.AddrPortFrom(relayClientAddrs[1].Addr(), 40000), netip.AddrPortFrom(peer6, 5000)},
		// Transparent mode: from the destination the client asked for.
		{netip.AddrPortFrom(relayClientAddrs[0].Addr(), 40000), netip.MustParseAddrPort("192.0.2.7:53")},
	} {
		h := newDownHeader(k)
		for _, size := range []int{0, 1, 2, 1400, 1500 - h.n} {
			p := payload(size, uint64(size))
			pkt := slices.Concat(h.packet(p)...)
			if k.src.Addr().Is4() && (pkt[8] != udpTTL || pkt[6]&0x40 == 0) {
				t.Errorf("%v: TTL %d, flags %#x, want %d and Don't Fragment", k, pkt[8], pkt[6], udpTTL)
			}
			client.Inject(pkt)
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			b := make([]byte, 65536)
			n, from, err := c.ReadFrom(b)
			if err != nil {
				t.Fatalf("%v, %d bytes: %v", k, size, err)
			}
			if !bytes.Equal(b[:n], p) || from.(*net.UDPAddr).AddrPort() != netip.AddrPortFrom(k.dst.Addr(), k.dst.Port()) {
				t.Errorf("%v, %d bytes: got %d bytes from %v", k, size, n, from)
			}
		}
	}
	if st := client.Stats(); st.Malformed != 0 || st.ChecksumErrors != 0 {
		t.Errorf("malformed %d, checksum errors %d", st.Malformed, st.ChecksumErrors)
	}
}

// TestRelayUDPBatchGroups checks how a batch is grouped into messages the
// target's socket segments: runs of one size, the last of a run shorter,
// none larger than the socket segments or longer than its limits.
func TestRelayUDPBatchGroups(t *testing.T) {
	b := newUDPBatch(udpBatchLen)
	add := func(sizes ...int) {
		for _, n := range sizes {
			b.msgs[b.n].Buffers[0] = make([]byte, n)
			b.n++
		}
	}
	add(1000, 1000, 1000, 300, 1000, 0, 1000, 1500, 1500, 1000, 2000)
	_, counts := b.group(1500)
	if want := []int{4, 1, 1, 1, 3, 1}; !slices.Equal(counts, want) {
		t.Errorf("groups of %v, want %v", counts, want)
	}
	for i, m := range b.groups[:len(counts)] {
		if (m.OOB != nil) != (counts[i] > 1) {
			t.Errorf("group %d of %d datagrams: control message %v", i, counts[i], m.OOB)
		}
	}
	b.reset()
	for range udpBatchLen {
		add(1200)
	}
	if _, counts := b.group(65000); !slices.Equal(counts, []int{54, 10}) {
		t.Errorf("64 datagrams of 1200 bytes in groups of %v, want 54 (the payload limit) and 10", counts)
	}
	b.reset()
}

// TestRelayUDPSegmentsToTarget sends datagrams of a few sizes through a
// session as fast as the path takes them: the target gets each, in
// order, whole, whether or not they went in a message the socket
// segmented.
func TestRelayUDPSegmentsToTarget(t *testing.T) {
	target, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()
	target.SetReadBuffer(8 << 20)
	_, r := newRelayPair(t, hostcfg.RelayConfig{
		Forwards: []hostcfg.Forward{{Proto: "udp", Listen: 5000, To: target.LocalAddr().(*net.UDPAddr).AddrPort()}},
	})
	r.admitWait = 10 * time.Second
	c4 := netip.AddrPortFrom(relayClientAddrs[0].Addr(), 40000)
	var want [][]byte
	for i := range 2000 {
		size := []int{1400, 1400, 1400, 700, 100, 1400}[i%6]
		p := payload(size, uint64(i))
		want = append(want, p)
		r.h.Inject(udpDatagram(c4, netip.AddrPortFrom(peer4, 5000), p))
		if i == 0 {
			waitFor(t, "the session", func() bool { return r.Stats().UDP.Relayed == 1 })
		}
	}
	b := make([]byte, 65536)
	for i, w := range want {
		target.SetReadDeadline(time.Now().Add(10 * time.Second))
		n, err := target.Read(b)
		if err != nil {
			t.Fatalf("datagram %d: %v (%+v)", i, err, r.Stats().UDP)
		}
		if !bytes.Equal(b[:n], w) {
			t.Fatalf("datagram %d: %d bytes, want %d", i, n, len(w))
		}
	}
}

// TestRelayUDPWithoutRoomForTheFastPath gives the relay a budget that
// holds a session but neither its fast path's queue nor a batch of the
// down direction: the session carries everything both ways through gVisor
// and one datagram per read.
func TestRelayUDPWithoutRoomForTheFastPath(t *testing.T) {
	client, r := newRelayPair(t, hostcfg.RelayConfig{
		Forwards: []hostcfg.Forward{{Proto: "udp", Listen: 5353, To: udpEchoServer(t)}},
		Budget:   udpCharge + 1024,
	})
	c, err := client.DialUDP(netip.AddrPortFrom(peer4, 5353))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	n := roundTrip(t, c, 1, 100, 1400, 1400, 1400, 8000)
	waitFor(t, "the bytes to be counted", func() bool {
		st := r.Stats().UDP
		return st.BytesUp == uint64(n) && st.BytesDown == uint64(n)
	})
	if r.fastIn.Load() != 0 {
		t.Errorf("%d datagrams took the fast path without room for its queue", r.fastIn.Load())
	}
}
