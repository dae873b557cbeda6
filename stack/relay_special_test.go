package stack

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/netjam/netjam/hostcfg"
)

// openAllow is the widest Allow the relay accepts (no /0): every IPv4 and
// IPv6 destination, in two halves each.
var openAllow = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/1"), netip.MustParsePrefix("128.0.0.0/1"),
	netip.MustParsePrefix("::/1"), netip.MustParsePrefix("8000::/1"),
}

// TestRelaySpecialDestinations checks the relay's decision for each
// special range, IPv4 and IPv6, with an Allow that holds every address:
// each is refused with its reason, for TCP and UDP alike, while ordinary
// destinations are relayed and a Forward to loopback still is.
func TestRelaySpecialDestinations(t *testing.T) {
	loop := netip.MustParseAddrPort("127.0.0.1:5201")
	_, r := newRelayPair(t, hostcfg.RelayConfig{
		Transparent: true,
		Allow:       openAllow,
		Forwards:    []hostcfg.Forward{{Proto: "tcp", Listen: 5201, To: loop}, {Proto: "udp", Listen: 5201, To: loop}},
		Dial: func(context.Context, string, string) (net.Conn, error) {
			t.Error("the decision test dialled")
			return nil, net.ErrClosed
		},
	})
	for _, c := range []struct {
		dst  string
		want refusal // refusedNotAllowed: relayed
	}{
		{"0.0.0.0", refusedUnspecified},
		{"0.1.2.3", refusedUnspecified},
		{"::", refusedUnspecified},
		{"127.0.0.1", refusedLoopback},
		{"127.255.0.9", refusedLoopback},
		{"::1", refusedLoopback},
		{"224.0.0.1", refusedMulticast},
		{"239.255.255.250", refusedMulticast},
		{"ff02::1", refusedMulticast},
		{"ff05::1:3", refusedMulticast},
		{"255.255.255.255", refusedBroadcast},
		{"10.99.0.255", refusedBroadcast}, // the peer's network, 10.99.0.2/24
		{"169.254.169.254", refusedLinkLocal},
		{"fe80::1", refusedLinkLocal},
		{"::ffff:127.0.0.1", refusedMapped},
		{"::ffff:198.51.100.7", refusedMapped},
		{"::ffff:0.0.0.0", refusedMapped},
		{"198.51.100.7", refusedNotAllowed},
		{"10.99.0.254", refusedNotAllowed},
		{"2001:db8::7", refusedNotAllowed},
		{"fd99::9", refusedNotAllowed},
	} {
		for _, proto := range []string{"tcp", "udp"} {
			dst := netip.AddrPortFrom(netip.MustParseAddr(c.dst), 53)
			act, target, why := r.decide(proto, dst)
			if c.want == refusedNotAllowed {
				if act != actRelay || target != dst {
					t.Errorf("%s %v: action %d to %v, want relayed to itself", proto, dst, act, target)
				}
				continue
			}
			if act != actRefuse || why != c.want {
				t.Errorf("%s %v: action %d (%v), want refused as %v", proto, dst, act, why, c.want)
			}
		}
	}
	for _, proto := range []string{"tcp", "udp"} {
		if act, target, _ := r.decide(proto, netip.AddrPortFrom(peer4, 5201)); act != actRelay || target != loop {
			t.Errorf("%s forward: action %d to %v, want relayed to %v", proto, act, target, loop)
		}
	}
}

// TestRelayUnspecifiedNeverLoopback injects raw UDP datagrams to 0.0.0.0
// and :: into a transparent relay whose Allow holds every address, with
// a UDP server on the machine's loopback at that port: Linux would
// deliver a datagram sent to 0.0.0.0:P to 127.0.0.1:P. The server must
// receive nothing, and the relay must count each refusal with its reason.
func TestRelayUnspecifiedNeverLoopback(t *testing.T) {
	srv, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	srv6, err := net.ListenPacket("udp", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	defer srv6.Close()
	port := srv.LocalAddr().(*net.UDPAddr).AddrPort().Port()
	port6 := srv6.LocalAddr().(*net.UDPAddr).AddrPort().Port()
	_, r := newRelayPair(t, hostcfg.RelayConfig{Transparent: true, Allow: openAllow})

	client4, client6 := relayClientAddrs[0].Addr(), relayClientAddrs[1].Addr()
	for _, pkt := range [][]byte{
		udpDatagram(netip.AddrPortFrom(client4, 40000), netip.AddrPortFrom(netip.IPv4Unspecified(), port), []byte("let me out")),
		udpDatagram(netip.AddrPortFrom(client6, 40000), netip.AddrPortFrom(netip.IPv6Unspecified(), port6), []byte("let me out")),
		udpDatagram(netip.AddrPortFrom(client6, 40001), netip.AddrPortFrom(netip.MustParseAddr("::ffff:127.0.0.1"), port), []byte("let me out")),
		udpDatagram(netip.AddrPortFrom(client4, 40002), netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port), []byte("let me out")),
	} {
		r.h.Inject(pkt)
	}
	for _, c := range []net.PacketConn{srv, srv6} {
		c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		if n, from, err := c.ReadFrom(make([]byte, 100)); err == nil {
			t.Errorf("the server on %v received %d bytes from %v through the relay", c.LocalAddr(), n, from)
		}
	}
	// gVisor drops the loopback and mapped destinations as martians
	// before the relay sees them; the relay refuses the other two.
	st := r.Stats().UDP
	if st.Relayed != 0 || st.RefusedBy["unspecified"] != 2 {
		t.Errorf("udp stats %+v, want nothing relayed and 2 refused as unspecified", st)
	}
}
