package scenario

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"
	"unicode"

	"go.yaml.in/yaml/v3"

	"github.com/netjam/netjam/hostcfg"
	"github.com/netjam/netjam/hostnet"
	"github.com/netjam/netjam/wifi"
)

// Defaults of the tun section.
const (
	defaultTUNName = "netjam0"
	maxTUNTCPIdle  = 7 * 24 * time.Hour
	maxIfName      = 15 // IFNAMSIZ - 1: the longest interface name Linux takes
	minMTUIPv6     = 1280
	netnsDir       = "/var/run/netns/" // where ip-netns(8) keeps named namespaces
)

// defaultTUNAddress is the kernel's address when tun has no address.
var defaultTUNAddress = netip.MustParsePrefix("10.99.0.1/24")

var (
	forwardProtos = []string{"tcp", "udp"}
)

// tun decodes the tun mapping. mtu is the scenario's, valid when mtuOK; w
// is the Wi-Fi cell, nil without one. A tun that is not a mapping is
// reported and decoded as all defaults, so that kernel flows are not also
// told to add a tun section.
func (d *decoder) tun(n *yaml.Node, mtu int, mtuOK bool, w *wifi.Config) *TUN {
	t := tunDefaults(mtu)
	f, ok := d.fields(n, "tun", "a mapping of TUN keys (tun: {} for every default)", tunKeys)
	if !ok {
		return t
	}
	if v := f["name"]; v != nil {
		if name, ok := d.text(v, "tun.name"); ok {
			if why := ifNameProblem(name); why != "" {
				d.errorf(v, "tun.name", "%s is not a valid interface name (%s)", quote(name), why)
			} else {
				t.Device.Name = name
			}
		}
	}
	fams := d.tunAddress(n, f["address"], t)
	d.tunPeer(f["peer"], t, fams)
	d.tunMTU(f["mtu"], t, fams, mtu, mtuOK)
	if v := f["routes"]; v != nil {
		t.Device.Routes = d.routes(v, fams)
	}
	d.tunSwitches(f, t)
	if v := f["netns"]; v != nil {
		t.Device.Netns = d.netns(v)
	}
	d.tunStation(n, f["station"], t, w)
	return t
}

// tunFamilies are the kernel's addresses on the device by family (0:
// IPv4, 1: IPv6), with their nodes, for the keys checked against them;
// ok is false when one of them is invalid, and those checks are skipped.
type tunFamilies struct {
	nodes    [2]*yaml.Node
	prefixes [2]netip.Prefix
	ok       bool
}

// tunAddress decodes tun.address, v (nil: the default, whose node is the
// tun's, n), into t.Device.Addrs.
func (d *decoder) tunAddress(n, v *yaml.Node, t *TUN) tunFamilies {
	fams := tunFamilies{ok: true}
	if v == nil {
		fams.nodes[0], fams.prefixes[0] = n, defaultTUNAddress
		return fams
	}
	before := d.count
	if v.Kind == yaml.SequenceNode && len(v.Content) == 0 {
		d.errorf(v, "tun.address", "expected at least one address, like 10.99.0.1/24 (leave address out for that default)")
	}
	t.Device.Addrs = nil
	for _, it := range d.scalars(v, "tun.address", "an address with its prefix length like 10.99.0.1/24") {
		p, ok := d.hostPrefix(it, "tun.address")
		if !ok {
			continue
		}
		fam := family(p.Addr())
		if fams.nodes[fam] != nil {
			d.errorf(it, "tun.address", "%s is a second %s address (tun takes at most one IPv4 and one IPv6 address)", p, familyName[fam])
			continue
		}
		fams.nodes[fam], fams.prefixes[fam] = it, p
		t.Device.Addrs = append(t.Device.Addrs, p)
	}
	fams.ok = d.count == before
	return fams
}

// tunPeer decodes tun.peer, v (nil: the default), into t.Peer: one per
// family of address, in the order of the addresses.
func (d *decoder) tunPeer(v *yaml.Node, t *TUN, fams tunFamilies) {
	var peers [2]netip.Addr
	if v != nil {
		peers = d.peers(v, fams)
	} else if fams.ok {
		for fam, an := range fams.nodes {
			if an != nil {
				peers[fam], _ = defaultPeer(fams.prefixes[fam])
			}
		}
	}
	t.Peer = nil
	for _, p := range t.Device.Addrs {
		if a := peers[family(p.Addr())]; a.IsValid() {
			t.Peer = append(t.Peer, a)
		}
	}
}

// peers decodes the peers given in tun.peer, by family.
func (d *decoder) peers(v *yaml.Node, fams tunFamilies) [2]netip.Addr {
	var peers [2]netip.Addr
	before := d.count
	var given [2]bool
	for _, it := range d.scalars(v, "tun.peer", "an IP address like 10.99.0.2") {
		a, ok := d.addr(it, "tun.peer")
		if !ok {
			continue
		}
		fam := family(a)
		if given[fam] {
			d.errorf(it, "tun.peer", "%s is a second %s peer (tun takes one peer per family of address)", a, familyName[fam])
			continue
		}
		given[fam] = true
		if fams.ok && d.peerOf(it, a, fams.nodes[fam], fams.prefixes[fam]) {
			peers[fam] = a
		}
	}
	if fams.ok && d.count == before {
		for fam, an := range fams.nodes {
			if an != nil && !given[fam] {
				d.errorf(v, "tun.peer", "no %s peer for tun.address %s (a peer given lists one per family of address)", familyName[fam], fams.prefixes[fam])
			}
		}
	}
	return peers
}

// peerOf reports whether a, at node it, may be the peer of the kernel's
// address p of its family (node an; nil: there is none).
func (d *decoder) peerOf(it *yaml.Node, a netip.Addr, an *yaml.Node, p netip.Prefix) bool {
	fam := family(a)
	switch {
	case an == nil:
		d.errorf(it, "tun.peer", "%s is %s, but tun.address has no %s address", a, familyName[fam], familyName[fam])
	case !p.Contains(a):
		d.errorf(it, "tun.peer", "%s is not in the network of tun.address %s (%s)", a, p, p.Masked())
	case a == p.Addr():
		d.errorf(it, "tun.peer", "%s is the kernel's own address (tun.address); the peer is netjam's end of the device", a)
	case !hostOf(p, a):
		d.errorf(it, "tun.peer", "%s is the %s address of %s, not a host address", a, reservedName(p, a), p.Masked())
	default:
		return true
	}
	return false
}

// tunMTU decodes tun.mtu, v (nil: the scenario's mtu, valid when mtuOK).
func (d *decoder) tunMTU(v *yaml.Node, t *TUN, fams tunFamilies, mtu int, mtuOK bool) {
	v6 := fams.nodes[1]
	if v == nil {
		if v6 != nil && mtuOK && mtu < minMTUIPv6 {
			d.errorf(v6, "tun.address", "%s needs an MTU of at least %d (IPv6's minimum), but the scenario's mtu is %d", fams.prefixes[1], minMTUIPv6, mtu)
		}
		return
	}
	m, ok := d.integer(v, "tun.mtu", minMTU, maxMTU)
	switch {
	case !ok:
	case mtuOK && int(m) > mtu:
		d.errorf(v, "tun.mtu", "%d is above the scenario's mtu (%d): packets larger than the path's MTU could not cross it", m, mtu)
	case v6 != nil && m < minMTUIPv6:
		d.errorf(v, "tun.mtu", "%d is below %d, IPv6's minimum MTU, and tun.address has an IPv6 address", m, minMTUIPv6)
	default:
		t.Device.MTU = int(m)
	}
}

// routes decodes tun.routes.
func (d *decoder) routes(v *yaml.Node, fams tunFamilies) []netip.Prefix {
	var out []netip.Prefix
	seen := map[netip.Prefix]bool{}
	for _, it := range d.scalars(v, "tun.routes", "a network like 192.0.2.0/24") {
		p, ok := d.network(it, "tun.routes")
		if !ok {
			continue
		}
		fam := family(p.Addr())
		switch {
		case p.Bits() == 0:
			d.errorf(it, "tun.routes", "%s would route everything, including netjam's own relay sockets, into the device; route the networks to reach", p)
		case p != p.Masked():
			d.errorf(it, "tun.routes", "%s has host bits set (the network is %s)", p, p.Masked())
		case seen[p]:
			d.errorf(it, "tun.routes", "%s is listed twice", p)
		case fams.ok && fams.nodes[fam] == nil:
			d.errorf(it, "tun.routes", "%s is %s, but tun.address has no %s address", p, familyName[fam], familyName[fam])
		default:
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

// tunSwitches decodes the keys of tun that switch its services and relays
// on and off and bound them: offload, services, forward, transparent, and
// the idle times.
func (d *decoder) tunSwitches(f map[string]*yaml.Node, t *TUN) {
	flag := func(key string, dst *bool) bool {
		v := f[key]
		if v == nil {
			return true
		}
		b, ok := d.boolean(v, "tun."+key)
		if ok {
			*dst = b
		}
		return ok
	}
	flag("offload", &t.Device.Offload)
	servicesOK := flag("services", &t.Relay.Services)
	if v := f["forward"]; v != nil {
		t.Relay.Forwards, t.ForwardPaths = d.forwards(v, t.Relay.Services && servicesOK)
	}
	if v := f["transparent"]; v != nil {
		t.Relay.Allow, t.Relay.Transparent = d.transparent(v), true
	}
	idle := func(key string, dst *time.Duration, max time.Duration) {
		if v := f[key]; v != nil {
			if idle, ok := d.duration(v, "tun."+key, true, max); ok {
				*dst = idle
			}
		}
	}
	idle("udp_idle", &t.Relay.UDPIdle, time.Hour)
	flag("host_routes", &t.Device.HostRoutes)
	idle("tcp_idle", &t.Relay.TCPIdle, maxTUNTCPIdle)
}

// netns decodes tun.netns: a namespace's name or the absolute path of its
// file.
func (d *decoder) netns(v *yaml.Node) string {
	s, ok := d.text(v, "tun.netns")
	switch {
	case !ok:
	case strings.HasPrefix(s, "/"):
		return s
	case strings.Contains(s, "/"):
		d.errorf(v, "tun.netns", "%s is a relative path; give a namespace name (as in ip netns) or an absolute path like /proc/PID/ns/net", quote(s))
	default:
		if why := nameProblem(s); why != "" {
			d.errorf(v, "tun.netns", "%s is not a valid namespace name (%s)", quote(s), why)
		} else {
			return netnsDir + s
		}
	}
	return ""
}

// tunStation decodes tun.station, v (nil: none), the stations of w the
// kernel sits behind, and gives each its addresses.
func (d *decoder) tunStation(n, v *yaml.Node, t *TUN, w *wifi.Config) {
	switch {
	case v != nil && w == nil:
		d.errorf(v, "tun.station", "there is no wifi cell in this scenario")
	case v == nil && w != nil:
		d.errorf(n, "tun.station", "with a wifi cell, tun needs a station: the one the kernel sits behind (or a list of them)")
	case v != nil:
		seen := map[string]bool{}
		for _, it := range d.scalars(v, "tun.station", "a station name") {
			if name, ok := d.station(it, "tun.station", w); ok {
				if seen[name] {
					d.errorf(it, "tun.station", "%s is listed twice", quote(name))
					continue
				}
				seen[name] = true
				t.Stations = append(t.Stations, name)
			}
		}
		if len(t.Stations) > 0 && len(t.Device.Addrs) > 0 {
			d.stationAddrs(v, t)
		}
	}
}

// forwards decodes tun.forward, and each forward's path ("" for every
// path); services tells whether the echo and discard ports are taken.
func (d *decoder) forwards(n *yaml.Node, services bool) ([]hostcfg.Forward, []string) {
	if n.Kind != yaml.SequenceNode {
		d.errorf(n, "tun.forward", "expected a list of forwards like {proto: tcp, listen: 5201, to: 127.0.0.1:5201}, got %s", describe(n))
		return nil, nil
	}
	var out []hostcfg.Forward
	var paths []string
	first := map[string]*yaml.Node{} // "tcp/5201/path": its first listen
	for i, item := range n.Content {
		path := fmt.Sprintf("tun.forward[%d]", i)
		f, ok := d.fields(item, path, "a mapping of proto, listen and to", forwardKeys)
		if !ok {
			continue
		}
		var fw hostcfg.Forward
		before := d.count
		if v := f["proto"]; v == nil {
			d.errorf(item, join(path, "proto"), "a forward needs a proto (tcp or udp)")
		} else {
			fw.Proto, _ = d.oneOf(v, join(path, "proto"), "protocol", forwardProtos)
		}
		lv := f["listen"]
		if lv == nil {
			d.errorf(item, join(path, "listen"), "a forward needs a listen port (the peer's port, 1 to 65535)")
		} else if p, ok := d.integer(lv, join(path, "listen"), 1, 65535); ok {
			fw.Listen = uint16(p)
		}
		if v := f["to"]; v == nil {
			d.errorf(item, join(path, "to"), "a forward needs a to address (the real server, like 127.0.0.1:5201)")
		} else {
			fw.To = d.forwardTo(v, join(path, "to"))
		}
		onPath := ""
		if v := f["path"]; v != nil {
			onPath, _ = d.text(v, join(path, "path"))
		}
		if fw.Proto != "" && fw.Listen != 0 {
			d.forwardOnce(fw, onPath, lv, join(path, "listen"), first, services)
		}
		if d.count == before {
			out, paths = append(out, fw), append(paths, onPath)
		}
	}
	if !slices.ContainsFunc(paths, func(p string) bool { return p != "" }) {
		paths = nil // no forward names a path
	}
	return out, paths
}

// forwardTo decodes the to address of a forward: an IP address and port.
func (d *decoder) forwardTo(v *yaml.Node, path string) netip.AddrPort {
	s, ok := d.text(v, path)
	if !ok {
		return netip.AddrPort{}
	}
	ap, err := netip.ParseAddrPort(s)
	switch {
	case err != nil:
		d.errorf(v, path, "%s is not an IP address and port like 127.0.0.1:5201 or [::1]:5201 (host names are not looked up)", quote(s))
	case ap.Port() == 0:
		d.errorf(v, path, "%s has port 0", ap)
	case ap.Addr().Unmap().IsUnspecified() || ap.Addr().IsMulticast():
		d.errorf(v, path, "%s is not a unicast address", ap)
	default:
		return ap
	}
	return netip.AddrPort{}
}

// forwardOnce reports a forward's listen port (node lv, at path) that is
// taken: by a forward before it on the same path (first holds their
// listen nodes, by "tcp/5201/path"), or while services are on, by the echo
// or discard service.
func (d *decoder) forwardOnce(fw hostcfg.Forward, onPath string, lv *yaml.Node, path string, first map[string]*yaml.Node, services bool) {
	key := fmt.Sprintf("%s/%d/%s", fw.Proto, fw.Listen, onPath)
	switch prev, dup := first[key]; {
	case dup && (d.origins[prev] != "" || prev.Line == 0):
		d.errorf(lv, path, "%s port %d is forwarded twice", fw.Proto, fw.Listen)
	case dup:
		d.errorf(lv, path, "%s port %d is forwarded twice (first at line %d)", fw.Proto, fw.Listen, prev.Line)
	case services && (fw.Listen == echoPort || fw.Listen == discardPort):
		svc := "echo"
		if fw.Listen == discardPort {
			svc = "discard"
		}
		d.errorf(lv, path, "port %d is the %s service's while services are on (set tun.services: false to forward it)", fw.Listen, svc)
	default:
		first[key] = lv
	}
}

// Ports of the peer's services.
const (
	echoPort    = 7
	discardPort = 9
)

// transparent decodes tun.transparent: the networks it allows.
func (d *decoder) transparent(n *yaml.Node) []netip.Prefix {
	f, ok := d.fields(n, "tun.transparent", "a mapping with allow, the destinations to relay to", transparentKeys)
	if !ok {
		return nil
	}
	v := f["allow"]
	if v == nil {
		d.errorf(n, "tun.transparent.allow", "transparent relaying needs allow, the networks it may relay to (netjam is never an open relay)")
		return nil
	}
	const path = "tun.transparent.allow"
	items := d.scalars(v, path, "a network like 192.0.2.0/24")
	if v.Kind == yaml.SequenceNode && len(v.Content) == 0 {
		d.errorf(v, path, "expected at least one network (netjam is never an open relay)")
	}
	var allow []netip.Prefix
	seen := map[netip.Prefix]bool{}
	for _, it := range items {
		p, ok := d.network(it, path)
		if !ok {
			continue
		}
		switch {
		case p.Bits() == 0:
			d.errorf(it, path, "%s allows every destination, and netjam is never an open relay: list the networks to reach", p)
		case p != p.Masked():
			d.errorf(it, path, "%s has host bits set (the network is %s)", p, p.Masked())
		case seen[p]:
			d.errorf(it, path, "%s is listed twice", p)
		case neverRelayed(p) != "":
			d.errorf(it, path, "%s is %s, which the relay never reaches whatever allow says (a forward reaches loopback)", p, neverRelayed(p))
		default:
			seen[p] = true
			allow = append(allow, p)
		}
	}
	return allow
}

// specialNets are the destinations the relay refuses whatever allow says
// (see stack's Relay), by what they are; IPv4-mapped networks are refused
// by network already, and broadcast addresses depend on the machine.
var specialNets = []struct {
	p    netip.Prefix
	what string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "unspecified (this host)"},
	{netip.MustParsePrefix("::/128"), "unspecified (this host)"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("::1/128"), "loopback"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("ff00::/8"), "multicast"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local"},
	{netip.MustParsePrefix("fe80::/10"), "link-local"},
}

// neverRelayed says what p is when all of it lies in a range the relay
// refuses; "" otherwise.
func neverRelayed(p netip.Prefix) string {
	for _, s := range specialNets {
		if s.p.Bits() <= p.Bits() && s.p.Contains(p.Addr()) {
			return s.what
		}
	}
	return ""
}

// scalars returns the items of n, one scalar or a list of scalars; want
// says what one item is. Items that are not scalars are reported and left
// out.
func (d *decoder) scalars(n *yaml.Node, path, want string) []*yaml.Node {
	switch n.Kind {
	case yaml.ScalarNode:
		return []*yaml.Node{n}
	case yaml.SequenceNode:
		var out []*yaml.Node
		for _, it := range n.Content {
			if d.scalar(it, path, want) {
				out = append(out, it)
			}
		}
		return out
	}
	d.errorf(n, path, "expected %s or a list of them, got %s", want, describe(n))
	return nil
}

// hostPrefix decodes the kernel's address on the device: a unicast host
// address with the length of its network's prefix, leaving room in that
// network for the peer.
func (d *decoder) hostPrefix(n *yaml.Node, path string) (netip.Prefix, bool) {
	p, err := netip.ParsePrefix(n.Value)
	if err != nil {
		if a, err := netip.ParseAddr(n.Value); err == nil && a.Zone() == "" {
			d.errorf(n, path, "%s needs a prefix length, like %s/%d", quote(n.Value), a, typicalBits(a))
		} else {
			d.errorf(n, path, "%s is not an address with a prefix length, like 10.99.0.1/24 or fd99::1/64", quote(n.Value))
		}
		return p, false
	}
	a := p.Addr()
	switch {
	case a.Is4In6():
		d.errorf(n, path, "%s is IPv4-mapped IPv6; write the IPv4 address as such (like 10.99.0.1/24)", p)
	case a.IsUnspecified() || a.IsMulticast() || a.IsLoopback():
		d.errorf(n, path, "%s is not a unicast host address", p)
	case p.Bits() == 0:
		d.errorf(n, path, "%s would route everything, including netjam's own relay sockets, into the device; give the network's prefix length, like %s/%d", p, a, typicalBits(a))
	case reservedName(p, a) == "network":
		d.errorf(n, path, "%s is the network's own address, not a host address (like %s/%d)", p, a.Next(), p.Bits())
	case reservedName(p, a) == "broadcast":
		d.errorf(n, path, "%s is the network's broadcast address, not a host address", p)
	default:
		if _, ok := defaultPeer(p); !ok {
			d.errorf(n, path, "%s leaves no other address in its network for the peer; use a shorter prefix, like %s/%d", p, a, typicalBits(a))
			return p, false
		}
		return p, true
	}
	return p, false
}

// addr decodes the peer's address: an IP address without prefix or zone.
func (d *decoder) addr(n *yaml.Node, path string) (netip.Addr, bool) {
	a, err := netip.ParseAddr(n.Value)
	switch {
	case err != nil:
		if p, err := netip.ParsePrefix(n.Value); err == nil {
			d.errorf(n, path, "%s has a prefix length; write the address alone (%s): the network is tun.address's", quote(n.Value), p.Addr())
		} else {
			d.errorf(n, path, "%s is not an IP address like 10.99.0.2 or fd99::2", quote(n.Value))
		}
	case a.Zone() != "":
		d.errorf(n, path, "%s has a zone; an address on the device takes none", a)
	case a.Is4In6():
		d.errorf(n, path, "%s is IPv4-mapped IPv6; write the IPv4 address as such (like 10.99.0.2)", a)
	default:
		return a, true
	}
	return a, false
}

// network decodes a network: an address and a prefix length. Whether host
// bits may be set is the caller's to say.
func (d *decoder) network(n *yaml.Node, path string) (netip.Prefix, bool) {
	p, err := netip.ParsePrefix(n.Value)
	if err != nil {
		if a, err := netip.ParseAddr(n.Value); err == nil && a.Zone() == "" {
			d.errorf(n, path, "%s needs a prefix length (%s/%d for this one address)", quote(n.Value), a, a.BitLen())
		} else {
			d.errorf(n, path, "%s is not a network like 192.0.2.0/24 or 2001:db8::/32", quote(n.Value))
		}
		return p, false
	}
	if p.Addr().Is4In6() {
		d.errorf(n, path, "%s is IPv4-mapped IPv6; write the IPv4 network as such (like 192.0.2.0/24)", p)
		return p, false
	}
	return p, true
}

// stationAddrs gives each station of t its kernel addresses: the first
// Device.Addrs's, each further one the next free hosts of their networks.
func (d *decoder) stationAddrs(n *yaml.Node, t *TUN) {
	used := map[netip.Addr]bool{}
	for _, p := range t.Peer {
		used[p] = true
	}
	next := make([]netip.Addr, len(t.Device.Addrs))
	for i, p := range t.Device.Addrs {
		used[p.Addr()] = true
		next[i] = p.Addr()
	}
	t.StationAddrs = nil
	for k, name := range t.Stations {
		var addrs []netip.Addr
		for i, p := range t.Device.Addrs {
			if k == 0 {
				addrs = append(addrs, p.Addr())
				continue
			}
			a := next[i].Next()
			for a.IsValid() && p.Contains(a) && (used[a] || !hostOf(p, a)) {
				a = a.Next()
			}
			if !a.IsValid() || !p.Contains(a) {
				d.errorf(n, "tun.station", "no address is left in %v for station %s: give tun.address a larger network", p.Masked(), name)
				return
			}
			used[a], next[i] = true, a
			addrs = append(addrs, a)
		}
		t.StationAddrs = append(t.StationAddrs, addrs)
	}
}

// Station returns the index in Stations of the station called name, or -1.
func (t *TUN) Station(name string) int {
	for i, s := range t.Stations {
		if s == name {
			return i
		}
	}
	return -1
}

// station decodes the name of a station of w.
func (d *decoder) station(n *yaml.Node, path string, w *wifi.Config) (string, bool) {
	name, ok := d.text(n, path)
	if !ok {
		return "", false
	}
	if w.Station(name) < 0 {
		var names []string
		for _, s := range w.Stations {
			names = append(names, s.Name)
		}
		d.errorf(n, path, "%s is not a station (expected one of: %s)", quote(name), strings.Join(names, ", "))
		return name, false
	}
	return name, true
}

// ifNameProblem returns why name is not an interface name Linux accepts,
// or "".
func ifNameProblem(name string) string {
	switch {
	case name == "":
		return "leave name out for " + defaultTUNName
	case len(name) > maxIfName:
		return fmt.Sprintf("at most %d bytes, Linux's limit", maxIfName)
	case name == "." || name == "..":
		return `"." and ".." are not names`
	case strings.ContainsAny(name, "/:%") || strings.IndexFunc(name, unicode.IsSpace) >= 0:
		return "no '/', ':', '%' or white space"
	}
	return ""
}

// typicalBits is the prefix length of a typical network of a's family,
// for examples in messages.
func typicalBits(a netip.Addr) int {
	if a.Is4() {
		return 24
	}
	return 64
}

// family is 0 for an IPv4 address, 1 for IPv6: the index of familyName.
func family(a netip.Addr) int {
	if a.Is4() {
		return 0
	}
	return 1
}

var familyName = [2]string{"IPv4", "IPv6"}

// hostOf reports whether a, in network p, may be a host's address: any
// address but, in an IPv4 network larger than /31, the network's own
// address and its broadcast address.
func hostOf(p netip.Prefix, a netip.Addr) bool {
	return reservedName(p, a) == ""
}

// reservedName returns "network" or "broadcast" when a is that address of
// the IPv4 network p (larger than /31), else "".
func reservedName(p netip.Prefix, a netip.Addr) string {
	if !a.Is4() || p.Bits() >= 31 {
		return ""
	}
	switch a {
	case p.Masked().Addr():
		return "network"
	case LastAddr(p):
		return "broadcast"
	}
	return ""
}

// LastAddr returns the last address of network p (an IPv4 network's
// broadcast address).
func LastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := range b {
		bits := p.Bits() - 8*i // of this byte in the prefix
		switch {
		case bits <= 0:
			b[i] = 0xff
		case bits < 8:
			b[i] |= 0xff >> bits
		}
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// defaultPeer returns the peer of the kernel's address p: the next address
// (10.99.0.1/24 gives 10.99.0.2), or the one before when the next is not
// a host of p's network (10.99.0.254/24 gives 10.99.0.253).
func defaultPeer(p netip.Prefix) (netip.Addr, bool) {
	for _, a := range []netip.Addr{p.Addr().Next(), p.Addr().Prev()} {
		if a.IsValid() && p.Contains(a) && hostOf(p, a) {
			return a, true
		}
	}
	return netip.Addr{}, false
}

// kernelCongestionControls returns the congestion controls the machine's
// kernel offers: what Options.CongestionControls gives when nil. Off
// Linux it fails with hostnet's "TUN mode needs Linux" error.
func kernelCongestionControls() ([]string, error) {
	return hostnet.KernelCongestionControls()
}

// KernelFlows reports whether any flow of s runs on the kernel's TCP/IP,
// through the TUN device.
func (s *Scenario) KernelFlows() bool {
	for _, f := range s.Flows {
		if f.Stack == StackKernel {
			return true
		}
	}
	return false
}
