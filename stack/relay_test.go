package stack

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/netjam/netjam/third_party/gvisor/_pkg/tcpip"

	"github.com/netjam/netjam/hostcfg"
)

// These tests run the relay in memory, without root: a client Host wired
// back to back to the relay's Host, and targets on the loopback interface.
// tun_relay_linux_test.go runs the same relay behind a real TUN device.

var (
	relayClientAddrs = []netip.Prefix{netip.MustParsePrefix("10.99.0.1/24"), netip.MustParsePrefix("fd99::1/64")}
	relayPeerAddrs   = []netip.Prefix{netip.MustParsePrefix("10.99.0.2/24"), netip.MustParsePrefix("fd99::2/64")}
	peer4            = relayPeerAddrs[0].Addr()
	peer6            = relayPeerAddrs[1].Addr()
)

// newRelayPair returns a client host wired to a host running a relay with
// cfg, each direction delivered on a goroutine of its own as the emulator
// does. Everything is closed at the end of the test: the relay first, then
// the hosts, then the wires.
// arrived returns the UDP datagrams that reached the relay's host: those
// gVisor took, and those the relay's fast path did.
func (r *Relay) arrived() uint64 {
	return r.h.s.Stats().UDP.PacketsReceived.Value() + r.fastIn.Load()
}

func newRelayPair(t testing.TB, cfg hostcfg.RelayConfig) (*Host, *Relay) {
	t.Helper()
	return newRelayPairWire(t, cfg, nil)
}

// newRelayPairWire is newRelayPair whose wire from the relay's host to the
// client shows each packet to toClient first (see wire.drop).
func newRelayPairWire(t testing.TB, cfg hostcfg.RelayConfig, toClient func([]byte) bool) (*Host, *Relay) {
	t.Helper()
	client, r, _ := newRelayPairOf(t, cfg, toClient, 4096, false)
	return client, r
}

// newRelayPairOf is newRelayPairWire whose wires hold depth packets, and
// whose relay's host, with held, has an OutputHeld that waits at the
// wire toward the client while it is full, as a direction's input holds
// a held sender back. It returns that wire too.
func newRelayPairOf(t testing.TB, cfg hostcfg.RelayConfig, toClient func([]byte) bool, depth int, held bool) (*Host, *Relay, *wire) {
	t.Helper()
	ab, ba := newWire(nil), newWire(toClient)
	mk := func(name string, addrs []netip.Prefix, out *wire, seed uint64, transparent, held bool) *Host {
		hc := HostConfig{Name: name, Addrs: addrs, MTU: 1500, Clock: realClock, Seed: seed, SACK: true,
			Transparent: transparent, Output: out.output}
		if held {
			hc.OutputHeld = out.outputHeld
		}
		h, err := NewHost(hc)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	client := mk("client", relayClientAddrs, ab, 1, false, false)
	peer := mk("peer", relayPeerAddrs, ba, 2, cfg.Transparent, held)
	r, err := peer.StartRelay(context.Background(), cfg)
	if err != nil {
		client.Close()
		peer.Close()
		t.Fatal(err)
	}
	ab.to.Store(peer)
	ba.to.Store(client)
	t.Cleanup(ab.async(depth))
	t.Cleanup(ba.async(depth))
	t.Cleanup(func() { client.Close(); peer.Close() })
	t.Cleanup(func() { r.Close() })
	return client, r, ba
}

// server is a loopback server the test runs; its goroutines end before
// the test does.
type server struct {
	l  net.Listener
	wg sync.WaitGroup
}

// tcpServer serves each connection with handle on 127.0.0.1.
func tcpServer(t testing.TB, handle func(net.Conn)) netip.AddrPort {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &server{l: l}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer c.Close()
				handle(c)
			}()
		}
	}()
	t.Cleanup(func() { l.Close(); s.wg.Wait() })
	return l.Addr().(*net.TCPAddr).AddrPort()
}

// udpEchoServer answers each datagram on 127.0.0.1 with itself.
func udpEchoServer(t testing.TB) netip.AddrPort {
	t.Helper()
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(echoUDP(c))
	return c.LocalAddr().(*net.UDPAddr).AddrPort()
}

// recordDials wraps a relay's Dial: the returned list has every
// "network address" it was asked for, in order.
func recordDials(dial func(ctx context.Context, network, address string) (net.Conn, error)) (
	func(ctx context.Context, network, address string) (net.Conn, error), func() []string) {
	var mu sync.Mutex
	var dialed []string
	return func(ctx context.Context, network, address string) (net.Conn, error) {
			mu.Lock()
			dialed = append(dialed, network+" "+address)
			mu.Unlock()
			return dial(ctx, network, address)
		}, func() []string {
			mu.Lock()
			defer mu.Unlock()
			return slices.Clone(dialed)
		}
}

// echoUDP answers each datagram c receives with itself, on a goroutine of
// its own; stop closes c and waits for the goroutine.
func echoUDP(c net.PacketConn) (stop func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 65536)
		for {
			n, from, err := c.ReadFrom(buf)
			if err != nil {
				return
			}
			c.WriteTo(buf[:n], from)
		}
	}()
	return func() { c.Close(); <-done }
}

// sumThenSend is a server that reads the client's stream to its end,
// then answers with the stream's sha256 and reply: a test of half-close
// in both directions.
func sumThenSend(reply []byte) func(net.Conn) {
	return func(c net.Conn) {
		h := sha256.New()
		if _, err := io.Copy(h, c); err != nil {
			return
		}
		c.Write(h.Sum(nil))
		c.Write(reply)
	}
}

// closedPort returns a loopback TCP port nothing listens on.
func closedPort(t testing.TB) netip.AddrPort {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ap := l.Addr().(*net.TCPAddr).AddrPort()
	l.Close()
	return ap
}

// exchange writes up on c, half-closes, and reads the reply to its end,
// checking that it is the sha256 of up followed by down.
func exchange(t *testing.T, c io.ReadWriter, up, down []byte) {
	t.Helper()
	wrote := make(chan error, 1)
	go func() {
		_, err := c.Write(up)
		if err == nil {
			err = c.(interface{ CloseWrite() error }).CloseWrite()
		}
		wrote <- err
	}()
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("reading the reply: %v", err)
	}
	if err := <-wrote; err != nil {
		t.Fatalf("writing: %v", err)
	}
	sum := sha256.Sum256(up)
	want := append(sum[:], down...)
	if !bytes.Equal(got, want) {
		t.Fatalf("got %d bytes back, want %d (sha256 of the %d bytes sent, then the reply)", len(got), len(want), len(up))
	}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestRelayTCPForward relays connections to a loopback server over IPv4
// and IPv6, byte-exact, with half-close in both directions.
func TestRelayTCPForward(t *testing.T) {
	up, down := payload(1<<20, 1), payload(2<<20, 2)
	target := tcpServer(t, sumThenSend(down))
	client, r := newRelayPair(t, hostcfg.RelayConfig{Forwards: []hostcfg.Forward{{Proto: "tcp", Listen: 5201, To: target}}})
	for i, peer := range []netip.Addr{peer4, peer6} {
		c, err := client.DialTCP(testCtx(t), netip.AddrPortFrom(peer, 5201), hostcfg.TCPOptions{})
		if err != nil {
			t.Fatal(err)
		}
		exchange(t, c, up, down)
		c.Close()
		waitFor(t, "the relayed connection to end", func() bool { return r.Stats().TCP.Active == 0 })
		st := r.Stats().TCP
		n := uint64(i + 1)
		if st.Relayed != n || st.BytesUp != n*uint64(len(up)) || st.BytesDown != n*uint64(32+len(down)) || st.Errors != 0 {
			t.Errorf("after %d connections: %+v", n, st)
		}
	}
}

// TestRelayForwardByAddress: one port forwarded to two targets, each
// bound to a peer address (a path's, in TUN mode), and a third for every
// other address: a connection reaches the target of the address it
// dialed.
func TestRelayForwardByAddress(t *testing.T) {
	answer := func(s string) func(net.Conn) { return func(c net.Conn) { io.WriteString(c, s); c.Close() } }
	a, b, other := tcpServer(t, answer("a")), tcpServer(t, answer("b")), tcpServer(t, answer("other"))
	client, _ := newRelayPair(t, hostcfg.RelayConfig{Forwards: []hostcfg.Forward{
		{Proto: "tcp", Listen: 8080, To: a, Addrs: []netip.Addr{peer4}},
		{Proto: "tcp", Listen: 8080, To: other},
		{Proto: "tcp", Listen: 8080, To: b, Addrs: []netip.Addr{peer6}},
	}})
	for _, c := range []struct {
		peer netip.Addr
		want string
	}{{peer4, "a"}, {peer6, "b"}} {
		conn, err := client.DialTCP(testCtx(t), netip.AddrPortFrom(c.peer, 8080), hostcfg.TCPOptions{})
		if err != nil {
			t.Fatal(err)
		}
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		got, err := io.ReadAll(conn)
		conn.Close()
		if err != nil || string(got) != c.want {
			t.Errorf("through %v: %q (%v), want %q", c.peer, got, err, c.want)
		}
	}
	bad := hostcfg.RelayConfig{Forwards: []hostcfg.Forward{
		{Proto: "tcp", Listen: 8080, To: a, Addrs: []netip.Addr{peer4}},
		{Proto: "tcp", Listen: 8080, To: b, Addrs: []netip.Addr{peer6, peer4}},
	}}
	if err := bad.Validate(); err == nil || err.Error() != "forwards[1]: tcp port 8080 is forwarded already by forwards[0]" {
		t.Errorf("two forwards of one address and port: %v", err)
	}
}

// TestRelayTCPDialError: an unreachable target resets the client's
// connection attempt, which sees a refused connection.
func TestRelayTCPDialError(t *testing.T) {
	client, r := newRelayPair(t, hostcfg.RelayConfig{Forwards: []hostcfg.Forward{{Proto: "tcp", Listen: 5201, To: closedPort(t)}}})
	_, err := client.DialTCP(testCtx(t), netip.AddrPortFrom(peer4, 5201), hostcfg.TCPOptions{})
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial: %v, want ECONNREFUSED", err)
	}
	waitFor(t, "the attempt to end", func() bool { return r.Stats().TCP.Active == 0 })
	if st := r.Stats().TCP; st.DialErrors != 1 || st.Relayed != 0 || st.Active != 0 {
		t.Errorf("stats %+v, want one dial error", st)
	}
}

// TestRelayTCPBackpressure: a target that does not read stops the client
// after what the sockets' buffers hold (the relay itself holds one copy
// buffer), and once it reads everything arrives.
func TestRelayTCPBackpressure(t *testing.T) {
	read := make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(read) }) }
	defer release()
	got := make(chan int64, 1)
	target := tcpServer(t, func(c net.Conn) {
		<-read
		n, _ := io.Copy(io.Discard, c)
		got <- n
	})
	client, r := newRelayPair(t, hostcfg.RelayConfig{Forwards: []hostcfg.Forward{{Proto: "tcp", Listen: 5201, To: target}}})
	c, err := client.DialTCP(testCtx(t), netip.AddrPortFrom(peer4, 5201), hostcfg.TCPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	data := payload(64<<20, 7)
	c.SetWriteDeadline(time.Now().Add(2 * time.Second))
	n, err := c.Write(data)
	if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
		t.Fatalf("writing 64 MiB to a target that does not read: %d bytes, %v; want the write to block", n, err)
	}
	// What left the relay sits in the kernel's socket buffers (a few MiB
	// on loopback); what the client wrote also fills the two gVisor
	// buffers on the way, which start at 1 MiB each.
	up := r.Stats().TCP.BytesUp
	t.Logf("the client wrote %d bytes, of which %d reached the target's socket, before blocking", n, up)
	if up > 16<<20 || n > 32<<20 {
		t.Errorf("the client wrote %d bytes and the relay passed on %d to a target that reads nothing: no backpressure", n, up)
	}
	release()
	c.SetWriteDeadline(time.Time{})
	if _, err := c.Write(data[n:]); err != nil {
		t.Fatal(err)
	}
	c.CloseWrite()
	if total := <-got; total != int64(len(data)) {
		t.Errorf("the target read %d bytes, want %d", total, len(data))
	}
}

// roundTrip sends each datagram on c and expects it back.
func roundTrip(t *testing.T, c net.Conn, sizes ...int) (bytes int) {
	t.Helper()
	buf := make([]byte, 65536)
	for i, n := range sizes {
		p := payload(n, uint64(i))
		if _, err := c.Write(p); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		got, err := c.Read(buf)
		if err != nil {
			t.Fatalf("datagram %d (%d bytes): %v", i, n, err)
		}
		if !slices.Equal(buf[:got], p) {
			t.Fatalf("datagram %d: got %d bytes back, not the %d sent", i, got, n)
		}
		bytes += n
	}
	return bytes
}

// TestRelayUDPForward relays a session both ways (datagrams larger than
// the MTU included, so fragmented on the path), ends it after UDPIdle, and
// starts a new one for the next datagram.
func TestRelayUDPForward(t *testing.T) {
	target := udpEchoServer(t)
	client, r := newRelayPair(t, hostcfg.RelayConfig{
		Forwards: []hostcfg.Forward{{Proto: "udp", Listen: 5353, To: target}},
		UDPIdle:  300 * time.Millisecond,
	})
	c, err := client.DialUDP(netip.AddrPortFrom(peer4, 5353))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	n := roundTrip(t, c, 1, 100, 1400, 8000, 60000)
	// The echo can reach the client before the relay has counted the
	// datagram it sent, or the echo it passed on.
	waitFor(t, "the bytes to be counted", func() bool {
		st := r.Stats().UDP
		return st.BytesUp == uint64(n) && st.BytesDown == uint64(n)
	})
	if st := r.Stats().UDP; st.Relayed != 1 || st.Active != 1 || st.BytesUp != uint64(n) || st.BytesDown != uint64(n) {
		t.Errorf("stats %+v, want one open session carrying %d bytes each way", st, n)
	}
	waitFor(t, "the idle session to end", func() bool { return r.Stats().UDP.Active == 0 })
	roundTrip(t, c, 10)
	if st := r.Stats().UDP; st.Relayed != 2 || st.Active != 1 {
		t.Errorf("stats %+v, want a second session", st)
	}
}

// stuckTarget is a relay's UDP socket toward a target that takes no
// datagram until released (its first Write blocks), then fails every
// Write after the first fail writes. Its Read blocks until Close.
type stuckTarget struct {
	net.Conn // nil: only Write, Read and Close are called
	release  chan struct{}
	closed   chan struct{}
	once     sync.Once
	mu       sync.Mutex
	written  int
	fail     int
}

func (c *stuckTarget) Write(b []byte) (int, error) {
	<-c.release
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.written >= c.fail {
		return 0, syscall.ECONNREFUSED
	}
	c.written++
	return len(b), nil
}

func (c *stuckTarget) Read([]byte) (int, error) {
	<-c.closed
	return 0, net.ErrClosed
}

func (c *stuckTarget) Close() error {
	c.once.Do(func() { close(c.closed) })
	return nil
}

func (c *stuckTarget) SetReadDeadline(time.Time) error { return nil }

// TestRelayUDPCountsDrops sends a burst into a session whose target takes
// nothing for a while: the relay's socket overflows, and later writes to
// the target fail. Every datagram is either written or counted dropped.
func TestRelayUDPCountsDrops(t *testing.T) {
	target := &stuckTarget{release: make(chan struct{}), closed: make(chan struct{}), fail: 100}
	client, r := newRelayPair(t, hostcfg.RelayConfig{
		Forwards: []hostcfg.Forward{{Proto: "udp", Listen: 5353, To: netip.MustParseAddrPort("127.0.0.1:9")}},
		UDPIdle:  300 * time.Millisecond,
		Dial: func(context.Context, string, string) (net.Conn, error) {
			return target, nil
		},
	})
	c, err := client.DialUDP(netip.AddrPortFrom(peer4, 5353))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const sent = 2000 // 2 MB: well past a socket's receive buffer
	b := make([]byte, 1000)
	for i := range sent {
		if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			// The session's socket exists before the burst (until
			// then, each datagram would start a session of its own).
			waitFor(t, "the session", func() bool { return r.Stats().UDP.Relayed == 1 })
		}
	}
	waitFor(t, "the burst to reach the peer's socket", func() bool { return r.arrived() >= sent })
	close(target.release)
	waitFor(t, "the idle session to end", func() bool { return r.Stats().UDP.Active == 0 })
	st := r.Stats().UDP
	target.mu.Lock()
	written := target.written
	target.mu.Unlock()
	if written != target.fail || st.Dropped == 0 || uint64(written)+st.Dropped != sent {
		t.Errorf("%d written to the target and %d counted dropped, want %d and the rest of %d", written, st.Dropped, target.fail, sent)
	}
}

// TestRelayServices checks echo and discard over TCP and UDP, and that
// other ports of the peer are closed.
func TestRelayServices(t *testing.T) {
	client, r := newRelayPair(t, hostcfg.RelayConfig{Services: true})
	ctx := testCtx(t)
	data := payload(1<<20, 3)

	c, err := client.DialTCP(ctx, netip.AddrPortFrom(peer6, echoPort), hostcfg.TCPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	go func() { c.Write(data); c.CloseWrite() }()
	got, err := io.ReadAll(c)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("tcp echo: %d bytes back (%v), want the %d sent", len(got), err, len(data))
	}
	c.Close()

	c, err = client.DialTCP(ctx, netip.AddrPortFrom(peer4, discardPort), hostcfg.TCPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(data); err != nil {
		t.Fatal(err)
	}
	c.Close()
	waitFor(t, "discard to read everything", func() bool { return r.Stats().TCP.BytesUp == 2*uint64(len(data)) })

	u, err := client.DialUDP(netip.AddrPortFrom(peer4, echoPort))
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	roundTrip(t, u, 1, 1000)
	d, err := client.DialUDP(netip.AddrPortFrom(peer6, discardPort))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	d.Write([]byte("into the void"))
	waitFor(t, "discard to count a datagram", func() bool { return r.Stats().UDP.Served == 3 })

	if _, err := client.DialTCP(ctx, netip.AddrPortFrom(peer4, 10), hostcfg.TCPOptions{}); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("tcp to a port without service: %v, want ECONNREFUSED", err)
	}
	waitFor(t, "the connections to end", func() bool { return r.Stats().TCP.Active == 0 })
	st := r.Stats()
	if st.TCP.Served != 2 || st.TCP.NoService != 1 || st.TCP.Errors != 0 || st.TCP.BytesDown != uint64(len(data)) {
		t.Errorf("tcp stats %+v", st.TCP)
	}
	if st.UDP.Served != 3 || st.UDP.BytesUp != 1001+13 || st.UDP.BytesDown != 1001 {
		t.Errorf("udp stats %+v", st.UDP)
	}
}

// TestRelayTransparent relays allowed destinations to themselves and
// refuses the others, over TCP and UDP, IPv4 and IPv6. The relay's Dial
// is replaced: it records each target and connects to a loopback server
// instead, so that no traffic leaves the machine.
func TestRelayTransparent(t *testing.T) {
	down := payload(100<<10, 5)
	tcpTarget := tcpServer(t, sumThenSend(down))
	udpTarget := udpEchoServer(t)
	dial, dialed := recordDials(func(ctx context.Context, network, _ string) (net.Conn, error) {
		to := tcpTarget
		if network == "udp" {
			to = udpTarget
		}
		var d net.Dialer
		return d.DialContext(ctx, network, to.String())
	})
	client, r := newRelayPair(t, hostcfg.RelayConfig{
		Transparent: true,
		Allow:       []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24"), netip.MustParsePrefix("2001:db8:1::/48")},
		Services:    true,
		Dial:        dial,
	})
	ctx := testCtx(t)
	up := payload(50<<10, 6)
	for _, dst := range []string{"198.51.100.7:80", "[2001:db8:1::7]:443"} {
		c, err := client.DialTCP(ctx, netip.MustParseAddrPort(dst), hostcfg.TCPOptions{})
		if err != nil {
			t.Fatalf("allowed %s: %v", dst, err)
		}
		exchange(t, c, up, down)
		c.Close()
	}
	for _, dst := range []string{"203.0.113.9:80", "203.0.113.9:7", "[2001:db8:2::7]:443"} {
		_, err := client.DialTCP(ctx, netip.MustParseAddrPort(dst), hostcfg.TCPOptions{})
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("not allowed %s: %v, want ECONNREFUSED", dst, err)
		}
	}

	u, err := client.DialUDP(netip.MustParseAddrPort("198.51.100.7:53"))
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	// u is connected: an answer proves it came from 198.51.100.7:53.
	roundTrip(t, u, 40, 512)
	v, err := client.DialUDP(netip.MustParseAddrPort("203.0.113.9:53"))
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	v.Write([]byte("let me out"))
	v.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if n, err := v.Read(make([]byte, 100)); err == nil {
		t.Errorf("a datagram to a destination not allowed got %d bytes back", n)
	}

	waitFor(t, "the connections to end", func() bool { return r.Stats().TCP.Active == 0 })
	st := r.Stats()
	if st.TCP.Relayed != 2 || st.TCP.Refused != 3 || st.TCP.Served != 0 || st.TCP.Errors != 0 {
		t.Errorf("tcp stats %+v, want 2 relayed and 3 refused", st.TCP)
	}
	if st.UDP.Relayed != 1 || st.UDP.Refused != 1 {
		t.Errorf("udp stats %+v, want 1 relayed and 1 refused", st.UDP)
	}
	want := []string{"tcp 198.51.100.7:80", "tcp [2001:db8:1::7]:443", "udp 198.51.100.7:53"}
	if got := dialed(); !slices.Equal(got, want) {
		t.Errorf("dialed %q, want %q", got, want)
	}
}

// TestRelayClose closes a relay with a TCP connection and a UDP session
// open: both end at once on the client's side too, and no goroutine is
// left (TestMain checks). Cancelling StartRelay's context does the same.
func TestRelayClose(t *testing.T) {
	for _, how := range []string{"close", "context"} {
		t.Run(how, func(t *testing.T) {
			hold := make(chan struct{})
			defer close(hold)
			target := tcpServer(t, func(c net.Conn) { c.Write([]byte("hello")); <-hold })
			udpTarget := udpEchoServer(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			ab, ba := newWire(nil), newWire(nil)
			client, err := NewHost(HostConfig{Name: "client", Addrs: relayClientAddrs, MTU: 1500, Clock: realClock, Output: ab.output})
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()
			peer, err := NewHost(HostConfig{Name: "peer", Addrs: relayPeerAddrs, MTU: 1500, Clock: realClock, Output: ba.output})
			if err != nil {
				t.Fatal(err)
			}
			defer peer.Close()
			r, err := peer.StartRelay(ctx, hostcfg.RelayConfig{Forwards: []hostcfg.Forward{
				{Proto: "tcp", Listen: 80, To: target}, {Proto: "udp", Listen: 53, To: udpTarget}}})
			if err != nil {
				t.Fatal(err)
			}
			ab.to.Store(peer)
			ba.to.Store(client)
			defer ab.async(4096)()
			defer ba.async(4096)()

			c, err := client.DialTCP(testCtx(t), netip.AddrPortFrom(peer4, 80), hostcfg.TCPOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			buf := make([]byte, 5)
			if _, err := io.ReadFull(c, buf); err != nil {
				t.Fatal(err)
			}
			u, err := client.DialUDP(netip.AddrPortFrom(peer4, 53))
			if err != nil {
				t.Fatal(err)
			}
			defer u.Close()
			roundTrip(t, u, 10)
			if st := r.Stats(); st.TCP.Active != 1 || st.UDP.Active != 1 {
				t.Fatalf("stats %+v, want one connection and one session", st)
			}

			if how == "close" {
				r.Close()
			} else {
				cancel()
			}
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			if n, err := c.Read(buf); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
				t.Errorf("client read %d bytes, %v after the relay closed; want the connection ended", n, err)
			}
			r.Close()
			r.Close()
			if st := r.Stats(); st.TCP.Active != 0 || st.UDP.Active != 0 || st.TCP.Errors != 0 {
				t.Errorf("stats after Close %+v", st)
			}
			// Closed, the relay turns new connections away.
			if _, err := client.DialTCP(testCtx(t), netip.AddrPortFrom(peer4, 80), hostcfg.TCPOptions{}); !errors.Is(err, syscall.ECONNREFUSED) {
				t.Errorf("dial after Close: %v, want ECONNREFUSED", err)
			}
		})
	}
}

// TestRelayStart checks what StartRelay refuses.
func TestRelayStart(t *testing.T) {
	h, err := NewHost(HostConfig{Name: "peer", Addrs: relayPeerAddrs, MTU: 1500, Clock: realClock, Output: func([][]byte) {}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	r, err := h.StartRelay(context.Background(), hostcfg.RelayConfig{Services: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.StartRelay(context.Background(), hostcfg.RelayConfig{}); err == nil || err.Error() != `stack: host "peer": relay: the host has a relay already` {
		t.Errorf("second relay: %v", err)
	}
	if _, err := h.StartRelay(context.Background(), hostcfg.RelayConfig{Transparent: true, Allow: []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16")}}); err == nil ||
		err.Error() != `stack: host "peer": relay: transparent mode needs a host made with HostConfig.Transparent` {
		t.Errorf("transparent relay on a plain host: %v", err)
	}
	r.Close()
	h.Inject([]byte{0x45})
	r, err = h.StartRelay(context.Background(), hostcfg.RelayConfig{})
	if err != nil {
		t.Errorf("a second relay after the first closed, after Inject: %v", err)
	} else {
		r.Close()
	}
}

// TestRelayStartWhileInjecting starts a relay while datagrams arrive on
// another goroutine: StartRelay works whatever the order (the race
// detector checks the handlers' hand-over), and once it has returned the
// relay serves.
func TestRelayStartWhileInjecting(t *testing.T) {
	ab, ba := newWire(nil), newWire(nil)
	client, err := NewHost(HostConfig{Name: "client", Addrs: relayClientAddrs, MTU: 1500, Clock: realClock, Output: ab.output})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	peer, err := NewHost(HostConfig{Name: "peer", Addrs: relayPeerAddrs, MTU: 1500, Clock: realClock, Output: ba.output})
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	ab.to.Store(peer)
	ba.to.Store(client)
	defer ab.async(4096)()
	defer ba.async(4096)()

	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		pkt := udpDatagram(netip.AddrPortFrom(relayClientAddrs[0].Addr(), 40000), netip.AddrPortFrom(peer4, 9), []byte("x"))
		for {
			select {
			case <-stop:
				return
			default:
				peer.Inject(pkt)
			}
		}
	}()
	waitFor(t, "datagrams to arrive", func() bool { return peer.Stats().InPackets > 100 })
	r, err := peer.StartRelay(context.Background(), hostcfg.RelayConfig{Services: true})
	close(stop)
	<-done
	if err != nil {
		t.Fatalf("StartRelay while packets arrive: %v", err)
	}
	defer r.Close()
	c, err := client.DialTCP(testCtx(t), netip.AddrPortFrom(peer4, echoPort), hostcfg.TCPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	exchangeEcho(t, c, payload(10<<10, 3))
}

// exchangeEcho writes b to an echo service on c and reads it back.
func exchangeEcho(t *testing.T, c io.ReadWriter, b []byte) {
	t.Helper()
	go c.Write(b)
	got := make([]byte, len(b))
	if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, b) {
		t.Fatalf("echo: %v, got back %d bytes equal %v", err, len(got), bytes.Equal(got, b))
	}
}

// TestRelayByteRing streams through a small ring in pieces of every size, so
// that both sides wrap around at every offset.
func TestRelayByteRing(t *testing.T) {
	ring := newByteRing(1000, 1000, nil)
	streamThroughRing(t, ring, payload(1<<20, 21), 997, 1009)
	if ring.writable() != nil {
		t.Error("a closed ring is writable")
	}
}

// TestRelayTCPTargetReset: a target that closes while the client is still
// sending (iperf3's server at the end of a test) makes the relay's write
// fail with EPIPE or ECONNRESET. That is the target's doing, passed on to
// the client as a reset as a direct connection would have seen it: a
// reset, not a failure of the relay.
func TestRelayTCPTargetReset(t *testing.T) {
	target := tcpServer(t, func(c net.Conn) {
		var b [1]byte
		c.Read(b[:])
		c.(*net.TCPConn).SetLinger(0) // close with a reset, unread data or not
	})
	client, r := newRelayPair(t, hostcfg.RelayConfig{Forwards: []hostcfg.Forward{{Proto: "tcp", Listen: 5201, To: target}}})
	c, err := client.DialTCP(testCtx(t), netip.AddrPortFrom(peer4, 5201), hostcfg.TCPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	buf := make([]byte, 64<<10)
	var werr error
	for i := 0; i < 1000 && werr == nil; i++ {
		_, werr = c.Write(buf)
	}
	if werr == nil {
		t.Fatal("the client's writes went on after the target's reset")
	}
	waitFor(t, "the relayed connection to end", func() bool { return r.Stats().TCP.Active == 0 })
	if st := r.Stats().TCP; st.Relayed != 1 || st.Resets != 1 || st.Errors != 0 {
		t.Errorf("stats %+v, want one reset and no error", st)
	}
}

func TestIsReset(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&net.OpError{Op: "write", Err: os.NewSyscallError("write", syscall.EPIPE)}, true},
		{&net.OpError{Op: "read", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, true},
		{&net.OpError{Op: "read", Err: errors.New((&tcpip.ErrConnectionReset{}).String())}, true},
		{&net.OpError{Op: "write", Err: os.NewSyscallError("write", syscall.ENOBUFS)}, false},
		{errors.New("timeout"), false},
	} {
		if got := isReset(tc.err); got != tc.want {
			t.Errorf("isReset(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// streamThroughRing writes data into ring in pieces of 1 to maxWrite bytes
// while a reader takes it out in pieces of 1 to maxRead, so that both
// sides wrap around at every offset, closes the ring, and checks that
// everything came out in order.
func streamThroughRing(t *testing.T, ring *byteRing, data []byte, maxRead, maxWrite int) {
	t.Helper()
	got := make(chan []byte, 1)
	go func() {
		var out []byte
		for k := 1; ; k = k%maxRead + 1 {
			b := ring.readable()
			if b == nil {
				got <- out
				return
			}
			n := min(k, len(b))
			out = append(out, b[:n]...)
			ring.consumed(n)
		}
	}()
	for in, k := data, 1; len(in) > 0; k = k%maxWrite + 1 {
		b := ring.writable()
		n := copy(b[:min(k, len(b))], in)
		ring.produced(n)
		in = in[n:]
	}
	ring.close()
	if out := <-got; !bytes.Equal(out, data) {
		t.Fatalf("got %d bytes through the ring, not the %d put in", len(out), len(data))
	}
}
