package hostnet

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/netjam/netjam/internal/testenv"
)

// The tests of this file and of stack/tun_relay_linux_test.go make real TUN devices,
// each inside a network namespace of its own that ends with the test (the
// kernel deletes a namespace's devices and routes with it), so nothing
// they do can reach the machine's own network. They need root and
// /dev/net/tun: without them they are skipped, saying why, unless
// NETJAM_REQUIRE_TUN=1 (CI sets it), which turns the skip into a failure.

// inNetns runs f with the calling thread in ns: sockets f opens and
// processes it starts live in ns.
func inNetns(ns netns.NsHandle, f func() error) error {
	var err error
	onThread(func() {
		if err = netns.Set(ns); err == nil {
			err = f()
		}
	})
	return err
}

// newNetns returns a new network namespace that ends with the test (when
// its handle is closed and nothing runs in it any more). Its loopback
// device is up.
func newNetns(t testing.TB) netns.NsHandle {
	t.Helper()
	testenv.RequireTUN(t)
	n, err := NewNetns()
	if err != nil {
		testenv.Missing(t, fmt.Sprintf("cannot make a network namespace: %v", err))
	}
	ns := n.h
	t.Cleanup(func() { n.Close() })
	return ns
}

// nsPath is a path naming ns, for TUNConfig.Netns.
func nsPath(ns netns.NsHandle) string { return fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), int(ns)) }

// nlAt returns a netlink handle in ns, closed at the end of the test.
func nlAt(t testing.TB, ns netns.NsHandle) *netlink.Handle {
	t.Helper()
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h
}

// startIn starts cmd inside ns.
func startIn(ns netns.NsHandle, cmd *exec.Cmd) error {
	return inNetns(ns, cmd.Start)
}

// runIn runs cmd inside ns and returns its combined output.
func runIn(ns netns.NsHandle, cmd *exec.Cmd) (string, error) {
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := startIn(ns, cmd); err != nil {
		return "", err
	}
	err := cmd.Wait()
	return out.String(), err
}

// routesTo lists the main table's routes to exactly p.
func routesTo(h *netlink.Handle, p netip.Prefix) []netlink.Route {
	rs, _ := h.RouteListFiltered(nlFamily(p.Addr()), &netlink.Route{Dst: ipNet(p)}, netlink.RT_FILTER_DST)
	return rs
}

// addrsOf lists the addresses of link l.
func addrsOf(t testing.TB, h *netlink.Handle, l netlink.Link) map[netip.Prefix]bool {
	t.Helper()
	as, err := h.AddrList(l, netlink.FAMILY_ALL)
	if err != nil {
		t.Fatal(err)
	}
	m := make(map[netip.Prefix]bool)
	for _, a := range as {
		if p, ok := prefixOf(a.IPNet); ok {
			m[p] = true
		}
	}
	return m
}

// checkGone fails t unless the device and the routes are gone from ns.
func checkGone(t testing.TB, h *netlink.Handle, name string, routes ...netip.Prefix) {
	t.Helper()
	if l, err := h.LinkByName(name); !isLinkNotFound(err) {
		t.Errorf("device %s is still there (%v, %v)", name, l, err)
	}
	for _, r := range routes {
		if rs := routesTo(h, r); len(rs) != 0 {
			t.Errorf("route %v is still there: %v", r, rs)
		}
	}
}

var (
	tunAddrs  = []netip.Prefix{netip.MustParsePrefix("10.99.0.1/24"), netip.MustParsePrefix("fd99::1/64")}
	tunRoutes = []netip.Prefix{netip.MustParsePrefix("10.99.1.0/24"), netip.MustParsePrefix("fd99:1::/64")}
)

// TestTUNOpenClose opens a device with addresses, MTU and routes, checks
// each, and checks that Close removes all of it, wakes a blocked Read, and
// is idempotent.
func TestTUNOpenClose(t *testing.T) {
	ns := newNetns(t)
	nl := nlAt(t, ns)
	tun, err := OpenTUN(TUNConfig{Name: "netjam0", Addrs: tunAddrs, MTU: 1400, Routes: tunRoutes, Netns: nsPath(ns)})
	if err != nil {
		t.Fatal(err)
	}
	defer tun.Close()
	if tun.Name() != "netjam0" || tun.MTU() != 1400 {
		t.Errorf("name %q, MTU %d", tun.Name(), tun.MTU())
	}
	l, err := nl.LinkByName("netjam0")
	if err != nil {
		t.Fatal(err)
	}
	if tt, ok := l.(*netlink.Tuntap); !ok || tt.Mode != netlink.TUNTAP_MODE_TUN || tt.Flags&netlink.TUNTAP_NO_PI == 0 || !tt.NonPersist {
		t.Errorf("device is %#v, want a non-persistent TUN device without packet information", l)
	}
	if a := l.Attrs(); a.MTU != 1400 || a.Flags&net.FlagUp == 0 || a.Index != tun.Index() {
		t.Errorf("MTU %d, flags %v, index %d (TUN says %d)", a.MTU, a.Flags, a.Index, tun.Index())
	}
	have := addrsOf(t, nl, l)
	for _, a := range tunAddrs {
		if !have[a] {
			t.Errorf("address %v missing: %v", a, have)
		}
	}
	for _, r := range tunRoutes {
		if rs := routesTo(nl, r); len(rs) != 1 || rs[0].LinkIndex != tun.Index() {
			t.Errorf("route %v: %v", r, rs)
		}
	}

	read := make(chan error, 1)
	go func() {
		buf := make([]byte, 2000)
		for {
			if _, err := tun.Read(buf); err != nil {
				read <- err
				return
			}
		}
	}()
	if err := tun.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-read:
		if !errors.Is(err, os.ErrClosed) {
			t.Errorf("Read after Close: %v, want os.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not wake a blocked Read")
	}
	if err := tun.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	checkGone(t, nl, "netjam0", tunRoutes...)
}

// TestTUNReadWrite passes a datagram each way between a kernel socket
// and the device: Read returns what the kernel sends, Write and WriteVec
// (the packet in several slices) deliver to the kernel.
// testTUN opens a device with the first test address in a namespace of
// its own; both go with the test.
func testTUN(t *testing.T) (netns.NsHandle, *TUN) {
	t.Helper()
	ns := newNetns(t)
	tun, err := OpenTUN(TUNConfig{Addrs: tunAddrs[:1], Netns: nsPath(ns)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tun.Close() })
	return ns, tun
}

func TestTUNReadWrite(t *testing.T) {
	ns, tun := testTUN(t)
	if !strings.HasPrefix(tun.Name(), "tun") || tun.MTU() != 1500 {
		t.Errorf("name %q and MTU %d, want the kernel's tunN and 1500", tun.Name(), tun.MTU())
	}
	var c *net.UDPConn
	if err := inNetns(ns, func() (err error) {
		c, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.MustParseAddrPort("10.99.0.1:4000")))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	peer := netip.MustParseAddrPort("10.99.0.2:5000")

	if _, err := c.WriteToUDPAddrPort([]byte("to the device"), peer); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 2000)
	deadline := time.Now().Add(5 * time.Second)
	for {
		// The kernel may send other things first (IPv6 router
		// solicitations do not apply: this device has no IPv6).
		n, err := tun.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		if n > 28 && buf[0]>>4 == 4 && buf[9] == 17 && string(buf[28:n]) == "to the device" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the datagram never came out of the device")
		}
	}

	for i, write := range []func([]byte) (int, error){
		tun.Write,
		func(p []byte) (int, error) { return tun.WriteVec([][]byte{p[:10], {}, p[10:30], p[30:]}) },
	} {
		msg := fmt.Sprintf("from the device %d", i)
		p := udpDatagram(peer, netip.MustParseAddrPort("10.99.0.1:4000"), []byte(msg))
		if n, err := write(p); err != nil || n != len(p) {
			t.Fatalf("write %d: %d, %v", i, n, err)
		}
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, from, err := c.ReadFromUDPAddrPort(buf)
		if err != nil || string(buf[:n]) != msg || from != peer {
			t.Fatalf("socket read %q from %v (%v), want %q from %v", buf[:n], from, err, msg, peer)
		}
	}
}

// sendInto sends n datagrams of msg from ns toward the peer (10.99.0.2)
// and returns how many the socket refused (ENOBUFS: the queue in front of
// the device was full).
func sendInto(t *testing.T, ns netns.NsHandle, n int, msg string) (refused int) {
	t.Helper()
	var c *net.UDPConn
	if err := inNetns(ns, func() (err error) {
		c, err = net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.MustParseAddrPort("10.99.0.2:5000")))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for range n {
		if _, err := c.Write([]byte(msg)); err != nil {
			refused++
		}
	}
	return refused
}

// TestTUNDropped fills the device's queue while nothing reads it: the
// kernel drops the rest, and Dropped says how many.
func TestTUNDropped(t *testing.T) {
	ns, tun := testTUN(t)
	if n, ok := tun.Dropped(); !ok || n != 0 {
		t.Fatalf("a new device: Dropped %d, %v; want 0, true", n, ok)
	}
	const sent = deviceQueue + 3000
	refused := sendInto(t, ns, sent, "into a full queue")
	n, ok := tun.Dropped()
	t.Logf("%d datagrams sent, %d refused by the socket, %d dropped by the device", sent, refused, n)
	// The device keeps its queue's worth, and the qdisc in front of it
	// at most 1000 more.
	if got, took := int(n), sent-refused; !ok || got > took-deviceQueue || got < took-deviceQueue-1000 {
		t.Errorf("Dropped %d, %v; want all but %d to %d of the %d the socket took", n, ok, deviceQueue, deviceQueue+1000, took)
	}
}

// TestTUNQueueHoldsBurst sends a burst six times the kernel's default
// queue (500 packets) while nothing reads the device, as when netjam's
// read loop is not scheduled for a few milliseconds: the device holds it
// all, and the reader then gets every datagram.
func TestTUNQueueHoldsBurst(t *testing.T) {
	ns, tun := testTUN(t)
	const sent, msg = 3000, "a burst"
	refused := sendInto(t, ns, sent, msg)
	if n, ok := tun.Dropped(); !ok || n != 0 || refused != 0 {
		t.Fatalf("a burst of %d: the socket refused %d, the device dropped %d (%v); want none", sent, refused, n, ok)
	}
	got := make(chan int, 1)
	go func() {
		buf := make([]byte, 2048)
		k := 0
		for k < sent {
			n, err := tun.Read(buf)
			if err != nil {
				break
			}
			if strings.HasSuffix(string(buf[:n]), msg) {
				k++
			}
		}
		got <- k
	}()
	select {
	case k := <-got:
		if k != sent {
			t.Errorf("read %d datagrams of the burst, want %d", k, sent)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the burst did not come out of the device in 10 s") // Close (cleanup) ends the reader
	}
}

// addTuntap makes the persistent device d (without packet information) in
// ns, as `ip tuntap add` does, and returns its link.
func addTuntap(t *testing.T, ns netns.NsHandle, nl *netlink.Handle, d *netlink.Tuntap) netlink.Link {
	t.Helper()
	d.Flags |= netlink.TUNTAP_NO_PI
	if err := inNetns(ns, func() error { return netlink.LinkAdd(d) }); err != nil {
		t.Fatal(err)
	}
	l, err := nl.LinkByName(d.Name)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestTUNPersistent attaches to a persistent device that already has one
// of the addresses: Close removes only what OpenTUN added and changed,
// and leaves the device as it was.
func TestTUNPersistent(t *testing.T) {
	ns := newNetns(t)
	nl := nlAt(t, ns)
	l := addTuntap(t, ns, nl, &netlink.Tuntap{LinkAttrs: netlink.LinkAttrs{Name: "netjam7"}, Mode: netlink.TUNTAP_MODE_TUN})
	kept := tunAddrs[0]
	if err := nl.AddrAdd(l, &netlink.Addr{IPNet: ipNet(kept)}); err != nil {
		t.Fatal(err)
	}
	added := netip.MustParsePrefix("10.99.5.1/24")
	tun, err := OpenTUN(TUNConfig{Name: "netjam7", Addrs: []netip.Prefix{kept, added}, MTU: 9000, Routes: tunRoutes[:1], Netns: nsPath(ns)})
	if err != nil {
		t.Fatal(err)
	}
	l, _ = nl.LinkByName("netjam7")
	if have := addrsOf(t, nl, l); !have[kept] || !have[added] || l.Attrs().MTU != 9000 || l.Attrs().Flags&net.FlagUp == 0 || len(routesTo(nl, tunRoutes[0])) != 1 {
		t.Errorf("after OpenTUN: addresses %v, MTU %d, flags %v, routes %v", have, l.Attrs().MTU, l.Attrs().Flags, routesTo(nl, tunRoutes[0]))
	}
	if err := tun.Close(); err != nil {
		t.Fatal(err)
	}
	l, err = nl.LinkByName("netjam7")
	if err != nil {
		t.Fatalf("the persistent device is gone: %v", err)
	}
	if have := addrsOf(t, nl, l); !have[kept] || have[added] || l.Attrs().MTU != 1500 || l.Attrs().Flags&net.FlagUp != 0 || len(routesTo(nl, tunRoutes[0])) != 0 {
		t.Errorf("after Close: addresses %v, MTU %d, flags %v, routes %v; want it as it was", have, l.Attrs().MTU, l.Attrs().Flags, routesTo(nl, tunRoutes[0]))
	}
}

// TestTUNOpenErrors checks OpenTUN's refusals: each leaves nothing behind.
func TestTUNOpenErrors(t *testing.T) {
	ns := newNetns(t)
	nl := nlAt(t, ns)
	d := addTuntap(t, ns, nl, &netlink.Tuntap{LinkAttrs: netlink.LinkAttrs{Name: "tap0"}, Mode: netlink.TUNTAP_MODE_TAP})
	nl.LinkSetUp(d)
	taken := netip.MustParsePrefix("10.99.9.0/24")
	if err := nl.RouteAdd(&netlink.Route{LinkIndex: d.Attrs().Index, Dst: ipNet(taken)}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		cfg  TUNConfig
		want string
	}{
		{TUNConfig{Name: "tap0", Addrs: tunAddrs}, `hostnet: TUN: an interface named "tap0" exists already and is not a TUN device (it is a TAP device): choose another name`},
		{TUNConfig{Name: "netjam1", Addrs: tunAddrs, Routes: []netip.Prefix{tunRoutes[0], taken}},
			"hostnet: TUN: a route to 10.99.9.0/24 exists already through another device, so its traffic would not reach netjam1: remove it or leave 10.99.9.0/24 out of the routes"},
	} {
		c.cfg.Netns = nsPath(ns)
		tun, err := OpenTUN(c.cfg)
		if err == nil {
			tun.Close()
			t.Errorf("OpenTUN(%+v) succeeded", c.cfg)
			continue
		}
		if err.Error() != c.want || errors.Is(err, ErrPrivilege) {
			t.Errorf("OpenTUN error:\n%v\nwant:\n%s", err, c.want)
		}
	}
	checkGone(t, nl, "netjam1", tunRoutes[0])
	if rs := routesTo(nl, taken); len(rs) != 1 {
		t.Errorf("the TAP device's route is gone: %v", rs)
	}
}

func TestTUNConfigValidate(t *testing.T) {
	cfg := TUNConfig{
		Name:   "a-very-long-device-name",
		Addrs:  []netip.Prefix{{}, netip.MustParsePrefix("::ffff:10.0.0.1/104"), netip.MustParsePrefix("127.0.0.1/8"), tunAddrs[0], tunAddrs[0]},
		MTU:    100,
		Routes: []netip.Prefix{netip.MustParsePrefix("10.99.1.1/24"), netip.MustParsePrefix("fd00::/8"), {}},
	}
	want := `name: "a-very-long-device-name" is longer than 15 bytes
addrs[0]: invalid Prefix is not a valid prefix
addrs[1]: ::ffff:10.0.0.1/104: use the plain IPv4 form, not IPv4-mapped IPv6
addrs[2]: 127.0.0.1/8 is not a unicast host address
addrs[4]: 10.99.0.1 is listed twice
mtu: 100 is out of range 576..65536
routes[0]: 10.99.1.1/24 has host bits set (the network is 10.99.1.0/24)
routes[1]: fd00::/8 is IPv6 but addrs has no IPv6 address
routes[2]: invalid Prefix is not a valid prefix`
	if err := cfg.Validate(); err == nil || err.Error() != want {
		t.Errorf("Validate:\n%v\nwant:\n%s", err, want)
	}
	for _, c := range []struct {
		cfg  TUNConfig
		want string
	}{
		{TUNConfig{}, "addrs: at least one address is required"},
		{TUNConfig{Name: "a/b", Addrs: tunAddrs, MTU: 1000}, "name: \"a/b\" must not contain '/', ':', '%' or white space\nmtu: 1000 is below IPv6's minimum of 1280"},
	} {
		if err := c.cfg.Validate(); err == nil || err.Error() != c.want {
			t.Errorf("Validate(%+v):\n%v\nwant:\n%s", c.cfg, err, c.want)
		}
	}
	if _, err := OpenTUN(TUNConfig{}); err == nil || err.Error() != `hostnet: TUN "": addrs: at least one address is required` {
		t.Errorf("OpenTUN of an invalid config: %v", err)
	}
}

// The helper process: the test binary run again with NETJAM_TUN_HELPER set,
// as another user or to be signalled. It exits from inside the test
// function, so the rest of the test binary does not run.
const (
	helperEnv    = "NETJAM_TUN_HELPER"
	helperCfgEnv = "NETJAM_TUN_HELPER_CFG"
)

// TestTUNHelperProcess is not a test: it is the helper process's body.
//
//	NETJAM_TUN_HELPER=open: OpenTUN, print "opened NAME", Close, exit 0;
//	  on error print it and exit 2 for ErrPrivilege, 1 otherwise.
//	NETJAM_TUN_HELPER=hold: OpenTUN, print "ready", wait for SIGTERM,
//	  Close, print "closed", exit 0.
func TestTUNHelperProcess(t *testing.T) {
	mode := os.Getenv(helperEnv)
	if mode == "" {
		t.Skip("the helper process of the TUN tests, run by them")
	}
	var cfg TUNConfig
	if err := json.Unmarshal([]byte(os.Getenv(helperCfgEnv)), &cfg); err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(t.Context(), syscall.SIGTERM)
	defer stop()
	tun, err := OpenTUN(cfg)
	if err != nil {
		fmt.Println(err)
		if errors.Is(err, ErrPrivilege) {
			os.Exit(2)
		}
		os.Exit(1)
	}
	switch mode {
	case "open":
		fmt.Println("opened", tun.Name())
	case "hold":
		fmt.Println("ready")
		<-ctx.Done()
	}
	if err := tun.Close(); err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	fmt.Println("closed")
	os.Exit(0)
}

// helper returns a command running the helper process in mode with cfg.
// The test binary is copied where every user may run it, for helpers run
// as nobody.
func helper(t *testing.T, mode string, cfg TUNConfig) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "netjam-tun-helper-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "stack.test")
	src, err := os.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	dst.Close()
	b, _ := json.Marshal(cfg)
	cmd := exec.Command(bin, "-test.run=^TestTUNHelperProcess$", "-test.count=1")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), helperEnv+"="+mode, helperCfgEnv+"="+string(b))
	return cmd
}

// asNobody makes cmd run as the unprivileged user nobody (65534).
func asNobody(cmd *exec.Cmd) *exec.Cmd {
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	return cmd
}

// runHelperAsNobody runs the "open" helper for cfg in ns as the user
// nobody and checks its exit status and that its output holds each of
// wants; it returns the output.
func runHelperAsNobody(t *testing.T, ns netns.NsHandle, cfg TUNConfig, wantCode int, wants ...string) string {
	t.Helper()
	out, err := runIn(ns, asNobody(helper(t, "open", cfg)))
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if code != wantCode {
		t.Errorf("helper exited with %d, want %d; output:\n%s", code, wantCode, out)
	}
	for _, w := range wants {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
	if n := strings.Count(out, "Either:"); n > 1 {
		t.Errorf("the advice is given %d times:\n%s", n, out)
	}
	return out
}

// TestTUNPrivilegeNodeMode runs OpenTUN as the unprivileged user nobody
// while /dev/net/tun is root's alone (mode 0600, as on a fresh machine
// of some distributions): the error says so and how to open it up.
func TestTUNPrivilegeNodeMode(t *testing.T) {
	ns := newNetns(t)
	testenv.SetTUNMode(t, 0o600)
	cfg := TUNConfig{Name: "netjam3", Addrs: tunAddrs[:1], Routes: tunRoutes[:1]}
	out := runHelperAsNobody(t, ns, cfg, 2, "hostnet: TUN: open /dev/net/tun: permission denied: TUN mode needs read-write access to /dev/net/tun (mode 0666 on most systems). Either:\n",
		"\n  - make the node usable by every user, as most distributions ship it: sudo chmod 0666 /dev/net/tun")
	t.Logf("as nobody, with /dev/net/tun at 0600:\n%s", out)
}

// TestTUNPrivilege runs OpenTUN as the unprivileged user nobody, with
// /dev/net/tun usable by every user (mode 0666): making a device fails
// with an ErrPrivilege error (exit status 2 in the helper) that names the
// ways to get the privilege; a persistent device nobody owns and that
// root has configured works; one not configured yet fails saying which
// commands configure it.
func TestTUNPrivilege(t *testing.T) {
	ns := newNetns(t)
	nl := nlAt(t, ns)
	testenv.SetTUNMode(t, 0o666)
	cfg := TUNConfig{Name: "netjam3", Addrs: tunAddrs[:1], Routes: tunRoutes[:1]}
	run := func(wantCode int, wants ...string) string {
		t.Helper()
		return runHelperAsNobody(t, ns, cfg, wantCode, wants...)
	}

	out := run(2, "hostnet: TUN: create device netjam3: operation not permitted: creating a TUN device needs CAP_NET_ADMIN. Either:\n",
		"\n  - run netjam as root: sudo ",
		"\n  - give the netjam binary the capability once (again after each rebuild): sudo setcap cap_net_admin+ep /tmp/netjam-tun-helper-",
		"\n  - have root create a persistent device that you own, which netjam then attaches to by name (tun name netjam3), and configure it once: sudo ip tuntap add dev netjam3 mode tun user nobody && sudo ip addr add 10.99.0.1/24 dev netjam3 && sudo ip link set netjam3 mtu 1500 up && sudo ip route add 10.99.1.0/24 dev netjam3")
	t.Logf("as nobody, without a device:\n%s", out)
	checkGone(t, nl, "netjam3")

	// Root makes a persistent device for nobody, not configured yet.
	addTuntap(t, ns, nl, &netlink.Tuntap{LinkAttrs: netlink.LinkAttrs{Name: "netjam3"}, Mode: netlink.TUNTAP_MODE_TUN, Owner: 65534, Group: 65534})
	out = run(2, "hostnet: TUN: add address 10.99.0.1/24 to netjam3: operation not permitted: configuring a network device needs CAP_NET_ADMIN. Either:\n",
		"\n  - configure the persistent device netjam3 once as root, so netjam finds it ready and changes nothing: sudo ip addr add 10.99.0.1/24 dev netjam3 && sudo ip link set netjam3 mtu 1500 up && sudo ip route add 10.99.1.0/24 dev netjam3")
	t.Logf("as nobody, with an unconfigured device:\n%s", out)

	// Root configures it: nobody attaches and changes nothing.
	l, err := nl.LinkByName("netjam3")
	if err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(nl.AddrAdd(l, &netlink.Addr{IPNet: ipNet(tunAddrs[0])}), nl.LinkSetUp(l),
		nl.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Dst: ipNet(tunRoutes[0])})); err != nil {
		t.Fatal(err)
	}
	run(0, "opened netjam3\nclosed\n")
	l, err = nl.LinkByName("netjam3")
	if err != nil {
		t.Fatalf("the persistent device is gone: %v", err)
	}
	if !addrsOf(t, nl, l)[tunAddrs[0]] || len(routesTo(nl, tunRoutes[0])) != 1 {
		t.Errorf("Close removed what root had configured")
	}

	// Someone else's device.
	addTuntap(t, ns, nl, &netlink.Tuntap{LinkAttrs: netlink.LinkAttrs{Name: "netjam4"}, Mode: netlink.TUNTAP_MODE_TUN, Owner: 4242, Group: 4242})
	cfg.Name = "netjam4"
	out = run(2, "hostnet: TUN: attach to device netjam4: operation not permitted: the persistent device netjam4 belongs to uid 4242; attaching to it needs to be its owner (or in its group), or CAP_NET_ADMIN. Either:\n",
		"\n  - make the device yours: sudo ip tuntap del dev netjam4 mode tun && sudo ip tuntap add dev netjam4 mode tun user nobody")
	t.Logf("as nobody, with root's device:\n%s", out)
}

// TestTUNSignal runs a process that holds a TUN device with routes. On
// SIGTERM it closes the TUN and nothing remains; killed with SIGKILL, it
// cannot, and the kernel deletes the non-persistent device (with its
// routes) when the process's descriptor closes.
func TestTUNSignal(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			ns := newNetns(t)
			nl := nlAt(t, ns)
			cmd := helper(t, "hold", TUNConfig{Name: "netjam5", Addrs: tunAddrs, Routes: tunRoutes})
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			cmd.Stderr = os.Stderr
			if err := startIn(ns, cmd); err != nil {
				t.Fatal(err)
			}
			defer cmd.Process.Kill()
			lines := bufio.NewScanner(stdout)
			if !lines.Scan() || lines.Text() != "ready" {
				t.Fatalf("helper said %q, not ready", lines.Text())
			}
			if _, err := nl.LinkByName("netjam5"); err != nil {
				t.Fatalf("the helper's device: %v", err)
			}
			for _, r := range tunRoutes {
				if len(routesTo(nl, r)) != 1 {
					t.Fatalf("the helper's route %v is missing", r)
				}
			}
			cmd.Process.Signal(sig)
			var rest strings.Builder
			for lines.Scan() {
				rest.WriteString(lines.Text() + "\n")
			}
			err = cmd.Wait()
			if sig == syscall.SIGTERM && (err != nil || rest.String() != "closed\n") {
				t.Errorf("after SIGTERM the helper said %q and ended with %v", rest.String(), err)
			}
			// The device goes when the last descriptor closes, which
			// is done by the time Wait returns; wait a little anyway
			// rather than assume how the kernel orders it.
			waitFor(t, "the device to go", func() bool { _, err := nl.LinkByName("netjam5"); return isLinkNotFound(err) })
			checkGone(t, nl, "netjam5", tunRoutes...)
		})
	}
}

// TestTUNCloseOnExec checks that a child process does not inherit the
// device's descriptor (water opens it without O_CLOEXEC; OpenTUN sets
// the flag), so the device never outlives netjam in a child.
func TestTUNCloseOnExec(t *testing.T) {
	testTUN(t)
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	held := false
	for _, fd := range fds {
		l, _ := os.Readlink("/proc/self/fd/" + fd.Name())
		held = held || l == "/dev/net/tun"
	}
	if !held {
		t.Fatal("the test process holds no /dev/net/tun descriptor?")
	}
	child, err := exec.Command("ls", "-l", "/proc/self/fd/").CombinedOutput()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(child), "/dev/net/tun") {
		t.Errorf("a child process inherited the TUN descriptor:\n%s", child)
	}
}

// udpDatagram builds an IPv4 UDP datagram without a UDP checksum (0:
// none, which IPv4 allows), so the test needs no packet library.
func udpDatagram(src, dst netip.AddrPort, data []byte) []byte {
	b := make([]byte, 28+len(data))
	b[0], b[8], b[9] = 0x45, 64, 17 // version and header length, TTL, UDP
	binary.BigEndian.PutUint16(b[2:], uint16(len(b)))
	copy(b[12:16], src.Addr().AsSlice())
	copy(b[16:20], dst.Addr().AsSlice())
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(b[10:], ^uint16(sum))
	binary.BigEndian.PutUint16(b[20:], src.Port())
	binary.BigEndian.PutUint16(b[22:], dst.Port())
	binary.BigEndian.PutUint16(b[24:], uint16(8+len(data)))
	copy(b[28:], data)
	return b
}

// TestTUNPrivilegeMessages checks the errors for a missing device node
// and an unusable one, which this machine cannot produce for real.
func TestTUNPrivilegeMessages(t *testing.T) {
	cfg := TUNConfig{Name: "netjam0", Addrs: tunAddrs[:1]}
	for _, c := range []struct {
		errno syscall.Errno
		want  []string
	}{
		{syscall.ENOENT, []string{
			"hostnet: TUN: open /dev/net/tun: no such file or directory: TUN mode needs the TUN device node /dev/net/tun, backed by the tun driver. Either:\n",
			"\n  - load the driver: sudo modprobe tun\n",
			"\n  - in a container, pass the device and the capability in: docker run --device /dev/net/tun --cap-add NET_ADMIN ...",
		}},
		{syscall.EACCES, []string{
			"hostnet: TUN: open /dev/net/tun: permission denied: TUN mode needs read-write access to /dev/net/tun (mode 0666 on most systems). Either:\n",
			"\n  - make the node usable by every user, as most distributions ship it: sudo chmod 0666 /dev/net/tun",
		}},
	} {
		err := openError(cfg, nil, c.errno)
		if !errors.Is(err, ErrPrivilege) || !errors.Is(err, c.errno) {
			t.Errorf("%v: the error wraps neither ErrPrivilege nor the errno: %v", c.errno, err)
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: the error lacks %q:\n%v", c.errno, w, err)
			}
		}
	}
	if err := openError(cfg, nil, &os.SyscallError{Syscall: "ioctl", Err: syscall.EBUSY}); errors.Is(err, ErrPrivilege) ||
		err.Error() != `hostnet: TUN: device "netjam0" is in use by another process (another netjam?): ioctl: device or resource busy` {
		t.Errorf("EBUSY: %v", err)
	}
}

// TestTUNSetcapRefusesHostRoutes runs OpenTUN in a binary given
// CAP_NET_ADMIN by its file (setcap), as the user nobody, with a route
// outside the device's network in nobody's (the machine's) namespace: it
// is refused before anything is made, naming the key that allows it.
func TestTUNSetcapRefusesHostRoutes(t *testing.T) {
	testenv.RequireTUN(t)
	setcap := testenv.RequireTool(t, "setcap", "libcap2-bin")
	cmd := asNobody(helper(t, "open", TUNConfig{Name: "njsetcap0", Addrs: tunAddrs[:1], Routes: []netip.Prefix{netip.MustParsePrefix("198.18.0.0/24")}}))
	if out, err := exec.Command(setcap, "cap_net_admin+ep", cmd.Path).CombinedOutput(); err != nil {
		testenv.Missing(t, fmt.Sprintf("setcap: %v: %s", err, out))
	}
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), "routes [198.18.0.0/24] lie outside the device's networks") ||
		!strings.Contains(string(out), "tun.host_routes: true") {
		t.Errorf("OpenTUN with a host route in setcap mode: %v\n%s", err, out)
	}
}
