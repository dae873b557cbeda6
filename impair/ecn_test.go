package impair

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// qdIPv4 builds an IPv4 packet of size bytes by hand: a 20-byte header
// (protocol proto, TOS tos, valid checksum) followed, for TCP and UDP, by
// the ports sport and dport, then zeros.
func qdIPv4(src, dst [4]byte, proto uint8, sport, dport uint16, tos uint8, size int) []byte {
	b := make([]byte, max(size, 28))
	b[0] = 0x45
	b[1] = tos
	binary.BigEndian.PutUint16(b[2:4], uint16(len(b)))
	binary.BigEndian.PutUint16(b[4:6], 0x1234) // identification
	b[8] = 64                                  // TTL
	b[9] = proto
	copy(b[12:16], src[:])
	copy(b[16:20], dst[:])
	if carriesPorts(proto) {
		binary.BigEndian.PutUint16(b[20:22], sport)
		binary.BigEndian.PutUint16(b[22:24], dport)
	}
	binary.BigEndian.PutUint16(b[10:12], qdIPv4Checksum(b[:20]))
	return b
}

// qdIPv6 builds an IPv6 packet of size bytes by hand: a 40-byte header
// (next header nh, traffic class tc, flow label 0x12345) followed, for TCP
// and UDP, by the ports, then zeros.
func qdIPv6(src, dst [16]byte, nh uint8, sport, dport uint16, tc uint8, size int) []byte {
	b := make([]byte, max(size, 48))
	binary.BigEndian.PutUint32(b[0:4], 6<<28|uint32(tc)<<20|0x12345)
	binary.BigEndian.PutUint16(b[4:6], uint16(len(b)-40))
	b[6] = nh
	b[7] = 64
	copy(b[8:24], src[:])
	copy(b[24:40], dst[:])
	if carriesPorts(nh) {
		binary.BigEndian.PutUint16(b[40:42], sport)
		binary.BigEndian.PutUint16(b[42:44], dport)
	}
	return b
}

// qdIPv4Checksum computes the header checksum of hdr from scratch, with its
// checksum field taken as zero (RFC 791, RFC 1071).
func qdIPv4Checksum(hdr []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(hdr); i += 2 {
		if i == 10 {
			continue
		}
		s += uint32(binary.BigEndian.Uint16(hdr[i:]))
	}
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	return ^uint16(s)
}

var (
	qdSrc4 = [4]byte{10, 0, 0, 1}
	qdDst4 = [4]byte{10, 0, 0, 2}
	qdSrc6 = [16]byte{0x20, 0x01, 0x0d, 0xb8, 15: 1}
	qdDst6 = [16]byte{0x20, 0x01, 0x0d, 0xb8, 15: 2}
)

func TestMarkCEIPv4(t *testing.T) {
	for _, tc := range []struct {
		name    string
		tos     uint8
		want    bool
		wantTOS uint8
	}{
		{"not-ect", 0xb8 | ecnNotECT, false, 0xb8 | ecnNotECT},
		{"ect1", 0xb8 | ecnECT1, true, 0xb8 | ecnCE},
		{"ect0", 0xb8 | ecnECT0, true, 0xb8 | ecnCE},
		{"ce", 0xb8 | ecnCE, true, 0xb8 | ecnCE},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &Packet{Data: qdIPv4(qdSrc4, qdDst4, 17, 1, 2, tc.tos, 100)}
			orig := bytes.Clone(p.Data)
			if got := markCE(p); got != tc.want {
				t.Fatalf("markCE = %v, want %v", got, tc.want)
			}
			if p.Data[1] != tc.wantTOS {
				t.Errorf("TOS = %#02x, want %#02x", p.Data[1], tc.wantTOS)
			}
			if got, want := binary.BigEndian.Uint16(p.Data[10:12]), qdIPv4Checksum(p.Data[:20]); got != want {
				t.Errorf("checksum = %#04x, full recomputation gives %#04x", got, want)
			}
			for i := range p.Data {
				if i != 1 && i != 10 && i != 11 && p.Data[i] != orig[i] {
					t.Errorf("byte %d changed: %#02x -> %#02x", i, orig[i], p.Data[i])
				}
			}
		})
	}
}

// TestMarkCEIPv4ChecksumRandom checks the incremental checksum against a
// full recomputation over random headers, options included.
func TestMarkCEIPv4ChecksumRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 20000 {
		ihl := 5 + rng.IntN(11)
		b := make([]byte, ihl*4+rng.IntN(8))
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		b[0] = 0x40 | byte(ihl)
		b[1] = b[1]&^3 | byte(1+rng.IntN(2)) // ECT(1) or ECT(0)
		binary.BigEndian.PutUint16(b[10:12], qdIPv4Checksum(b[:ihl*4]))
		p := &Packet{Data: b}
		if !markCE(p) {
			t.Fatalf("#%d: markCE refused an ECT header", i)
		}
		if got, want := binary.BigEndian.Uint16(b[10:12]), qdIPv4Checksum(b[:ihl*4]); got != want {
			t.Fatalf("#%d: checksum %#04x, full recomputation %#04x (header % x)", i, got, want, b[:ihl*4])
		}
	}
}

func TestMarkCEIPv6(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tc     uint8
		want   bool
		wantTC uint8
	}{
		{"not-ect", 0xb8 | ecnNotECT, false, 0xb8 | ecnNotECT},
		{"ect1", 0xb8 | ecnECT1, true, 0xb8 | ecnCE},
		{"ect0", 0xb8 | ecnECT0, true, 0xb8 | ecnCE},
		{"ce", 0xb8 | ecnCE, true, 0xb8 | ecnCE},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &Packet{Data: qdIPv6(qdSrc6, qdDst6, 6, 1, 2, tc.tc, 100)}
			if got := markCE(p); got != tc.want {
				t.Fatalf("markCE = %v, want %v", got, tc.want)
			}
			w := binary.BigEndian.Uint32(p.Data[0:4])
			if v, cls, label := w>>28, uint8(w>>20), w&0xfffff; v != 6 || cls != tc.wantTC || label != 0x12345 {
				t.Errorf("version %d traffic class %#02x flow label %#x, want 6 %#02x 0x12345", v, cls, label, tc.wantTC)
			}
		})
	}
}

func TestMarkCEMalformed(t *testing.T) {
	v4 := qdIPv4(qdSrc4, qdDst4, 17, 1, 2, ecnECT0, 60)
	ihlLong := bytes.Clone(v4)
	ihlLong[0] = 0x4f // 60-byte header in a packet of 60: fits
	ihlOver := bytes.Clone(v4[:40])
	ihlOver[0] = 0x4f // 60-byte header in 40 bytes
	ihlShort := bytes.Clone(v4)
	ihlShort[0] = 0x44
	for _, tc := range []struct {
		name string
		data []byte
		want bool
	}{
		{"empty", nil, false},
		{"one byte", []byte{0x45}, false},
		{"ipv4 truncated", bytes.Clone(v4[:19]), false},
		{"ipv4 ihl under 5", ihlShort, false},
		{"ipv4 ihl past end", ihlOver, false},
		{"ipv4 ihl 15", ihlLong, true},
		{"ipv6 truncated", qdIPv6(qdSrc6, qdDst6, 17, 1, 2, ecnECT0, 60)[:39], false},
		{"version 5", []byte{0x50, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &Packet{Data: tc.data}
			orig := bytes.Clone(tc.data)
			if got := markCE(p); got != tc.want {
				t.Fatalf("markCE = %v, want %v", got, tc.want)
			}
			if !tc.want && !bytes.Equal(p.Data, orig) {
				t.Errorf("refused packet was modified: % x -> % x", orig, p.Data)
			}
		})
	}
}

func TestMarkCEAllocs(t *testing.T) {
	p := &Packet{Data: qdIPv4(qdSrc4, qdDst4, 17, 1, 2, ecnECT0, 100)}
	if n := testing.AllocsPerRun(100, func() {
		p.Data[1] = ecnECT0
		markCE(p)
	}); n != 0 {
		t.Errorf("markCE allocates %v times per call", n)
	}
}

// FuzzMarkCE feeds markCE arbitrary bytes: it must never panic, must leave
// a packet it refuses untouched, and on an IPv4 packet it marks must change
// only the TOS byte and the checksum, keeping a valid checksum valid.
func FuzzMarkCE(f *testing.F) {
	f.Add(qdIPv4(qdSrc4, qdDst4, 17, 1, 2, ecnECT0, 40))
	f.Add(qdIPv4(qdSrc4, qdDst4, 6, 1, 2, ecnECT1, 28))
	f.Add(qdIPv4(qdSrc4, qdDst4, 1, 0, 0, ecnCE, 28))
	f.Add(qdIPv6(qdSrc6, qdDst6, 17, 1, 2, ecnECT0, 48))
	f.Add([]byte{})
	f.Add([]byte{0x4f, 0x02})
	f.Fuzz(func(t *testing.T, data []byte) {
		orig := bytes.Clone(data)
		p := &Packet{Data: data}
		marked := markCE(p)
		if !marked {
			if !bytes.Equal(data, orig) {
				t.Fatalf("refused packet was modified")
			}
			return
		}
		switch data[0] >> 4 {
		case 4:
			if data[1]&3 != ecnCE {
				t.Fatalf("IPv4 ECN field %02b after marking", data[1]&3)
			}
			for i := range data {
				if i != 1 && i != 10 && i != 11 && data[i] != orig[i] {
					t.Fatalf("byte %d changed", i)
				}
			}
			ihl := int(data[0]&0xf) * 4
			if binary.BigEndian.Uint16(orig[10:12]) == qdIPv4Checksum(orig[:ihl]) &&
				binary.BigEndian.Uint16(data[10:12]) != qdIPv4Checksum(data[:ihl]) {
				t.Fatalf("a valid checksum became invalid")
			}
		case 6:
			if (data[1]>>4)&3 != ecnCE {
				t.Fatalf("IPv6 ECN field %02b after marking", (data[1]>>4)&3)
			}
			for i := range data {
				if i != 1 && data[i] != orig[i] {
					t.Fatalf("byte %d changed", i)
				}
			}
		default:
			t.Fatalf("marked a packet of version %d", data[0]>>4)
		}
	})
}

func BenchmarkMarkCE(b *testing.B) {
	p := &Packet{Data: qdIPv4(qdSrc4, qdDst4, 17, 1, 2, ecnECT0, 1500)}
	b.ReportAllocs()
	for b.Loop() {
		p.Data[1] = ecnECT0
		markCE(p)
	}
}
