package hostnet

import (
	"net"
	"net/netip"
	"unsafe"

	"golang.org/x/sys/unix"
)

// kernelReceiveBuffer is what ListenKernelUDP asks for: seconds of a flow,
// so that a loaded machine that reads late loses nothing the path
// delivered. Without CAP_NET_ADMIN the kernel caps it at
// net.core.rmem_max.
const kernelReceiveBuffer = 4 << 20

// ListenKernelUDP opens a kernel UDP socket on laddr, in the calling
// thread's network namespace, with a receive buffer of 4 MiB (SO_RCVBUFFORCE
// when permitted, else SO_RCVBUF as far as rmem_max allows).
func ListenKernelUDP(laddr netip.AddrPort) (*KernelUDPConn, error) {
	c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(laddr))
	if err != nil {
		return nil, err
	}
	if rc, err := c.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) {
			if unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, kernelReceiveBuffer) != nil {
				c.SetReadBuffer(kernelReceiveBuffer)
			}
		})
	}
	return &KernelUDPConn{c}, nil
}

// The kernel's socket memory figures (SO_MEMINFO, linux/sock_diag.h): an
// array of skMeminfoVars counters, the drops at index skMeminfoDrops.
const (
	skMeminfoDrops = 8
	skMeminfoVars  = 9
)

// ReceiveDrops returns how many datagrams the kernel dropped at the socket
// (its receive buffer full, or memory short): flows.ReceiveDropper. 0 when
// the kernel does not say.
func (c *KernelUDPConn) ReceiveDrops() uint64 {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0
	}
	var info [skMeminfoVars]uint32
	var drops uint64
	rc.Control(func(fd uintptr) {
		n := uint32(unsafe.Sizeof(info))
		_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, fd, unix.SOL_SOCKET, unix.SO_MEMINFO,
			uintptr(unsafe.Pointer(&info[0])), uintptr(unsafe.Pointer(&n)), 0)
		if errno == 0 && n >= (skMeminfoDrops+1)*4 {
			drops = uint64(info[skMeminfoDrops])
		}
	})
	return drops
}
