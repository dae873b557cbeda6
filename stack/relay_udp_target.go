package stack

import (
	"net"
	"sync"
	"syscall"

	"golang.org/x/net/ipv4"
)

// The UDP session's socket toward its target: a host socket, the one
// queue of the down direction before the relay reads it. It is made
// large, so that a burst from the target waits there while the relay is
// busy instead of being dropped, and what the kernel dropped at it anyway
// is counted (from_target) when it closes: a datagram the target sent and
// the path never saw is a drop inside netjam, not the path's.

// targetReceiveBuffer is the receive buffer asked for on a session's
// socket toward its target (SO_RCVBUFFORCE when netjam may, else
// SO_RCVBUF as far as net.core.rmem_max allows): about 20 ms of
// 1400-byte datagrams at 1 Gbit/s (the kernel charges about 2.3 KiB per
// such datagram), the time the relay's goroutine may wait for a core on a
// loaded machine. It is kernel memory, taken only while datagrams wait
// and bounded by the kernel's own UDP memory limits (net.ipv4.udp_mem),
// like the TCP sockets' buffers; it is not charged to the relay's Budget,
// which bounds the relay's own buffers.
const targetReceiveBuffer = 4 << 20

// targetConn is a session's connection toward its target. Close reads
// the kernel's drops at the socket before closing it, and counts them to
// the relay once.
type targetConn struct {
	net.Conn
	rc     syscall.RawConn // nil: not a socket (a test's Dial)
	segMax int             // see segmentMax
	r      *Relay
	once   sync.Once
}

// newTargetConn wraps c, a Dial's connection toward a target, and asks
// for its large receive buffer.
func newTargetConn(r *Relay, c net.Conn) *targetConn {
	t := &targetConn{Conn: c, r: r}
	if sc, ok := c.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			t.rc = rc
			t.segMax = tuneTarget(c, rc)
		}
	}
	return t
}

// Close counts the socket's drops (from_target) and closes it; once.
func (t *targetConn) Close() error {
	var err error
	t.once.Do(func() {
		if t.rc != nil {
			t.r.udpN.drop(dropFromTarget, uint64(socketDrops(t.rc)))
		}
		err = t.Conn.Close()
	})
	return err
}

// UDP segmentation toward the target (UDP_SEGMENT, linux/udp.h): a
// message of several datagrams of one size (the last may be shorter) that
// the kernel sends as those datagrams.
const (
	// udpSegments bounds the datagrams of one message: Linux's
	// UDP_MAX_SEGMENTS before 6.14.
	udpSegments = 64
	// udpSegmentBytes bounds a message's payload: what a UDP length
	// holds, with room for either IP header.
	udpSegmentBytes = 65000
	// segmentCmsgLen is the space of the control message: a cmsghdr
	// and a 16-bit size, aligned.
	segmentCmsgLen = 24
)

// group returns the batch's datagrams as messages, each consecutive run of
// datagrams of one size up to segMax (the last may be shorter) one message
// with a UDP_SEGMENT control message, and how many datagrams each
// carries.
func (b *udpBatch) group(segMax int) ([]ipv4.Message, []int) {
	for i := range b.msgs[:b.n] {
		b.bufs[i] = b.msgs[i].Buffers[0]
	}
	g := 0
	for i := 0; i < b.n; g++ {
		size := len(b.bufs[i])
		j := i + 1
		if size > 0 && size <= segMax {
			for total := size; j < b.n && j-i < udpSegments; {
				m := len(b.bufs[j])
				if m == 0 || m > size || total+m > udpSegmentBytes {
					break
				}
				total += m
				j++
				if m < size {
					break // a shorter one ends the run
				}
			}
		}
		gm := &b.groups[g]
		gm.Buffers, gm.OOB = b.bufs[i:j:j], nil
		if j-i > 1 {
			gm.OOB = b.oob[g][:]
			putSegmentCmsg(gm.OOB, size)
		}
		b.counts[g] = j - i
		i = j
	}
	return b.groups[:g], b.counts[:g]
}
