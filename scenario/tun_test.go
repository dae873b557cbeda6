package scenario

import (
	"errors"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/netjam/netjam/flows"
	"github.com/netjam/netjam/hostcfg"
	"github.com/netjam/netjam/hostnet"
)

// defaultTUN is the TUN of `tun: {}` in a scenario of mtu 1500.
func defaultTUN() *TUN {
	return &TUN{
		Device: hostnet.TUNConfig{Name: "netjam0", Addrs: []netip.Prefix{netip.MustParsePrefix("10.99.0.1/24")}, MTU: 1500, Offload: true},
		Peer:   []netip.Addr{netip.MustParseAddr("10.99.0.2")},
		Relay:  hostcfg.RelayConfig{Services: true, UDPIdle: 60 * time.Second, TCPIdle: 2 * time.Hour},
	}
}

// withTUN returns the default TUN changed by f.
func withTUN(f func(t *TUN)) *TUN {
	t := defaultTUN()
	f(t)
	return t
}

func prefixes(s ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range s {
		out = append(out, netip.MustParsePrefix(p))
	}
	return out
}

func addrs(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, a := range s {
		out = append(out, netip.MustParseAddr(a))
	}
	return out
}

func TestTUN(t *testing.T) {
	tests := []struct {
		src  string
		want *TUN
	}{
		{"", nil},
		{"tun:\n", nil}, // null counts as absent
		{"tun: ~\n", nil},
		{"tun: {}\n", defaultTUN()},
		{"mtu: 9000\ntun: {}\n", withTUN(func(t *TUN) { t.Device.MTU = 9000 })},
		{"tun: {name: wg-test.0, mtu: 1400, services: false, udp_idle: 5s, tcp_idle: 10m, host_routes: true}\n", withTUN(func(t *TUN) {
			t.Device.Name, t.Device.MTU, t.Relay.Services, t.Relay.UDPIdle, t.Relay.TCPIdle, t.Device.HostRoutes = "wg-test.0", 1400, false, 5*time.Second, 10*time.Minute, true
		})},
		{"tun: {name: abcdefghijklmno}\n", withTUN(func(t *TUN) { t.Device.Name = "abcdefghijklmno" })}, // 15 bytes
		// One address or a list; the peers default to the next address,
		// in the order of the addresses.
		{"tun: {address: 10.1.2.3/16}\n", withTUN(func(t *TUN) {
			t.Device.Addrs, t.Peer = prefixes("10.1.2.3/16"), addrs("10.1.2.4")
		})},
		{"tun: {address: [fd99::1/64, 10.99.0.1/24]}\n", withTUN(func(t *TUN) {
			t.Device.Addrs, t.Peer = prefixes("fd99::1/64", "10.99.0.1/24"), addrs("fd99::2", "10.99.0.2")
		})},
		{"tun: {address: fd99::1/64}\n", withTUN(func(t *TUN) {
			t.Device.Addrs, t.Peer = prefixes("fd99::1/64"), addrs("fd99::2")
		})},
		// ... or the address before, when the next is no host of the network.
		{"tun: {address: [10.99.0.254/24, 'fd99::ffff:ffff:ffff:ffff/64']}\n", withTUN(func(t *TUN) {
			t.Device.Addrs = prefixes("10.99.0.254/24", "fd99::ffff:ffff:ffff:ffff/64")
			t.Peer = addrs("10.99.0.253", "fd99::ffff:ffff:ffff:fffe")
		})},
		{"tun: {address: 10.0.0.1/31}\n", withTUN(func(t *TUN) {
			t.Device.Addrs, t.Peer = prefixes("10.0.0.1/31"), addrs("10.0.0.0")
		})},
		{"tun: {address: 10.0.0.0/31}\n", withTUN(func(t *TUN) {
			t.Device.Addrs, t.Peer = prefixes("10.0.0.0/31"), addrs("10.0.0.1")
		})},
		// Peers given: one or a list, one per family, any order.
		{"tun: {peer: 10.99.0.200}\n", withTUN(func(t *TUN) { t.Peer = addrs("10.99.0.200") })},
		{"tun: {address: [10.99.0.1/24, fd99::1/64], peer: [fd99::abcd, 10.99.0.9]}\n", withTUN(func(t *TUN) {
			t.Device.Addrs, t.Peer = prefixes("10.99.0.1/24", "fd99::1/64"), addrs("10.99.0.9", "fd99::abcd")
		})},
		{"tun: {routes: 192.0.2.0/24}\n", withTUN(func(t *TUN) { t.Device.Routes = prefixes("192.0.2.0/24") })},
		{"tun: {address: [10.99.0.1/24, fd99::1/64], routes: [192.0.2.0/24, '2001:db8::/32', 198.51.100.7/32]}\n", withTUN(func(t *TUN) {
			t.Device.Addrs, t.Peer = prefixes("10.99.0.1/24", "fd99::1/64"), addrs("10.99.0.2", "fd99::2")
			t.Device.Routes = prefixes("192.0.2.0/24", "2001:db8::/32", "198.51.100.7/32")
		})},
		{`
tun:
  forward:
    - {proto: tcp, listen: 5201, to: 127.0.0.1:5201}
    - {proto: udp, listen: 5201, to: "[::1]:5201"}
    - {proto: tcp, listen: 80, to: 192.0.2.10:8080}
`, withTUN(func(t *TUN) {
			t.Relay.Forwards = []hostcfg.Forward{
				{Proto: "tcp", Listen: 5201, To: netip.MustParseAddrPort("127.0.0.1:5201")},
				{Proto: "udp", Listen: 5201, To: netip.MustParseAddrPort("[::1]:5201")},
				{Proto: "tcp", Listen: 80, To: netip.MustParseAddrPort("192.0.2.10:8080")},
			}
		})},
		// The service ports are free once services are off.
		{"tun: {services: false, forward: [{proto: udp, listen: 9, to: 127.0.0.1:9}]}\n", withTUN(func(t *TUN) {
			t.Relay.Services = false
			t.Relay.Forwards = []hostcfg.Forward{{Proto: "udp", Listen: 9, To: netip.MustParseAddrPort("127.0.0.1:9")}}
		})},
		{"tun: {transparent: {allow: [198.51.100.0/24, '2001:db8::/32']}}\n", withTUN(func(t *TUN) {
			t.Relay.Transparent, t.Relay.Allow = true, prefixes("198.51.100.0/24", "2001:db8::/32")
		})},
		{"tun: {transparent: {allow: 192.0.2.0/24}}\n", withTUN(func(t *TUN) {
			t.Relay.Transparent, t.Relay.Allow = true, prefixes("192.0.2.0/24")
		})},
		{"tun: {netns: lab}\n", withTUN(func(t *TUN) { t.Device.Netns = "/var/run/netns/lab" })},
		{"tun: {offload: false}\n", withTUN(func(t *TUN) { t.Device.Offload = false })},
		{"tun: {netns: /proc/1234/ns/net}\n", withTUN(func(t *TUN) { t.Device.Netns = "/proc/1234/ns/net" })},
		{"wifi: {stations: [{name: a}, {name: b}]}\ntun: {station: b}\n", withTUN(func(t *TUN) {
			t.Stations = []string{"b"}
			t.StationAddrs = [][]netip.Addr{{netip.MustParseAddr("10.99.0.1")}}
		})},
		// Further stations take the next free hosts, skipping the peer.
		{"wifi: {stations: [{name: a}, {name: b}, {name: c}]}\ntun: {station: [c, a, b], address: [10.99.0.1/24, fd99::1/64]}\n", withTUN(func(t *TUN) {
			t.Device.Addrs = prefixes("10.99.0.1/24", "fd99::1/64")
			t.Peer = []netip.Addr{netip.MustParseAddr("10.99.0.2"), netip.MustParseAddr("fd99::2")}
			t.Stations = []string{"c", "a", "b"}
			t.StationAddrs = [][]netip.Addr{
				{netip.MustParseAddr("10.99.0.1"), netip.MustParseAddr("fd99::1")},
				{netip.MustParseAddr("10.99.0.3"), netip.MustParseAddr("fd99::3")},
				{netip.MustParseAddr("10.99.0.4"), netip.MustParseAddr("fd99::4")},
			}
		})},
	}
	for _, tt := range tests {
		s := mustParse(t, tt.src)
		if !reflect.DeepEqual(s.TUN, tt.want) {
			t.Errorf("Parse(%q).TUN =\n%+v\nwant\n%+v", tt.src, s.TUN, tt.want)
		}
	}
}

func TestTUNErrors(t *testing.T) {
	tests := []struct{ src, want string }{
		// The section.
		{"tun: true\n", "x.yaml:1: tun: expected a mapping of TUN keys (tun: {} for every default), got true"},
		{"tun: [a]\n", "x.yaml:1: tun: expected a mapping of TUN keys (tun: {} for every default), got a list"},
		{"tun:\n  adress: 10.0.0.1/24\n", `x.yaml:2: tun.adress: unknown key; did you mean "address"?`},
		{"tun: {x: 1}\n", "x.yaml:1: tun.x: unknown key (expected one of: address, forward, host_routes, mtu, name, netns, offload, peer, routes, services, station, tcp_idle, transparent, udp_idle)"},
		{"tun: {}\ntun: {}\n", "x.yaml:2: tun: duplicate key (first at line 1)"},

		// name
		{"tun: {name: abcdefghijklmnop}\n", `x.yaml:1: tun.name: "abcdefghijklmnop" is not a valid interface name (at most 15 bytes, Linux's limit)`},
		{"tun: {name: 'a b'}\n", `x.yaml:1: tun.name: "a b" is not a valid interface name (no '/', ':', '%' or white space)`},
		{"tun: {name: a/b}\n", `x.yaml:1: tun.name: "a/b" is not a valid interface name (no '/', ':', '%' or white space)`},
		{"tun: {name: 'a:1'}\n", `x.yaml:1: tun.name: "a:1" is not a valid interface name (no '/', ':', '%' or white space)`},
		{"tun: {name: tun%d}\n", `x.yaml:1: tun.name: "tun%d" is not a valid interface name (no '/', ':', '%' or white space)`},
		{"tun: {name: ..}\n", `x.yaml:1: tun.name: ".." is not a valid interface name ("." and ".." are not names)`},
		{"tun: {name: ''}\n", `x.yaml:1: tun.name: "" is not a valid interface name (leave name out for netjam0)`},
		{"tun: {name: [a]}\n", `x.yaml:1: tun.name: expected text, got a list`},

		// address
		{"tun:\n  address: 10.99.0.1\n", `x.yaml:2: tun.address: "10.99.0.1" needs a prefix length, like 10.99.0.1/24`},
		{"tun: {address: 'fd99::1'}\n", `x.yaml:1: tun.address: "fd99::1" needs a prefix length, like fd99::1/64`},
		{"tun: {address: netjam}\n", `x.yaml:1: tun.address: "netjam" is not an address with a prefix length, like 10.99.0.1/24 or fd99::1/64`},
		{"tun: {address: 'fe80::1%eth0/64'}\n", `x.yaml:1: tun.address: "fe80::1%eth0/64" is not an address with a prefix length, like 10.99.0.1/24 or fd99::1/64`},
		{"tun: {address: []}\n", `x.yaml:1: tun.address: expected at least one address, like 10.99.0.1/24 (leave address out for that default)`},
		{"tun: {address: {a: 1}}\n", `x.yaml:1: tun.address: expected an address with its prefix length like 10.99.0.1/24 or a list of them, got a mapping`},
		{"tun: {address: [[1]]}\n", `x.yaml:1: tun.address: expected an address with its prefix length like 10.99.0.1/24, got a list`},
		{"tun:\n  address:\n    - 10.99.0.1/24\n    - 10.98.0.1/24\n", "x.yaml:4: tun.address: 10.98.0.1/24 is a second IPv4 address (tun takes at most one IPv4 and one IPv6 address)"},
		{"tun: {address: [10.99.0.1/24, 10.99.0.1/24]}\n", "x.yaml:1: tun.address: 10.99.0.1/24 is a second IPv4 address (tun takes at most one IPv4 and one IPv6 address)"},
		{"tun: {address: [fd99::1/64, fd98::1/64]}\n", "x.yaml:1: tun.address: fd98::1/64 is a second IPv6 address (tun takes at most one IPv4 and one IPv6 address)"},
		{"tun: {address: 10.99.0.0/24}\n", "x.yaml:1: tun.address: 10.99.0.0/24 is the network's own address, not a host address (like 10.99.0.1/24)"},
		{"tun: {address: 10.99.0.255/24}\n", "x.yaml:1: tun.address: 10.99.0.255/24 is the network's broadcast address, not a host address"},
		{"tun: {address: 10.99.0.1/32}\n", "x.yaml:1: tun.address: 10.99.0.1/32 leaves no other address in its network for the peer; use a shorter prefix, like 10.99.0.1/24"},
		{"tun: {address: 'fd99::1/128'}\n", "x.yaml:1: tun.address: fd99::1/128 leaves no other address in its network for the peer; use a shorter prefix, like fd99::1/64"},
		{"tun: {address: 10.99.0.1/0}\n", "x.yaml:1: tun.address: 10.99.0.1/0 would route everything, including netjam's own relay sockets, into the device; give the network's prefix length, like 10.99.0.1/24"},
		{"tun: {address: '::ffff:10.99.0.1/120'}\n", "x.yaml:1: tun.address: ::ffff:10.99.0.1/120 is IPv4-mapped IPv6; write the IPv4 address as such (like 10.99.0.1/24)"},
		{"tun: {address: 127.0.0.1/8}\n", "x.yaml:1: tun.address: 127.0.0.1/8 is not a unicast host address"},
		{"tun: {address: '::/64'}\n", "x.yaml:1: tun.address: ::/64 is not a unicast host address"},
		{"tun: {address: 224.0.0.1/24}\n", "x.yaml:1: tun.address: 224.0.0.1/24 is not a unicast host address"},
		{"tun: {address: 'ff02::1/64'}\n", "x.yaml:1: tun.address: ff02::1/64 is not a unicast host address"},

		// peer
		{"tun: {peer: 10.99.0.1}\n", "x.yaml:1: tun.peer: 10.99.0.1 is the kernel's own address (tun.address); the peer is netjam's end of the device"},
		{"tun: {peer: 10.98.0.2}\n", "x.yaml:1: tun.peer: 10.98.0.2 is not in the network of tun.address 10.99.0.1/24 (10.99.0.0/24)"},
		{"tun: {peer: 10.99.0.255}\n", "x.yaml:1: tun.peer: 10.99.0.255 is the broadcast address of 10.99.0.0/24, not a host address"},
		{"tun: {peer: 10.99.0.0}\n", "x.yaml:1: tun.peer: 10.99.0.0 is the network address of 10.99.0.0/24, not a host address"},
		{"tun: {peer: 'fd99::2'}\n", "x.yaml:1: tun.peer: fd99::2 is IPv6, but tun.address has no IPv6 address"}, // and no other message
		{"tun: {peer: [10.99.0.2, 'fd99::2']}\n", "x.yaml:1: tun.peer: fd99::2 is IPv6, but tun.address has no IPv6 address"},
		{"tun: {address: 'fd99::1/64', peer: 10.99.0.2}\n", "x.yaml:1: tun.peer: 10.99.0.2 is IPv4, but tun.address has no IPv4 address"},
		{"tun: {peer: [10.99.0.2, 10.99.0.3]}\n", "x.yaml:1: tun.peer: 10.99.0.3 is a second IPv4 peer (tun takes one peer per family of address)"},
		{"tun:\n  address: [10.99.0.1/24, fd99::1/64]\n  peer: 10.99.0.3\n", "x.yaml:3: tun.peer: no IPv6 peer for tun.address fd99::1/64 (a peer given lists one per family of address)"},
		{"tun: {peer: []}\n", "x.yaml:1: tun.peer: no IPv4 peer for tun.address 10.99.0.1/24 (a peer given lists one per family of address)"},
		{"tun: {peer: 10.99.0.2/24}\n", `x.yaml:1: tun.peer: "10.99.0.2/24" has a prefix length; write the address alone (10.99.0.2): the network is tun.address's`},
		{"tun: {peer: peer}\n", `x.yaml:1: tun.peer: "peer" is not an IP address like 10.99.0.2 or fd99::2`},
		{"tun: {address: 'fe80::1/64', peer: 'fe80::2%eth0'}\n", `x.yaml:1: tun.peer: fe80::2%eth0 has a zone; an address on the device takes none`},
		{"tun: {peer: '::ffff:10.99.0.2'}\n", `x.yaml:1: tun.peer: ::ffff:10.99.0.2 is IPv4-mapped IPv6; write the IPv4 address as such (like 10.99.0.2)`},
		// An invalid address gives no peer errors.
		{"tun: {address: 10.99.0.1, peer: 10.98.0.2}\n", `x.yaml:1: tun.address: "10.99.0.1" needs a prefix length, like 10.99.0.1/24`},

		// mtu
		{"mtu: 1400\ntun:\n  mtu: 1500\n", "x.yaml:3: tun.mtu: 1500 is above the scenario's mtu (1400): packets larger than the path's MTU could not cross it"},
		{"tun: {mtu: 575}\n", "x.yaml:1: tun.mtu: 575 is out of range (expected 576 to 65535)"},
		{"tun: {mtu: 1500B}\n", `x.yaml:1: tun.mtu: expected an integer, got the string "1500B"`},
		{"tun: {address: 'fd99::1/64', mtu: 1279}\n", "x.yaml:1: tun.mtu: 1279 is below 1280, IPv6's minimum MTU, and tun.address has an IPv6 address"},
		{"mtu: 1000\ntun: {address: [10.99.0.1/24, 'fd99::1/64']}\n", "x.yaml:2: tun.address: fd99::1/64 needs an MTU of at least 1280 (IPv6's minimum), but the scenario's mtu is 1000"},
		// An invalid scenario mtu is reported alone.
		{"mtu: 70000\ntun: {mtu: 9000}\n", "x.yaml:1: mtu: 70000 is out of range (expected 576 to 65535)"},

		// routes
		{"tun: {routes: [0.0.0.0/0]}\n", "x.yaml:1: tun.routes: 0.0.0.0/0 would route everything, including netjam's own relay sockets, into the device; route the networks to reach"},
		{"tun: {address: [10.99.0.1/24, 'fd99::1/64'], routes: '::/0'}\n", "x.yaml:1: tun.routes: ::/0 would route everything, including netjam's own relay sockets, into the device; route the networks to reach"},
		{"tun: {routes: [192.0.2.1/24]}\n", "x.yaml:1: tun.routes: 192.0.2.1/24 has host bits set (the network is 192.0.2.0/24)"},
		{"tun:\n  routes:\n    - 192.0.2.0/24\n    - 192.0.2.0/24\n", "x.yaml:4: tun.routes: 192.0.2.0/24 is listed twice"},
		{"tun: {routes: ['2001:db8::/32']}\n", "x.yaml:1: tun.routes: 2001:db8::/32 is IPv6, but tun.address has no IPv6 address"},
		{"tun: {address: 'fd99::1/64', routes: 192.0.2.0/24}\n", "x.yaml:1: tun.routes: 192.0.2.0/24 is IPv4, but tun.address has no IPv4 address"},
		{"tun: {routes: [192.0.2.7]}\n", `x.yaml:1: tun.routes: "192.0.2.7" needs a prefix length (192.0.2.7/32 for this one address)`},
		{"tun: {routes: [example.com]}\n", `x.yaml:1: tun.routes: "example.com" is not a network like 192.0.2.0/24 or 2001:db8::/32`},
		{"tun: {routes: ['::ffff:192.0.2.0/120']}\n", `x.yaml:1: tun.routes: ::ffff:192.0.2.0/120 is IPv4-mapped IPv6; write the IPv4 network as such (like 192.0.2.0/24)`},
		{"tun: {routes: {a: b}}\n", `x.yaml:1: tun.routes: expected a network like 192.0.2.0/24 or a list of them, got a mapping`},

		// forward
		{"tun: {forward: {proto: tcp, listen: 1, to: 127.0.0.1:1}}\n", "x.yaml:1: tun.forward: expected a list of forwards like {proto: tcp, listen: 5201, to: 127.0.0.1:5201}, got a mapping"},
		{"tun: {forward: [5201]}\n", "x.yaml:1: tun.forward[0]: expected a mapping of proto, listen and to, got 5201"},
		{"tun:\n  forward:\n    - {}\n", "x.yaml:3: tun.forward[0].proto: a forward needs a proto (tcp or udp)\n" +
			"x.yaml:3: tun.forward[0].listen: a forward needs a listen port (the peer's port, 1 to 65535)\n" +
			"x.yaml:3: tun.forward[0].to: a forward needs a to address (the real server, like 127.0.0.1:5201)"},
		{"tun: {forward: [{proto: sctp, listen: 1, to: 127.0.0.1:1}]}\n", `x.yaml:1: tun.forward[0].proto: "sctp" is not a protocol; did you mean "tcp"?`},
		{"tun: {forward: [{proto: any, listen: 1, to: 127.0.0.1:1}]}\n", `x.yaml:1: tun.forward[0].proto: "any" is not a protocol (expected one of: tcp, udp)`},
		{"tun: {forward: [{proto: tcp, listen: 0, to: 127.0.0.1:1}]}\n", "x.yaml:1: tun.forward[0].listen: 0 is out of range (expected 1 to 65535)"},
		{"tun: {forward: [{proto: tcp, listen: 65536, to: 127.0.0.1:1}]}\n", "x.yaml:1: tun.forward[0].listen: 65536 is out of range (expected 1 to 65535)"},
		{"tun: {forward: [{proto: tcp, listen: 80, to: 'localhost:80'}]}\n", `x.yaml:1: tun.forward[0].to: "localhost:80" is not an IP address and port like 127.0.0.1:5201 or [::1]:5201 (host names are not looked up)`},
		{"tun: {forward: [{proto: tcp, listen: 80, to: '::1:80'}]}\n", `x.yaml:1: tun.forward[0].to: "::1:80" is not an IP address and port like 127.0.0.1:5201 or [::1]:5201 (host names are not looked up)`},
		{"tun: {forward: [{proto: tcp, listen: 80, to: 127.0.0.1}]}\n", `x.yaml:1: tun.forward[0].to: "127.0.0.1" is not an IP address and port like 127.0.0.1:5201 or [::1]:5201 (host names are not looked up)`},
		{"tun: {forward: [{proto: tcp, listen: 80, to: '127.0.0.1:0'}]}\n", `x.yaml:1: tun.forward[0].to: 127.0.0.1:0 has port 0`},
		{"tun: {forward: [{proto: tcp, listen: 80, to: '0.0.0.0:80'}]}\n", `x.yaml:1: tun.forward[0].to: 0.0.0.0:80 is not a unicast address`},
		{"tun: {forward: [{proto: udp, listen: 80, to: '224.0.0.1:80'}]}\n", `x.yaml:1: tun.forward[0].to: 224.0.0.1:80 is not a unicast address`},
		{"tun:\n  forward:\n    - {proto: udp, listen: 53, to: 192.0.2.1:53}\n    - {proto: tcp, listen: 53, to: 192.0.2.1:53}\n    - {proto: udp, listen: 53, to: 192.0.2.2:53}\n",
			"x.yaml:5: tun.forward[2].listen: udp port 53 is forwarded twice (first at line 3)"},
		// A port per path: the same port on two paths is two forwards;
		// twice on one path is refused; a path must exist.
		{"links: [{name: a}, {name: b}]\npaths: [{name: p, via: [a], match: {dst: 10.20.0.0/16}}, {name: q, via: [b]}]\ntun:\n  forward:\n    - {proto: tcp, listen: 80, to: 192.0.2.1:80, path: p}\n    - {proto: tcp, listen: 80, to: 192.0.2.2:80, path: q}\n    - {proto: tcp, listen: 80, to: 192.0.2.3:80, path: p}\n",
			"x.yaml:7: tun.forward[2].listen: tcp port 80 is forwarded twice (first at line 5)"},
		{"links: [{name: a}]\npaths: [{name: p, via: [a]}]\ntun: {forward: [{proto: tcp, listen: 80, to: 192.0.2.1:80, path: pp}]}\n",
			`x.yaml:3: tun.forward[0].path: "pp" is not a path; did you mean "p"?`},
		{"tun: {forward: [{proto: tcp, listen: 80, to: 192.0.2.1:80, path: eu}]}\n",
			`x.yaml:1: tun.forward[0].path: "eu" is not a path (expected one of: default)`},
		{"tun: {forward: [{proto: tcp, listen: 7, to: 127.0.0.1:7}]}\n", "x.yaml:1: tun.forward[0].listen: port 7 is the echo service's while services are on (set tun.services: false to forward it)"},
		{"tun: {services: true, forward: [{proto: udp, listen: 9, to: 127.0.0.1:9}]}\n", "x.yaml:1: tun.forward[0].listen: port 9 is the discard service's while services are on (set tun.services: false to forward it)"},
		// An invalid services value does not make ports 7 and 9 wrong too.
		{"tun: {services: 1, forward: [{proto: udp, listen: 9, to: 127.0.0.1:9}]}\n", `x.yaml:1: tun.services: expected true or false, got 1`},

		// transparent
		{"tun: {transparent: true}\n", "x.yaml:1: tun.transparent: expected a mapping with allow, the destinations to relay to, got true"},
		{"tun: {transparent: {}}\n", "x.yaml:1: tun.transparent.allow: transparent relaying needs allow, the networks it may relay to (netjam is never an open relay)"},
		{"tun: {transparent: {allow: []}}\n", "x.yaml:1: tun.transparent.allow: expected at least one network (netjam is never an open relay)"},
		{"tun: {transparent: {alow: []}}\n", `x.yaml:1: tun.transparent.alow: unknown key; did you mean "allow"?` + "\n" +
			"x.yaml:1: tun.transparent.allow: transparent relaying needs allow, the networks it may relay to (netjam is never an open relay)"},
		{"tun: {transparent: {allow: [0.0.0.0/0]}}\n", "x.yaml:1: tun.transparent.allow: 0.0.0.0/0 allows every destination, and netjam is never an open relay: list the networks to reach"},
		{"tun: {transparent: {allow: '::/0'}}\n", "x.yaml:1: tun.transparent.allow: ::/0 allows every destination, and netjam is never an open relay: list the networks to reach"},
		{"tun: {transparent: {allow: [127.0.0.1/8]}}\n", "x.yaml:1: tun.transparent.allow: 127.0.0.1/8 has host bits set (the network is 127.0.0.0/8)"},
		{"tun: {transparent: {allow: [10.0.0.0/8, 10.0.0.0/8]}}\n", "x.yaml:1: tun.transparent.allow: 10.0.0.0/8 is listed twice"},
		{"tun: {transparent: {allow: [10.0.0.1]}}\n", `x.yaml:1: tun.transparent.allow: "10.0.0.1" needs a prefix length (10.0.0.1/32 for this one address)`},

		// services, udp_idle
		{"tun: {services: yes}\n", `x.yaml:1: tun.services: expected true or false, got the string "yes"`},
		{"tun: {udp_idle: 0}\n", "x.yaml:1: tun.udp_idle: 0 is out of range (expected more than 0s, up to 1h)"},
		{"tun: {udp_idle: 61m}\n", "x.yaml:1: tun.udp_idle: 61m is out of range (expected more than 0s, up to 1h)"},
		{"tun: {udp_idle: 60}\n", `x.yaml:1: tun.udp_idle: "60" is not a duration (missing unit; examples: 50ms, 250us, 1.5s)`},
		{"tun: {transparent: {allow: [127.0.0.0/8, 10.0.0.0/8]}}\n", "x.yaml:1: tun.transparent.allow: 127.0.0.0/8 is loopback, which the relay never reaches whatever allow says (a forward reaches loopback)"},
		{"tun: {transparent: {allow: [169.254.169.254/32]}}\n", "x.yaml:1: tun.transparent.allow: 169.254.169.254/32 is link-local, which the relay never reaches whatever allow says (a forward reaches loopback)"},
		{"tun: {transparent: {allow: ['ff02::/16']}}\n", "x.yaml:1: tun.transparent.allow: ff02::/16 is multicast, which the relay never reaches whatever allow says (a forward reaches loopback)"},
		{"tun: {tcp_idle: 0s}\n", "x.yaml:1: tun.tcp_idle: 0s is out of range (expected more than 0s, up to 168h)"},
		{"tun: {tcp_idle: 169h}\n", "x.yaml:1: tun.tcp_idle: 169h is out of range (expected more than 0s, up to 168h)"},
		{"tun: {tcp_idle: -1s}\n", "x.yaml:1: tun.tcp_idle: -1s is out of range (expected more than 0s, up to 168h)"},

		// netns
		{"tun: {netns: ns/lab}\n", `x.yaml:1: tun.netns: "ns/lab" is a relative path; give a namespace name (as in ip netns) or an absolute path like /proc/PID/ns/net`},
		{"tun: {netns: 'my lab'}\n", `x.yaml:1: tun.netns: "my lab" is not a valid namespace name (use letters, digits, '.', '_' and '-')`},
		{"tun: {netns: ..}\n", `x.yaml:1: tun.netns: ".." is not a valid namespace name (use letters, digits, '.', '_' and '-')`},

		// station
		{"tun: {station: sta1}\n", "x.yaml:1: tun.station: there is no wifi cell in this scenario"},
		{"wifi: {stations: [{name: a}]}\ntun: {}\n", "x.yaml:2: tun.station: with a wifi cell, tun needs a station: the one the kernel sits behind (or a list of them)"},
		{"wifi: {stations: [{name: a}, {name: b}]}\ntun: {station: c}\n", `x.yaml:2: tun.station: "c" is not a station (expected one of: a, b)`},
	}
	for _, tt := range tests {
		_, err := parse(tt.src)
		if err == nil || err.Error() != tt.want {
			t.Errorf("Parse(%q):\n got %v\nwant %s", tt.src, err, tt.want)
		}
	}
}

// TestTUNAllErrors checks that the mistakes of a tun section are all
// reported at once, on their lines.
func TestTUNAllErrors(t *testing.T) {
	src := `mtu: 1400
tun:
  name: a very long name
  address: [10.99.0.1/24, 10.99.1.1/24]
  peer: 10.99.0.1
  mtu: 1500
  routes: [0.0.0.0/0]
  forward:
    - {proto: tcp, listen: 9, to: 127.0.0.1:9}
  transparent: {allow: [0.0.0.0/0]}
  udp_idle: 2h
  netns: ./ns
  station: sta1
`
	want := `x.yaml:3: tun.name: "a very long name" is not a valid interface name (at most 15 bytes, Linux's limit)
x.yaml:4: tun.address: 10.99.1.1/24 is a second IPv4 address (tun takes at most one IPv4 and one IPv6 address)
x.yaml:6: tun.mtu: 1500 is above the scenario's mtu (1400): packets larger than the path's MTU could not cross it
x.yaml:7: tun.routes: 0.0.0.0/0 would route everything, including netjam's own relay sockets, into the device; route the networks to reach
x.yaml:9: tun.forward[0].listen: port 9 is the discard service's while services are on (set tun.services: false to forward it)
x.yaml:10: tun.transparent.allow: 0.0.0.0/0 allows every destination, and netjam is never an open relay: list the networks to reach
x.yaml:11: tun.udp_idle: 2h is out of range (expected more than 0s, up to 1h)
x.yaml:12: tun.netns: "./ns" is a relative path; give a namespace name (as in ip netns) or an absolute path like /proc/PID/ns/net
x.yaml:13: tun.station: there is no wifi cell in this scenario`
	_, err := parse(src)
	if err == nil || err.Error() != want {
		t.Errorf("Parse error:\n%v\nwant:\n%s", err, want)
	}
}

func TestKernelFlows(t *testing.T) {
	s := mustParse(t, `
tun: {}
flows:
  - {name: k, type: tcp, stack: kernel, cc: bbr, sack: true, send_buffer: 1MB, receive_buffer: 2MB, size: 10MB}
  - {name: n, type: tcp, size: 1MB, sack: false}
  - {name: plain, type: tcp, stack: kernel, duration: 5s}
  - {name: u, type: udp, stack: kernel, interval: 10ms, count: 10, packet_size: 1472}
`)
	want := []Flow{
		{Name: "k", Type: "tcp", Stack: StackKernel, Direction: "up", TCPOptions: hostcfg.TCPOptions{CC: "bbr", SendBuffer: 1e6, ReceiveBuffer: 2e6},
			SACK: true, TCP: flows.TCPBulkSpec{Name: "k", Size: 10e6}},
		{Name: "n", Type: "tcp", Stack: StackNetstack, Direction: "up", TCP: flows.TCPBulkSpec{Name: "n", Size: 1e6}},
		{Name: "plain", Type: "tcp", Stack: StackKernel, Direction: "up", SACK: true, TCP: flows.TCPBulkSpec{Name: "plain", Duration: 5 * time.Second}},
		{Name: "u", Type: "udp", Stack: StackKernel, Direction: "up", SACK: true,
			UDP: flows.UDPSpec{Name: "u", Interval: 10 * time.Millisecond, Count: 10, PacketSize: 1472}},
	}
	if !reflect.DeepEqual(s.Flows, want) {
		t.Errorf("flows\n%+v\nwant\n%+v", s.Flows, want)
	}
	if !s.KernelFlows() {
		t.Error("KernelFlows() = false, want true")
	}
	if s := mustParse(t, "tun: {}\nflows: [{name: n, type: tcp, size: 1MB}]\n"); s.KernelFlows() {
		t.Error("KernelFlows() = true without kernel flows")
	}

	// With a cell, kernel flows run on the TUN's station; the TCP flows of
	// other stations agree on sack among themselves.
	s = mustParse(t, `
wifi: {stations: [{name: laptop}, {name: phone}]}
tun: {station: laptop}
flows:
  - {name: k, type: tcp, stack: kernel, size: 1MB, station: laptop}
  - {name: n, type: tcp, size: 1MB, station: phone, sack: false}
  - {name: m, type: tcp, size: 1MB, station: phone, sack: false}
`)
	if got := []string{s.Flows[0].Station, s.TUN.Stations[0]}; got[0] != "laptop" || got[1] != "laptop" {
		t.Errorf("stations %v", got)
	}
}

func TestKernelFlowErrors(t *testing.T) {
	tests := []struct{ src, want string }{
		{"flows:\n  - {name: k, type: tcp, size: 1MB, stack: kernel}\n",
			"x.yaml:2: flows.k.stack: stack kernel sends through the TUN device; add a tun section (tun: {} for every default)"},
		// A tun that is wrong is still a tun.
		{"tun: [x]\nflows:\n  - {name: k, type: tcp, size: 1MB, stack: kernel}\n",
			"x.yaml:1: tun: expected a mapping of TUN keys (tun: {} for every default), got a list"},
		{"tun: {}\nflows:\n  - {name: k, type: tcp, size: 1MB, stack: kernel, cc: vegas}\n",
			`x.yaml:3: flows.k.cc: "vegas" is not a congestion control of this machine's kernel (available: reno, cubic, bbr; loading its module adds one, as modprobe tcp_bbr does bbr)`},
		{"tun: {}\nflows:\n  - {name: k, type: tcp, size: 1MB, stack: kernel, cc: bbr2}\n",
			`x.yaml:3: flows.k.cc: "bbr2" is not a congestion control of this machine's kernel; did you mean "bbr"? (available: reno, cubic, bbr)`},
		{"tun: {}\nflows:\n  - {name: k, type: tcp, size: 1MB, stack: kernel, cc: [bbr]}\n",
			`x.yaml:3: flows.k.cc: expected a congestion control, got a list`},
		// netstack flows keep gVisor's list.
		{"tun: {}\nflows:\n  - {name: n, type: tcp, size: 1MB, cc: bbr}\n",
			`x.yaml:3: flows.n.cc: "bbr" is not a congestion control of netstack TCP (expected one of: reno, cubic)`},
		// An invalid stack leaves cc unchecked.
		{"tun: {}\nflows:\n  - {name: n, type: tcp, size: 1MB, cc: bbr, stack: linux}\n",
			`x.yaml:3: flows.n.stack: "linux" is not a flow stack (expected one of: netstack, kernel)`},
		{"tun: {}\nflows:\n  - {name: k, type: tcp, size: 1MB, stack: kernel, sack: false}\n",
			"x.yaml:3: flows.k.sack: a kernel flow cannot turn SACK off: the kernel's SACK is the system-wide sysctl net.ipv4.tcp_sack, not a socket option"},
		// Down, the peer's netstack sends: its congestion control.
		{"tun: {}\nflows:\n  - {name: k, type: tcp, size: 1MB, stack: kernel, direction: down, cc: bbr}\n",
			`x.yaml:3: flows.k.cc: "bbr" is not a congestion control of the peer's netstack, which sends a kernel flow down (expected one of: reno, cubic)`},
		// Kernel UDP datagrams fit the device's MTU.
		{"tun: {mtu: 1400}\nflows:\n  - {name: u, type: udp, stack: kernel, interval: 1ms, count: 1, packet_size: 1373}\n",
			"x.yaml:3: flows.u.packet_size: 1373 is out of range (expected 24 to 1372)"},
		{"tun: {address: ['fd99::1/64', 10.99.0.1/24]}\nflows:\n  - {name: u, type: udp, stack: kernel, interval: 1ms, count: 1, packet_size: 1453}\n",
			"x.yaml:3: flows.u.packet_size: 1453 is out of range (expected 24 to 1452)"},
		// Wi-Fi: the TUN's station is the kernel's.
		{"wifi: {stations: [{name: a}, {name: b}]}\ntun: {station: a}\nflows:\n  - {name: k, type: tcp, size: 1MB, stack: kernel, station: b}\n",
			"x.yaml:4: flows.k.station: the kernel sits behind station a (tun.station), so a kernel flow runs there"},
		{"wifi: {stations: [{name: a}, {name: b}, {name: c}]}\ntun: {station: [a, b]}\nflows:\n  - {name: k, type: tcp, size: 1MB, stack: kernel, station: c}\n",
			"x.yaml:4: flows.k.station: the kernel sits behind stations a, b (tun.station), so a kernel flow runs there"},
		{"wifi: {stations: [{name: a}, {name: b}]}\ntun: {station: [a, a]}\n",
			`x.yaml:2: tun.station: "a" is listed twice`},
		{"wifi: {stations: [{name: a}, {name: b}, {name: c}]}\ntun: {address: 10.99.0.1/30, station: [a, b, c]}\n",
			"x.yaml:2: tun.station: no address is left in 10.99.0.0/30 for station b: give tun.address a larger network"},
		{"wifi: {stations: [{name: a}, {name: b}]}\ntun: {station: a}\nflows:\n  - {name: n, type: tcp, size: 1MB, station: a}\n",
			"x.yaml:4: flows.n.station: station a is the kernel's (tun.station); a netstack flow needs another station, or stack: kernel"},
		{"wifi: {stations: [{name: a}]}\ntun: {station: a}\nflows:\n  - {name: k, type: tcp, size: 1MB, stack: kernel}\n",
			"x.yaml:4: flows.k: a flow of a scenario with a wifi cell needs a station"},
		// The SACK agreement of a station is between netstack flows.
		{"wifi: {stations: [{name: a}, {name: b}]}\ntun: {station: a}\nflows:\n  - {name: k, type: tcp, size: 1MB, stack: kernel, station: a}\n  - {name: n, type: tcp, size: 1MB, station: b, sack: false}\n  - {name: m, type: tcp, size: 1MB, station: b}\n",
			"x.yaml:6: flows.m.sack: the TCP flows of station b disagree on sack (a station is one host, which has SACK on or off)"},
	}
	for _, tt := range tests {
		_, err := parse(tt.src)
		if err == nil || err.Error() != tt.want {
			t.Errorf("Parse(%q):\n got %v\nwant %s", tt.src, err, tt.want)
		}
	}

	// The kernel's list is read only for kernel flows with a cc, once per
	// run; when it cannot be read, that is the error.
	calls := 0
	unreadable := func(src string) (*Plan, error) {
		return Parse("x.yaml", []byte(src), Options{CongestionControls: func() ([]string, error) {
			calls++
			return nil, errors.New("open /proc/sys/net/ipv4/tcp_available_congestion_control: no such file or directory")
		}})
	}
	if _, err := unreadable("tun: {}\nflows:\n  - {name: n, type: tcp, size: 1MB}\n  - {name: k, type: tcp, size: 1MB, stack: kernel}\n"); err != nil || calls != 0 {
		t.Errorf("without a cc: %v, %d reads", err, calls)
	}
	_, err := unreadable("tun: {}\nflows:\n  - {name: k, type: tcp, size: 1MB, stack: kernel, cc: bbr}\n  - {name: l, type: tcp, size: 1MB, stack: kernel, cc: cubic}\n")
	want := `x.yaml:3: flows.k.cc: cannot check "bbr" against the kernel's congestion controls: open /proc/sys/net/ipv4/tcp_available_congestion_control: no such file or directory
x.yaml:4: flows.l.cc: cannot check "cubic" against the kernel's congestion controls: open /proc/sys/net/ipv4/tcp_available_congestion_control: no such file or directory`
	if err == nil || err.Error() != want {
		t.Errorf("unreadable list:\n got %v\nwant %s", err, want)
	}
	if calls != 1 {
		t.Errorf("%d reads of the kernel's list, want 1", calls)
	}
}

// TestTUNOverrides checks that variants and --set reach tun and its keys,
// and switch flows to the kernel.
func TestTUNOverrides(t *testing.T) {
	src := `
flows:
  - {name: tcp, type: tcp, size: 1MB}
variants:
  - name: netstack
  - name: kernel
    set: {tun: {}, flows.tcp.stack: kernel, flows.tcp.cc: bbr}
  - name: small
    set:
      tun.mtu: 1280
      tun.address: [10.99.0.1/24, fd99::1/64]
      tun.forward: [{proto: tcp, listen: 5201, to: 127.0.0.1:5201}]
`
	p, err := parse(src, "tun.udp_idle=5s")
	if err != nil {
		t.Fatal(err)
	}
	// --set tun.udp_idle creates a tun section for every run.
	for _, run := range p.Runs {
		if run.TUN == nil || run.TUN.Relay.UDPIdle != 5*time.Second {
			t.Fatalf("%s: tun %+v", run.Variant, run.TUN)
		}
	}
	if f := p.Runs[0].Flows[0]; f.Stack != StackNetstack || f.CC != "" {
		t.Errorf("netstack: flow %+v", f)
	}
	if f := p.Runs[1].Flows[0]; f.Stack != StackKernel || f.CC != "bbr" || !p.Runs[1].KernelFlows() {
		t.Errorf("kernel: flow %+v", f)
	}
	want := withTUN(func(t *TUN) {
		t.Device.MTU, t.Relay.UDPIdle = 1280, 5*time.Second
		t.Device.Addrs, t.Peer = prefixes("10.99.0.1/24", "fd99::1/64"), addrs("10.99.0.2", "fd99::2")
		t.Relay.Forwards = []hostcfg.Forward{{Proto: "tcp", Listen: 5201, To: netip.MustParseAddrPort("127.0.0.1:5201")}}
	})
	if got := p.Runs[2].TUN; !reflect.DeepEqual(got, want) {
		t.Errorf("small: tun\n%+v\nwant\n%+v", got, want)
	}

	// Errors name the variant or --set that caused them.
	src = `
flows:
  - {name: tcp, type: tcp, size: 1MB}
variants:
  - name: no-tun
    set: {flows.tcp.stack: kernel}
  - name: bad-mtu
    set: {tun.mtu: 9000}
`
	_, err = parse(src)
	wantErr := `x.yaml:6: variant no-tun: flows.tcp.stack: stack kernel sends through the TUN device; add a tun section (tun: {} for every default)
x.yaml:8: variant bad-mtu: tun.mtu: 9000 is above the scenario's mtu (1500): packets larger than the path's MTU could not cross it`
	if err == nil || err.Error() != wantErr {
		t.Errorf("Parse error:\n%v\nwant:\n%s", err, wantErr)
	}
	_, err = parse("tun: {}\n", "tun.routes=0.0.0.0/0", "tun.nmae=x", "tun.forward=[{proto: udp, listen: 1, to: 127.0.0.1:1}, {proto: udp, listen: 1, to: 127.0.0.1:2}]")
	wantErr = `--set tun.nmae: unknown key; did you mean "name"?
--set tun.routes: 0.0.0.0/0 would route everything, including netjam's own relay sockets, into the device; route the networks to reach
--set tun.forward[1].listen: udp port 1 is forwarded twice`
	if err == nil || err.Error() != wantErr {
		t.Errorf("Parse error:\n%v\nwant:\n%s", err, wantErr)
	}
}

// TestTUNYAML checks that the scenario as run keeps the tun section, and
// parses back to the same TUN.
func TestTUNYAML(t *testing.T) {
	for _, src := range []string{
		"tun: {}\n",
		"tun: {netns: lab, address: [fd99::1/64, 10.99.0.1/24], transparent: {allow: 192.0.2.0/24}, routes: 192.0.2.0/24}\nflows: [{name: k, type: tcp, size: 1MB, stack: kernel, cc: bbr}]\n",
		"flows: [{name: k, type: tcp, size: 1MB}]\nvariants: [{name: k, set: {tun: {}, flows.k.stack: kernel}}]\n",
	} {
		p, err := parse(src)
		if err != nil {
			t.Fatalf("%q: %v", src, err)
		}
		for _, run := range p.Runs {
			out, err := run.YAML()
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(out), "tun:") {
				t.Errorf("%q: YAML without tun:\n%s", src, out)
			}
			back := mustParse(t, string(out))
			if !reflect.DeepEqual(back.TUN, run.TUN) || !reflect.DeepEqual(back.Flows, run.Flows) {
				t.Errorf("%q: round trip\n got %+v\nwant %+v\nYAML:\n%s", src, back.TUN, run.TUN, out)
			}
		}
	}
}

func TestDefaultPeer(t *testing.T) {
	for p, want := range map[string]string{
		"10.99.0.1/24":       "10.99.0.2",
		"10.99.0.254/24":     "10.99.0.253",
		"10.0.0.1/31":        "10.0.0.0",
		"10.0.0.0/31":        "10.0.0.1",
		"10.0.0.1/32":        "",
		"fd99::1/64":         "fd99::2",
		"fd99::/64":          "fd99::1",
		"fd99::ffff/112":     "fd99::fffe",
		"fd99::1/128":        "",
		"255.255.255.254/24": "255.255.255.253",
	} {
		a, ok := defaultPeer(netip.MustParsePrefix(p))
		if got := a.String(); !ok && want != "" || ok && got != want {
			t.Errorf("defaultPeer(%s) = %v, %v; want %q", p, a, ok, want)
		}
	}
	for p, want := range map[string]string{
		"10.99.0.1/24": "10.99.0.255",
		"10.99.0.1/20": "10.99.15.255",
		"10.99.0.1/8":  "10.255.255.255",
		"fd99::1/120":  "fd99::ff",
	} {
		if got := LastAddr(netip.MustParsePrefix(p)).String(); got != want {
			t.Errorf("LastAddr(%s) = %s, want %s", p, got, want)
		}
	}
}
