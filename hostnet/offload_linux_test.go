package hostnet

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/netjam/netjam/netif"
)

// tcpSegment returns the first bytes of a TCP segment in IPv4 (a 20-byte
// header) or IPv6: an IP header and a TCP header of tcpLen bytes with
// flags, as encodeVnet reads them.
func tcpSegment(v6 bool, tcpLen int, flags byte) []byte {
	ipLen := 20
	b := make([]byte, 40+60)
	b[0] = 0x45
	if v6 {
		ipLen, b[0] = 40, 0x60
	}
	b[ipLen+12] = byte(tcpLen/4) << 4
	b[ipLen+13] = flags
	return b[:ipLen+tcpLen]
}

// udpHeaders returns the IP and UDP headers of a datagram in IPv4 (a
// 20-byte header) or IPv6, as encodeVnet reads them.
func udpHeaders(v6 bool) []byte {
	if v6 {
		b := make([]byte, 48)
		b[0], b[6] = 0x60, 17
		return b
	}
	b := make([]byte, 28)
	b[0], b[9] = 0x45, 17
	return b
}

// TestVnetHeader encodes the virtio-net header of each kind of packet
// and reads it back: the header the kernel gets says what the GSO
// description says, in the layout of linux/virtio_net.h.
func TestVnetHeader(t *testing.T) {
	const cwr = 0x80
	for _, c := range []struct {
		name  string
		first []byte
		g     netif.GSO
		want  [vnetHdrLen]byte
		back  netif.GSO // what decodeVnet reads from want
	}{
		{"ordinary", tcpSegment(false, 20, 0), netif.GSO{}, [vnetHdrLen]byte{}, netif.GSO{}},
		{"ordinary, no packet", nil, netif.GSO{}, [vnetHdrLen]byte{}, netif.GSO{}},
		{"checksum only", tcpSegment(false, 32, 0), netif.GSO{NeedsCsum: true},
			[vnetHdrLen]byte{vnetFlagNeedsCsum, 0, 0, 0, 0, 0, 20, 0, 16, 0},
			netif.GSO{NeedsCsum: true, CsumStart: 20, CsumOffset: 16}},
		{"TCPv4 segment", tcpSegment(false, 32, 0), netif.GSO{MSS: 1448, NeedsCsum: true},
			[vnetHdrLen]byte{vnetFlagNeedsCsum, vnetGSOTCPv4, 52, 0, 1448 & 0xff, 1448 >> 8, 20, 0, 16, 0},
			netif.GSO{MSS: 1448, NeedsCsum: true, CsumStart: 20, CsumOffset: 16}},
		{"TCPv4 segment with CWR", tcpSegment(false, 20, cwr), netif.GSO{MSS: 1460},
			[vnetHdrLen]byte{vnetFlagNeedsCsum, vnetGSOTCPv4 | vnetGSOECN, 40, 0, 1460 & 0xff, 1460 >> 8, 20, 0, 16, 0},
			netif.GSO{MSS: 1460, NeedsCsum: true, CsumStart: 20, CsumOffset: 16}},
		{"TCPv6 segment", tcpSegment(true, 32, 0), netif.GSO{MSS: 1428, NeedsCsum: true},
			[vnetHdrLen]byte{vnetFlagNeedsCsum, vnetGSOTCPv6, 72, 0, 1428 & 0xff, 1428 >> 8, 40, 0, 16, 0},
			netif.GSO{MSS: 1428, NeedsCsum: true, CsumStart: 40, CsumOffset: 16}},
		{"UDPv4 run", udpHeaders(false), netif.GSO{MSS: 1000, NeedsCsum: true},
			[vnetHdrLen]byte{vnetFlagNeedsCsum, vnetGSOUDPL4, 28, 0, 1000 & 0xff, 1000 >> 8, 20, 0, 6, 0},
			netif.GSO{NeedsCsum: true, CsumStart: 20, CsumOffset: 6}},
		{"UDPv6 run", udpHeaders(true), netif.GSO{MSS: 1200, NeedsCsum: true},
			[vnetHdrLen]byte{vnetFlagNeedsCsum, vnetGSOUDPL4, 48, 0, 1200 & 0xff, 1200 >> 8, 40, 0, 6, 0},
			netif.GSO{NeedsCsum: true, CsumStart: 40, CsumOffset: 6}},
		{"UDP checksum only", udpHeaders(false), netif.GSO{NeedsCsum: true},
			[vnetHdrLen]byte{vnetFlagNeedsCsum, 0, 0, 0, 0, 0, 20, 0, 6, 0},
			netif.GSO{NeedsCsum: true, CsumStart: 20, CsumOffset: 6}},
	} {
		hdr := [vnetHdrLen]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10} // left over from another packet
		if err := encodeVnet(&hdr, c.first, c.g); err != nil || hdr != c.want {
			t.Errorf("%s: header %v, %v; want %v", c.name, hdr, err, c.want)
		}
		if g := decodeVnet(&c.want); g != c.back {
			t.Errorf("%s: read back as %+v, want %+v", c.name, g, c.back)
		}
	}
	for _, c := range []struct {
		first []byte
		want  string
	}{
		{tcpSegment(false, 20, 0)[:19], "IP header"},
		{tcpSegment(false, 20, 0)[:39], "TCP header"},
		{tcpSegment(true, 20, 0)[:59], "TCP header"},
		{udpHeaders(false)[:27], "UDP header"},
	} {
		var hdr [vnetHdrLen]byte
		if err := encodeVnet(&hdr, c.first, netif.GSO{MSS: 1000}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("a %d-byte first slice: %v, want an error about the %s", len(c.first), err, c.want)
		}
	}
}

// TestTUNReadResultChecksLength: the count readv returns is checked
// against the header and the buffer before it becomes a packet's length.
func TestTUNReadResultChecksLength(t *testing.T) {
	tun := &TUN{name: "netjam0"}
	for _, c := range []struct {
		done uintptr
		want int // -1: an error
	}{
		{0, -1},
		{vnetHdrLen - 1, -1},
		{vnetHdrLen, 0},
		{vnetHdrLen + 1500, 1500},
		{vnetHdrLen + 1501, -1},
		{^uintptr(0), -1},
	} {
		io := &ioState{done: c.done}
		n, _, err := tun.readResult(io, 1500)
		switch {
		case c.want < 0 && err == nil:
			t.Errorf("readv returned %d for a 1500-byte buffer: got %d bytes, want an error", c.done, n)
		case c.want >= 0 && (err != nil || n != c.want):
			t.Errorf("readv returned %d: got %d, %v; want %d", c.done, n, err, c.want)
		}
	}
}

// TestTUNIOAllocatesNothing: writing a packet into the device, whole or
// gathered from many slices, and reading one from it, with or without a
// virtio-net header, allocate nothing.
func TestTUNIOAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops its I/O state at random under the race detector")
	}
	ns := newNetns(t)
	for _, offload := range []bool{false, true} {
		tun, err := OpenTUN(TUNConfig{Name: "njalloc0", Addrs: []netip.Prefix{netip.MustParsePrefix("10.98.7.1/24")}, Netns: nsPath(ns), Offload: offload})
		if err != nil {
			t.Fatal(err)
		}
		// A UDP datagram to a port nobody listens on, from the peer's
		// side: the kernel takes it and drops it.
		pkt := []byte{0x45, 0, 0, 28, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 98, 7, 2, 10, 98, 7, 1, 0x30, 0x39, 0x30, 0x39, 0, 8, 0, 0}
		var sum uint32
		for i := 0; i < 20; i += 2 {
			sum += uint32(pkt[i])<<8 | uint32(pkt[i+1])
		}
		for sum > 0xffff {
			sum = sum&0xffff + sum>>16
		}
		pkt[10], pkt[11] = byte(^sum>>8), byte(^sum)
		vec := [][]byte{pkt}
		write := func() {
			if _, err := tun.WritePacket(vec, netif.GSO{}); err != nil {
				t.Fatal(err)
			}
		}
		write()
		if n := testing.AllocsPerRun(1000, write); n != 0 {
			t.Errorf("offload %v: %v allocations per write", offload, n)
		}
		// The same packet gathered from a slice per byte, as a device
		// writes a run of segments as one packet (one slice each).
		vec = nil
		for i := range pkt {
			vec = append(vec, pkt[i:i+1])
		}
		if n := testing.AllocsPerRun(1000, write); n != 0 {
			t.Errorf("offload %v: %v allocations per write of %d slices", offload, n, len(vec))
		}
		// And reading what the kernel sends into the device.
		if err := inNetns(ns, func() error {
			c, err := net.Dial("udp", "10.98.7.2:9")
			if err != nil {
				return err
			}
			defer c.Close()
			for range 300 {
				c.Write([]byte("x"))
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 65536)
		read := func() {
			if _, _, err := tun.ReadPacket(buf); err != nil {
				t.Fatal(err)
			}
		}
		if n := testing.AllocsPerRun(200, read); n != 0 {
			t.Errorf("offload %v: %v allocations per read", offload, n)
		}
		tun.Close()
	}
}

// TestTUNWritesUDPRuns writes runs of UDP datagrams, IPv4, each as one
// packet (GSO_UDP_L4): a socket behind the device receives each datagram
// of the run, in order, with its payload, the last one shorter.
func TestTUNWritesUDPRuns(t *testing.T) {
	ns := newNetns(t)
	tun, err := OpenTUN(TUNConfig{Addrs: tunAddrs[:1], Netns: nsPath(ns), Offload: true})
	if err != nil {
		t.Fatal(err)
	}
	defer tun.Close()
	if !tun.UDPOffload() {
		t.Skip("the kernel takes no UDP runs from a TUN device (before Linux 6.2)")
	}
	var c *net.UDPConn
	if err := inNetns(ns, func() (err error) {
		c, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.MustParseAddrPort("10.99.0.1:4000")))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	peer := netip.MustParseAddrPort("10.99.0.2:5000")
	const size, n = 1000, 10
	last := 300
	total := 28 + (n-1)*size + last
	// The headers of the run: lengths of the whole, the UDP checksum
	// the pseudo-header's sum (the kernel completes each datagram's).
	h := udpDatagram(peer, netip.MustParseAddrPort("10.99.0.1:4000"), nil)
	binary.BigEndian.PutUint16(h[2:], uint16(total))
	h[10], h[11] = 0, 0
	binary.BigEndian.PutUint16(h[10:], ^fold16(h[:20], 0))
	binary.BigEndian.PutUint16(h[24:], uint16(total-20))
	pseudo := fold16(h[12:20], uint32(17+total-20))
	binary.BigEndian.PutUint16(h[26:], pseudo)
	pkt := [][]byte{h}
	for i := range n {
		p := bytes.Repeat([]byte{byte('a' + i)}, size)
		if i == n-1 {
			p = p[:last]
		}
		pkt = append(pkt, p)
	}
	if _, err := tun.WritePacket(pkt, netif.GSO{MSS: size, NeedsCsum: true}); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 2000)
	for i := range n {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		k, from, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			t.Fatalf("datagram %d: %v", i, err)
		}
		if !bytes.Equal(buf[:k], pkt[1+i]) || from != peer {
			t.Errorf("datagram %d: %d bytes %q... from %v, want %d bytes of %q", i, k, buf[:1], from, len(pkt[1+i]), pkt[1+i][:1])
		}
	}
}

// fold16 adds b, as big-endian 16-bit words, to s and folds the sum to
// 16 bits.
func fold16(b []byte, s uint32) uint16 {
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	return uint16(s)
}
