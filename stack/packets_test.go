package stack

import (
	"net"
	"net/netip"

	"github.com/netjam/netjam/third_party/gvisor/_pkg/tcpip"
	gvchecksum "github.com/netjam/netjam/third_party/gvisor/_pkg/tcpip/checksum"
	"github.com/netjam/netjam/third_party/gvisor/_pkg/tcpip/header"
)

// Hand-made IP packets, for the tests that feed a host what a device
// would (tun_relay_linux_test.go, the relay's tests in memory).

func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

var tunAddrs = []netip.Prefix{netip.MustParsePrefix("10.99.0.1/24"), netip.MustParsePrefix("fd99::1/64")}

// checksumOf adds data to a partial Internet checksum.
func checksumOf(partial uint16, data []byte) uint16 { return gvchecksum.Checksum(data, partial) }

// ipPacket wraps a transport segment l4 in an IPv4 or IPv6 header.
func ipPacket(src, dst netip.Addr, proto uint8, l4 []byte) []byte {
	if src.Is4() {
		b := make([]byte, header.IPv4MinimumSize+len(l4))
		ip := header.IPv4(b)
		ip.Encode(&header.IPv4Fields{TotalLength: uint16(len(b)), TTL: 64, Protocol: proto,
			SrcAddr: tcpipAddr(src), DstAddr: tcpipAddr(dst)})
		ip.SetChecksum(^ip.CalculateChecksum())
		copy(b[header.IPv4MinimumSize:], l4)
		return b
	}
	b := make([]byte, header.IPv6MinimumSize+len(l4))
	header.IPv6(b).Encode(&header.IPv6Fields{PayloadLength: uint16(len(l4)), TransportProtocol: tcpip.TransportProtocolNumber(proto),
		HopLimit: 64, SrcAddr: tcpipAddr(src), DstAddr: tcpipAddr(dst)})
	copy(b[header.IPv6MinimumSize:], l4)
	return b
}

// tcpPacket builds a TCP segment without options in an IP packet.
func tcpPacket(src, dst netip.AddrPort, flags header.TCPFlags, data []byte) []byte {
	s := make([]byte, header.TCPMinimumSize+len(data))
	copy(s[header.TCPMinimumSize:], data)
	header.TCP(s).Encode(&header.TCPFields{SrcPort: src.Port(), DstPort: dst.Port(), SeqNum: 1000, DataOffset: header.TCPMinimumSize,
		Flags: flags, WindowSize: 65535})
	xsum := header.PseudoHeaderChecksum(header.TCPProtocolNumber, tcpipAddr(src.Addr()), tcpipAddr(dst.Addr()), uint16(len(s)))
	header.TCP(s).SetChecksum(^header.TCP(s).CalculateChecksum(checksumOf(xsum, data)))
	return ipPacket(src.Addr(), dst.Addr(), uint8(header.TCPProtocolNumber), s)
}

// udpDatagram builds a UDP datagram in an IPv4 or IPv6 packet.
func udpDatagram(src, dst netip.AddrPort, data []byte) []byte {
	u := make([]byte, header.UDPMinimumSize+len(data))
	copy(u[header.UDPMinimumSize:], data)
	header.UDP(u).Encode(&header.UDPFields{SrcPort: src.Port(), DstPort: dst.Port(), Length: uint16(len(u))})
	xsum := header.PseudoHeaderChecksum(header.UDPProtocolNumber, tcpipAddr(src.Addr()), tcpipAddr(dst.Addr()), uint16(len(u)))
	header.UDP(u).SetChecksum(^header.UDP(u).CalculateChecksum(checksumOf(xsum, data)))
	return ipPacket(src.Addr(), dst.Addr(), uint8(header.UDPProtocolNumber), u)
}
