package hostnet

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"syscall"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// A TUN device's configuration over netlink (MTU, addresses, up, routes)
// and its teardown, which removes exactly what configure added.

// Dropped returns how many packets the kernel dropped on their way into
// the device before they could be read (the device's tx_dropped: its
// queue was full because the reader fell behind). ok is false when that
// cannot be read: a device from TUNFromFile, whose namespace netjam does
// not hold, or one already closed.
func (t *TUN) Dropped() (n uint64, ok bool) {
	if t.nl == nil {
		return 0, false
	}
	l, err := t.nl.LinkByIndex(t.index)
	if err != nil || l.Attrs().Statistics == nil {
		return 0, false
	}
	return l.Attrs().Statistics.TxDropped, true
}

// deviceQueue is the length, in packets, of the queue a device netjam makes
// keeps between the kernel and netjam's read loop (its txqueuelen; the
// kernel's default for a TUN device is 500). The loop reads one packet per
// system call; when the scheduler runs something else on its core for a
// few milliseconds, a sender at 1 Gbit/s of full datagrams (83k a second)
// outruns 500 packets, and the kernel drops the rest at the device before
// netjam sees them: the machine's loss, not the path's. 4096 packets hold
// 50 ms of such a burst, as a NIC's receive ring would (BenchmarkTUNUDP,
// up at 1 Gbit/s with 4 MiB socket buffers: 21k to 51k drops at the device
// per 5 s with 500, 0 to 3.7k with 4096, in 5 runs each alternating).
//
// The queue is the kernel's, counted in packets: it holds at most 4096
// sk_buffs, 6 MiB of full-sized packets, or 256 MiB if every one were a
// 64 KiB segment that netjam does not read (it reads as fast as it can and
// sheds at its own input, so the queue fills only while it is not
// scheduled). A persistent device netjam attaches to keeps its own.
const deviceQueue = 4096

// configure brings the device to cfg: MTU, addresses, up, routes. What is
// already as wanted is left alone (and so needs no privilege); what it
// changes is recorded for teardown.
func (t *TUN) configure(cfg TUNConfig, l netlink.Link) error {
	if mtu := l.Attrs().MTU; mtu != t.mtu {
		if err := t.nl.LinkSetMTU(l, t.mtu); err != nil {
			return t.privErr(cfg, fmt.Sprintf("set MTU %d on %s", t.mtu, t.name), err)
		}
		if t.attached {
			t.oldMTU = mtu
		}
	}
	if !t.attached && l.Attrs().TxQLen < deviceQueue {
		if err := t.nl.LinkSetTxQLen(l, deviceQueue); err != nil {
			return t.privErr(cfg, fmt.Sprintf("set the queue of %s to %d packets", t.name, deviceQueue), err)
		}
	}
	if err := t.addAddrs(cfg, l); err != nil {
		return err
	}

	// A device of netjam's own without an IPv6 address gets no
	// link-local one either, so the kernel sends nothing into it by
	// itself (router solicitations, MLD reports): a path with no traffic
	// carries none. (On a kernel without IPv6 there is nothing to turn
	// off, and the request fails harmlessly.)
	if !t.attached && !slices.ContainsFunc(cfg.Addrs, func(p netip.Prefix) bool { return p.Addr().Is6() }) {
		t.nl.LinkSetIP6AddrGenMode(l, ip6AddrGenModeNone)
	}

	if l.Attrs().Flags&net.FlagUp == 0 {
		if err := t.nl.LinkSetUp(l); err != nil {
			return t.privErr(cfg, "set "+t.name+" up", err)
		}
		t.wasDown = t.attached
	}
	return t.addRoutes(cfg)
}

// privErr is configure's error for op: a *PrivilegeError when the kernel
// refused for want of CAP_NET_ADMIN, naming the ways to get it.
func (t *TUN) privErr(cfg TUNConfig, op string, err error) error {
	if errors.Is(err, syscall.EPERM) {
		fixes := []string{
			"run netjam as root: sudo " + exeName() + " ...",
			"give the netjam binary the capability once (again after each rebuild): sudo setcap cap_net_admin+ep " + exeName(),
		}
		if t.attached {
			fixes = append(fixes, fmt.Sprintf("configure the persistent device %s once as root, so netjam finds it ready and changes nothing: %s",
				t.name, strings.Join(setupCommands(t.name, cfg), " && ")))
		}
		return &PrivilegeError{Op: op, Err: syscall.EPERM, Need: "configuring a network device needs CAP_NET_ADMIN.", Fixes: fixes}
	}
	return fmt.Errorf("hostnet: TUN: %s: %w", op, err)
}

// addAddrs adds the addresses of cfg the device does not have yet.
func (t *TUN) addAddrs(cfg TUNConfig, l netlink.Link) error {
	have := make(map[netip.Prefix]bool)
	if t.attached {
		as, err := t.nl.AddrList(l, netlink.FAMILY_ALL)
		if err != nil {
			return fmt.Errorf("hostnet: TUN: listing addresses of %s: %w", t.name, err)
		}
		for _, a := range as {
			if p, ok := prefixOf(a.IPNet); ok {
				have[p] = true
			}
		}
	}
	for _, p := range cfg.Addrs {
		if have[p] {
			continue
		}
		a := &netlink.Addr{IPNet: ipNet(p)}
		if p.Addr().Is6() {
			// Without DAD the address is usable at once rather than
			// tentative for a second; on a point-to-point device there
			// is nobody to collide with.
			a.Flags = unix.IFA_F_NODAD
		}
		if err := t.nl.AddrAdd(l, a); err != nil {
			if errors.Is(err, syscall.EACCES) && p.Addr().Is6() {
				return fmt.Errorf("hostnet: TUN: add address %v to %s: %w (is IPv6 disabled? sysctl net.ipv6.conf.%[2]s.disable_ipv6)", p, t.name, err)
			}
			return t.privErr(cfg, fmt.Sprintf("add address %v to %s", p, t.name), err)
		}
		t.addrs = append(t.addrs, p)
	}
	return nil
}

// addRoutes adds the routes of cfg through the device.
func (t *TUN) addRoutes(cfg TUNConfig) error {
	for _, r := range cfg.Routes {
		// Looked for first: the kernel checks the privilege before it
		// finds that a route exists.
		if t.attached && t.routeVia(r) {
			continue // a persistent device's own route, not ours to remove
		}
		err := t.nl.RouteAdd(&netlink.Route{LinkIndex: t.index, Dst: ipNet(r)})
		if errors.Is(err, syscall.EEXIST) {
			return fmt.Errorf("hostnet: TUN: a route to %v exists already through another device, so its traffic would not reach %s: remove it or leave %[1]v out of the routes", r, t.name)
		}
		if err != nil {
			return t.privErr(cfg, fmt.Sprintf("add route %v dev %s", r, t.name), err)
		}
		t.routes = append(t.routes, r)
	}
	return nil
}

// routeVia reports whether the main table has a route to exactly r through
// the device.
func (t *TUN) routeVia(r netip.Prefix) bool {
	routes, err := t.nl.RouteListFiltered(nlFamily(r.Addr()), &netlink.Route{Dst: ipNet(r), LinkIndex: t.index},
		netlink.RT_FILTER_DST|netlink.RT_FILTER_OIF)
	return err == nil && len(routes) > 0
}

// teardown undoes what open did; it copes with a partly opened TUN.
func (t *TUN) teardown() error {
	var errs []error
	gone := func(err error) bool {
		return err == nil || errors.Is(err, syscall.ESRCH) || errors.Is(err, syscall.ENOENT) ||
			errors.Is(err, syscall.EADDRNOTAVAIL) || errors.Is(err, syscall.ENODEV) || isLinkNotFound(err)
	}
	if t.nl != nil && t.index != 0 {
		for _, r := range t.routes {
			if err := t.nl.RouteDel(&netlink.Route{LinkIndex: t.index, Dst: ipNet(r)}); !gone(err) {
				errs = append(errs, fmt.Errorf("removing route %v: %w", r, err))
			}
		}
		l := &netlink.Tuntap{LinkAttrs: netlink.LinkAttrs{Index: t.index, Name: t.name}}
		for _, a := range t.addrs {
			if err := t.nl.AddrDel(l, &netlink.Addr{IPNet: ipNet(a)}); !gone(err) {
				errs = append(errs, fmt.Errorf("removing address %v: %w", a, err))
			}
		}
		if t.wasDown {
			if err := t.nl.LinkSetDown(l); !gone(err) {
				errs = append(errs, fmt.Errorf("setting %s down: %w", t.name, err))
			}
		}
		if t.oldMTU != 0 {
			if err := t.nl.LinkSetMTU(l, t.oldMTU); !gone(err) {
				errs = append(errs, fmt.Errorf("restoring MTU %d: %w", t.oldMTU, err))
			}
		}
	}
	if t.f != nil {
		if err := t.f.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if t.nl != nil && t.index != 0 && !t.attached {
		// The last close of a non-persistent device deletes it, unless
		// some other process holds a descriptor of it.
		if l, err := t.nl.LinkByIndex(t.index); err == nil && l.Attrs().Name == t.name {
			if err := t.nl.LinkDel(l); !gone(err) {
				errs = append(errs, fmt.Errorf("deleting %s: %w", t.name, err))
			}
		}
	}
	if t.nl != nil {
		t.nl.Close()
	}
	if t.ns.IsOpen() {
		t.ns.Close()
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("hostnet: TUN %s: closing: %w", t.name, err)
	}
	return nil
}

func isLinkNotFound(err error) bool {
	var nf netlink.LinkNotFoundError
	return errors.As(err, &nf)
}

func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

func prefixOf(n *net.IPNet) (netip.Prefix, bool) {
	if n == nil {
		return netip.Prefix{}, false
	}
	a, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	ones, _ := n.Mask.Size()
	return netip.PrefixFrom(a.Unmap(), ones), true
}

func nlFamily(a netip.Addr) int {
	if a.Is4() {
		return netlink.FAMILY_V4
	}
	return netlink.FAMILY_V6
}
