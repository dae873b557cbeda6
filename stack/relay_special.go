package stack

import (
	"net/netip"
)

// The destinations the relay refuses whatever Allow says (see decide).

// refusal is why the relay refused a destination.
type refusal int

// Reasons for refusing a destination, in the order special checks them.
const (
	refusedNotAllowed  refusal = iota // neither the peer nor in Allow
	refusedUnspecified                // 0.0.0.0/8, ::
	refusedLoopback                   // 127.0.0.0/8, ::1
	refusedMulticast                  // 224.0.0.0/4, ff00::/8
	refusedBroadcast                  // 255.255.255.255, a network's broadcast
	refusedLinkLocal                  // 169.254.0.0/16, fe80::/10
	refusedMapped                     // ::ffff:0:0/96
	nRefusals
)

// refusalNames name the reasons in hostcfg.RelayCounters.RefusedBy and in logs.
var refusalNames = [nRefusals]string{"not_allowed", "unspecified", "loopback", "multicast", "broadcast", "link_local", "ipv4_mapped"}

func (w refusal) String() string { return refusalNames[w] }

// special returns why the relay refuses destination a whatever Allow
// says, or refusedNotAllowed when a is an ordinary unicast address.
//
// A host socket dialled to any of these does not reach what the client
// named: Linux delivers 0.0.0.0 and :: to the machine's own loopback (so a
// datagram the client sends to 0.0.0.0:P reaches a service on 127.0.0.1:P
// of the host), an IPv4-mapped address is dialled as the IPv4 address it
// holds (::ffff:127.0.0.1 is loopback again), and multicast, broadcast and
// link-local destinations reach the machine's own networks rather than a
// destination behind the path. Forwards are not checked: only an explicit
// Forward may reach the host's loopback.
func (r *Relay) special(a netip.Addr) refusal {
	switch {
	case a.Is4In6():
		return refusedMapped
	case a.IsUnspecified() || a.Is4() && a.As4()[0] == 0:
		// 0.0.0.0/8 is "this network" (RFC 1122 3.2.1.3): Linux
		// treats the whole block as the local host.
		return refusedUnspecified
	case a.IsLoopback():
		return refusedLoopback
	case a.IsMulticast():
		return refusedMulticast
	case a == broadcast4 || r.broadcast[a]:
		return refusedBroadcast
	case a.IsLinkLocalUnicast():
		return refusedLinkLocal
	}
	return refusedNotAllowed
}

// broadcast4 is IPv4's limited broadcast address.
var broadcast4 = netip.AddrFrom4([4]byte{255, 255, 255, 255})

// directedBroadcasts returns the broadcast address of each IPv4 network
// in ps that has one (not /31 or /32, RFC 3021).
func directedBroadcasts(ps []netip.Prefix) map[netip.Addr]bool {
	out := make(map[netip.Addr]bool)
	for _, p := range ps {
		if !p.Addr().Is4() || p.Bits() > 30 {
			continue
		}
		b := p.Masked().Addr().As4()
		host := ^uint32(0) >> p.Bits()
		for i := range 4 {
			b[i] |= byte(host >> (24 - 8*i))
		}
		out[netip.AddrFrom4(b)] = true
	}
	return out
}
