package stack

import (
	"errors"
	"net/netip"
	"os/exec"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/netjam/netjam/hostnet"
	"github.com/netjam/netjam/internal/testenv"
)

// What the tests of tun_relay_linux_test.go need of the host: network
// namespaces (package hostnet's, entered only on threads of their own)
// and netlink handles inside them (packets_test.go makes their packets). The tests make
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
