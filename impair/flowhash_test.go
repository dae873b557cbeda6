package impair

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

const qdSeed = 0x5eed

func qdHash(data []byte) uint32 { return flowHash(&Packet{Data: data}, qdSeed) }

func TestFlowHashFiveTuple(t *testing.T) {
	base := qdIPv4(qdSrc4, qdDst4, 17, 1000, 53, 0, 100)
	h := qdHash(base)

	// Fields outside the 5-tuple do not matter.
	other := qdIPv4(qdSrc4, qdDst4, 17, 1000, 53, 0xb8, 1400)
	other[8] = 3                                     // TTL
	binary.BigEndian.PutUint16(other[4:6], 0xbeef)   // identification
	other[60] = 0xff                                 // payload
	binary.BigEndian.PutUint16(other[10:12], 0xdead) // checksum
	if got := qdHash(other); got != h {
		t.Errorf("same 5-tuple, other TTL/ID/TOS/length/payload: hash %#x, want %#x", got, h)
	}

	// Each field of the 5-tuple does.
	for name, data := range map[string][]byte{
		"src":      qdIPv4([4]byte{10, 0, 0, 3}, qdDst4, 17, 1000, 53, 0, 100),
		"dst":      qdIPv4(qdSrc4, [4]byte{10, 0, 0, 3}, 17, 1000, 53, 0, 100),
		"protocol": qdIPv4(qdSrc4, qdDst4, 6, 1000, 53, 0, 100),
		"sport":    qdIPv4(qdSrc4, qdDst4, 17, 1001, 53, 0, 100),
		"dport":    qdIPv4(qdSrc4, qdDst4, 17, 1000, 54, 0, 100),
		"swapped":  qdIPv4(qdDst4, qdSrc4, 17, 53, 1000, 0, 100),
	} {
		if qdHash(data) == h {
			t.Errorf("changing %s leaves the hash at %#x", name, h)
		}
	}

	// The seed does too.
	if flowHash(&Packet{Data: base}, qdSeed+1) == h {
		t.Errorf("changing the seed leaves the hash at %#x", h)
	}
}

func TestFlowHashIPv4Fragments(t *testing.T) {
	first := qdIPv4(qdSrc4, qdDst4, 17, 1000, 53, 0, 1500)
	binary.BigEndian.PutUint16(first[6:8], 0x2000) // MF, offset 0
	later := qdIPv4(qdSrc4, qdDst4, 17, 0, 0, 0, 500)
	binary.BigEndian.PutUint16(later[6:8], 185) // offset 1480 bytes, last
	copy(later[20:24], []byte{0xde, 0xad, 0xbe, 0xef})
	if a, b := qdHash(first), qdHash(later); a != b {
		t.Errorf("fragments of one datagram hash apart: %#x, %#x", a, b)
	}
	whole := qdIPv4(qdSrc4, qdDst4, 17, 1000, 53, 0, 1500)
	df := bytes.Clone(whole)
	binary.BigEndian.PutUint16(df[6:8], 0x4000) // DF is not a fragment
	if a, b := qdHash(whole), qdHash(df); a != b {
		t.Errorf("DF changes the hash: %#x, %#x", a, b)
	}
}

// TestFlowHashNoPorts checks that protocols without ports hash on
// addresses and protocol only.
func TestFlowHashNoPorts(t *testing.T) {
	a := qdIPv4(qdSrc4, qdDst4, 1, 0, 0, 0, 84) // ICMP
	b := bytes.Clone(a)
	copy(b[20:28], []byte{8, 0, 1, 2, 3, 4, 5, 6}) // echo header
	if qdHash(a) != qdHash(b) {
		t.Errorf("ICMP payload changes the hash")
	}
}

func TestFlowHashIPv6(t *testing.T) {
	plain := qdIPv6(qdSrc6, qdDst6, 17, 1000, 53, 0, 100)
	h := qdHash(plain)
	if qdHash(qdIPv6(qdSrc6, qdDst6, 17, 1000, 54, 0, 100)) == h {
		t.Errorf("IPv6 ports do not reach the hash")
	}
	if qdHash(qdIPv6(qdSrc6, [16]byte{0x20, 0x01, 15: 2}, 17, 1000, 53, 0, 100)) == h {
		t.Errorf("the high half of the destination does not reach the hash")
	}

	// Hop-by-hop (8 bytes) and destination options (16 bytes) before UDP:
	// the same flow.
	ext := qdIPv6(qdSrc6, qdDst6, 0, 0, 0, 0, 40+8+16+8)
	ext[40], ext[41] = 60, 0 // hop-by-hop -> dest opts, 8 bytes
	ext[48], ext[49] = 17, 1 // dest opts -> UDP, 16 bytes
	binary.BigEndian.PutUint16(ext[64:66], 1000)
	binary.BigEndian.PutUint16(ext[66:68], 53)
	if got := qdHash(ext); got != h {
		t.Errorf("UDP behind extension headers: hash %#x, want %#x", got, h)
	}

	// Fragments: first (offset 0, M) and a later one hash together.
	frag := func(offM uint16, sport, dport uint16) []byte {
		b := qdIPv6(qdSrc6, qdDst6, 44, 0, 0, 0, 40+8+8)
		b[40] = 17
		binary.BigEndian.PutUint16(b[42:44], offM)
		binary.BigEndian.PutUint16(b[48:50], sport)
		binary.BigEndian.PutUint16(b[50:52], dport)
		return b
	}
	first, later := frag(1, 1000, 53), frag(1480, 0xdead, 0xbeef)
	if a, b := qdHash(first), qdHash(later); a != b {
		t.Errorf("IPv6 fragments of one datagram hash apart: %#x, %#x", a, b)
	}
	// An atomic fragment (offset 0, no M) is a whole datagram.
	if got := qdHash(frag(0, 1000, 53)); got != h {
		t.Errorf("atomic fragment: hash %#x, want the flow's %#x", got, h)
	}
}

func TestFlowHashCache(t *testing.T) {
	p := &Packet{Data: qdIPv4(qdSrc4, qdDst4, 6, 1, 2, 0, 60)}
	h := flowHash(p, qdSeed)
	if h == 0 || p.hash != h {
		t.Fatalf("flowHash = %#x, cached %#x", h, p.hash)
	}
	p.Data[12] ^= 0xff // the cache wins: the hash is computed once
	if got := flowHash(p, qdSeed); got != h {
		t.Errorf("second call: %#x, want the cached %#x", got, h)
	}
	if n := testing.AllocsPerRun(100, func() {
		p.hash = 0
		flowHash(p, qdSeed)
	}); n != 0 {
		t.Errorf("flowHash allocates %v times per call", n)
	}
}

// TestFlowHashGarbage checks that what is not IP shares one hash per seed.
func TestFlowHashGarbage(t *testing.T) {
	h := qdHash(nil)
	for _, b := range [][]byte{{}, {0x45}, make([]byte, 19), {0x60, 1, 2}, bytes.Repeat([]byte{0xff}, 80)} {
		if got := qdHash(b); got != h {
			t.Errorf("% x: hash %#x, want the garbage hash %#x", b, got, h)
		}
	}
}

// TestFlowHashSpread checks that many flows spread evenly over FQ-CoDel's
// buckets: with n flows over k buckets the counts are roughly Poisson with
// mean n/k; a bucket over mean + 6 sd would mean a bad hash.
func TestFlowHashSpread(t *testing.T) {
	const flows, buckets = 20480, 1024
	var count [buckets]int
	rng := rand.New(rand.NewPCG(3, 4))
	for range flows {
		var src, dst [4]byte
		binary.BigEndian.PutUint32(src[:], 0x0a000000|rng.Uint32N(256))
		binary.BigEndian.PutUint32(dst[:], 0x0a010001)
		h := qdHash(qdIPv4(src, dst, 6, uint16(rng.Uint32()), 443, 0, 40))
		count[uint64(h)*buckets>>32]++
	}
	limit := 20 + 6*4.48 // mean 20, sd sqrt(20)
	for i, c := range count {
		if float64(c) > limit || c == 0 {
			t.Errorf("bucket %d holds %d flows (mean 20)", i, c)
		}
	}
}

// FuzzFlowHash feeds flowHash arbitrary bytes: it must never panic, never
// return 0, and give the same hash for the same bytes.
func FuzzFlowHash(f *testing.F) {
	f.Add(qdIPv4(qdSrc4, qdDst4, 17, 1, 2, 0, 28), uint64(1))
	f.Add(qdIPv4(qdSrc4, qdDst4, 6, 1, 2, 0, 20), uint64(2))
	f.Add(qdIPv6(qdSrc6, qdDst6, 17, 1, 2, 0, 48), uint64(3))
	f.Add(append(qdIPv6(qdSrc6, qdDst6, 0, 0, 0, 0, 40), 44, 0, 0, 0, 0, 0, 0, 0, 17, 0, 0, 1), uint64(4))
	f.Add([]byte{0x4f}, uint64(0))
	f.Fuzz(func(t *testing.T, data []byte, seed uint64) {
		h := flowHash(&Packet{Data: data}, seed)
		if h == 0 {
			t.Fatal("flowHash returned 0")
		}
		if again := flowHash(&Packet{Data: bytes.Clone(data)}, seed); again != h {
			t.Fatalf("same bytes, hashes %#x and %#x", h, again)
		}
	})
}

func BenchmarkFlowHash(b *testing.B) {
	for _, bc := range []struct {
		name string
		data []byte
	}{
		{"ipv4", qdIPv4(qdSrc4, qdDst4, 6, 1000, 443, 0, 1500)},
		{"ipv6", qdIPv6(qdSrc6, qdDst6, 6, 1000, 443, 0, 1500)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			p := &Packet{Data: bc.data}
			b.ReportAllocs()
			for b.Loop() {
				p.hash = 0
				flowHash(p, qdSeed)
			}
		})
	}
}
