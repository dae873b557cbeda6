package stack

import (
	"errors"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"testing"

	"github.com/netjam/netjam/third_party/gvisor/_pkg/tcpip"
	gvchecksum "github.com/netjam/netjam/third_party/gvisor/_pkg/tcpip/checksum"
	"github.com/netjam/netjam/third_party/gvisor/_pkg/tcpip/header"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/netjam/netjam/hostnet"
	"github.com/netjam/netjam/internal/testenv"
)

// What the tests of tun_relay_test.go need of the host: network
// namespaces (package hostnet's, entered only on threads of their own),
// netlink handles inside them, and hand-made IP packets. The tests make
// real TUN devices, each inside a network namespace of its own that ends
// with the test, so nothing they do can reach the machine's own network.
// They need root and /dev/net/tun: without them they are skipped, saying
// why, unless NETJAM_REQUIRE_TUN=1 (CI sets it), which turns the skip
// into a failure.

// inNetns runs f inside ns: sockets f opens and processes it starts live
// in ns.
func inNetns(ns *hostnet.Netns, f func() error) error { return ns.Do(f) }

// newNetns returns a new network namespace that ends with the test (when
// its handle is closed and nothing runs in it any more). Its loopback
// device is up.
func newNetns(t testing.TB) *hostnet.Netns {
	t.Helper()
	testenv.RequireTUN(t)
	n, err := hostnet.NewNetns()
	if err != nil {
		testenv.Missing(t, "cannot make a network namespace: "+err.Error())
	}
	t.Cleanup(func() { n.Close() })
	return n
}

// nsPath is a path naming ns, for TUNConfig.Netns.
func nsPath(ns *hostnet.Netns) string { return ns.Path() }

// nlAt returns a netlink handle in ns, closed at the end of the test.
func nlAt(t testing.TB, ns *hostnet.Netns) *netlink.Handle {
	t.Helper()
	h, err := netns.GetFromPath(ns.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	nl, err := netlink.NewHandleAt(h, unix.NETLINK_ROUTE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nl.Close)
	return nl
}

// startIn starts cmd inside ns.
func startIn(ns *hostnet.Netns, cmd *exec.Cmd) error {
	return inNetns(ns, cmd.Start)
}

// runIn runs cmd inside ns and returns its combined output.
func runIn(ns *hostnet.Netns, cmd *exec.Cmd) (string, error) {
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := startIn(ns, cmd); err != nil {
		return "", err
	}
	err := cmd.Wait()
	return out.String(), err
}

// checkGone fails t unless the device and the routes are gone from ns.
func checkGone(t testing.TB, h *netlink.Handle, name string, routes ...netip.Prefix) {
	t.Helper()
	var nf netlink.LinkNotFoundError
	if l, err := h.LinkByName(name); !errors.As(err, &nf) {
		t.Errorf("device %s is still there (%v, %v)", name, l, err)
	}
	for _, r := range routes {
		family := netlink.FAMILY_V6
		if r.Addr().Is4() {
			family = netlink.FAMILY_V4
		}
		if rs, _ := h.RouteListFiltered(family, &netlink.Route{Dst: ipNet(r)}, netlink.RT_FILTER_DST); len(rs) != 0 {
			t.Errorf("route %v is still there: %v", r, rs)
		}
	}
}

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
