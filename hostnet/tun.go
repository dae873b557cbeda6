package hostnet

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/netjam/netjam/netif"
)

// TUNConfig describes the TUN device of OpenTUN.
type TUNConfig struct {
	// Name is the device's name, at most 15 bytes ("netjam0"). Empty lets
	// the kernel choose (tun0, tun1, ...). When a persistent TUN device of
	// that name exists (sudo ip tuntap add dev netjam0 mode tun user
	// NAME), OpenTUN attaches to it instead of creating one, and Close
	// leaves it in place.
	Name string
	// Addrs are the kernel's addresses on the device with their prefixes
	// (10.99.0.1/24, fd99::1/64): the prefix routes the peer (10.99.0.2)
	// into the device. IPv6 addresses are added without duplicate address
	// detection, so they are usable at once. Addresses a persistent
	// device already has are kept and not removed by Close.
	Addrs []netip.Prefix
	// MTU is the device's MTU, netif.MinMTU..netif.MaxMTU (at least
	// netif.MinMTUIPv6 with an IPv6 address); 0 means 1500.
	MTU int
	// Routes are extra routes through the device (for transparent mode:
	// the networks whose traffic should cross the emulated path). They
	// must not have host bits set; each needs an address of its family in
	// Addrs, which becomes the source the kernel picks.
	Routes []netip.Prefix
	// Offload turns segmentation and checksum offload on: use ReadPacket
	// and WritePacket, which carry each packet's GSO description. A
	// kernel that refuses TSO leaves the device with virtio-net headers
	// but no large segments (TUN.Offload then reports false).
	Offload bool
	// Netns is the path of the network namespace to put the device in
	// (/var/run/netns/NAME, /proc/PID/ns/net); empty means the namespace
	// of the calling thread. The TUN keeps a netlink socket in that
	// namespace, so Close works from any goroutine.
	Netns string
	// HostRoutes lets OpenTUN add Routes outside the networks of Addrs
	// to the caller's own namespace when netjam holds CAP_NET_ADMIN
	// without being root (a file capability: setcap cap_net_admin+ep).
	// Any user who may run the binary then has that capability, and
	// routes of theirs would send other users' traffic into a device
	// they read, so OpenTUN refuses such routes unless asked explicitly.
	HostRoutes bool
}

// defaultTUNMTU is the MTU of a TUNConfig whose MTU is 0: Ethernet's.
const defaultTUNMTU = 1500

// maxIfName is the longest interface name Linux accepts (IFNAMSIZ - 1).
const maxIfName = 15

// Validate reports every invalid field of c, each as its own error. A zero
// MTU is valid (it means 1500).
func (c *TUNConfig) Validate() error {
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	switch {
	case len(c.Name) > maxIfName:
		add("name: %q is longer than %d bytes", c.Name, maxIfName)
	case c.Name == "." || c.Name == "..":
		add("name: %q is not a valid interface name", c.Name)
	case strings.ContainsAny(c.Name, "/: \t\n%"):
		add("name: %q must not contain '/', ':', '%%' or white space", c.Name)
	}
	if len(c.Addrs) == 0 {
		add("addrs: at least one address is required")
	}
	v4, v6 := netif.CheckAddrs(c.Addrs, add)
	netif.CheckMTU(c.mtu(), v6, add)
	routes := make(map[netip.Prefix]bool)
	for i, r := range c.Routes {
		switch {
		case !r.IsValid():
			add("routes[%d]: %v is not a valid prefix", i, r)
			continue
		case r.Addr().Is4In6():
			add("routes[%d]: %v: use the plain IPv4 form, not IPv4-mapped IPv6", i, r)
		case r != r.Masked():
			add("routes[%d]: %v has host bits set (the network is %v)", i, r, r.Masked())
		case routes[r]:
			add("routes[%d]: %v is listed twice", i, r)
		case r.Addr().Is4() && !v4:
			add("routes[%d]: %v is IPv4 but addrs has no IPv4 address", i, r)
		case r.Addr().Is6() && !v6:
			add("routes[%d]: %v is IPv6 but addrs has no IPv6 address", i, r)
		}
		routes[r] = true
	}
	return errors.Join(errs...)
}

func (c *TUNConfig) mtu() int {
	if c.MTU == 0 {
		return defaultTUNMTU
	}
	return c.MTU
}
