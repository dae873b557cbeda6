package impair

import (
	"encoding/binary"
	"time"
)

// Segmentation offload (GSO). A sender that offloads segmentation (the
// kernel writing into a TUN device with virtio-net headers, gVisor with
// GSO on) hands over one TCP segment of up to 64 KiB that stands for
// several MTU-sized ones, each MSS bytes of payload with a copy of the
// headers. Such a packet enters a direction whole when each of its
// stages either keeps it as it is or decides on each of its segments
// inside (Config.TakesSegments: a fixed delay; loss, which splits it
// only where a segment is lost; a fast rate behind a drop-tail queue,
// which sends it in parts of at most clock.Slack): the counters then
// count it as its segments, in packets and in bytes on the wire.
// Otherwise it is split into its segments before it enters the
// direction (by its sender, Pool.Split, or by Chain.Arrive). Either way
// every impairment applies to each MTU-sized packet as it would on a
// real link.

// gsoMaxSegments bounds the segments Coalesce merges into one packet, as
// a NIC's receive offload bounds them: 64 KiB of payload in segments of
// at least 536 bytes (IPv4's default MSS) is 123. A GSO packet a sender
// makes has no such bound (SetGSO): Linux's TCP with TCP_MAXSEG 88 sends
// 64 KiB as 745 segments.
const gsoMaxSegments = 128

// SetGSO marks p, a TCP segment over IPv4 or IPv6, as standing for
// segments of mss payload bytes each. partial says its TCP checksum is
// not final (the sender left it to be completed, as with checksum
// offload), nor will its segments' be (see Partial). It reports false,
// leaving p an ordinary packet, when p is not such a TCP segment (then, if partial,
// its checksum stays as it is) or when it fits in one segment; p's
// checksum is then completed when partial.
func (p *Packet) SetGSO(mss int, partial bool) bool {
	p.segs, p.hdrLen, p.partial = 0, 0, false
	ipLen, ok := tcpHeaders(p.Data)
	if !ok || mss <= 0 {
		return false
	}
	tcpLen := int(p.Data[ipLen+12]>>4) * 4
	payload := len(p.Data) - ipLen - tcpLen
	if payload <= mss {
		if partial {
			CompleteChecksum(p.Data)
		}
		return false
	}
	// Any count: a packet of up to 64 KiB has at most 65535 segments,
	// which segs holds. Refusing a count here would leave p an ordinary
	// packet that crosses every stage whole.
	n := (payload + mss - 1) / mss
	if mss > 0xffff {
		return false
	}
	p.segs, p.mss, p.hdrLen, p.partial = uint16(n), uint16(mss), uint16(ipLen+tcpLen), partial
	return true
}

// GSO reports p's segment size and whether it is a GSO packet (see
// SetGSO); partial says its TCP checksum is not final.
func (p *Packet) GSO() (mss int, partial, ok bool) {
	if p.segs == 0 {
		return 0, false, false
	}
	return int(p.mss), p.partial, true
}

// Partial reports whether p's TCP checksum is not final, as a sender with
// checksum offload leaves it: a GSO packet's (see SetGSO), its segments'
// after a split, and a merged packet's (Coalesce). Whoever hands p to a
// receiver that checks it completes it first (FinishChecksum); a device
// with checksum offload takes it as it is, after PseudoChecksum. Nothing
// in the path reads a TCP checksum, so the path carries it unfinished and
// no byte of a transfer is summed where no one would check it.
func (p *Packet) Partial() bool { return p.partial }

// FinishChecksum completes p's TCP checksum when it is partial.
func (p *Packet) FinishChecksum() {
	if p.partial {
		CompleteChecksum(p.Data)
		p.partial = false
	}
}

// Segments returns how many packets p stands for on the wire: 1, or its
// segments for a GSO packet.
func (p *Packet) Segments() int { return max(1, int(p.segs)) }

// WireLen returns the bytes p occupies on the wire: its length, plus, for
// a GSO packet, a copy of its headers for every segment after the first.
func (p *Packet) WireLen() int {
	if p.segs == 0 {
		return len(p.Data)
	}
	return len(p.Data) + (int(p.segs)-1)*int(p.hdrLen)
}

// tcpHeaders returns the length of the IP header of b when b is an
// unfragmented TCP segment over IPv4, or over IPv6 with no extension
// header, whose TCP header fits.
func tcpHeaders(b []byte) (ipLen int, ok bool) {
	if len(b) < 20 {
		return 0, false
	}
	switch b[0] >> 4 {
	case 4:
		ipLen = int(b[0]&0x0f) * 4
		frag := binary.BigEndian.Uint16(b[6:8])
		if ipLen < 20 || b[9] != 6 || frag&0x3fff != 0 || int(binary.BigEndian.Uint16(b[2:4])) != len(b) {
			return 0, false
		}
	case 6:
		ipLen = 40
		if len(b) < 40 || b[6] != 6 || 40+int(binary.BigEndian.Uint16(b[4:6])) != len(b) {
			return 0, false
		}
	default:
		return 0, false
	}
	if len(b) < ipLen+20 {
		return 0, false
	}
	tcpLen := int(b[ipLen+12]>>4) * 4
	if tcpLen < 20 || len(b) < ipLen+tcpLen {
		return 0, false
	}
	return ipLen, true
}

// Split hands emit p's segments as ordinary packets from pool, each a
// complete IP packet with its own length, IPv4 identification and header
// checksum, sequence number, flags (FIN and PSH on the last segment only,
// CWR on the first only) and TCP checksum, and with p's timestamps; p is
// released. The segments of a partial p are partial (their TCP checksum
// field holds the pseudo-header's sum); the others get their final TCP
// checksum. A packet that is not a GSO packet is handed over as it is.
func (pl *Pool) Split(p *Packet, emit func(*Packet)) {
	pl.SplitTo(time.Time{}, p, emitFunc(emit))
}

// emitFunc is Split's emit as a Sink; a func is pointer-shaped, so the
// conversion allocates nothing.
type emitFunc func(*Packet)

func (f emitFunc) Push(_ time.Time, p *Packet) { f(p) }

// SplitTo is Split handing each segment to out at now: a split that
// keeps no state between calls, so that one may serve senders on several
// goroutines at once.
func (pl *Pool) SplitTo(now time.Time, p *Packet, out Sink) {
	if p.segs == 0 {
		out.Push(now, p)
		return
	}
	b := p.Data
	hl := int(p.hdrLen)
	ipLen, _ := tcpHeaders(b)
	mss := int(p.mss)
	payload := b[hl:]
	seq := binary.BigEndian.Uint32(b[ipLen+4:])
	flags := b[ipLen+13]
	v4 := b[0]>>4 == 4
	var id uint16
	if v4 {
		id = binary.BigEndian.Uint16(b[4:6])
	}
	for i := 0; len(payload) > 0; i++ {
		n := min(mss, len(payload))
		var s *Packet
		switch {
		case hl+n <= pl.size:
			s = pl.Get(hl + n)
		case p.pool != nil && hl+n <= p.pool.size:
			s = p.pool.Get(hl + n) // a segment larger than pl's packets
		default:
			s = &Packet{Data: make([]byte, hl+n)}
		}
		copy(s.Data, b[:hl])
		copy(s.Data[hl:], payload[:n])
		payload = payload[n:]
		h := s.Data
		if v4 {
			binary.BigEndian.PutUint16(h[2:4], uint16(hl+n))
			binary.BigEndian.PutUint16(h[4:6], id+uint16(i))
			h[10], h[11] = 0, 0
			binary.BigEndian.PutUint16(h[10:12], ^fold(sum(h[:ipLen], 0)))
		} else {
			binary.BigEndian.PutUint16(h[4:6], uint16(hl+n-40))
		}
		binary.BigEndian.PutUint32(h[ipLen+4:], seq+uint32(i*mss))
		f := flags
		if len(payload) > 0 {
			f &^= 0x09 // FIN, PSH: the last segment's
		}
		if i > 0 {
			f &^= 0x80 // CWR: the first segment's
		}
		h[ipLen+13] = f
		if p.partial {
			PseudoChecksum(h)
			s.partial = true
		} else {
			CompleteChecksum(h)
		}
		s.Arrival, s.Enqueued, s.mayWait = p.Arrival, p.Enqueued, p.mayWait
		out.Push(now, s)
	}
	p.Release()
}

// CompleteChecksum computes the TCP checksum of b, an IPv4 or IPv6 TCP
// segment, over its pseudo-header, header and payload, and stores it;
// whatever the checksum field held is ignored. It reports false, leaving
// b alone, when b is not such a segment.
func CompleteChecksum(b []byte) bool {
	ipLen, ok := tcpHeaders(b)
	if !ok {
		return false
	}
	tcp := b[ipLen:]
	var s uint64
	if b[0]>>4 == 4 {
		s = sum(b[12:20], 0) // source and destination
	} else {
		s = sum(b[8:40], 0)
	}
	s += 6 + uint64(len(tcp)) // protocol and TCP length
	tcp[16], tcp[17] = 0, 0
	binary.BigEndian.PutUint16(tcp[16:18], ^fold(sum(tcp, s)))
	return true
}

// CompletePartial completes a checksum its sender left partial, as a
// device with checksum offload would: the field at start+offset holds
// the pseudo-header's sum, and the checksum covers b from start on. It
// reports false, changing nothing, when the field is not inside b.
func CompletePartial(b []byte, start, offset int) bool {
	at := start + offset
	if start < 0 || offset < 0 || at+2 > len(b) {
		return false
	}
	c := ^fold(sum(b[start:], 0))
	if c == 0 && offset == 6 {
		c = 0xffff // UDP sends a computed 0 as all ones
	}
	binary.BigEndian.PutUint16(b[at:], c)
	return true
}

// PseudoChecksum stores in b's TCP checksum field the folded sum of its
// pseudo-header alone (not complemented): what a device with checksum
// offload (a TUN device given a virtio-net header with NEEDS_CSUM)
// expects there, adding the sum of the segment itself.
func PseudoChecksum(b []byte) {
	ipLen, ok := tcpHeaders(b)
	if !ok {
		return
	}
	pseudo(b, ipLen, len(b)-ipLen)
}

// pseudo stores in the TCP checksum field of b, whose IP header is ipLen
// bytes, the folded sum of its pseudo-header for a TCP length of tcpLen.
func pseudo(b []byte, ipLen, tcpLen int) {
	var s uint64
	if b[0]>>4 == 4 {
		s = sum(b[12:20], 0)
	} else {
		s = sum(b[8:40], 0)
	}
	s += 6 + uint64(tcpLen)
	binary.BigEndian.PutUint16(b[ipLen+16:ipLen+18], fold(s))
}

// sum adds b to the one's complement sum s as big-endian 16-bit words (an
// odd last byte padded with zero). It adds 32-bit words into 64 bits,
// which cannot overflow for any packet, and fold does the rest.
func sum(b []byte, s uint64) uint64 {
	for len(b) >= 16 {
		s += uint64(binary.BigEndian.Uint32(b)) + uint64(binary.BigEndian.Uint32(b[4:])) +
			uint64(binary.BigEndian.Uint32(b[8:])) + uint64(binary.BigEndian.Uint32(b[12:]))
		b = b[16:]
	}
	for len(b) >= 4 {
		s += uint64(binary.BigEndian.Uint32(b))
		b = b[4:]
	}
	if len(b) >= 2 {
		s += uint64(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		s += uint64(b[0]) << 8
	}
	return s
}

// fold folds a 64-bit one's complement sum into 16 bits.
func fold(s uint64) uint16 {
	s = (s >> 32) + (s & 0xffffffff)
	s = (s >> 32) + (s & 0xffffffff)
	s = (s >> 16) + (s & 0xffff)
	s = (s >> 16) + (s & 0xffff)
	return uint16(s)
}

// Coalesce merges, in ps (packets that arrived together, in order), each
// run of consecutive segments of one TCP connection into one GSO packet
// from pl, as a NIC's receive offload (GRO) does, and releases the
// segments it merged. It returns the packets that remain, in order,
// reusing ps's array. Only what arrived together is merged, so no packet
// waits for another. A run is segments with the same addresses, ports,
// IP and TCP header fields (acknowledgement, window, options) but the
// lengths, identification, checksums and sequence numbers, each starting
// where the previous ended with the same payload size, only the last
// possibly smaller or carrying PSH, and no other flag than ACK (and CWR on
// the first); a GSO packet in it (a part of a large segment a rate stage
// cut, see cutHead) counts as its segments. A merged packet's checksum is
// left partial.
func (pl *Pool) Coalesce(ps []*Packet) []*Packet {
	out := ps[:0]
	for i := 0; i < len(ps); {
		n, segs, mss, total := runOf(ps[i:], pl.size, false)
		if n > 1 {
			out = append(out, pl.merge(ps[i:i+n], segs, mss, total))
		} else {
			out = append(out, ps[i])
		}
		i += n
	}
	clear(ps[len(out):])
	return out
}

// tcpOff returns the offset of the TCP header of a packet tcpHeaders took.
func tcpOff(b []byte) int {
	if b[0]>>4 == 4 {
		return int(b[0]&0x0f) * 4
	}
	return 40
}

// coalescable describes p when p may be part of a run: an ordinary TCP
// segment with a payload, or a GSO packet (a part of a large segment the
// path cut, see cutHead), over IPv4 without options or IPv6, flags ACK
// (and PSH, and CWR when first), whose checksum is partial or right. It
// returns p's payload size, the size of its segments (its payload, for an
// ordinary segment) and how many it stands for. A merged packet's
// checksum is computed afresh over all of it, so a wrong one (the corrupt
// stage's damage, or a sender's own) would be made right: such a segment
// stays apart, and its receiver finds it as it was sent.
func coalescable(p *Packet, first bool) (payload, mss, segs int, ok bool) {
	b := p.Data
	ipLen, ok := tcpHeaders(b)
	if !ok || (b[0]>>4 == 4 && ipLen != 20) {
		return 0, 0, 0, false
	}
	flags := b[ipLen+13]
	allowed := byte(0x10 | 0x08)
	if first {
		allowed |= 0x80
	}
	if flags&0x10 == 0 || flags&^allowed != 0 {
		return 0, 0, 0, false
	}
	hl := ipLen + int(b[ipLen+12]>>4)*4
	payload, mss, segs = len(b)-hl, len(b)-hl, 1
	if p.segs != 0 {
		if int(p.hdrLen) != hl {
			return 0, 0, 0, false
		}
		mss, segs = int(p.mss), int(p.segs)
	}
	return payload, mss, segs, payload > 0 && (p.partial || checksumRight(b, ipLen))
}

// checksumRight reports whether the TCP checksum of b, a segment whose IP
// header is ipLen bytes, is right.
func checksumRight(b []byte, ipLen int) bool {
	var s uint64
	if ipLen == 20 {
		s = sum(b[12:20], 0)
	} else {
		s = sum(b[8:40], 0)
	}
	s += 6 + uint64(len(b)-ipLen)
	return fold(sum(b[ipLen:], s)) == 0xffff
}

// sameRun reports whether q continues the run that first starts and that
// holds total bytes so far.
func sameRun(first, q *Packet, total int) bool {
	a, b := first.Data, q.Data
	ipLen := tcpOff(a)
	if b[0]>>4 != a[0]>>4 || tcpOff(b) != ipLen {
		return false
	}
	if ipLen == 20 {
		// TOS, flags and TTL, protocol, addresses; not length, id or
		// checksum.
		if a[1] != b[1] || a[6]&0xe0 != b[6]&0xe0 || a[8] != b[8] || !equal(a[12:20], b[12:20]) {
			return false
		}
	} else if !equal(a[0:4], b[0:4]) || a[7] != b[7] || !equal(a[8:40], b[8:40]) {
		return false
	}
	ta, tb := a[ipLen:], b[ipLen:]
	hl := int(ta[12]>>4) * 4
	if int(tb[12]>>4)*4 != hl || !equal(ta[0:4], tb[0:4]) || !equal(ta[8:12], tb[8:12]) || !equal(ta[14:16], tb[14:16]) || !equal(ta[20:hl], tb[20:hl]) {
		return false
	}
	payloadSoFar := total - ipLen - hl
	return binary.BigEndian.Uint32(tb[4:8]) == binary.BigEndian.Uint32(ta[4:8])+uint32(payloadSoFar)
}

func equal(a, b []byte) bool { return string(a) == string(b) }

// merge makes one GSO packet of the run rs, total bytes long, standing
// for segs segments of mss bytes, and releases rs.
func (pl *Pool) merge(rs []*Packet, segs, mss, total int) *Packet {
	first := rs[0]
	ipLen := tcpOff(first.Data)
	hl := ipLen + int(first.Data[ipLen+12]>>4)*4
	m := pl.Get(total)
	copy(m.Data, first.Data[:hl])
	off := hl
	var flags byte
	for _, r := range rs {
		off += copy(m.Data[off:], r.Data[hl:])
		flags |= r.Data[ipLen+13] & 0x08 // PSH from any (the last)
	}
	h := m.Data
	setIPLength(h, ipLen, total)
	h[ipLen+13] |= flags
	m.Arrival, m.Enqueued = first.Arrival, first.Enqueued
	m.segs, m.mss, m.hdrLen, m.partial = uint16(segs), uint16(mss), uint16(hl), true
	for _, r := range rs {
		r.Release()
	}
	return m
}

// Run returns how many packets from ps[0] on form one run that a device
// with offload may take as one GSO packet without a copy (JoinHeaders):
// n is 1 when ps[0] starts none. A run is what Coalesce would merge (so
// never a segment whose checksum is wrong, a corrupted one's), at most
// maxBytes long once merged; a pushed first packet ends its run, as a
// NIC's receive offload flushes at PSH. segs is how many segments the
// run stands for (a GSO packet in it, a part of a large segment, counts
// as its segments), mss their size, total the merged length.
func Run(ps []*Packet, maxBytes int) (n, segs, mss, total int) {
	return runOf(ps, maxBytes, true)
}

// runOf is Run, and with pushedEnds false (a pushed first segment still
// starts a run) the run Coalesce merges. Segments of one size follow each
// other, in packets of their own or in GSO packets (the parts a rate
// stage cut a large segment into, delivered together): only the run's
// last segment may be shorter, and a run stands for at most
// gsoMaxSegments.
func runOf(ps []*Packet, maxBytes int, pushedEnds bool) (n, segs, mss, total int) {
	if len(ps) == 0 {
		return 0, 0, 0, 0
	}
	first := ps[0]
	payload, mss, segs, ok := coalescable(first, true)
	if !ok || payload%mss != 0 || pushedEnds && first.Data[tcpOff(first.Data)+13]&0x08 != 0 {
		return 1, first.Segments(), 0, len(first.Data)
	}
	total = len(first.Data)
	for n = 1; n < len(ps); n++ {
		q := ps[n]
		p, m, k, ok := coalescable(q, false)
		// Segments of the run's size: a part's, or one segment at most
		// that long (a shorter one ends the run, below).
		sized := k > 1 && m == mss || k == 1 && p <= mss
		if !ok || !sized || segs+k > gsoMaxSegments || total+p > maxBytes || !sameRun(first, q, total) {
			break
		}
		total += p
		segs += k
		if p%mss != 0 || q.Data[tcpOff(q.Data)+13]&0x08 != 0 {
			return n + 1, segs, mss, total // a short or pushed segment ends the run
		}
	}
	if n == 1 {
		return 1, first.Segments(), 0, len(first.Data)
	}
	return n, segs, mss, total
}

// setIPLength sets the IP length of h, the headers of a TCP segment
// whose TCP header starts at ipLen, for a packet total bytes long, with
// IPv4's header checksum.
func setIPLength(h []byte, ipLen, total int) {
	if ipLen == 20 {
		binary.BigEndian.PutUint16(h[2:4], uint16(total))
		h[10], h[11] = 0, 0
		binary.BigEndian.PutUint16(h[10:12], ^fold(sum(h[:20], 0)))
	} else {
		binary.BigEndian.PutUint16(h[4:6], uint16(total-40))
	}
}

// JoinHeaders turns the headers of run[0], the first of a run (Run) total
// bytes long once merged, into those of the merged packet, in place, and
// returns their length, hdrLen: the IP length and header checksum are the
// merged packet's, PSH is set when any packet of the run has it, and the
// TCP checksum is partial (PseudoChecksum's, for the merged length). The
// merged packet is then run[0].Data followed by run[i].Data[hdrLen:] for
// each further packet, in order: what a device with offload takes as one
// GSO packet of the run's mss, in one gathered write, with no copy.
// run[0].Data no longer describes a packet of its own: release it after
// the write.
func JoinHeaders(run []*Packet, total int) (hdrLen int) {
	h := run[0].Data
	ipLen := tcpOff(h)
	hdrLen = ipLen + int(h[ipLen+12]>>4)*4
	var push byte
	for _, r := range run[1:] {
		push |= r.Data[ipLen+13] & 0x08
	}
	setIPLength(h, ipLen, total)
	h[ipLen+13] |= push
	pseudo(h, ipLen, total-ipLen)
	return hdrLen
}

// Gather joins the headers of run, the first of a run total bytes long
// once merged (JoinHeaders), and appends the merged packet's parts to
// vec: run[0].Data, then each further packet's payload. It returns vec;
// with room in vec, it allocates nothing.
func Gather(vec [][]byte, run []*Packet, total int) [][]byte {
	hl := JoinHeaders(run, total)
	vec = append(vec, run[0].Data)
	for _, p := range run[1:] {
		vec = append(vec, p.Data[hl:])
	}
	return vec
}

// CoalesceRun returns how many packets from ps[0] on Coalesce would merge
// into one (n is 1 when ps[0] starts no run), with the segments the run
// stands for, their size and its merged length, for a receiver that
// builds the merged packet itself (JoinHeaders, then a gathered copy)
// instead of having it copied into a packet of a pool first. maxBytes is
// what Coalesce's pool holds. The rules are Coalesce's, including a
// pushed first segment that still starts a run (Run, for a device, ends
// it there).
func CoalesceRun(ps []*Packet, maxBytes int) (n, segs, mss, total int) {
	return runOf(ps, maxBytes, false)
}

// cutHead takes the first m segments off p, a GSO packet of more than m
// segments, and returns them as a packet of their own (a GSO packet when
// m > 1), leaving the rest in p, in place: the same segments, each with
// the sequence number, IPv4 identification, flags (FIN and PSH on the
// last segment only, CWR on the first only) and checksums Split would
// give it. Both keep p's timestamps; a partial p gives partial parts.
// The head is a copy (newPart); the rest stays in p's buffer, its headers
// moved to just before its payload.
func cutHead(p *Packet, m int) *Packet {
	b := p.Data
	hl, mss := int(p.hdrLen), int(p.mss)
	ipLen := tcpOff(b)
	size := hl + m*mss
	h := newPart(p, size)
	copy(h.Data, b[:size])
	h.Data[ipLen+13] &^= 0x09 // FIN, PSH: the last segment's
	h.stampFrom(p)
	if m > 1 {
		h.segs, h.mss, h.hdrLen = uint16(m), p.mss, p.hdrLen
	}
	h.partial = p.partial
	setIPLength(h.Data, ipLen, size)
	finishPart(h)

	// The rest: the headers go where the head's last bytes were (copy
	// moves overlapping bytes right).
	rest := b[m*mss:]
	copy(rest[:hl], b[:hl])
	seq := binary.BigEndian.Uint32(rest[ipLen+4:])
	binary.BigEndian.PutUint32(rest[ipLen+4:], seq+uint32(m*mss))
	rest[ipLen+13] &^= 0x80 // CWR: the first segment's
	if ipLen == 20 {
		id := binary.BigEndian.Uint16(rest[4:6])
		binary.BigEndian.PutUint16(rest[4:6], id+uint16(m))
	}
	setIPLength(rest, ipLen, len(rest))
	p.Data = rest
	if p.segs -= uint16(m); p.segs == 1 {
		p.segs, p.mss, p.hdrLen = 0, 0, 0
	}
	finishPart(p)
	return h
}

// finishPart gives p, a part cutHead made, its TCP checksum: the pseudo
// header's sum when partial, the final one otherwise.
func finishPart(p *Packet) {
	if p.partial {
		PseudoChecksum(p.Data)
	} else {
		CompleteChecksum(p.Data)
	}
}

// newPart returns a packet of n bytes for a part of p: from the smallest
// of partPools that holds it, else from p's pool, else fresh.
func newPart(p *Packet, n int) *Packet {
	if pl := partPool(n); pl != nil {
		return pl.Get(n)
	}
	if p.pool != nil && n <= p.pool.size {
		return p.pool.Get(n)
	}
	return &Packet{Data: make([]byte, n)}
}

// fit returns p, a packet going on the wire, in a buffer at most twice
// its length: itself when its buffer is that small already (or p is
// larger than partPools hold), else a copy from partPools, p released.
// What is left of a GSO packet after its first parts (cutHead) still
// holds its sender's 64 KiB buffer.
func fit(p *Packet) *Packet {
	pl := partPool(len(p.Data))
	if pl == nil || p.mem() <= 2*int64(len(p.Data)) || int64(pl.size) >= p.mem() {
		return p
	}
	q := pl.Get(len(p.Data))
	copy(q.Data, p.Data)
	q.stampFrom(p)
	q.segs, q.mss, q.hdrLen, q.partial = p.segs, p.mss, p.hdrLen, p.partial
	p.Release()
	return q
}

// stampFrom gives p, a part of o (cutHead, fit), o's timestamps, its
// sender's mark and its flow hash.
func (p *Packet) stampFrom(o *Packet) {
	p.Arrival, p.Enqueued, p.mayWait, p.hash = o.Arrival, o.Enqueued, o.mayWait, o.hash
}
