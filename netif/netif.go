// Package netif holds what both ends of an emulated path's interfaces
// agree on: the GSO description that travels with a packet between a
// device with offload and a host whose TCP segments it (GSO), the MTU
// bounds and address rules every interface checks, and the snapshot of a
// TCP connection's state either TCP (gVisor's or the kernel's) reports
// (TCPInfo).
//
// It sits below package stack (gVisor's hosts) and package hostnet (the
// kernel's TUN devices, namespaces and sockets), so the two share these
// types without importing each other. It imports nothing of netjam and
// nothing of gVisor.
package netif

import (
	"net/netip"
	"time"
)

// MTU limits. 576 is the smallest datagram every IPv4 host must accept
// (RFC 791). IPv6 needs at least 1280 (RFC 8200), checked when the
// interface has an IPv6 address. The maximum is 65536, Linux's loopback
// MTU: an IPv4 packet stops at 65535 bytes whatever the MTU (its total
// length is 16 bits, and gVisor clamps to it), while an IPv6 packet, whose
// 16-bit length excludes the 40-byte header, can fill all 65536.
const (
	MinMTU     = 576
	MinMTUIPv6 = 1280
	MaxMTU     = 65536
)

// GSO describes a packet read from or written to a device with offload:
// a TCP segment standing for several of MSS payload bytes each, and
// whether its TCP checksum is left to the receiver.
type GSO struct {
	// MSS is the payload of each segment; 0 for an ordinary packet.
	MSS int
	// NeedsCsum: the TCP (or UDP) checksum field holds only the
	// pseudo-header's sum. Reading: the receiver must complete it, summing
	// from CsumStart and storing at CsumStart+CsumOffset. Writing: the
	// packet carries the pseudo-header's sum there, and the kernel
	// completes it (CsumStart and CsumOffset are then derived from the
	// packet).
	NeedsCsum             bool
	CsumStart, CsumOffset int
}

// MaxGSOPacket is the largest packet that crosses an interface with
// offload, a GSO segment standing for many included: IPv4's total length
// limit, and what a TUN device takes with one virtio-net header.
const MaxGSOPacket = 65535

// Output is the outgoing side of an interface with offload, the contract
// between whoever sends packets (a gVisor host's NIC, a TUN device's
// reader) and whoever takes them (the emulated path, a TUN device's
// writer). pkt is one IP packet of at most MaxGSOPacket bytes, given as
// slices whose concatenation is the packet, valid only during the call:
// the callee copies what it keeps. g describes it: a TCP segment standing
// for several of g.MSS payload bytes each, and whether its checksum is
// left to the receiver (g.NeedsCsum); a zero g is an ordinary packet.
// Output must not block: a callee that cannot take a packet drops it and
// counts it.
type Output func(pkt [][]byte, g GSO)

// CheckAddrs reports through add every problem of the addresses of an
// interface (a Host's NIC or the kernel's side of a TUN): invalid,
// IPv4-mapped, not unicast, zoned, or listed twice. It returns whether the
// valid ones include IPv4 and IPv6 addresses.
func CheckAddrs(addrs []netip.Prefix, add func(format string, a ...any)) (v4, v6 bool) {
	seen := make(map[netip.Addr]bool)
	for i, p := range addrs {
		a := p.Addr()
		switch {
		case !p.IsValid():
			add("addrs[%d]: %v is not a valid prefix", i, p)
			continue
		case a.Is4In6():
			add("addrs[%d]: %v: use the plain IPv4 form, not IPv4-mapped IPv6", i, p)
		case a.IsUnspecified() || a.IsMulticast() || a.IsLoopback():
			add("addrs[%d]: %v is not a unicast host address", i, p)
		case a.Is6() && a.Zone() != "":
			add("addrs[%d]: %v: an address on the device takes no zone", i, p)
		case seen[a]:
			add("addrs[%d]: %v is listed twice", i, a)
		default:
			v4, v6 = v4 || a.Is4(), v6 || a.Is6()
		}
		seen[a] = true
	}
	return v4, v6
}

// CheckMTU reports through add an MTU outside MinMTU..MaxMTU, or below
// MinMTUIPv6 on an interface with an IPv6 address (v6).
func CheckMTU(mtu int, v6 bool, add func(format string, a ...any)) {
	switch {
	case mtu < MinMTU || mtu > MaxMTU:
		add("mtu: %d is out of range %d..%d", mtu, MinMTU, MaxMTU)
	case v6 && mtu < MinMTUIPv6:
		add("mtu: %d is below IPv6's minimum of %d", mtu, MinMTUIPv6)
	}
}

// TCPInfo is a snapshot of a connection's TCP state, as gVisor's TCP
// (stack.TCPConn.Info) or the kernel's (hostnet.KernelTCPConn.Info)
// reports it. The field comments name gVisor's sources: its TCP_INFO
// (tcpip.TCPInfoOption), its TCP_CONGESTION (tcpip.CongestionControlOption)
// and the endpoint's own counters (tcp.Stats); the kernel's come from its
// TCP_INFO, as noted there.
type TCPInfo struct {
	State string // TCPInfoOption.State: "ESTABLISHED", "FIN-WAIT1", ...
	CC    string // CongestionControlOption: the algorithm in use
	// CCState is TCPInfoOption.CcState: "open", "disorder" (dupACKs or
	// SACKs seen), "fast-recovery" (NewReno), "sack-recovery" (RFC 6675)
	// or "rto-recovery" (after a retransmission timeout).
	CCState     string
	SRTT        time.Duration // TCPInfoOption.RTT, the smoothed RTT
	RTTVar      time.Duration // TCPInfoOption.RTTVar
	RTO         time.Duration // TCPInfoOption.RTO, the current timeout
	Cwnd        uint32        // TCPInfoOption.SndCwnd, in segments
	Ssthresh    uint32        // TCPInfoOption.SndSsthresh, in segments
	ReorderSeen bool          // TCPInfoOption.ReorderSeen
	// Counters of this connection, from tcp.Stats. SACK recoveries are
	// counted only stack-wide by gVisor: see stack's Stats().TCP.SACKRecoveries.
	SegmentsSent     uint64 // tcp.Stats.SegmentsSent, retransmissions included
	SegmentsReceived uint64 // tcp.Stats.SegmentsReceived, valid ones
	Retransmits      uint64 // tcp.Stats.SendErrors.Retransmits: segments resent
	FastRetransmits  uint64 // tcp.Stats.SendErrors.FastRetransmit: resent in fast/SACK recovery
	Timeouts         uint64 // tcp.Stats.SendErrors.Timeouts: RTO expiries
}
