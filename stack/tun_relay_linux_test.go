package stack

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/netjam/netjam/third_party/gvisor/_pkg/tcpip/header"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/netjam/netjam/hostcfg"
	"github.com/netjam/netjam/hostnet"
	"github.com/netjam/netjam/internal/testenv"
)

// tunLab is TUN mode without the emulated path: a TUN device in a network
// namespace of its own (the "client" namespace, where the test's
// applications run) wired straight to a relay Host, whose host sockets
// live in the test's own namespace. A goroutine reads the device and
// Injects into the host; the host's Output writes to the device.
type tunLab struct {
	ns    *hostnet.Netns // the client namespace
	tun   *hostnet.TUN
	host  *Host
	relay *Relay
}

var peerAddrs = []netip.Prefix{netip.MustParsePrefix("10.99.0.2/24"), netip.MustParsePrefix("fd99::2/64")}

// newTUNLab builds a lab; routes are extra routes into the device. It is
// torn down at the end of the test in this order: the device (the read
// loop ends), the host (aborting what is open), the relay (waiting for its
// goroutines).
func newTUNLab(t testing.TB, rcfg hostcfg.RelayConfig, routes ...netip.Prefix) *tunLab {
	t.Helper()
	ns := newNetns(t)
	tun, err := hostnet.OpenTUN(hostnet.TUNConfig{Name: "netjam0", Addrs: tunAddrs, MTU: 1500, Routes: routes, Netns: nsPath(ns)})
	if err != nil {
		t.Fatal(err)
	}
	host, err := NewHost(HostConfig{Name: "peer", Addrs: peerAddrs, MTU: 1500, Clock: realClock, Seed: 1, SACK: true,
		Transparent: rcfg.Transparent,
		Output:      func(pkt [][]byte) { tun.WriteVec(pkt) }})
	if err != nil {
		tun.Close()
		t.Fatal(err)
	}
	relay, err := host.StartRelay(context.Background(), rcfg)
	if err != nil {
		tun.Close()
		host.Close()
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 65536)
		for {
			n, err := tun.Read(buf)
			if err != nil {
				return
			}
			host.Inject(buf[:n])
		}
	}()
	nl := nlAt(t, ns)
	t.Cleanup(func() {
		if err := tun.Close(); err != nil {
			t.Error(err)
		}
		<-done
		host.Close()
		relay.Close()
		checkGone(t, nl, "netjam0", routes...)
	})
	return &tunLab{ns: ns, tun: tun, host: host, relay: relay}
}

// dialIn opens a connection from inside ns.
func dialIn(t testing.TB, ns *hostnet.Netns, network, addr string) net.Conn {
	t.Helper()
	var c net.Conn
	err := inNetns(ns, func() (err error) {
		d := net.Dialer{Timeout: 10 * time.Second}
		c, err = d.Dial(network, addr)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestTUNRelayPing pings the peer through the device with the real ping,
// over IPv4 and IPv6: gVisor answers.
func TestTUNRelayPing(t *testing.T) {
	ping := testenv.RequireTool(t, "ping", "iputils-ping")
	lab := newTUNLab(t, hostcfg.RelayConfig{})
	for _, dst := range []string{"10.99.0.2", "fd99::2"} {
		out, err := runIn(lab.ns, exec.Command(ping, "-n", "-c", "3", "-i", "0.2", "-w", "10", dst))
		if err != nil || !strings.Contains(out, "3 packets transmitted, 3 received") {
			t.Errorf("ping %s: %v\n%s", dst, err, out)
		}
		t.Logf("ping %s: %s", dst, lastLine(out))
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// TestTUNRelayCurl downloads and uploads through a TCP forward with curl,
// to and from an HTTP server on 127.0.0.1 of the test's namespace,
// byte-exact, over IPv4 and IPv6.
func TestTUNRelayCurl(t *testing.T) {
	curl := testenv.RequireTool(t, "curl", "curl")
	body := payload(8<<20, 11)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			h := sha256.New()
			io.Copy(h, r.Body)
			fmt.Fprintf(w, "%x", h.Sum(nil))
			return
		}
		w.Write(body)
	}))
	defer srv.Close()
	target := netip.MustParseAddrPort(strings.TrimPrefix(srv.URL, "http://"))
	lab := newTUNLab(t, hostcfg.RelayConfig{Forwards: []hostcfg.Forward{{Proto: "tcp", Listen: 8080, To: target}}})
	dir := t.TempDir()
	upload := filepath.Join(dir, "up")
	up := payload(3<<20, 12)
	if err := os.WriteFile(upload, up, 0o600); err != nil {
		t.Fatal(err)
	}
	for i, host := range []string{"10.99.0.2", "[fd99::2]"} {
		url := "http://" + host + ":8080/body"
		got := filepath.Join(dir, fmt.Sprint("down", i))
		out, err := runIn(lab.ns, exec.Command(curl, "-sS", "--max-time", "60", "-o", got, "-w", "%{speed_download}", url))
		if err != nil {
			t.Fatalf("curl %s: %v\n%s", url, err, out)
		}
		b, err := os.ReadFile(got)
		if err != nil || !bytes.Equal(b, body) {
			t.Fatalf("curl %s: downloaded %d bytes (%v), not the %d served", url, len(b), err, len(body))
		}
		t.Logf("curl %s: %d bytes at %s bytes/s", url, len(b), out)

		out, err = runIn(lab.ns, exec.Command(curl, "-sS", "--max-time", "60", "--data-binary", "@"+upload, url))
		if want := fmt.Sprintf("%x", sha256.Sum256(up)); err != nil || out != want {
			t.Fatalf("curl upload to %s: %v; the server got sha256 %q, want %q", url, err, out, want)
		}
	}
	waitFor(t, "the connections to end", func() bool { return lab.relay.Stats().TCP.Active == 0 })
	if st := lab.relay.Stats().TCP; st.Relayed != 4 || st.Errors != 0 || st.BytesDown < 2*uint64(len(body)) || st.BytesUp < 2*uint64(len(up)) {
		t.Errorf("stats %+v", st)
	}
}

// TestTUNRelayUDP relays datagrams both ways through a UDP forward to an
// echo server on 127.0.0.1, including some the kernel and gVisor
// fragment, over IPv4 and IPv6.
func TestTUNRelayUDP(t *testing.T) {
	lab := newTUNLab(t, hostcfg.RelayConfig{Forwards: []hostcfg.Forward{{Proto: "udp", Listen: 5353, To: udpEchoServer(t)}}})
	for _, dst := range []string{"10.99.0.2:5353", "[fd99::2]:5353"} {
		roundTrip(t, dialIn(t, lab.ns, "udp", dst), 1, 512, 1472, 1473, 9000, 65000)
	}
	n := uint64(2 * (1 + 512 + 1472 + 1473 + 9000 + 65000))
	// The relay counts a datagram after sending it on, so the echo can
	// reach the client before either count has moved.
	waitFor(t, "the bytes to be counted", func() bool { st := lab.relay.Stats().UDP; return st.BytesUp == n && st.BytesDown == n })
	if st := lab.relay.Stats().UDP; st.Relayed != 2 || st.BytesUp != n || st.BytesDown != n {
		t.Errorf("stats %+v", st)
	}
}

// TestTUNRelayServices uses echo and discard over TCP and UDP through the
// device, and checks that other ports of the peer are closed.
func TestTUNRelayServices(t *testing.T) {
	lab := newTUNLab(t, hostcfg.RelayConfig{Services: true})
	data := payload(4<<20, 13)
	c := dialIn(t, lab.ns, "tcp", "10.99.0.2:7")
	go func() { c.Write(data); c.(*net.TCPConn).CloseWrite() }()
	got, err := io.ReadAll(c)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("tcp echo: %d bytes back (%v), want the %d sent", len(got), err, len(data))
	}
	d := dialIn(t, lab.ns, "tcp", "[fd99::2]:9")
	if _, err := d.Write(data); err != nil {
		t.Fatal(err)
	}
	d.Close()
	// The discarded megabytes may still be crossing the device: let them
	// land first, so that the datagrams below do not meet full queues (a
	// bounded queue may shed a datagram; UDP does not resend it).
	waitFor(t, "the discard to take every byte", func() bool { return lab.relay.Stats().TCP.BytesUp >= 2*uint64(len(data)) })
	roundTrip(t, dialIn(t, lab.ns, "udp", "[fd99::2]:7"), 100, 1400)
	err = inNetns(lab.ns, func() error {
		_, err := net.DialTimeout("tcp", "10.99.0.2:10", 5*time.Second)
		return err
	})
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("tcp to a port without service: %v, want ECONNREFUSED", err)
	}
	waitFor(t, "discard to read everything", func() bool { return lab.relay.Stats().TCP.BytesUp == 2*uint64(len(data)) })
	if st := lab.relay.Stats(); st.TCP.Served != 2 || st.TCP.NoService != 1 || st.UDP.Served != 2 {
		t.Errorf("stats %+v", st)
	}
}

// TestTUNRelayTransparent routes two networks into the device, allows one
// and checks that it is relayed to the destination itself while the other
// is refused (TCP reset, UDP dropped) and counted. The destinations live
// in a second namespace (the "server" one) where the relay's Dial opens
// its sockets, so that they are real destinations and nothing leaves the
// machine: 10.99.1.5 and fd99:1::5 are addresses of that namespace, and
// 10.99.2.0/24 is nowhere.
func TestTUNRelayTransparent(t *testing.T) {
	curl := testenv.RequireTool(t, "curl", "curl")
	srvNS := newNetns(t)
	snl := nlAt(t, srvNS)
	lo, err := snl.LinkByName("lo")
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"10.99.1.5/32", "fd99:1::5/128"} {
		if err := snl.AddrAdd(lo, &netlink.Addr{IPNet: ipNet(netip.MustParsePrefix(a)), Flags: unix.IFA_F_NODAD}); err != nil {
			t.Fatal(err)
		}
	}
	body := payload(2<<20, 14)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s ", r.Host)
		w.Write(body)
	}))
	var l net.Listener
	var u net.PacketConn
	if err := inNetns(srvNS, func() (err error) {
		if l, err = net.Listen("tcp", ":8080"); err != nil {
			return err
		}
		u, err = net.ListenPacket("udp", ":5353")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	srv.Listener = l
	srv.Start()
	defer srv.Close()
	defer echoUDP(u)()

	dialInServer, dialed := recordDials(func(ctx context.Context, network, address string) (net.Conn, error) {
		var c net.Conn
		err := inNetns(srvNS, func() (err error) {
			var d net.Dialer
			c, err = d.DialContext(ctx, network, address)
			return err
		})
		return c, err
	})
	lab := newTUNLab(t, hostcfg.RelayConfig{
		Transparent: true,
		Allow:       []netip.Prefix{netip.MustParsePrefix("10.99.1.0/24"), netip.MustParsePrefix("fd99:1::/64")},
		Dial:        dialInServer,
	}, netip.MustParsePrefix("10.99.1.0/24"), netip.MustParsePrefix("10.99.2.0/24"), netip.MustParsePrefix("fd99:1::/64"))

	for _, host := range []string{"10.99.1.5:8080", "[fd99:1::5]:8080"} {
		out, err := runIn(lab.ns, exec.Command(curl, "-sS", "--max-time", "30", "http://"+host+"/"))
		if want := host + " " + string(body); err != nil || out != want {
			t.Errorf("curl %s through the transparent relay: %v; got %d bytes, want %d", host, err, len(out), len(want))
		}
	}
	err = inNetns(lab.ns, func() error {
		_, err := net.DialTimeout("tcp", "10.99.2.5:8080", 5*time.Second)
		return err
	})
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("tcp to a destination outside allow: %v, want ECONNREFUSED", err)
	}
	roundTrip(t, dialIn(t, lab.ns, "udp", "10.99.1.5:5353"), 10, 3000)
	refused := dialIn(t, lab.ns, "udp", "10.99.2.5:5353")
	refused.Write([]byte("let me out"))
	refused.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if n, err := refused.Read(make([]byte, 100)); err == nil {
		t.Errorf("a datagram to a destination outside allow got %d bytes back", n)
	}

	waitFor(t, "the connections to end", func() bool { return lab.relay.Stats().TCP.Active == 0 })
	st := lab.relay.Stats()
	if st.TCP.Relayed != 2 || st.TCP.Refused != 1 || st.UDP.Relayed != 1 || st.UDP.Refused != 1 {
		t.Errorf("stats %+v, want 2 TCP relayed and 1 refused, 1 UDP session relayed and 1 datagram refused", st)
	}
	for _, d := range dialed() {
		if strings.Contains(d, "10.99.2.") {
			t.Errorf("the relay dialled %s, outside allow", d)
		}
	}
	t.Logf("dialled: %q", dialed())
}

// FuzzTUNPacket feeds arbitrary bytes, as if read from the device, to a
// relay host in transparent mode with services and forwards: nothing
// panics, and a packet whose IP header does not hold together is counted
// as malformed. The relay's Dial fails at once, so no input can make it
// open a socket.
func FuzzTUNPacket(f *testing.F) {
	c4, c6 := netip.MustParseAddrPort("10.99.0.1:40000"), netip.MustParseAddrPort("[fd99::1]:40000")
	allowed4, allowed6 := netip.MustParseAddrPort("192.0.2.7:80"), netip.MustParseAddrPort("[2001:db8::7]:80")
	refused4 := netip.MustParseAddrPort("198.51.100.7:80")
	for _, p := range [][]byte{
		tcpPacket(c4, allowed4, header.TCPFlagSyn, nil),
		tcpPacket(c6, allowed6, header.TCPFlagSyn, nil),
		tcpPacket(c4, refused4, header.TCPFlagSyn, nil),
		tcpPacket(c4, netip.AddrPortFrom(peer4, 5201), header.TCPFlagSyn, nil),
		tcpPacket(c4, netip.AddrPortFrom(peer4, 7), header.TCPFlagAck|header.TCPFlagPsh, []byte("data")),
		udpDatagram(c4, netip.AddrPortFrom(peer4, 7), []byte("echo")),
		udpDatagram(c6, netip.AddrPortFrom(peer6, 5353), []byte("forward")),
		udpDatagram(c4, allowed4, []byte("transparent")),
		udpDatagram(c4, refused4, []byte("refused")),
		echoRequest(c4.Addr(), peer4, 1, 1, []byte("ping")),
		{0x45, 0, 0, 20},
		{},
	} {
		f.Add(p)
	}
	h, err := NewHost(HostConfig{Name: "peer", Addrs: peerAddrs, MTU: 1500, Clock: realClock, Transparent: true,
		Output: func([][]byte) {}})
	if err != nil {
		f.Fatal(err)
	}
	r, err := h.StartRelay(context.Background(), hostcfg.RelayConfig{
		Forwards: []hostcfg.Forward{
			{Proto: "tcp", Listen: 5201, To: netip.MustParseAddrPort("127.0.0.1:5201")},
			{Proto: "udp", Listen: 5353, To: netip.MustParseAddrPort("127.0.0.1:5353")},
		},
		Transparent: true,
		Allow:       []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24"), netip.MustParsePrefix("2001:db8::/32")},
		Services:    true,
		UDPIdle:     time.Second,
		Dial: func(context.Context, string, string) (net.Conn, error) {
			return nil, errors.New("fuzzing: no sockets")
		},
	})
	if err != nil {
		f.Fatal(err)
	}
	// The host first: it aborts handshakes the relay would wait for.
	f.Cleanup(func() { h.Close(); r.Close() })
	f.Fuzz(func(t *testing.T, pkt []byte) {
		_, valid := networkProtocol(pkt, len(pkt))
		before := h.Stats().Malformed
		h.Inject(pkt)
		if after := h.Stats().Malformed; !valid && after != before+1 {
			t.Errorf("a packet with a broken IP header moved Malformed from %d to %d", before, after)
		}
	})
}

// BenchmarkTUNThroughput runs iperf3 for 3 s through a TCP forward: the
// client in the device's namespace, the server on 127.0.0.1 of the test's
// namespace, with nothing in between but the device and the relay host.
// It reports the receiver's Gbit/s, the packets through the device per
// second either way, and the CPU this process used per second (at most 2
// on this 2-core machine, where iperf3 and the kernel compete for the
// same cores). dir=up sends from the client (the kernel's TCP into
// gVisor), dir=down from the server (iperf3 -R). Run it with
// -benchtime=1x: each run is one 3 s iperf3 test.
func BenchmarkTUNThroughput(b *testing.B) {
	iperf := testenv.RequireTool(b, "iperf3", "iperf3")
	for _, dir := range []string{"up", "down"} {
		b.Run("dir="+dir, func(b *testing.B) {
			port := closedPort(b)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			srv := exec.CommandContext(ctx, iperf, "-s", "-1", "-B", "127.0.0.1", "-p", fmt.Sprint(port.Port()))
			if err := srv.Start(); err != nil {
				b.Fatal(err)
			}
			defer srv.Wait()
			defer srv.Process.Kill()
			lab := newTUNLab(b, hostcfg.RelayConfig{Forwards: []hostcfg.Forward{{Proto: "tcp", Listen: 5201, To: port}}})
			args := []string{"-c", "10.99.0.2", "-p", "5201", "-t", "3", "-f", "g"}
			if dir == "down" {
				args = append(args, "-R")
			}
			var out string
			var err error
			var ru0, ru1 syscall.Rusage
			syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
			st0 := lab.host.Stats()
			start := time.Now()
			// The server may take a moment to listen.
			for range 50 {
				if out, err = runIn(lab.ns, exec.CommandContext(ctx, iperf, args...)); err == nil || !strings.Contains(out, "Connection refused") {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if err != nil {
				b.Fatalf("iperf3: %v\n%s", err, out)
			}
			m := regexp.MustCompile(`([0-9.]+) Gbits/sec\s+receiver`).FindStringSubmatch(out)
			if m == nil {
				b.Fatalf("no receiver rate in iperf3's output:\n%s", out)
			}
			var gbps float64
			fmt.Sscan(m[1], &gbps)
			b.ReportMetric(gbps, "Gbit/s")
			elapsed := time.Since(start).Seconds()
			syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
			st := lab.host.Stats()
			cpu := time.Duration(ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano())
			b.ReportMetric(0, "ns/op")
			// Packets through the device either way, and the CPU of this
			// process (the read loop, gVisor, the relay's copies; not
			// iperf3 and not the kernel's side of the device) per second.
			b.ReportMetric(float64(st.InPackets-st0.InPackets+st.OutPackets-st0.OutPackets)/elapsed, "pkts/s")
			b.ReportMetric(cpu.Seconds()/elapsed, "cpu-s/s")
		})
	}
}

// TestTUNRelayRawToUnspecified writes raw UDP datagrams to 0.0.0.0 and to
// :: into the device from inside the client namespace (an AF_PACKET
// socket, as a shell's command can open as root of its own namespace),
// with a transparent relay whose Allow holds every address and a UDP
// server on the test namespace's loopback, where the relay's sockets
// live. Linux would deliver a datagram the relay sent to 0.0.0.0:P to
// 127.0.0.1:P: the server must receive nothing.
func TestTUNRelayRawToUnspecified(t *testing.T) {
	lab := newTUNLab(t, hostcfg.RelayConfig{Transparent: true, Allow: openAllow})
	srv4, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv4.Close()
	srv6, err := net.ListenPacket("udp", "[::1]:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv6.Close()
	port4 := srv4.LocalAddr().(*net.UDPAddr).AddrPort().Port()
	port6 := srv6.LocalAddr().(*net.UDPAddr).AddrPort().Port()

	src4, src6 := tunAddrs[0].Addr(), tunAddrs[1].Addr()
	err = inNetns(lab.ns, func() error {
		ifi, err := net.InterfaceByName("netjam0")
		if err != nil {
			return err
		}
		for _, p := range []struct {
			proto uint16
			pkt   []byte
		}{
			{unix.ETH_P_IP, udpDatagram(netip.AddrPortFrom(src4, 40000), netip.AddrPortFrom(netip.IPv4Unspecified(), port4), []byte("let me out"))},
			{unix.ETH_P_IPV6, udpDatagram(netip.AddrPortFrom(src6, 40000), netip.AddrPortFrom(netip.IPv6Unspecified(), port6), []byte("let me out"))},
		} {
			fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, int(htons(p.proto)))
			if err != nil {
				return err
			}
			err = unix.Sendto(fd, p.pkt, 0, &unix.SockaddrLinklayer{Ifindex: ifi.Index, Protocol: htons(p.proto)})
			unix.Close(fd)
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the relay to decide both datagrams", func() bool {
		st := lab.relay.Stats().UDP
		return st.Refused+st.Relayed >= 2
	})
	for _, c := range []net.PacketConn{srv4, srv6} {
		c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		if n, from, err := c.ReadFrom(make([]byte, 100)); err == nil {
			t.Errorf("the server on %v received %d bytes from %v through the relay", c.LocalAddr(), n, from)
		}
	}
	if st := lab.relay.Stats().UDP; st.Relayed != 0 || st.RefusedBy["unspecified"] != 2 {
		t.Errorf("udp stats %+v, want nothing relayed and 2 refused as unspecified", st)
	}
}

// htons converts a 16-bit value to network byte order, as AF_PACKET's
// protocol fields take it.
func htons(v uint16) uint16 { return v<<8 | v>>8 }
