//go:build !linux

package stack

import (
	"net"
	"syscall"
)

// The portable fallbacks of the UDP relay's Linux fast paths
// (relay_udp_linux.go): one datagram per read and per write, the receive
// buffer as large as the system lets any process have it, no count of the
// kernel's drops, no segmentation. Same behaviour, more system calls.

// batchSyscalls: no sendmmsg here; x/net's WriteBatch would write one
// message (macOS) or none (Windows), so each datagram is one Write.
const batchSyscalls = false

// msgDontWait is Linux's MSG_DONTWAIT: without sendmmsg only a
// batchWriter that a target's connection is itself (a test's) sees it.
const msgDontWait = 0x40

// tuneTarget asks for the large receive buffer of a session's socket
// toward its target, as far as the system allows; nothing is segmented.
func tuneTarget(c net.Conn, _ syscall.RawConn) (segMax int) {
	if b, ok := c.(interface{ SetReadBuffer(int) error }); ok {
		b.SetReadBuffer(targetReceiveBuffer)
	}
	return 0
}

// socketDrops returns 0: the kernel's count (SO_MEMINFO) is Linux's.
func socketDrops(syscall.RawConn) uint32 { return 0 }

// putSegmentCmsg leaves b zero: with tuneTarget's segMax 0 no message
// carrying a run is ever sent here.
func putSegmentCmsg([]byte, int) {}

// readBatches reads the target's datagrams one at a time (no recvmmsg).
func (u *udpSession) readBatches(syscall.RawConn) error { return u.readEach() }
