package stack

import (
	"bytes"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/netjam/netjam/clock"
	"github.com/netjam/netjam/hostcfg"
	"github.com/netjam/netjam/netif"
	"github.com/netjam/netjam/third_party/gvisor/_pkg/tcpip"
	csum "github.com/netjam/netjam/third_party/gvisor/_pkg/tcpip/checksum"
	"github.com/netjam/netjam/third_party/gvisor/_pkg/tcpip/header"
)

// gsoLink is one direction between two hosts with segmentation offload:
// each packet goes whole into the far host, counted as its segments,
// with its checksum field scrambled when its sender left it partial
// (whoever completes it must ignore what it holds).
type gsoLink struct {
	to          atomic.Pointer[Host]
	whole, segs atomic.Uint64
	mu          sync.Mutex
	last        []byte // the last TCP segment with a payload, completed
}

func (l *gsoLink) output(pkt [][]byte, g netif.GSO) {
	p := bytes.Join(pkt, nil)
	n := 1
	if hl := tcpHeadersLen(p, len(p)); hl > 0 && g.MSS > 0 && len(p)-hl > g.MSS {
		n = (len(p) - hl + g.MSS - 1) / g.MSS
		l.whole.Add(1)
	}
	l.segs.Add(uint64(n))
	if hl := tcpHeadersLen(p, len(p)); hl > 0 && g.NeedsCsum {
		if hl < len(p) {
			c := bytes.Clone(p)
			completeTCPChecksum(c[:hl], c[hl:])
			l.mu.Lock()
			l.last = c
			l.mu.Unlock()
		}
		tcp := p[hl-tcpLen(p, hl):]
		tcp[16], tcp[17] = 0xde, 0xad
	}
	l.to.Load().InjectSegments(p, n, g.NeedsCsum)
}

// tcpLen returns the TCP header length of p, whose IP and TCP headers
// end at hl.
func tcpLen(p []byte, hl int) int {
	ipLen := 40
	if p[0]>>4 == 4 {
		ipLen = int(p[0]&0x0f) * 4
	}
	return hl - ipLen
}

// TestHostTakesLargeSegmentsWhole: a TCP transfer between two hosts whose
// large segments (GSO) go whole into the receiver, with the checksums
// their senders left partial scrambled: every byte arrives, the receiver
// counts each segment, and finds no checksum error; a segment with a
// final but wrong checksum is still dropped as one.
func TestHostTakesLargeSegmentsWhole(t *testing.T) {
	for _, fam := range []family{v4, v6} {
		t.Run(fam.name, func(t *testing.T) {
			var ab, ba gsoLink
			mk := func(name string, addr netip.Prefix, out *gsoLink) *Host {
				h, err := NewHost(HostConfig{Name: name, Addrs: []netip.Prefix{addr}, MTU: 1500, Clock: clock.Real{},
					Seed: 1, SACK: true, OutputGSO: out.output})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { h.Close() })
				return h
			}
			a, b := mk("a", fam.a, &ab), mk("b", fam.b, &ba)
			ab.to.Store(b)
			ba.to.Store(a)
			transfer(t, a, b, netip.AddrPortFrom(fam.b.Addr(), 5001), payload(4<<20, 3), hostcfg.TCPOptions{})
			st := b.Stats()
			if ab.whole.Load() == 0 {
				t.Fatal("no segment larger than the MTU was sent")
			}
			if st.InPackets != ab.segs.Load() {
				t.Errorf("b counted %d packets in; %d segments were sent to it", st.InPackets, ab.segs.Load())
			}
			if st.ChecksumErrors+st.Malformed > 0 {
				t.Errorf("b found %d checksum errors and %d malformed packets", st.ChecksumErrors, st.Malformed)
			}
			ab.mu.Lock()
			bad := ab.last
			ab.mu.Unlock()
			bad[len(bad)-1] ^= 0x40
			// To an endpoint: gVisor checks the checksum of a segment
			// for a port with none only over IPv4.
			l, err := b.ListenTCP(5001, hostcfg.TCPOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			b.InjectSegments(bad, 1, false)
			waitFor(t, "the bad segment counted", func() bool { return b.Stats().ChecksumErrors == 1 })
			if fam.name != "ipv4" {
				return
			}
			// A partial segment's TCP checksum is taken as checked, but
			// not its IPv4 header's: one that fails it is still dropped.
			bad[len(bad)-1] ^= 0x40
			bad[10] ^= 0x01
			before := b.Stats().Malformed
			b.InjectSegments(bad, 1, true)
			if st := b.Stats(); st.Malformed != before+1 || st.ChecksumErrors != 1 {
				t.Errorf("a partial segment with a broken IPv4 header: malformed %d -> %d, checksum errors %d", before, st.Malformed, st.ChecksumErrors)
			}
		})
	}
}

// completeTCPChecksum stores the TCP checksum of the segment whose IP and
// TCP headers are hdr and whose payload is payload, ignoring what its
// checksum field held.
func completeTCPChecksum(hdr, payload []byte) {
	var src, dst tcpip.Address
	ipLen := header.IPv6MinimumSize
	if hdr[0]>>4 == 4 {
		ip := header.IPv4(hdr)
		src, dst, ipLen = ip.SourceAddress(), ip.DestinationAddress(), int(ip.HeaderLength())
	} else {
		ip := header.IPv6(hdr)
		src, dst = ip.SourceAddress(), ip.DestinationAddress()
	}
	tcp := header.TCP(hdr[ipLen:])
	tcp.SetChecksum(0)
	sum := header.PseudoHeaderChecksum(header.TCPProtocolNumber, src, dst, uint16(len(tcp)+len(payload)))
	sum = csum.Checksum(tcp, sum)
	sum = csum.Checksum(payload, sum)
	tcp.SetChecksum(^sum)
}
