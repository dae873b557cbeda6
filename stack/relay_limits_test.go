package stack

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/netjam/netjam/third_party/gvisor/_pkg/tcpip"

	"github.com/netjam/netjam/hostcfg"
)

// TestRelayByteRingGrows moves 4 MiB through a ring that starts at 16
// bytes with a slow consumer: it grows by doubling up to its cap, asking
// for each growth, and every byte comes out in order. A ring refused
// growth stays at its size and still carries everything.
func TestRelayByteRingGrows(t *testing.T) {
	for _, c := range []struct {
		name  string
		grant int64 // bytes of growth granted
		want  int   // the ring's final size
	}{{"cap", 1 << 30, 64 << 10}, {"refused", 1000, 512}} {
		t.Run(c.name, func(t *testing.T) {
			granted := int64(0)
			ring := newByteRing(16, 64<<10, func(extra int64) bool {
				if granted+extra > c.grant {
					return false
				}
				granted += extra
				return true
			})
			streamThroughRing(t, ring, payload(4<<20, 22), 4093, 65521)
			if ring.size() != c.want || int64(ring.size()-16) != granted {
				t.Errorf("ring of %d bytes, %d granted; want %d, all growth granted", ring.size(), granted, c.want)
			}
		})
	}
}

// TestRelayTCPIdle resets served and relayed connections that carry
// nothing for TCPIdle, counted as Idle, and keeps one that talks (less
// often than TCPIdle, in one direction only) open.
func TestRelayTCPIdle(t *testing.T) {
	// The talker writes every 100 ms: ten times in each idle period, so
	// that a stall of the loaded machine (seen: 200 ms under the race
	// detector) does not look like silence.
	const idle = time.Second
	target := tcpServer(t, func(c net.Conn) { io.Copy(c, c) })
	client, r := newRelayPair(t, hostcfg.RelayConfig{
		Services: true,
		Forwards: []hostcfg.Forward{{Proto: "tcp", Listen: 80, To: target}},
		TCPIdle:  idle,
	})
	ctx := testCtx(t)
	start := time.Now()
	var silent []net.Conn
	for _, port := range []uint16{echoPort, discardPort, 80} {
		c, err := client.DialTCP(ctx, netip.AddrPortFrom(peer4, port), hostcfg.TCPOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		silent = append(silent, c)
	}
	talker, err := client.DialTCP(ctx, netip.AddrPortFrom(peer4, discardPort), hostcfg.TCPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer talker.Close()
	for range 25 {
		time.Sleep(idle / 10)
		if _, err := talker.Write([]byte("still here")); err != nil {
			t.Fatalf("a talking connection failed: %v", err)
		}
	}
	for i, c := range silent {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		n, err := c.Read(make([]byte, 10))
		if n != 0 || err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("silent connection %d: read %d, %v; want it reset", i, n, err)
		}
	}
	if d := time.Since(start); d < idle {
		t.Errorf("silent connections ended after %v, before %v", d, idle)
	}
	waitFor(t, "the silent connections to be counted", func() bool { return r.Stats().TCP.Idle == 3 })
	if st := r.Stats().TCP; st.Active != 1 || st.Errors != 0 {
		t.Errorf("tcp stats %+v, want the talker open and no error", st)
	}
}

// TestRelayBudget spends the relay's buffer budget on relayed
// connections: the next is reset and counted as Limited and OverBudget;
// once one ends, its buffers are free for a new one.
func TestRelayBudget(t *testing.T) {
	target := tcpServer(t, func(c net.Conn) { c.Write([]byte("hi")); io.Copy(io.Discard, c) })
	client, r := newRelayPair(t, hostcfg.RelayConfig{
		Forwards: []hostcfg.Forward{{Proto: "tcp", Listen: 80, To: target}},
		Budget:   3 * tcpCharge(actRelay),
	})
	ctx := testCtx(t)
	dial := func() (net.Conn, error) {
		c, err := client.DialTCP(ctx, netip.AddrPortFrom(peer4, 80), hostcfg.TCPOptions{})
		if err != nil {
			return nil, err
		}
		if _, err := io.ReadFull(c, make([]byte, 2)); err != nil {
			c.Close()
			return nil, err
		}
		return c, nil
	}
	var open []net.Conn
	for range 3 {
		c, err := dial()
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		open = append(open, c)
	}
	if st := r.Stats(); st.BufferBytes != 3*tcpCharge(actRelay) {
		t.Errorf("%d bytes of buffers in use, want %d", st.BufferBytes, 3*tcpCharge(actRelay))
	}
	if _, err := dial(); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("a connection past the budget: %v, want ECONNREFUSED", err)
	}
	if st := r.Stats().TCP; st.Limited != 1 || st.OverBudget != 1 || st.Relayed != 3 {
		t.Errorf("tcp stats %+v, want 3 relayed and 1 over budget", st)
	}
	open[0].Close()
	waitFor(t, "the closed connection's buffers", func() bool { return r.Stats().BufferBytes == 2*tcpCharge(actRelay) })
	c, err := dial()
	if err != nil {
		t.Fatalf("a connection once buffers are free: %v", err)
	}
	c.Close()
}

// TestRelayIdleEchoMemory opens 1000 echo connections that say one byte
// each and then nothing: netjam's heap (the relay's side, and the
// client's gVisor stack of this test too) must stay under 64 MiB. Each
// echo ring once took 4 MiB from the start: 4 GB for these.
func TestRelayIdleEchoMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("1000 connections")
	}
	client, r := newRelayPair(t, hostcfg.RelayConfig{Services: true})
	ctx := testCtx(t)
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	const conns = 1000
	buf := make([]byte, 1)
	for i := range conns {
		c, err := client.DialTCP(ctx, netip.AddrPortFrom(peer4, echoPort), hostcfg.TCPOptions{})
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		defer c.Close()
		if _, err := c.Write([]byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf); err != nil || buf[0] != byte(i) {
			t.Fatalf("connection %d: echo %v, %v", i, buf, err)
		}
	}
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	heap := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("%d idle echo connections: heap %.1f MiB more (%.0f KiB each, both stacks), relay buffers %d KiB",
		conns, float64(heap)/(1<<20), float64(heap)/conns/1024, r.Stats().BufferBytes>>10)
	if heap > 64<<20 {
		t.Errorf("heap grew by %.1f MiB for %d idle echo connections, want under 64 MiB", float64(heap)/(1<<20), conns)
	}
	if st := r.Stats(); st.TCP.Active != conns || st.BufferBytes != conns*tcpCharge(actEcho) {
		t.Errorf("stats %+v, want %d connections holding %d bytes of buffers each", st, conns, tcpCharge(actEcho))
	}
}

// TestRelayUDPDownOnlyKeepsSession: a session whose datagrams flow only
// from the target, more often than UDPIdle, stays open: the idle end is
// the last datagram either way.
func TestRelayUDPDownOnlyKeepsSession(t *testing.T) {
	// A datagram every 100 ms: ten per idle period, so that a stall of a
	// loaded machine does not read as silence.
	const idle = time.Second
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 100)
		_, from, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		for i := range 15 {
			time.Sleep(idle / 10)
			pc.WriteTo([]byte{byte(i)}, from)
		}
	}()
	defer func() { <-done }()
	client, r := newRelayPair(t, hostcfg.RelayConfig{
		Forwards: []hostcfg.Forward{{Proto: "udp", Listen: 5353, To: pc.LocalAddr().(*net.UDPAddr).AddrPort()}},
		UDPIdle:  idle,
	})
	c, err := client.DialUDP(netip.AddrPortFrom(peer4, 5353))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("start"))
	buf := make([]byte, 10)
	for i := range 15 {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if n, err := c.Read(buf); err != nil || n != 1 || buf[0] != byte(i) {
			t.Fatalf("datagram %d from the target: %d bytes %v, %v", i, n, buf[:n], err)
		}
	}
	if st := r.Stats().UDP; st.Relayed != 1 {
		t.Errorf("udp stats %+v, want one session throughout", st)
	}
}

// filledConn is a net.Conn whose reads always return a full buffer.
type filledConn struct{ net.Conn }

func (filledConn) Read(b []byte) (int, error) { return len(b), nil }

// TestRelayReadIdleAllocs: a relay's read that brings data allocates
// nothing. (It allocated on every read: the check for a passed deadline
// declared the net.Error that errors.As fills, which escaped to the heap
// even for no error at all.)
func TestRelayReadIdleAllocs(t *testing.T) {
	a := newActivity(time.Minute)
	b := make([]byte, 1024)
	var c net.Conn = filledConn{}
	allocs := testing.AllocsPerRun(100, func() {
		if n, err := readIdle(c, b, a); n != len(b) || err != nil {
			t.Fatalf("read %d, %v", n, err)
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per read, want 0", allocs)
	}
}

// TestRelayTCPReadAllocs: the relay's read of a client's connection that
// holds data allocates nothing. (gonet's Read put its writer on the heap
// at every call: 11k allocations a second into TUN mode at 4 Gbit/s.)
func TestRelayTCPReadAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops objects under the race detector")
	}
	in, out := tcpConnPair(t)
	const chunk, runs = 1024, 100
	if _, err := out.Write(make([]byte, (runs+1)*chunk)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the data to arrive", func() bool {
		n, _ := in.ep.GetSockOptInt(tcpip.ReceiveQueueSizeOption)
		return n >= (runs+1)*chunk
	})
	c := &relayTCP{TCPConn: in.c, ep: in.ep, bufs: newTCPBuffers(in.ep, &budget{limit: 1 << 30}, 1500)}
	buf := make([]byte, chunk)
	allocs := testing.AllocsPerRun(runs, func() {
		if n, err := c.Read(buf); n != chunk || err != nil {
			t.Fatalf("read %d, %v", n, err)
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per read, want 0", allocs)
	}
}

// tcpConnPair returns the two ends of a TCP connection between two hosts
// wired back to back: in, accepted, and out, which dialed it.
func tcpConnPair(t *testing.T) (in, out *TCPConn) {
	t.Helper()
	a, b := newPair(t, pairConfig{fam: v4})
	l, err := b.ListenTCP(80, hostcfg.TCPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	accepted := make(chan *TCPConn, 1)
	go func() {
		c, err := l.Accept(ctx)
		if err != nil {
			t.Error(err)
		}
		accepted <- c
	}()
	out, err = a.DialTCP(ctx, netip.AddrPortFrom(v4.b.Addr(), 80), hostcfg.TCPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { out.Close() })
	if in = <-accepted; in == nil {
		t.FailNow()
	}
	t.Cleanup(func() { in.Close() })
	return in, out
}
