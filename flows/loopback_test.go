package flows

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/netjam/netjam/clock"
)

// These tests run flows over the kernel's loopback, on the real clock: the
// deadlines, CloseWrite and the allocation-free UDP read of real sockets,
// which the in-memory fakes do not exercise. They assert no timing.

func tcpPair(t *testing.T) (client, server *net.TCPConn) {
	t.Helper()
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Skipf("no loopback: %v", err)
	}
	defer ln.Close()
	accepted := make(chan *net.TCPConn, 1)
	go func() {
		c, err := ln.AcceptTCP()
		if err != nil {
			c = nil
		}
		accepted <- c
	}()
	client, err = net.DialTCP("tcp", nil, ln.Addr().(*net.TCPAddr))
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

func TestTCPLoopback(t *testing.T) {
	for _, spec := range []TCPBulkSpec{
		{Name: "size", Size: 8<<20 + 1},
		{Name: "duration", Duration: 50 * time.Millisecond}, // ended by the write deadline and CloseWrite
	} {
		t.Run(spec.Name, func(t *testing.T) {
			client, server := tcpPair(t)
			f, err := NewTCPBulk(spec, clock.Real{}, client, server, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := f.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			s := f.Summary()
			if s.BytesReceived == 0 || s.BytesSent != s.BytesReceived || s.CompletionS <= 0 || (spec.Size > 0 && s.BytesReceived != uint64(spec.Size)) {
				t.Errorf("summary %+v", *s.TCPSummary)
			}
		})
	}
}

func TestUDPLoopback(t *testing.T) {
	recv, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Skipf("no loopback: %v", err)
	}
	defer recv.Close()
	send, err := net.DialUDP("udp", nil, recv.LocalAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer send.Close()
	f, err := NewUDP(UDPSpec{Name: "probe", FlowID: 3, Interval: 200 * time.Microsecond, PacketSize: 200, Count: 200}, clock.Real{}, send, recv)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The loopback may drop under load, never invent, duplicate or
	// corrupt.
	s := f.Summary()
	if s.PacketsSent != 200 || s.PacketsReceived == 0 || s.PacketsReceived > 200 || s.Duplicates != 0 || s.Malformed != 0 || s.DelayMs.Min <= 0 {
		t.Errorf("summary %+v", *s.UDPSummary)
	}
}

// droppingConn stands for a socket whose full buffer dropped the first n
// datagrams: it reads and discards them, and says so (ReceiveDropper).
type droppingConn struct {
	*net.UDPConn
	n, dropped uint64
}

func (c *droppingConn) ReadFromUDPAddrPort(b []byte) (int, netip.AddrPort, error) {
	for {
		n, a, err := c.UDPConn.ReadFromUDPAddrPort(b)
		if err != nil || c.dropped == c.n {
			return n, a, err
		}
		c.dropped++
	}
}

func (c *droppingConn) ReceiveDrops() uint64 { return c.n }

// TestUDPReceiverDropsAreNotLoss: datagrams the receiving socket dropped
// (the machine did not read them in time) are counted as the receiver's,
// not as the path's loss.
func TestUDPReceiverDropsAreNotLoss(t *testing.T) {
	recv, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Skipf("no loopback: %v", err)
	}
	defer recv.Close()
	recv.SetReadBuffer(1 << 20)
	send, err := net.DialUDP("udp", nil, recv.LocalAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer send.Close()
	f, err := NewUDP(UDPSpec{Name: "probe", FlowID: 3, Interval: 200 * time.Microsecond, PacketSize: 200, Count: 200}, clock.Real{}, send, &droppingConn{UDPConn: recv, n: 5})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	s := f.Summary()
	if s.ReceiverDrops != 5 || s.Lost+s.PacketsReceived+s.ReceiverDrops != 200 || s.LossRatio != float64(s.Lost)/200 {
		t.Errorf("summary %+v: want 5 receiver drops apart from lost", *s.UDPSummary)
	}
}
