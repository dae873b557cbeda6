package impair

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// udpPacket returns a checksummed UDP datagram of n payload bytes of
// fill, over IPv4 (identification id) or IPv6, from port sport.
func udpPacket(v6 bool, sport uint16, id uint16, n int, fill byte) []byte {
	ipLen := 20
	if v6 {
		ipLen = 40
	}
	b := make([]byte, ipLen+8+n)
	if v6 {
		b[0], b[6], b[7] = 0x60, 17, 64
		binary.BigEndian.PutUint16(b[4:], uint16(8+n))
		b[23], b[39] = 1, 2
	} else {
		b[0], b[8], b[9] = 0x45, 64, 17
		b[6] = 0x40 // Don't Fragment
		binary.BigEndian.PutUint16(b[2:], uint16(len(b)))
		binary.BigEndian.PutUint16(b[4:], id)
		copy(b[12:20], []byte{10, 99, 0, 2, 10, 99, 0, 1})
		binary.BigEndian.PutUint16(b[10:], ^naiveSum(b[:20]))
	}
	u := b[ipLen:]
	binary.BigEndian.PutUint16(u[0:], sport)
	binary.BigEndian.PutUint16(u[2:], 4000)
	binary.BigEndian.PutUint16(u[4:], uint16(8+n))
	for i := range n {
		u[8+i] = fill + byte(i%7)
	}
	binary.BigEndian.PutUint16(u[6:], udpChecksum(b, ipLen))
	return b
}

// udpChecksum computes the UDP checksum of b, whose IP header is ipLen
// bytes, the naive way.
func udpChecksum(b []byte, ipLen int) uint16 {
	u := b[ipLen:]
	ph := []byte{0, 17, byte(len(u) >> 8), byte(len(u))}
	if ipLen == 20 {
		ph = append(append([]byte{}, b[12:20]...), ph...)
	} else {
		ph = append(append([]byte{}, b[8:40]...), ph...)
	}
	c := append(append([]byte{}, ph...), u[:6]...)
	c = append(c, 0, 0)
	c = append(c, u[8:]...)
	s := ^naiveSum(c)
	if s == 0 {
		s = 0xffff
	}
	return s
}

// segmentUDP splits a UDP run's merged packet as the kernel does
// (GSO_UDP_L4): datagrams of size payload bytes, IPv4 identifications
// counting up from the first's, checksums computed.
func segmentUDP(m []byte, size int) [][]byte {
	ipLen := 20
	if m[0]>>4 == 6 {
		ipLen = 40
	}
	var out [][]byte
	id := binary.BigEndian.Uint16(m[4:])
	for off := ipLen + 8; off < len(m); off += size {
		p := m[off:min(off+size, len(m))]
		b := append(append([]byte{}, m[:ipLen+8]...), p...)
		if ipLen == 20 {
			binary.BigEndian.PutUint16(b[2:], uint16(len(b)))
			binary.BigEndian.PutUint16(b[4:], id)
			id++
			b[10], b[11] = 0, 0
			binary.BigEndian.PutUint16(b[10:], ^naiveSum(b[:20]))
		} else {
			binary.BigEndian.PutUint16(b[4:], uint16(8+len(p)))
		}
		binary.BigEndian.PutUint16(b[ipLen+4:], uint16(8+len(p)))
		binary.BigEndian.PutUint16(b[ipLen+6:], udpChecksum(b, ipLen))
		out = append(out, b)
	}
	return out
}

// TestUDPRunGathersDatagrams: a run of one flow's datagrams of one size
// (the last shorter) goes in as one packet that the kernel's segmentation
// turns back into the same datagrams; a datagram of another flow, a
// larger one, one without or with a wrong checksum, a fragment, or the
// run's length limit ends the run.
func TestUDPRunGathersDatagrams(t *testing.T) {
	pool := NewPool(2048)
	pkts := func(bs ...[]byte) []*Packet {
		var ps []*Packet
		for _, b := range bs {
			ps = append(ps, pool.Copy(b))
		}
		return ps
	}
	corrupt := udpPacket(false, 5000, 3, 1000, 'c')
	corrupt[100] ^= 1
	noSum := udpPacket(false, 5000, 3, 1000, 'c')
	noSum[26], noSum[27] = 0, 0
	fragment := udpPacket(false, 5000, 3, 1000, 'c')
	fragment[6] |= 0x20
	for _, c := range []struct {
		name string
		ps   []*Packet
		n    int
	}{
		{"ipv4", pkts(udpPacket(false, 5000, 1, 1000, 'a'), udpPacket(false, 5000, 2, 1000, 'b'), udpPacket(false, 5000, 3, 300, 'c'), udpPacket(false, 5000, 4, 1000, 'd')), 3},
		{"ipv6", pkts(udpPacket(true, 5000, 0, 1200, 'a'), udpPacket(true, 5000, 0, 1200, 'b'), udpPacket(true, 5000, 0, 1200, 'c')), 3},
		{"another flow", pkts(udpPacket(false, 5000, 1, 1000, 'a'), udpPacket(false, 5001, 2, 1000, 'b')), 1},
		{"a larger one", pkts(udpPacket(false, 5000, 1, 1000, 'a'), udpPacket(false, 5000, 2, 1001, 'b')), 1},
		{"corrupted", pkts(udpPacket(false, 5000, 1, 1000, 'a'), udpPacket(false, 5000, 2, 1000, 'b'), corrupt), 2},
		{"corrupted first", pkts(corrupt, udpPacket(false, 5000, 2, 1000, 'b')), 1},
		{"no checksum", pkts(udpPacket(false, 5000, 1, 1000, 'a'), noSum), 1},
		{"fragment", pkts(fragment, udpPacket(false, 5000, 2, 1000, 'b')), 1},
	} {
		want := make([][]byte, len(c.ps))
		for i, p := range c.ps {
			want[i] = bytes.Clone(p.Data)
		}
		n, size, total := UDPRun(c.ps, 65535)
		if n != c.n {
			t.Errorf("%s: a run of %d, want %d", c.name, n, c.n)
			continue
		}
		if n < 2 {
			continue
		}
		m := bytes.Join(UDPGather(nil, c.ps[:n], total), nil)
		if len(m) != total {
			t.Errorf("%s: merged %d bytes, want %d", c.name, len(m), total)
		}
		got := segmentUDP(m, size)
		if len(got) != n {
			t.Fatalf("%s: %d datagrams out of the run, want %d", c.name, len(got), n)
		}
		for i := range got {
			w := want[i]
			if w[0] == 0x45 {
				// The kernel numbers them from the first's
				// identification.
				w = bytes.Clone(w)
				binary.BigEndian.PutUint16(w[4:], binary.BigEndian.Uint16(want[0][4:])+uint16(i))
				w[10], w[11] = 0, 0
				binary.BigEndian.PutUint16(w[10:], ^naiveSum(w[:20]))
			}
			if !bytes.Equal(got[i], w) {
				t.Errorf("%s: datagram %d out of the run differs from the one that went in", c.name, i)
			}
		}
	}
	// The length limit and the segment limit.
	var many []*Packet
	for i := range udpMaxSegments + 5 {
		many = append(many, pool.Copy(udpPacket(false, 5000, uint16(i), 500, 'a')))
	}
	if n, _, total := UDPRun(many, 65535); n != udpMaxSegments || total != 28+udpMaxSegments*500 {
		t.Errorf("a run of %d (%d bytes), want %d", n, total, udpMaxSegments)
	}
	if n, _, _ := UDPRun(many, 28+10*500); n != 10 {
		t.Errorf("a run of %d within %d bytes, want 10", n, 28+10*500)
	}
}
