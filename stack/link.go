package stack

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/netjam/netjam/third_party/gvisor/_pkg/tcpip"
	"github.com/netjam/netjam/third_party/gvisor/_pkg/tcpip/header"
	"github.com/netjam/netjam/third_party/gvisor/_pkg/tcpip/stack"

	"github.com/netjam/netjam/netif"
)

// link is the Host's NIC as gVisor sees it: a stack.LinkEndpoint with no
// link header and no address resolution, like a TUN device. Outbound
// packets go straight to the Output callback on the sending goroutine;
// inbound packets come from Host.Inject. No goroutine, channel or queue of
// its own: the emulated path behind Output does the queueing, with its own
// bounds, so the link adds no latency or drops of its own.
//
// gVisor's link/channel endpoint would add a goroutine and a channel hop
// per packet; avoiding them is the reason for this type.
type link struct {
	output func([][]byte)
	// outputGSO, when not nil, replaces output and makes the link offer
	// host GSO (see HostConfig.OutputGSO).
	outputGSO netif.Output
	// gsoWhen, when not nil, says whether a connection made now uses
	// host GSO (see HostConfig.GSOWhen).
	gsoWhen func() bool
	// outputHeld, when not nil, takes the TCP segments other than
	// resets and may block (see HostConfig.OutputHeld).
	outputHeld netif.Output
	mtu        atomic.Uint32

	// disp is the dispatcher gVisor attached, nil before Attach and after
	// the NIC is removed. Inject loads it on every packet.
	disp atomic.Pointer[dispatcherBox]

	// gate counts calls in flight through the link in either direction;
	// shut sets its shutBit. Once shut, the link drops what it is
	// given, so Output is never called after Host.Close returns.
	gate atomic.Int64

	// scratch recycles the [][]byte handed to Output: the slice of views
	// of one packet, so writing a packet allocates nothing.
	scratch sync.Pool

	outPackets, outBytes, outDropped atomic.Uint64
}

// dispatcherBox wraps the interface so it can live in an atomic.Pointer.
type dispatcherBox struct{ d stack.NetworkDispatcher }

const shutBit = int64(1) << 62

var (
	_ stack.LinkEndpoint       = (*link)(nil)
	_ stack.QueueingDiscipline = (*link)(nil)
	_ stack.GSOEndpoint        = (*link)(nil)
)

// GSOMaxSize is the largest segment a host with OutputGSO sends: what
// fits, with its headers, in an IP packet (IPv4's total length is 16
// bits).
const GSOMaxSize = netif.MaxGSOPacket - 60 - 60

func newLink(mtu uint32, output func([][]byte), outputGSO netif.Output, gsoWhen func() bool) *link {
	l := &link{output: output, outputGSO: outputGSO, gsoWhen: gsoWhen}
	l.mtu.Store(mtu)
	l.scratch.New = func() any {
		s := make([][]byte, 0, 4)
		return &s
	}
	return l
}

// enter admits one call through the link; it reports false once the link
// is shut. Every successful enter is paired with exit.
func (l *link) enter() bool {
	if l.gate.Add(1)&shutBit != 0 {
		l.gate.Add(-1)
		return false
	}
	return true
}

func (l *link) exit() { l.gate.Add(-1) }

// shut stops the link in both directions and waits for the calls in flight
// to return. They do so promptly: Output must not block, OutputHeld waits
// only for what never waits for the host, and an Inject in flight only
// runs gVisor's inbound path (which may itself send through Output).
func (l *link) shut() {
	for {
		g := l.gate.Load()
		if g&shutBit != 0 || l.gate.CompareAndSwap(g, g|shutBit) {
			break
		}
	}
	for l.gate.Load() != shutBit {
		time.Sleep(50 * time.Microsecond)
	}
}

// dispatcher returns the attached dispatcher or nil.
func (l *link) dispatcher() stack.NetworkDispatcher {
	if b := l.disp.Load(); b != nil {
		return b.d
	}
	return nil
}

// WritePacket implements stack.QueueingDiscipline: the link is also its
// NIC's queueing discipline, one that queues nothing. gVisor's default
// discipline wraps every packet in a one-element PacketBufferList to call
// WritePackets, which allocates per packet; taking the packet straight
// from the NIC avoids that. Queueing belongs to the emulated path.
func (l *link) WritePacket(pkt *stack.PacketBuffer) tcpip.Error {
	if !l.enter() {
		// A shut link behaves like an unplugged cable: the packet is
		// lost, not refused, so gVisor neither retries nor reports it.
		l.outDropped.Add(1)
		return nil
	}
	defer l.exit()
	sp := l.scratch.Get().(*[][]byte)
	*sp = l.write(pkt, (*sp)[:0])
	l.scratch.Put(sp)
	return nil
}

// WritePackets implements stack.LinkWriter. With the link as its own
// queueing discipline gVisor does not call it; it is there for the
// interface, and behaves as WritePacket for each packet.
func (l *link) WritePackets(pkts stack.PacketBufferList) (int, tcpip.Error) {
	for _, pkt := range pkts.AsSlice() {
		l.WritePacket(pkt)
	}
	return pkts.Len(), nil
}

// write passes pkt to Output as the views that make it up, from the start
// of its network header: no copy, no allocation (s is scratch space for
// the slice of views, returned emptied for reuse). The packet stays owned
// by the caller, who releases it, as with gVisor's own link endpoints.
func (l *link) write(pkt *stack.PacketBuffer, s [][]byte) [][]byte {
	views, off := pkt.AsViewList()
	size := 0
	for v := views.Front(); v != nil; v = v.Next() {
		b := v.AsSlice()
		if off >= len(b) {
			off -= len(b)
			continue
		}
		b = b[off:]
		off = 0
		s = append(s, b)
		size += len(b)
	}
	l.send(s, size, l.gso(pkt, s), mayHold(pkt))
	clear(s) // hold no reference to packet memory in the pool
	return s[:0]
}

// send counts pkt, size bytes, and hands it to OutputHeld when hold and
// the host has one, else to OutputGSO with g, else to Output.
func (l *link) send(pkt [][]byte, size int, g netif.GSO, hold bool) {
	l.outPackets.Add(1)
	l.outBytes.Add(uint64(size))
	switch {
	case hold && l.outputHeld != nil:
		l.outputHeld(pkt, g)
	case l.outputGSO != nil:
		l.outputGSO(pkt, g)
	default:
		l.output(pkt)
	}
}

// mayHold reports whether pkt may go to outputHeld: a TCP segment other
// than a reset. gVisor sends those only from goroutines that no packet
// path waits for (see HostConfig.OutputHeld); a reset may come from
// Inject's, answering a segment no connection takes.
func mayHold(pkt *stack.PacketBuffer) bool {
	if pkt.TransportProtocolNumber != header.TCPProtocolNumber {
		return false
	}
	h := pkt.TransportHeader().Slice()
	return len(h) >= header.TCPMinimumSize && header.TCP(h).Flags()&header.TCPFlagRst == 0
}

// gso returns pkt's description for OutputGSO (s, its views, from the
// network header on): zero without OutputGSO.
//
// gVisor's TCP leaves the checksum of every segment of an endpoint on a
// GSO route partial, its ACKs included, and marks each with the
// endpoint's GSOOptions (the rule gVisor's own IP and NAT code read); the
// other TCP packets (a connection made without GSO, see GSOWhen; a reset
// for no endpoint) carry final checksums.
func (l *link) gso(pkt *stack.PacketBuffer, s [][]byte) netif.GSO {
	o := pkt.GSOOptions
	if l.outputGSO == nil || pkt.TransportProtocolNumber != header.TCPProtocolNumber || o.Type == stack.GSONone || !o.NeedsCsum || len(s) == 0 || len(s[0]) == 0 {
		return netif.GSO{}
	}
	g := netif.GSO{NeedsCsum: true, CsumStart: header.IPv6MinimumSize, CsumOffset: header.TCPChecksumOffset}
	if s[0][0]>>4 == 4 {
		g.CsumStart = int(s[0][0]&0x0f) * 4
	}
	if o.Type == stack.GSOTCPv4 || o.Type == stack.GSOTCPv6 {
		g.MSS = int(o.MSS)
	}
	return g
}

// GSOMaxSize implements stack.GSOEndpoint.
func (l *link) GSOMaxSize() uint32 { return GSOMaxSize }

// SupportedGSO implements stack.GSOEndpoint: host GSO (segments split by
// whoever receives them) with OutputGSO, none without, or while gsoWhen
// says none. gVisor asks when a connection is made.
func (l *link) SupportedGSO() stack.SupportedGSO {
	if l.outputGSO != nil && (l.gsoWhen == nil || l.gsoWhen()) {
		return stack.HostGSOSupported
	}
	return stack.GSONotSupported
}

// MTU implements stack.LinkEndpoint.
func (l *link) MTU() uint32 { return l.mtu.Load() }

// SetMTU implements stack.LinkEndpoint.
func (l *link) SetMTU(mtu uint32) { l.mtu.Store(mtu) }

// MaxHeaderLength implements stack.LinkEndpoint: there is no link header.
func (*link) MaxHeaderLength() uint16 { return 0 }

// LinkAddress implements stack.LinkEndpoint: an IP-only link has none.
func (*link) LinkAddress() tcpip.LinkAddress { return "" }

// SetLinkAddress implements stack.LinkEndpoint; it is ignored.
func (*link) SetLinkAddress(tcpip.LinkAddress) {}

// Capabilities implements stack.LinkEndpoint. The link claims none:
//   - no CapabilityResolutionRequired, so gVisor sends without ARP or NDP;
//   - no checksum offload, so outbound packets carry real checksums (the
//     path may corrupt them, a TUN may carry them to a real host) and
//     inbound checksums are verified, so corruption shows up as drops.
//   - GSO only through GSOEndpoint, with OutputGSO (see there).
func (*link) Capabilities() stack.LinkEndpointCapabilities { return 0 }

// Attach implements stack.LinkEndpoint; d is nil when the NIC is removed.
func (l *link) Attach(d stack.NetworkDispatcher) {
	if d == nil {
		l.disp.Store(nil)
		return
	}
	l.disp.Store(&dispatcherBox{d})
}

// IsAttached implements stack.LinkEndpoint.
func (l *link) IsAttached() bool { return l.disp.Load() != nil }

// Wait implements stack.LinkEndpoint: the link has no goroutines.
func (*link) Wait() {}

// ARPHardwareType implements stack.LinkEndpoint; as for a TUN device.
func (*link) ARPHardwareType() header.ARPHardwareType { return header.ARPHardwareNone }

// AddHeader implements stack.LinkEndpoint: there is no link header.
func (*link) AddHeader(*stack.PacketBuffer) {}

// ParseHeader implements stack.LinkEndpoint: there is no link header.
func (*link) ParseHeader(*stack.PacketBuffer) bool { return true }

// Close implements stack.LinkEndpoint and stack.QueueingDiscipline;
// Host.Close has shut the link.
func (*link) Close() {}

// SetOnCloseAction implements stack.LinkEndpoint; there is nothing to
// destroy.
func (*link) SetOnCloseAction(func()) {}
