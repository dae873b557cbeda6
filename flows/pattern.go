package flows

import (
	"bytes"
	"fmt"
	"hash/fnv"
)

// patternPeriod is the period of a TCP flow's payload, in bytes: the largest
// prime below 2^16. A prime period keeps it from lining up with segment
// sizes, buffer sizes or any power of two, so data displaced by any amount a
// TCP stack might displace it by (a segment, a window, a buffer) lands on
// different bytes and is detected.
const patternPeriod = 65521

// pattern is the payload of a TCP flow: byte i of the stream is
// block[i%patternPeriod]. The block holds two periods so that any window of
// up to a period starting anywhere in the first one is contiguous, which
// lets the sender write and the receiver compare without copying. It is
// read-only once built.
type pattern struct {
	block []byte
}

// newPattern builds the pattern of the flow called name. Deriving it from
// the name means two flows crossed by mistake do not verify each other's
// data.
func newPattern(name string) *pattern {
	h := fnv.New64a()
	h.Write([]byte(name))
	x := h.Sum64()
	b := make([]byte, 2*patternPeriod)
	for i := 0; i < patternPeriod; {
		// splitmix64: fast, well mixed, and fixed for a given seed.
		x += 0x9e3779b97f4a7c15
		z := x
		z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
		z = (z ^ z>>27) * 0x94d049bb133111eb
		z ^= z >> 31
		for j := 0; j < 8 && i < patternPeriod; j++ {
			b[i] = byte(z >> (8 * j))
			i++
		}
	}
	copy(b[patternPeriod:], b[:patternPeriod])
	return &pattern{block: b}
}

// at returns the n bytes (n <= patternPeriod) of the stream at offset off.
// The slice aliases the pattern and must not be modified.
func (p *pattern) at(off int64, n int) []byte {
	s := int(off % patternPeriod)
	return p.block[s : s+n : s+n]
}

// byteAt returns the byte of the stream at offset off.
func (p *pattern) byteAt(off int64) byte { return p.block[off%patternPeriod] }

// verify compares b with the stream at offset off and returns the index in
// b of the first byte that differs, or -1 when b is right.
func (p *pattern) verify(off int64, b []byte) int {
	done := 0
	for len(b) > 0 {
		n := min(len(b), patternPeriod)
		want := p.at(off, n)
		if !bytes.Equal(b[:n], want) {
			for i := range n {
				if b[i] != want[i] {
					return done + i
				}
			}
		}
		b = b[n:]
		off += int64(n)
		done += n
	}
	return -1
}

// DataError reports a byte a TCP flow's receiver read that differs from
// what the sender wrote at that offset of the stream: data was corrupted,
// lost, duplicated or reordered on the way.
type DataError struct {
	Flow   string
	Offset int64 // offset of the byte in the stream, from 0
	Got    byte
	Want   byte
}

func (e *DataError) Error() string {
	return fmt.Sprintf("flows: %s: received byte at offset %d is 0x%02x, want 0x%02x (data corrupted or out of order)",
		e.Flow, e.Offset, e.Got, e.Want)
}
