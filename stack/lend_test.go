package stack

import (
	"bytes"
	"net/netip"
	"sync"
	"testing"

	"github.com/netjam/netjam/hostcfg"
	"github.com/netjam/netjam/netif"
)

// lendingHosts returns two hosts wired back to back, where every packet
// from a to b is lent to b (InjectLent) from a buffer of its own, each
// with a countingLender (which scribbles over its bytes when given back,
// as a pool reusing them would) that lenders lists. With gso, both hosts
// have segmentation offload (HostConfig.OutputGSO): a's large segments
// are lent whole with their checksums partial, as the emulator lends the
// kernel's through TUN mode.
func lendingHosts(t *testing.T, gso bool) (a, b *Host, lenders func() []*countingLender) {
	t.Helper()
	var mu sync.Mutex
	var lent []*countingLender
	mk := func(name string, addr netip.Prefix, seed uint64, hc HostConfig) *Host {
		hc.Name, hc.Addrs, hc.MTU, hc.Clock, hc.Seed, hc.SACK = name, []netip.Prefix{addr}, 1500, realClock, seed, true
		h, err := NewHost(hc)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close() })
		return h
	}
	lend := func(pkt [][]byte, g netif.GSO) {
		buf := bytes.Join(pkt, nil)
		segs := 1
		if hl := tcpHeadersLen(buf, len(buf)); hl > 0 && g.MSS > 0 {
			segs = max(1, (len(buf)-hl+g.MSS-1)/g.MSS)
		}
		l := &countingLender{bytes: buf}
		mu.Lock()
		lent = append(lent, l)
		mu.Unlock()
		b.InjectLent(buf, l, segs, g.NeedsCsum)
	}
	// A host takes a partial checksum as checked only on a link with
	// offload, as both ends of a GSO pair have.
	back := func(pkt [][]byte, g netif.GSO) { a.InjectSegments(bytes.Join(pkt, nil), 1, g.NeedsCsum) }
	if gso {
		a = mk("a", v4.a, 1, HostConfig{OutputGSO: lend})
		b = mk("b", v4.b, 2, HostConfig{OutputGSO: back})
	} else {
		a = mk("a", v4.a, 1, HostConfig{Output: func(pkt [][]byte) { lend(pkt, netif.GSO{}) }})
		b = mk("b", v4.b, 2, HostConfig{Output: func(pkt [][]byte) { back(pkt, netif.GSO{}) }})
	}
	return a, b, func() []*countingLender {
		mu.Lock()
		defer mu.Unlock()
		return append([]*countingLender(nil), lent...)
	}
}

// TestTransferOverLentPackets: a TCP transfer whose every packet reaches
// its receiver lent, MSS-sized or as large segments with partial
// checksums: every byte arrives, nothing is taken for malformed or a
// checksum error (a host that read a packet's headers after giving it
// back found the lender's scribbles there, and dropped every pure ACK of
// a GSO sender), and every packet is given back exactly once.
func TestTransferOverLentPackets(t *testing.T) {
	for _, gso := range []bool{false, true} {
		t.Run(map[bool]string{false: "mss", true: "gso"}[gso], func(t *testing.T) {
			a, b, lenders := lendingHosts(t, gso)
			transfer(t, a, b, netip.AddrPortFrom(v4.b.Addr(), 5001), payload(4<<20, 8), hostcfg.TCPOptions{})
			if st := b.Stats(); st.ChecksumErrors+st.Malformed > 0 {
				t.Errorf("the receiver found %d checksum errors and %d malformed packets", st.ChecksumErrors, st.Malformed)
			}
			large := 0
			waitFor(t, "every lent packet given back", func() bool {
				large = 0
				for _, l := range lenders() {
					if l.released.Load() != 1 {
						return false
					}
					if len(l.bytes) > 1500 {
						large++
					}
				}
				return true
			})
			for i, l := range lenders() {
				if n := l.released.Load(); n > 1 {
					t.Errorf("packet %d given back %d times", i, n)
				}
			}
			if gso && large == 0 {
				t.Error("no segment larger than the MTU was lent")
			}
		})
	}
}
