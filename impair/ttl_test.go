package impair

import (
	"encoding/binary"
	"testing"
)

// ipv4Checksum computes an IPv4 header's checksum from scratch.
func ipv4Checksum(h []byte) uint16 {
	var s uint32
	for i := 0; i < len(h); i += 2 {
		if i == 10 {
			continue
		}
		s += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	return ^uint16(s)
}

func TestDecrementTTL(t *testing.T) {
	for _, ttl := range []byte{64, 2, 255, 128} {
		b := []byte{0x45, 0, 0, 28, 0x12, 0x34, 0x40, 0, ttl, 17, 0, 0, 10, 99, 0, 1, 10, 99, 0, 2, 0, 1, 0, 7, 0, 8, 0, 0}
		binary.BigEndian.PutUint16(b[10:], ipv4Checksum(b[:20]))
		if !DecrementTTL(b) || b[8] != ttl-1 {
			t.Fatalf("TTL %d: now %d", ttl, b[8])
		}
		if got, want := binary.BigEndian.Uint16(b[10:]), ipv4Checksum(b[:20]); got != want {
			t.Errorf("TTL %d: checksum %#04x, want %#04x (computed again)", ttl, got, want)
		}
	}
	for _, ttl := range []byte{1, 0} {
		b := []byte{0x45, 0, 0, 20, 0, 0, 0, 0, ttl, 17, 0xab, 0xcd, 10, 99, 0, 1, 10, 99, 0, 2}
		if DecrementTTL(b) || b[8] != ttl || b[10] != 0xab {
			t.Errorf("TTL %d: decremented, or the packet changed: %v", ttl, b)
		}
	}
	v6 := make([]byte, 40)
	v6[0], v6[7] = 0x60, 64
	if !DecrementTTL(v6) || v6[7] != 63 {
		t.Errorf("IPv6 hop limit 64: now %d", v6[7])
	}
	v6[7] = 1
	if DecrementTTL(v6) || DecrementTTL(nil) || DecrementTTL([]byte{0x45, 0}) {
		t.Error("an expiring or short packet was decremented")
	}
}
