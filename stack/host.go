package stack

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/netjam/netjam/third_party/gvisor/_pkg/buffer"
	"github.com/netjam/netjam/third_party/gvisor/_pkg/tcpip"
	"github.com/netjam/netjam/third_party/gvisor/_pkg/tcpip/header"
	"github.com/netjam/netjam/third_party/gvisor/_pkg/tcpip/network/ipv4"
	"github.com/netjam/netjam/third_party/gvisor/_pkg/tcpip/network/ipv6"
	"github.com/netjam/netjam/third_party/gvisor/_pkg/tcpip/stack"
	"github.com/netjam/netjam/third_party/gvisor/_pkg/tcpip/transport/tcp"
	"github.com/netjam/netjam/third_party/gvisor/_pkg/tcpip/transport/udp"
	"go.uber.org/zap"

	"github.com/netjam/netjam/clock"
	"github.com/netjam/netjam/hostcfg"
	"github.com/netjam/netjam/netif"
)

// HostConfig describes a Host. NewHost validates it and reports every
// problem at once.
type HostConfig struct {
	// Name names the host in logs and errors ("client").
	Name string
	// Addrs are the NIC's addresses with their prefixes, IPv4 and/or IPv6
	// (10.0.0.1/24, fd00::1/64). The host has a default route through the
	// NIC for each family it has an address of; the prefix length only
	// decides which addresses gVisor treats as on-link, which changes
	// nothing on a link without neighbour resolution.
	Addrs []netip.Prefix
	// MTU is the largest IP packet the host sends, netif.MinMTU..netif.MaxMTU
	// (at least netif.MinMTUIPv6 with an IPv6 address). TCP's MSS follows from it.
	MTU int
	// Clock is the run's clock. gVisor takes all its time from it
	// (stack.Options.Clock), so a clock.Manual drives its timers too.
	Clock clock.Clock
	// Seed seeds every random choice gVisor makes through the stack's
	// random sources: initial sequence numbers, TCP timestamp offsets,
	// ephemeral ports, hash seeds. Same seed, same choices.
	Seed uint64
	// SACK enables TCP selective acknowledgements (RFC 2018) for every
	// connection of the host. gVisor has the switch only for the whole
	// stack, not per socket; Linux enables SACK by default.
	SACK bool
	// Transparent lets the host take packets for any destination address,
	// not only its own: a Relay in transparent mode needs it (see
	// hostcfg.RelayConfig.Transparent). gVisor's promiscuous mode, which
	// that uses, contradicts its handling of packets to the host's own
	// addresses inside the stack (HandleLocal: in promiscuous mode every
	// source address looks like one of the host's, and every packet is
	// dropped as a martian), so a transparent host sends packets to its
	// own addresses to Output like any other.
	Transparent bool
	// Output is called with each IP packet the host sends, as slices whose
	// concatenation is the packet. The slices are valid only during the
	// call: the callee copies what it keeps. Output is called from many
	// goroutines at once and must not block; it may call Inject of any
	// host, including this one, but not Close. It is not called once Close
	// has returned.
	Output func(pkt [][]byte)
	// OutputGSO, when not nil, replaces Output and turns on segmentation
	// offload: the host's TCP then sends segments of up to GSOMaxSize
	// bytes that stand for several of GSO.MSS payload bytes each, and
	// leaves the checksums of its TCP segments partial, as it does for a
	// host NIC with TSO. Every packet comes with its GSO description:
	// every TCP packet has NeedsCsum (its checksum field may hold only the
	// pseudo-header's sum, or may be complete), and MSS when it stands for
	// several segments; others have a zero GSO. Whoever receives a TCP
	// packet computes its checksum (or splits it, which does). See
	// netif.Output for the rest of the contract.
	OutputGSO netif.Output
	// OutputHeld, when set, takes the host's TCP segments (all but
	// resets), and the datagrams its relay builds toward UDP clients, in
	// place of Output or OutputGSO, and unlike them may block:
	// it is called only on goroutines that may be held back until the
	// path below has room, as a Linux host's TCP is held back by the
	// queue below it (TCP Small Queues) rather than losing what it sends.
	// gVisor sends a connection's segments from the connection's
	// processor goroutine, from the application's calls and from its
	// timers, never from the goroutine calling Inject, which only queues
	// a segment for the processor; the relay's UDP datagrams are sent
	// from each session's own goroutine. Resets (sent from Inject for a
	// segment no connection takes) and the other packets gVisor sends
	// (ICMP replies, from Inject too; UDP, such as a relayed datagram too
	// large for the MTU, which gVisor fragments) still go to Output or
	// OutputGSO. A call blocked here holds its connection (gVisor's
	// endpoint lock), so what it waits for must never wait for one of the
	// host's connections, nor for Close; it may wait for the host's
	// Inject, which waits for neither. g is as for OutputGSO (zero
	// without it).
	OutputHeld netif.Output
	// GSOWhen, when set with OutputGSO, says whether a TCP connection made
	// now (dialed or accepted) segments its data itself or sends large
	// segments (as gVisor decides, once per connection): false, and the
	// connection sends MTU-sized packets with final checksums, as without
	// OutputGSO. For a path that would split every large segment anyway,
	// where a sender that hands over a window's worth of data in a few
	// calls outruns a path that takes it packet by packet.
	GSOWhen func() bool
	// Log is the logger; nil means none. The host names it "stack" and
	// adds its name; nothing is logged per packet.
	Log *zap.Logger
}

// Validate reports every invalid field of c, each as its own error.
func (c *HostConfig) Validate() error {
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if c.Name == "" {
		add("name: must not be empty")
	}
	if len(c.Addrs) == 0 {
		add("addrs: at least one address is required")
	}
	_, v6 := netif.CheckAddrs(c.Addrs, add)
	netif.CheckMTU(c.MTU, v6, add)
	if c.Clock == nil {
		add("clock: must be set")
	}
	if c.Output == nil && c.OutputGSO == nil {
		add("output: must be set")
	}
	return errors.Join(errs...)
}

// Host is one gVisor network stack with one NIC: the end of an emulated
// path. Its methods are safe for concurrent use.
type Host struct {
	name  string
	log   *zap.Logger
	s     *stack.Stack
	link  *link
	v4    bool // the host has an IPv4 address
	v6    bool // the host has an IPv6 address
	ccs   []string
	close sync.Once

	mu      sync.Mutex          // guards closed and closers
	closed  bool                // Close has begun
	closers map[closer]struct{} // every open endpoint the host made

	inPackets, inBytes, malformed, inDropped atomic.Uint64
	// mergedSegs counts the segments TCP packets standing for several
	// (a run merged on the way in, a large segment) brought beyond the
	// one gVisor counts each as (hostcfg.TCPStats.SegmentsReceived).
	mergedSegs atomic.Uint64

	// fwd holds the running Relay's forwarders, nil without one. The
	// transport handlers NewHost installs read it for each packet that
	// no endpoint of the host takes (see handleUnmatched).
	fwd atomic.Pointer[forwarders]
}

// forwarders are a Relay's gVisor forwarders.
type forwarders struct {
	relay *Relay
	tcp   *tcp.Forwarder
	udp   *udp.Forwarder
}

// closer is an endpoint wrapper the Host closes on Close.
type closer interface{ closeEndpoint() }

// nicID is the Host's only NIC.
const nicID tcpip.NICID = 1

// NewHost validates cfg and builds the host's stack, NIC, addresses and
// routes. The stack is running when NewHost returns (gVisor starts its TCP
// processor goroutines in stack.New); Close stops it.
func NewHost(cfg HostConfig) (*Host, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("stack: host %q: %w", cfg.Name, err)
	}
	log := cfg.Log
	if log == nil {
		log = zap.NewNop()
	}
	nets, transports := protocols()
	s := stack.New(stack.Options{
		NetworkProtocols:   nets,
		TransportProtocols: transports,
		Clock:              tcpipClockOf(cfg.Clock),
		// A packet to one of the host's own addresses is delivered
		// inside the stack, as Linux does, rather than sent to the path
		// (except on a transparent host: see HostConfig.Transparent).
		HandleLocal: !cfg.Transparent,
		RandSource:  newLockedSource(seedStream(cfg.Seed, "rand")),
		SecureRNG:   newLockedReader(seedStream(cfg.Seed, "secure")),
	})
	h := &Host{
		name:    cfg.Name,
		log:     log.Named("stack").With(zap.String("host", cfg.Name)),
		s:       s,
		link:    newLink(uint32(cfg.MTU), cfg.Output, cfg.OutputGSO, cfg.GSOWhen),
		closers: make(map[closer]struct{}),
	}
	h.link.outputHeld = cfg.OutputHeld
	if err := h.setup(cfg); err != nil {
		h.link.shut()
		s.Destroy()
		return nil, fmt.Errorf("stack: host %q: %w", cfg.Name, err)
	}
	h.log.Debug("host up", zap.Stringers("addrs", prefixes(cfg.Addrs)), zap.Int("mtu", cfg.MTU),
		zap.Bool("sack", cfg.SACK), zap.Strings("congestion_controls", h.ccs))
	return h, nil
}

func prefixes(ps []netip.Prefix) []fmt.Stringer {
	out := make([]fmt.Stringer, len(ps))
	for i, p := range ps {
		out[i] = p
	}
	return out
}

func (h *Host) setup(cfg HostConfig) error {
	if err := tune(h.s, cfg.SACK); err != nil {
		return err
	}
	if err := h.s.CreateNICWithOptions(nicID, h.link, stack.NICOptions{Name: cfg.Name, QDisc: h.link}); err != nil {
		return fmt.Errorf("creating NIC: %s", err)
	}
	var routes []tcpip.Route
	for _, p := range cfg.Addrs {
		a := p.Addr()
		proto, def := ipv4.ProtocolNumber, header.IPv4EmptySubnet
		if a.Is6() {
			proto, def = ipv6.ProtocolNumber, header.IPv6EmptySubnet
		}
		pa := tcpip.ProtocolAddress{
			Protocol:          proto,
			AddressWithPrefix: tcpip.AddressWithPrefix{Address: tcpipAddr(a), PrefixLen: p.Bits()},
		}
		if err := h.s.AddProtocolAddress(nicID, pa, stack.AddressProperties{}); err != nil {
			return fmt.Errorf("adding address %v: %s", p, err)
		}
		if a.Is4() && !h.v4 || a.Is6() && !h.v6 {
			routes = append(routes, tcpip.Route{Destination: def, NIC: nicID})
		}
		h.v4, h.v6 = h.v4 || a.Is4(), h.v6 || a.Is6()
	}
	h.s.SetRouteTable(routes)
	h.ccs = availableCC(h.s)
	// The transport handlers are installed here, before any packet can
	// arrive, because gVisor reads them without synchronization
	// (SetTransportProtocolHandler may only be called during
	// initialization). A Relay started later swaps its forwarders in
	// through fwd, an atomic pointer, whatever packets are in flight.
	h.s.SetTransportProtocolHandler(tcp.ProtocolNumber, func(id stack.TransportEndpointID, pkt *stack.PacketBuffer) bool {
		if f := h.fwd.Load(); f != nil {
			return f.tcp.HandlePacket(id, pkt)
		}
		return false // gVisor's own answer: a reset
	})
	h.s.SetTransportProtocolHandler(udp.ProtocolNumber, func(id stack.TransportEndpointID, pkt *stack.PacketBuffer) bool {
		if f := h.fwd.Load(); f != nil {
			return f.udp.HandlePacket(id, pkt)
		}
		return false // gVisor's own answer: ICMP port unreachable
	})
	return nil
}

// Name returns the host's name.
func (h *Host) Name() string { return h.name }

// Inject hands the host an IP packet arriving from the path. IPv4 or IPv6
// is told by the version nibble. pkt is copied (into gVisor's buffer pool)
// before Inject returns, so the caller keeps it. Inject checks the version
// and that the IP header's length fields fit in pkt; anything else wrong
// with the packet is gVisor's to find. Either way a malformed packet is
// counted in Stats().Malformed and dropped; Inject never panics on any
// input. After Close, packets are counted as Dropped.
//
// Inject runs gVisor's inbound path on the caller's goroutine, up to the
// point where TCP queues the segment for its processor; a reply the
// network layer makes at once (an ICMP echo reply, a TCP reset) goes to
// Output before Inject returns.
//
// On a Host with a Relay, a datagram of an open relayed UDP session goes
// to the session directly, checked as gVisor would check it (the relay's
// fast path), and waits (up to 100 ms) until the session has room for it:
// backpressure on the caller instead of a drop inside the relay (see the
// relay's UDP).
func (h *Host) Inject(pkt []byte) { h.InjectSegments(pkt, 1, false) }

// InjectSegments is Inject for a packet that stands for segs packets on
// the wire, as a NIC with receive offload (GRO) hands its host a TCP
// segment larger than the MTU: one that crossed the path whole from a
// sender with segmentation offload (see HostConfig.OutputGSO), or the
// segments of one connection that arrived together, merged. gVisor's TCP
// takes such a segment as it comes (its IP layer checks no MTU on what
// arrives) and acknowledges it as Linux acknowledges a GRO packet: once,
// for all its bytes, when it has processed what arrived. Stats counts it
// as segs packets (InPackets), as the path counted it.
//
// partial says pkt is a TCP segment whose checksum its sender left to be
// completed (segmentation and checksum offload: the field holds a partial
// sum, whatever it is). The host takes its TCP checksum as checked, as
// Linux takes a segment a local sender left partial (CHECKSUM_PARTIAL,
// across a veth or loopback): what the field holds is never read, and no
// pass is made over the payload to complete a sum only to verify it. Its
// IPv4 header checksum is still checked; a segment whose IPv4 header
// fails it is checked whole by gVisor, and dropped. It is ignored for any
// other packet.
func (h *Host) InjectSegments(pkt []byte, segs int, partial bool) {
	h.InjectLent(pkt, nil, segs, partial)
}

// Lender is what lends the host a packet's bytes (InjectLent,
// InjectRunLent): the host keeps them as they are, without a copy, until
// it calls Release, once; meanwhile the lender neither reads nor writes
// them. *impair.Packet is one (Release puts it back in its pool).
type Lender = buffer.Releaser

// InjectLent is InjectSegments for a packet whose bytes own lends the
// host (nil: InjectSegments, the bytes copied): the host keeps a TCP
// segment's payload in place, not copied, until gVisor is done with it
// (the relay, say, has read it), and gives every other packet back at
// once, copied as InjectSegments copies it. Either way own.Release is
// called once, perhaps before InjectLent returns, perhaps later on
// another goroutine; the caller must not touch own or pkt after the call.
//
// What the host keeps counts in gVisor's receive buffers as the payload
// does, so a lender should lend only bytes that fill most of the memory
// they hold (a 64 KiB buffer for a segment of 1 KiB would hold 64 times
// what the buffers count): the emulator lends a packet whose buffer is at
// most twice its length, and copies any other.
func (h *Host) InjectLent(pkt []byte, own Lender, segs int, partial bool) {
	proto, d, ok := h.arrive(pkt, len(pkt), segs)
	if !ok {
		giveBack(own)
		return
	}
	defer h.link.exit()
	if f := h.fwd.Load(); f != nil && f.relay.intercept(pkt) {
		giveBack(own)
		return // a relayed UDP session's datagram, handed to it
	}
	b, checked := inbound(pkt, own, partial)
	deliver(d, proto, b, checked)
}

// giveBack releases own, if any.
func giveBack(own Lender) {
	if own != nil {
		own.Release()
	}
}

// InjectRun is InjectSegments for a run of segments of one connection
// that arrived together, given as its parts instead of merged: the packet
// is run[0] followed by each further part, in order, and stands for segs
// packets on the wire; its TCP checksum is partial. The caller joins the
// headers in place (impair.JoinHeaders: run[0] holds the merged packet's
// IP and TCP headers, the first segment's payload after them) and passes
// each further segment's payload. The host gathers the parts into its own
// buffer, the one copy it makes of any packet (a merged packet built
// first and then copied again cost a pass over every byte), and takes its
// checksum as InjectSegments takes a partial one. The caller keeps the
// parts.
//
// What the host gets is byte for byte what InjectSegments gets for the
// parts joined, and it counts the same; headers that are not a TCP
// segment's within run[0] are taken as InjectSegments takes any other
// packet (gVisor's to find).
func (h *Host) InjectRun(run [][]byte, segs int) {
	h.InjectRunLent(run, nil, segs)
}

// InjectRunLent is InjectRun for parts whose bytes the lenders in own lend
// the host, own[i] run[i]'s (as InjectLent; own nil, or a nil own[i]: that
// part copied). Each part of a TCP segment's payload is kept in place,
// and run[0]'s headers are copied; each lender is released once, as
// InjectLent releases its one. own is the caller's again on return.
func (h *Host) InjectRunLent(run [][]byte, own []Lender, segs int) {
	if len(run) == 0 {
		h.InjectSegments(nil, segs, true)
		return
	}
	total := 0
	for _, p := range run {
		total += len(p)
	}
	proto, d, ok := h.arrive(run[0], total, segs)
	if !ok {
		for _, o := range own {
			giveBack(o)
		}
		return
	}
	defer h.link.exit()
	b, checked := inboundRun(run, own, total)
	deliver(d, proto, b, checked)
}

// arrive counts a packet of total bytes, standing for segs, whose first
// bytes are first, and checks it. It reports ok with the host's link
// entered (the caller exits it) and the dispatcher to deliver to; a
// packet it refuses is counted (Malformed, or Dropped once Close began).
func (h *Host) arrive(first []byte, total, segs int) (tcpip.NetworkProtocolNumber, stack.NetworkDispatcher, bool) {
	h.inPackets.Add(uint64(max(1, segs)))
	h.inBytes.Add(uint64(total))
	proto, ok := networkProtocol(first, total)
	if !ok {
		h.malformed.Add(1)
		return 0, nil, false
	}
	if !h.link.enter() {
		h.inDropped.Add(1)
		return 0, nil, false
	}
	d := h.link.dispatcher()
	if d == nil {
		h.link.exit()
		h.inDropped.Add(1)
		return 0, nil, false
	}
	if segs > 1 && carriesTCP(first, proto) {
		h.mergedSegs.Add(uint64(segs - 1))
	}
	return proto, d, true
}

// carriesTCP reports whether the IP packet whose first bytes are first
// carries TCP right after its header (no IPv6 extension header: a run
// netjam merges has none).
func carriesTCP(first []byte, proto tcpip.NetworkProtocolNumber) bool {
	if proto == ipv4.ProtocolNumber {
		return header.IPv4(first).Protocol() == uint8(header.TCPProtocolNumber)
	}
	return header.IPv6(first).NextHeader() == uint8(header.TCPProtocolNumber)
}

// deliver hands gVisor a packet whose bytes are b; checked, its
// checksums need no verifying (gVisor patch 0006 keeps the mark).
func deliver(d stack.NetworkDispatcher, proto tcpip.NetworkProtocolNumber, b buffer.Buffer, checked bool) {
	pb := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: b})
	pb.RXChecksumValidated = checked
	d.DeliverNetworkPacket(proto, pb)
	pb.DecRef()
}

// inbound copies pkt into a gVisor buffer, or lends its payload (own, see
// InjectLent), and reports whether its checksums count as checked: a
// partial TCP segment's whose IP header is sound (checkedPartial).
//
// A TCP segment's IP and TCP headers get a view of their own, a copy, its
// payload another: gVisor's inbound path takes a reference to the network
// header's view and then reads the header again, and reading from a view
// whose memory is shared (or lent) copies that memory first
// (buffer.PullUp), which for a whole 64 KiB segment in one view copied
// (and cleared) all of it. With the headers apart only they are copied,
// and the payload, never read so, can stay where it is.
func inbound(pkt []byte, own Lender, partial bool) (buffer.Buffer, bool) {
	hl := tcpHeadersLen(pkt, len(pkt))
	if hl == 0 {
		b := buffer.MakeWithData(pkt)
		giveBack(own) // after the copy
		return b, false
	}
	// Checked before the payload is appended: an empty one is given back
	// at once, and its lender may reuse the bytes.
	checked := partial && checkedPartial(pkt)
	b := buffer.MakeWithView(buffer.NewViewWithData(pkt[:hl]))
	appendPayload(&b, pkt[hl:], own)
	return b, checked
}

// appendPayload appends p to b: lent by own (nil: copied); an empty p is
// given back at once.
func appendPayload(b *buffer.Buffer, p []byte, own Lender) {
	switch {
	case len(p) == 0:
		giveBack(own)
	case own == nil:
		b.Append(buffer.NewViewWithData(p))
	default:
		b.Append(buffer.NewViewOf(p, own))
	}
}

// inboundRun is inbound for the packet that is the parts of run joined,
// total bytes long, with a partial checksum: the headers in a view of
// their own, each lent payload (own) in its own view, the others gathered
// into one view each stretch.
func inboundRun(run [][]byte, own []Lender, total int) (buffer.Buffer, bool) {
	lender := func(i int) Lender {
		if i < len(own) {
			return own[i]
		}
		return nil
	}
	hl := tcpHeadersLen(run[0], total)
	if hl == 0 {
		var b buffer.Buffer
		for i, p := range run {
			if len(p) > 0 {
				b.Append(buffer.NewViewWithData(p))
			}
			giveBack(lender(i))
		}
		return b, false
	}
	checked := checkedPartial(run[0]) // before run[0] may be given back
	b := buffer.MakeWithView(buffer.NewViewWithData(run[0][:hl]))
	var pv *buffer.View // the stretch of copied parts being gathered
	for i, p := range run {
		if i == 0 {
			p = p[hl:]
		}
		o := lender(i)
		if len(p) == 0 {
			giveBack(o) // nothing to keep, and a stretch goes on
			continue
		}
		if o != nil {
			if pv != nil {
				b.Append(pv)
				pv = nil
			}
			appendPayload(&b, p, o)
			continue
		}
		if pv == nil {
			n := copiedRest(run[i:], own[min(i, len(own)):])
			if i == 0 {
				n -= hl
			}
			pv = buffer.NewView(n)
		}
		pv.Write(p)
	}
	if pv != nil {
		b.Append(pv)
	}
	return b, checked
}

// copiedRest returns the bytes of the stretch of copied parts run starts
// with: up to the first lent one with bytes (own[i] not nil).
func copiedRest(run [][]byte, own []Lender) int {
	n := 0
	for i, p := range run {
		if i < len(own) && own[i] != nil && len(p) > 0 {
			break
		}
		n += len(p)
	}
	return n
}

// checkedPartial reports whether a TCP segment whose checksum its sender
// left partial, with its IP and TCP headers in hdr (tcpHeadersLen), may
// skip gVisor's checksum checks: those cover its IPv4 header's too, so
// that one must hold (IPv6 has none).
func checkedPartial(hdr []byte) bool {
	return hdr[0]>>4 == 6 || header.IPv4(hdr).IsChecksumValid()
}

// tcpHeadersLen returns the length of the IP and TCP headers of a packet
// of total bytes that starts with pkt, when it is an unfragmented TCP
// segment over IPv4, or over IPv6 without extension headers, whose
// lengths agree with total and whose headers lie in pkt; 0 for anything
// else.
func tcpHeadersLen(pkt []byte, total int) int {
	var ipLen int
	switch {
	case len(pkt) >= header.IPv4MinimumSize && pkt[0]>>4 == 4:
		ip := header.IPv4(pkt)
		ipLen = int(ip.HeaderLength())
		if ip.TransportProtocol() != header.TCPProtocolNumber || ip.More() || ip.FragmentOffset() != 0 ||
			ipLen < header.IPv4MinimumSize || int(ip.TotalLength()) != total {
			return 0
		}
	case len(pkt) >= header.IPv6MinimumSize && pkt[0]>>4 == 6:
		ip := header.IPv6(pkt)
		ipLen = header.IPv6MinimumSize
		if ip.TransportProtocol() != header.TCPProtocolNumber || ipLen+int(ip.PayloadLength()) != total {
			return 0
		}
	default:
		return 0
	}
	if len(pkt) < ipLen+header.TCPMinimumSize {
		return 0
	}
	tl := int(header.TCP(pkt[ipLen:]).DataOffset())
	if tl < header.TCPMinimumSize || ipLen+tl > len(pkt) {
		return 0
	}
	return ipLen + tl
}

// networkProtocol checks what gVisor relies on the link to have checked:
// a known IP version and a header whose length fields fit in the packet,
// total bytes long, that starts with pkt (which holds its fixed IP
// header). Trailing bytes past the IP length are allowed (gVisor trims
// them, as link padding).
func networkProtocol(pkt []byte, total int) (tcpip.NetworkProtocolNumber, bool) {
	if len(pkt) == 0 {
		return 0, false
	}
	switch pkt[0] >> 4 {
	case 4:
		if len(pkt) < header.IPv4MinimumSize {
			return 0, false
		}
		ip := header.IPv4(pkt)
		hl, tl := int(ip.HeaderLength()), int(ip.TotalLength())
		if hl < header.IPv4MinimumSize || tl < hl || tl > total {
			return 0, false
		}
		return ipv4.ProtocolNumber, true
	case 6:
		if len(pkt) < header.IPv6MinimumSize {
			return 0, false
		}
		if header.IPv6MinimumSize+int(header.IPv6(pkt).PayloadLength()) > total {
			return 0, false
		}
		return ipv6.ProtocolNumber, true
	}
	return 0, false
}

// Stats are a Host's counters since NewHost.
type Stats struct {
	// InPackets and InBytes count what was given to Inject: a packet
	// given to InjectSegments as the segs packets it stands for on the
	// wire, and by its own length (without the headers its segments
	// would repeat).
	InPackets, InBytes   uint64
	OutPackets, OutBytes uint64 // given to Output
	// Malformed counts arriving packets dropped as not well-formed: by
	// Inject's own check, or by gVisor's IP, TCP, UDP or ICMP parsers.
	Malformed uint64
	// ChecksumErrors counts arriving TCP and UDP packets dropped for a bad
	// checksum (IPv4 header checksum failures count as Malformed, as
	// gVisor counts them).
	ChecksumErrors uint64
	// Dropped counts packets lost because Close had begun: given to Inject
	// or sent by gVisor while the host was closing or closed.
	Dropped uint64
	// TCP holds connection-level events summed over every TCP connection
	// the host has had.
	TCP hostcfg.TCPStats
}

// Stats returns the host's counters; safe at any time, also after Close.
func (h *Host) Stats() Stats {
	st := h.s.Stats()
	return Stats{
		InPackets:  h.inPackets.Load(),
		InBytes:    h.inBytes.Load(),
		OutPackets: h.link.outPackets.Load(),
		OutBytes:   h.link.outBytes.Load(),
		Malformed: h.malformed.Load() +
			st.IP.MalformedPacketsReceived.Value() + st.IP.MalformedFragmentsReceived.Value() +
			st.TCP.InvalidSegmentsReceived.Value() + st.UDP.MalformedPacketsReceived.Value() +
			st.ICMP.V4.PacketsReceived.Invalid.Value() + st.ICMP.V6.PacketsReceived.Invalid.Value(),
		ChecksumErrors: st.TCP.ChecksumErrors.Value() + st.UDP.ChecksumErrors.Value(),
		Dropped:        h.inDropped.Load() + h.link.outDropped.Load(),
		TCP: hostcfg.TCPStats{
			SegmentsSent:       st.TCP.SegmentsSent.Value(),
			SegmentsReceived:   st.TCP.ValidSegmentsReceived.Value() + h.mergedSegs.Load(),
			Retransmits:        st.TCP.Retransmits.Value(),
			Timeouts:           st.TCP.Timeouts.Value(),
			FastRecoveries:     st.TCP.FastRecovery.Value(),
			SACKRecoveries:     st.TCP.SACKRecovery.Value(),
			TLPRecoveries:      st.TCP.TLPRecovery.Value(),
			SpuriousRecoveries: st.TCP.SpuriousRecovery.Value(),
			ResetsSent:         st.TCP.ResetsSent.Value(),
			ResetsReceived:     st.TCP.ResetsReceived.Value(),
		},
	}
}

// Close shuts the host down, in this order: the link stops (Inject drops,
// Output is no longer called, calls in flight are waited for); every
// endpoint the host made is closed; gVisor aborts what remains and closes
// its protocols (stack.Close); then Close waits for gVisor's goroutines to
// end and removes the NIC (stack.Wait). Established connections are reset
// without a word on the path, as if the cable were cut. Close is
// idempotent and always returns nil; it must not be called from Output.
func (h *Host) Close() error {
	h.close.Do(func() {
		h.link.shut()
		h.mu.Lock()
		h.closed = true
		cs := make([]closer, 0, len(h.closers))
		for c := range h.closers {
			cs = append(cs, c)
		}
		h.closers = nil
		h.mu.Unlock()
		for _, c := range cs {
			c.closeEndpoint()
		}
		h.s.Close()
		h.s.Wait()
		h.log.Debug("host closed", zap.Int("endpoints", len(cs)))
	})
	return nil
}

// track registers c to be closed by Close. It fails once Close has begun.
func (h *Host) track(c closer) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return net.ErrClosed
	}
	h.closers[c] = struct{}{}
	return nil
}

// untrack forgets c, closed by its owner.
func (h *Host) untrack(c closer) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.closers, c)
}

// netProto picks the network protocol for talking to a, which must be of a
// family the host has an address of.
func (h *Host) netProto(a netip.Addr) (tcpip.NetworkProtocolNumber, error) {
	switch {
	case a.Is4() && h.v4:
		return ipv4.ProtocolNumber, nil
	case a.Is6() && h.v6:
		return ipv6.ProtocolNumber, nil
	case !a.IsValid():
		return 0, errors.New("invalid address")
	}
	family := 6
	if a.Is4() {
		family = 4
	}
	return 0, fmt.Errorf("host %q has no IPv%d address", h.name, family)
}

// listenProto picks the endpoint family for a listener on every address:
// IPv6 dual-stack when the host has both families, so one endpoint
// accepts both, as with Go's net.Listen("tcp", ":port").
func (h *Host) listenProto() (proto tcpip.NetworkProtocolNumber, v6only bool) {
	if h.v6 {
		return ipv6.ProtocolNumber, !h.v4
	}
	return ipv4.ProtocolNumber, false
}

func tcpipAddr(a netip.Addr) tcpip.Address {
	if a.Is4() {
		return tcpip.AddrFrom4(a.As4())
	}
	return tcpip.AddrFrom16(a.As16())
}

func fullAddr(ap netip.AddrPort) tcpip.FullAddress {
	return tcpip.FullAddress{Addr: tcpipAddr(ap.Addr()), Port: ap.Port()}
}

// availableCC reads the congestion controls gVisor's TCP offers from s.
func availableCC(s *stack.Stack) []string {
	var avail tcpip.TCPAvailableCongestionControlOption
	if err := s.TransportProtocolOption(tcp.ProtocolNumber, &avail); err != nil {
		return nil
	}
	return strings.Fields(string(avail))
}
