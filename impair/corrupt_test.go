package impair

import (
	"encoding/binary"
	"math"
	"math/bits"
	"testing"
	"time"
)

// ipv4Packet returns an IPv4 packet with optLen bytes of options, payload
// bytes of payload (a pattern) and pad bytes of trailing padding beyond
// the total length.
func ipv4Packet(optLen, payload, pad int) []byte {
	hdr := 20 + optLen
	b := make([]byte, hdr+payload+pad)
	b[0] = 0x40 | byte(hdr/4)
	binary.BigEndian.PutUint16(b[2:4], uint16(hdr+payload))
	b[9] = 17 // UDP
	for i := hdr; i < len(b); i++ {
		b[i] = byte(i * 7)
	}
	return b
}

// ipv6Packet returns an IPv6 packet with payload bytes of payload.
func ipv6Packet(payload int) []byte {
	b := make([]byte, 40+payload)
	b[0] = 0x60
	binary.BigEndian.PutUint16(b[4:6], uint16(payload))
	b[6] = 17
	for i := 40; i < len(b); i++ {
		b[i] = byte(i * 7)
	}
	return b
}

// flippedBits returns the positions (bit index from the start) where a and
// b, of equal length, differ.
func flippedBits(a, b []byte) []int {
	var pos []int
	for i := range a {
		for x := a[i] ^ b[i]; x != 0; x &= x - 1 {
			pos = append(pos, i*8+bits.TrailingZeros8(x))
		}
	}
	return pos
}

func TestCorruptPayloadOnly(t *testing.T) {
	for _, tc := range []struct {
		name       string
		pkt        []byte
		start, end int // the payload's bytes
	}{
		{"ipv4 with options and padding", ipv4Packet(4, 4, 3), 24, 28},
		{"ipv4 length beyond the data", func() []byte {
			b := ipv4Packet(0, 10, 0)
			binary.BigEndian.PutUint16(b[2:4], 1000)
			return b
		}(), 20, 30},
		{"ipv6", ipv6Packet(4), 40, 44},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newCorruptStage(Chance{P: 1}, newRand(1, "up", "corrupt"))
			if s.Name() != "corrupt" {
				t.Errorf("Name() = %q", s.Name())
			}
			sink := &recordSink{}
			p := &Packet{Data: make([]byte, len(tc.pkt))}
			// Every bit of the payload, and only those, is hit
			// uniformly: over n trials each of the B bits is hit
			// Binomial(n, 1/B) times, and Pearson's χ² statistic has
			// mean B-1 and sd √(2(B-1)); accept within tolSD sd.
			const n = 20_000
			nbits := (tc.end - tc.start) * 8
			hits := make([]int, nbits)
			for range n {
				copy(p.Data, tc.pkt)
				s.Push(time.Time{}, p, sink)
				pos := flippedBits(tc.pkt, p.Data)
				if len(pos) != 1 || pos[0] < tc.start*8 || pos[0] >= tc.end*8 {
					t.Fatalf("flipped bits %v, want one in bytes [%d, %d)", pos, tc.start, tc.end)
				}
				hits[pos[0]-tc.start*8]++
			}
			var chi2 float64
			e := float64(n) / float64(nbits)
			for _, h := range hits {
				chi2 += (float64(h) - e) * (float64(h) - e) / e
			}
			dof := float64(nbits - 1)
			checkNear(t, "χ² of bit positions", chi2, dof, math.Sqrt(2*dof))
			c := s.Counters()
			if c.Corrupted.Load() != n || c.InPackets.Load() != n || c.OutPackets.Load() != n || len(sink.pkts) != n {
				t.Errorf("corrupted %d, in %d, out %d, forwarded %d; want %d each", c.Corrupted.Load(), c.InPackets.Load(), c.OutPackets.Load(), len(sink.pkts), n)
			}
		})
	}
}

func TestCorruptNoPayload(t *testing.T) {
	bogusIHL := ipv4Packet(0, 8, 0)
	bogusIHL[0] = 0x44 // IHL 4: 16 bytes, shorter than a header
	longIHL := ipv4Packet(0, 8, 0)
	longIHL[0] = 0x4f // IHL 15: 60 bytes, more than the packet
	for name, pkt := range map[string][]byte{
		"empty":                   {},
		"one byte":                {0x45},
		"short ipv4":              ipv4Packet(0, 0, 0)[:19],
		"ipv4 header only":        ipv4Packet(0, 0, 0),
		"ipv4 header and padding": ipv4Packet(4, 0, 6),
		"ipv4 ihl too small":      bogusIHL,
		"ipv4 ihl past the end":   longIHL,
		"ipv6 header only":        ipv6Packet(0),
		"short ipv6":              ipv6Packet(0)[:39],
		"version 5":               append([]byte{0x50}, make([]byte, 40)...),
	} {
		s := newCorruptStage(Chance{P: 1}, newRand(1, "up", "corrupt"))
		sink := &recordSink{}
		p := &Packet{Data: append([]byte(nil), pkt...)}
		s.Push(time.Time{}, p, sink)
		if len(sink.pkts) != 1 || string(p.Data) != string(pkt) {
			t.Errorf("%s: forwarded %d packets, changed %v", name, len(sink.pkts), flippedBits(pkt, p.Data))
		}
		if c := s.Counters(); c.Corrupted.Load() != 0 || c.OutPackets.Load() != 1 {
			t.Errorf("%s: counted %d corrupted, %d out", name, c.Corrupted.Load(), c.OutPackets.Load())
		}
	}
}

// A segment whose checksum was left to the receiver's device gets its
// final checksum before the bit flips, so that the receiver sees the
// damage instead of a checksum computed over it.
func TestCorruptFinishesAPartialChecksum(t *testing.T) {
	pool := NewPool(1520)
	big := NewPool(65536)
	p := big.Copy(superSegment(false, 3000))
	if !p.SetGSO(1448, true) {
		t.Fatal("SetGSO refused a TCP segment")
	}
	var seg *Packet
	pool.Split(p, func(s *Packet) {
		if seg == nil {
			seg = s
		}
	})
	if !seg.Partial() {
		t.Fatal("the segment of a partial packet is not partial")
	}
	want := append([]byte(nil), seg.Data...)
	CompleteChecksum(want) // the segment as it should leave: final checksum, then one bit flipped
	s := newCorruptStage(Chance{P: 1}, newRand(4, "up", "corrupt"))
	s.Push(time.Time{}, seg, &recordSink{})
	if seg.Partial() {
		t.Error("a corrupted segment is still partial")
	}
	if flips := flippedBits(want, seg.Data); len(flips) != 1 || flips[0] < 40*8 {
		t.Errorf("corrupted segment differs from its finished original at bits %v, want one payload bit", flips)
	}
	if tcpChecksumOK(t, seg.Data) {
		t.Error("the corrupted segment's checksum matches its damaged payload")
	}
}

func TestCorruptRate(t *testing.T) {
	// As TestDuplicateRate: sd = sqrt(p(1-p)/n·(1+ρ)/(1-ρ)).
	for _, c := range []Chance{{P: 0.1}, {P: 0.1, Correlation: 0.5}} {
		s := newCorruptStage(c, newRand(2, "up", "corrupt"))
		sink := &recordSink{pkts: make([]*Packet, 0, 1), times: make([]time.Time, 0, 1)}
		p := &Packet{Data: ipv4Packet(0, 100, 0)}
		const n = 100_000
		for range n {
			s.Push(time.Time{}, p, sink)
			sink.pkts, sink.times = sink.pkts[:0], sink.times[:0]
		}
		got := float64(s.Counters().Corrupted.Load()) / n
		checkNear(t, "corrupt rate", got, c.P, math.Sqrt(c.P*(1-c.P)/n*(1+c.Correlation)/(1-c.Correlation)))
	}
}

func TestCorruptAllocs(t *testing.T) {
	s := newCorruptStage(Chance{P: 0.5}, newRand(3, "up", "corrupt"))
	sink := &recordSink{pkts: make([]*Packet, 0, 1), times: make([]time.Time, 0, 1)}
	p := &Packet{Data: ipv6Packet(1200)}
	if a := testing.AllocsPerRun(1000, func() {
		s.Push(time.Time{}, p, sink)
		sink.pkts, sink.times = sink.pkts[:0], sink.times[:0]
	}); a != 0 {
		t.Errorf("%v allocations per packet", a)
	}
}

func FuzzCorrupt(f *testing.F) {
	f.Add(ipv4Packet(0, 20, 0))
	f.Add(ipv4Packet(8, 3, 2))
	f.Add(ipv6Packet(16))
	f.Add([]byte{0x4f, 0, 0, 10})
	f.Add([]byte{0x60})
	f.Fuzz(func(t *testing.T, data []byte) {
		s := newCorruptStage(Chance{P: 1}, newRand(4, "up", "corrupt"))
		sink := &recordSink{}
		p := &Packet{Data: append([]byte(nil), data...)}
		s.Push(time.Time{}, p, sink)
		if len(sink.pkts) != 1 || len(p.Data) != len(data) {
			t.Fatalf("forwarded %d packets of %d bytes from %d", len(sink.pkts), len(p.Data), len(data))
		}
		pos := flippedBits(data, p.Data)
		payload := ipPayload(data)
		start := cap(data) - cap(payload) // payload is a subslice of data
		switch {
		case len(payload) == 0 && len(pos) != 0:
			t.Fatalf("no payload, yet bits %v flipped", pos)
		case len(payload) > 0 && (len(pos) != 1 || pos[0] < start*8 || pos[0] >= (start+len(payload))*8):
			t.Fatalf("flipped %v, want one bit in bytes [%d, %d)", pos, start, start+len(payload))
		}
		if got := s.Counters().Corrupted.Load(); got != uint64(len(pos)) {
			t.Fatalf("counted %d corrupted, flipped %d bits", got, len(pos))
		}
	})
}
