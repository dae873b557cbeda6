package stack

import "net/netip"

// checkAddrs reports through add every problem of the addresses of an
// interface (a Host's NIC or the kernel's side of a TUN): invalid,
// IPv4-mapped, not unicast, zoned, or listed twice. It returns whether the
// valid ones include IPv4 and IPv6 addresses.
func checkAddrs(addrs []netip.Prefix, add func(format string, a ...any)) (v4, v6 bool) {
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
