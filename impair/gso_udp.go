package impair

import "encoding/binary"

// UDP runs: datagrams of one flow that reach a device with offload
// together go in as one UDP GSO packet (the kernel's UDP segmentation,
// virtio-net's GSO_UDP_L4), in one gathered write, as TCP runs do (Run):
// the kernel splits it into the datagrams again before any socket sees
// them. Each datagram has crossed the path on its own, every stage's
// decision taken for it; only their way into the kernel is shared.

// udpMaxSegments bounds a UDP run: Linux's UDP_MAX_SEGMENTS before 6.14.
const udpMaxSegments = 64

// udpDatagram returns the IP header length and payload size of p when p
// may be part of a UDP run: an ordinary packet, an unfragmented UDP
// datagram over IPv4 without options or over IPv6 without extension
// headers, whose UDP length fills the packet, with a payload and a
// checksum that is set and right. The merged packet's checksum is left
// to the kernel, which computes each datagram's afresh, so a wrong one
// (the corrupt stage's damage) would be made right, and a datagram sent
// without one would get one: such a datagram stays apart.
func udpDatagram(p *Packet) (ipLen, size int, ok bool) {
	b := p.Data
	if p.segs != 0 || p.partial || len(b) < 48 {
		return 0, 0, false
	}
	switch b[0] {
	case 0x45:
		if b[9] != 17 || binary.BigEndian.Uint16(b[6:8])&0x3fff != 0 || int(binary.BigEndian.Uint16(b[2:4])) != len(b) {
			return 0, 0, false
		}
		ipLen = 20
	default:
		if b[0]>>4 != 6 || b[6] != 17 || int(binary.BigEndian.Uint16(b[4:6]))+40 != len(b) {
			return 0, 0, false
		}
		ipLen = 40
	}
	u := b[ipLen:]
	if int(binary.BigEndian.Uint16(u[4:6])) != len(u) || len(u) == 8 || binary.BigEndian.Uint16(u[6:8]) == 0 {
		return 0, 0, false
	}
	var s uint64
	if ipLen == 20 {
		s = sum(b[12:20], 0)
	} else {
		s = sum(b[8:40], 0)
	}
	s += 17 + uint64(len(u))
	if fold(sum(u, s)) != 0xffff {
		return 0, 0, false
	}
	return ipLen, len(u) - 8, true
}

// sameUDPFlow reports whether b continues the UDP run whose first
// datagram is a: the same IP version, TOS or traffic class and flow
// label, Don't Fragment, TTL or hop limit, addresses and ports.
func sameUDPFlow(a, b []byte, ipLen int) bool {
	if ipLen == 20 {
		return b[0] == 0x45 && a[1] == b[1] && a[6]&0x40 == b[6]&0x40 && a[8] == b[8] && equal(a[12:24], b[12:24])
	}
	return b[0]>>4 == 6 && equal(a[0:4], b[0:4]) && a[7] == b[7] && equal(a[8:44], b[8:44])
}

// UDPRun returns how many packets from ps[0] on form one UDP run that a
// device with UDP segmentation offload may take as one GSO packet
// (UDPGather): n is 1 when ps[0] starts none. A run is datagrams of one
// flow (udpDatagram's rules) of one payload size, the last of which may
// be shorter, at most maxBytes long once merged. size is the run's
// payload size and total its merged length.
func UDPRun(ps []*Packet, maxBytes int) (n, size, total int) {
	if len(ps) == 0 {
		return 0, 0, 0
	}
	first := ps[0]
	ipLen, size, ok := udpDatagram(first)
	if !ok {
		return 1, 0, len(first.Data)
	}
	total = len(first.Data)
	for n = 1; n < len(ps) && n < udpMaxSegments; n++ {
		q := ps[n]
		ql, m, ok := udpDatagram(q)
		if !ok || ql != ipLen || m > size || total+m > maxBytes || !sameUDPFlow(first.Data, q.Data, ipLen) {
			break
		}
		total += m
		if m < size {
			return n + 1, size, total // a shorter datagram ends the run
		}
	}
	return n, size, total
}

// UDPGather turns the headers of run[0], the first of a UDP run total
// bytes long once merged (UDPRun), into those of the merged packet, in
// place (the IP length and header checksum, the UDP length, and the UDP
// checksum left partial: the pseudo-header's sum for the merged length),
// and appends its parts to vec: run[0].Data, then each further
// datagram's payload. It returns vec; with room in vec, it allocates
// nothing. run[0].Data no longer describes a packet of its own: release
// it after the write.
func UDPGather(vec [][]byte, run []*Packet, total int) [][]byte {
	h := run[0].Data
	ipLen := 20
	if h[0]>>4 == 6 {
		ipLen = 40
	}
	setIPLength(h, ipLen, total)
	udpLen := total - ipLen
	binary.BigEndian.PutUint16(h[ipLen+4:ipLen+6], uint16(udpLen))
	var s uint64
	if ipLen == 20 {
		s = sum(h[12:20], 0)
	} else {
		s = sum(h[8:40], 0)
	}
	s += 17 + uint64(udpLen)
	binary.BigEndian.PutUint16(h[ipLen+6:ipLen+8], fold(s))
	vec = append(vec, h)
	for _, p := range run[1:] {
		vec = append(vec, p.Data[ipLen+8:])
	}
	return vec
}
