package stack

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/netjam/netjam/third_party/gvisor/_pkg/buffer"
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

// TestLentBytesAreNeverWritten checks what gVisor patch 0010 must keep: a
// view of lent bytes (NewViewOf) and its clones read them in place, never
// write them (every way of writing to a view copies them to a chunk of
// the pool first), and the lender gets them back once, when the last
// view is released. It also checks that growing a view whose chunk
// another view shares leaves that view's bytes alone (patch 0009's Grow
// cleared them in place).
func TestLentBytesAreNeverWritten(t *testing.T) {
	orig := bytes.Repeat([]byte("lent bytes "), 100)
	lent := bytes.Clone(orig)
	l := &countingLender{}
	v := buffer.NewViewOf(lent, l)
	if !bytes.Equal(v.AsSlice(), orig) || v.AvailableSize() != 0 {
		t.Fatalf("the view shows %d bytes with room for %d more, want the %d lent and none", v.Size(), v.AvailableSize(), len(orig))
	}
	writes := []struct {
		name string
		f    func(*buffer.View)
	}{
		{"Write", func(v *buffer.View) { v.Write([]byte("x")) }},
		{"WriteAt", func(v *buffer.View) { v.WriteAt([]byte("xyz"), 5) }},
		{"Grow after CapLength", func(v *buffer.View) { v.CapLength(10); v.Grow(20) }},
		{"Reset and Write", func(v *buffer.View) { v.Reset(); v.Write([]byte("overwritten")) }},
	}
	for _, w := range writes {
		c := v.Clone()
		w.f(c)
		c.Release()
		if !bytes.Equal(lent, orig) {
			t.Fatalf("%s on a clone wrote the lent bytes", w.name)
		}
	}
	var b buffer.Buffer
	b.Append(v.Clone())
	b.Append(buffer.NewViewWithData([]byte("tail")))
	b.Truncate(int64(len(orig) - 50))
	b.Append(buffer.NewViewWithData([]byte("more")))
	if pv, ok := b.PullUp(0, 100); ok {
		copy(pv.AsSlice(), "written into a pulled-up view")
	}
	b.Release()
	if !bytes.Equal(lent, orig) {
		t.Fatal("a buffer holding the view wrote the lent bytes")
	}
	if l.released.Load() != 0 {
		t.Fatalf("given back %d times while a view of the bytes is held", l.released.Load())
	}
	// The last writer, on the view itself.
	w := writes[2]
	w.f(v)
	if !bytes.Equal(lent, orig) {
		t.Fatalf("%s on the view wrote the lent bytes", w.name)
	}
	if l.released.Load() != 1 {
		t.Fatalf("given back %d times once no view of the bytes is left, want once", l.released.Load())
	}
	v.Release()
	if l.released.Load() != 1 {
		t.Fatalf("given back %d times, want once", l.released.Load())
	}

	pooled := buffer.NewViewWithData(orig)
	shared := pooled.Clone()
	pooled.CapLength(10)
	pooled.Grow(20)
	if !bytes.Equal(shared.AsSlice(), orig) {
		t.Fatal("growing a view cleared the bytes of another view of its chunk")
	}
	pooled.Release()
	shared.Release()
}

// BenchmarkInboundSegment is the cost of putting a 64 KiB segment, whole
// or as the 12 KiB parts a 10 Gbit/s path cuts it into, into gVisor
// buffers (inbound): not a TCP segment (one view of the whole, which
// gVisor patch 0009 no longer clears first), a TCP segment copied (its
// headers in a view of their own, then its payload), and a TCP segment
// whose payload is lent (gVisor patch 0010: only the headers copied).
func BenchmarkInboundSegment(b *testing.B) {
	for _, n := range []int{64 << 10, 12 << 10} {
		raw := make([]byte, n)
		raw[0] = 0x45                              // not TCP
		seg := runSegment(false, min(n, 65535)-52) // an IPv4 packet's largest
		var l countingLender
		for _, c := range []struct {
			name string
			pkt  []byte
			own  Lender
		}{{"raw", raw, nil}, {"tcp-copied", seg, nil}, {"tcp-lent", seg, &l}} {
			b.Run(fmt.Sprintf("%dKiB/%s", n>>10, c.name), func(b *testing.B) {
				b.SetBytes(int64(n))
				for b.Loop() {
					buf, _ := inbound(c.pkt, c.own, true)
					buf.Release()
				}
			})
		}
	}
}
