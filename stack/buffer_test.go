package stack

import (
	"bytes"
	"fmt"
	"testing"

	"gvisor.dev/gvisor/pkg/buffer"
)

// TestPooledBuffersShowNoStaleBytes checks what gVisor patch 0009 must
// keep: a pooled chunk is no longer cleared when it is taken, so every
// way a view exposes bytes nobody wrote (Grow, NewViewSize, GrowTo, a
// view grown past its chunk) must clear them, or a packet would carry
// what another connection's packet left in the chunk.
func TestPooledBuffersShowNoStaleBytes(t *testing.T) {
	for _, size := range []int{64, 100, 1500, 9000, 40000} {
		dirty := bytes.Repeat([]byte{0xab}, size)
		// Dirty the pool's chunks of this size, many times over: a
		// sync.Pool hands chunks back from per-P caches.
		for range 20 {
			var vs []*buffer.View
			for range 8 {
				vs = append(vs, buffer.NewViewWithData(dirty))
			}
			for _, v := range vs {
				v.Release()
			}
			check := func(what string, b []byte) {
				t.Helper()
				if i := bytes.IndexFunc(b, func(r rune) bool { return r != 0 }); i >= 0 {
					t.Fatalf("size %d: %s shows a byte nobody wrote at %d of %d", size, what, i, len(b))
				}
			}
			v := buffer.NewViewSize(size)
			check("NewViewSize", v.AsSlice())
			v.Release()

			v = buffer.NewView(size)
			v.Write(dirty[:size/4])
			v.Grow(size / 2)
			check("Grow after Write", v.AsSlice()[size/4:])
			v.Release()

			v = buffer.NewViewWithData(dirty[:size/2])
			v.Grow(2 * size) // past its chunk: a new one
			check("Grow past the chunk", v.AsSlice()[size/2:])
			v.Release()

			for _, zero := range []bool{true, false} {
				var b buffer.Buffer
				b.GrowTo(int64(size), zero)
				check("GrowTo", b.Flatten())
				b.Release()
			}
		}
	}
}

// BenchmarkInboundSegment is the cost of putting a 64 KiB segment, whole
// or as the 12 KiB parts a 10 Gbit/s path cuts it into, into gVisor
// buffers (inbound), which gVisor patch 0009 no longer clears first.
func BenchmarkInboundSegment(b *testing.B) {
	for _, n := range []int{64 << 10, 12 << 10} {
		pkt := make([]byte, n)
		pkt[0] = 0x45 // not TCP: one view of the whole
		b.Run(fmt.Sprintf("%dKiB", n>>10), func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				buf, _ := inbound(pkt, false)
				buf.Release()
			}
		})
	}
}
