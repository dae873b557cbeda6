package stack

import (
	"net"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The Linux fast paths of the UDP relay, each with a portable fallback in
// relay_udp_other.go: reading the target's datagrams in batches
// (recvmmsg), writing them in batches (sendmmsg, through x/net) and as
// segmented runs (UDP_SEGMENT), a receive buffer past net.core.rmem_max
// (SO_RCVBUFFORCE), and the kernel's count of what it dropped at a socket
// (SO_MEMINFO).

// batchSyscalls: a UDP socket toward a target is written with sendmmsg
// (x/net's WriteBatch), which only Linux has; elsewhere WriteBatch writes
// one message, or (Windows) none.
const batchSyscalls = true

// msgDontWait is MSG_DONTWAIT, for a batch write that must not wait.
const msgDontWait = unix.MSG_DONTWAIT

// udpSegment is UDP_SEGMENT (linux/udp.h).
const udpSegment = 103

// tuneTarget asks for the large receive buffer of a session's socket
// toward its target (SO_RCVBUFFORCE when netjam may, else SO_RCVBUF) and
// returns the largest datagram it segments (segmentMax).
func tuneTarget(_ net.Conn, rc syscall.RawConn) (segMax int) {
	rc.Control(func(fd uintptr) {
		if unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, targetReceiveBuffer) != nil {
			unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, targetReceiveBuffer)
		}
		segMax = segmentMax(int(fd))
	})
	return segMax
}

// The kernel's socket memory figures (SO_MEMINFO, linux/sock_diag.h): an
// array of skMeminfoVars counters, the drops at index skMeminfoDrops.
const (
	skMeminfoDrops = 8
	skMeminfoVars  = 9
)

// socketDrops returns how many datagrams the kernel dropped at the socket
// (its receive buffer full, memory short, a bad checksum); 0 when the
// kernel does not say.
func socketDrops(rc syscall.RawConn) uint32 {
	var info [skMeminfoVars]uint32
	var drops uint32
	rc.Control(func(fd uintptr) {
		n := uint32(unsafe.Sizeof(info))
		_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, fd, unix.SOL_SOCKET, unix.SO_MEMINFO,
			uintptr(unsafe.Pointer(&info[0])), uintptr(unsafe.Pointer(&n)), 0)
		if errno == 0 && n >= (skMeminfoDrops+1)*4 {
			drops = info[skMeminfoDrops]
		}
	})
	return drops
}

// segmentMax returns the largest datagram the socket segments: the path
// MTU toward its target (IP_MTU, IPV6_MTU) less the headers, when the
// kernel knows UDP_SEGMENT; 0 otherwise.
func segmentMax(fd int) int {
	if _, err := unix.GetsockoptInt(fd, unix.SOL_UDP, udpSegment); err != nil {
		return 0
	}
	if mtu, err := unix.GetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_MTU); err == nil {
		return mtu - 28
	}
	if mtu, err := unix.GetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_MTU); err == nil {
		return mtu - 48
	}
	return 0
}

// putSegmentCmsg writes the UDP_SEGMENT control message for datagrams of
// size bytes into b.
func putSegmentCmsg(b []byte, size int) {
	h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
	h.Level, h.Type = unix.SOL_UDP, udpSegment
	h.SetLen(unix.CmsgLen(2))
	*(*uint16)(unsafe.Pointer(&b[unix.CmsgLen(0)])) = uint16(size)
}

// downBatch is what one recvmmsg reads into: udpDownSlots slots of
// udpBuffer bytes, and their message headers.
type downBatch struct {
	arena []byte
	iovs  [udpDownSlots]unix.Iovec
	msgs  [udpDownSlots]unix.Mmsghdr
}

var downBatches = sync.Pool{New: func() any {
	b := &downBatch{arena: make([]byte, udpDownSlots*udpBuffer)}
	for i := range b.msgs {
		b.iovs[i].Base = &b.arena[i*udpBuffer]
		b.iovs[i].SetLen(udpBuffer)
		b.msgs[i].Hdr.Iov = &b.iovs[i]
		b.msgs[i].Hdr.SetIovlen(1)
	}
	return b
}}

// readBatches carries the target's datagrams, each read taking what the
// socket holds, up to udpDownSlots. A batch's memory is taken for the
// read and given back before the next wait; when the Budget has no room
// for it, the session reads one datagram at a time into the buffer it
// holds.
func (u *udpSession) readBatches(rc syscall.RawConn) error {
	r := u.r
	own := r.udpB.Get().(*[]byte)
	defer r.udpB.Put(own)
	var one downBatch // the fallback: one slot, the session's own buffer
	one.iovs[0].Base = &(*own)[0]
	one.iovs[0].SetLen(len(*own))
	one.msgs[0].Hdr.Iov = &one.iovs[0]
	one.msgs[0].Hdr.SetIovlen(1)
	var errno syscall.Errno
	read := func(fd uintptr) bool {
		b, slots := &one, 1
		if r.budget.take((udpDownSlots - 1) * udpBuffer) {
			b, slots = downBatches.Get().(*downBatch), udpDownSlots
			defer func() {
				downBatches.Put(b)
				r.budget.give((udpDownSlots - 1) * udpBuffer)
			}()
		}
		n, _, e := unix.Syscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&b.msgs[0])), uintptr(slots), unix.MSG_DONTWAIT, 0, 0)
		switch {
		case e == unix.EAGAIN || e == unix.EINTR:
			return false // wait for the socket, holding no batch
		case e == unix.ECONNREFUSED:
			return true // an ICMP error from the target: keep the session
		case e != 0:
			errno = e
			return true
		}
		u.touch()
		for i := range int(n) {
			u.toClient(unsafe.Slice(b.iovs[i].Base, b.msgs[i].Len))
		}
		return true
	}
	for {
		u.waitForPath()
		if err := rc.Read(read); err != nil {
			return err
		}
		if errno != 0 {
			return errno
		}
	}
}
