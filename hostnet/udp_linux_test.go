package hostnet

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestKernelUDPCountsReceiveDrops: a kernel listener that nobody reads
// holds what its buffer takes (4 MiB when netjam may force it) and the
// kernel's drop count has the rest: every datagram sent over loopback is
// read or counted.
func TestKernelUDPCountsReceiveDrops(t *testing.T) {
	c, err := ListenKernelUDP(netip.MustParseAddrPort("127.0.0.1:0"))
	if err != nil {
		t.Skipf("no loopback: %v", err)
	}
	defer c.Close()
	if rc, err := c.SyscallConn(); err == nil && unix.Geteuid() == 0 {
		rc.Control(func(fd uintptr) {
			// The kernel reports twice what was set (its bookkeeping).
			if n, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF); err != nil || n < 2*kernelReceiveBuffer {
				t.Errorf("receive buffer %d (%v), want %d forced as root", n, err, 2*kernelReceiveBuffer)
			}
		})
	}
	send, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(c.LocalAddr().(*net.UDPAddr).AddrPort()))
	if err != nil {
		t.Fatal(err)
	}
	defer send.Close()
	const n = 20000
	msg := make([]byte, 1400)
	for range n {
		if _, err := send.Write(msg); err != nil {
			t.Fatal(err)
		}
	}
	drops := c.ReceiveDrops()
	read := 0
	buf := make([]byte, 2048)
	// What the buffer holds is there to read at once; the deadline only
	// ends the test when it holds less than it should (a short one per
	// read could pass before a descheduled reader looked).
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for uint64(read)+drops < n {
		if _, _, err := c.ReadFromUDPAddrPort(buf); err != nil {
			break
		}
		read++
	}
	t.Logf("%d datagrams read, %d dropped by the kernel", read, drops)
	if drops == 0 || uint64(read)+drops != n {
		t.Errorf("%d read and %d dropped of %d sent: want the rest of what the buffer held counted", read, drops, n)
	}
}
