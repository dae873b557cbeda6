package hostnet

import (
	"net"
	"net/netip"
)

// KernelTCPConn is a TCP connection of the host kernel.
type KernelTCPConn struct {
	*net.TCPConn
}

// Abort closes the connection with a reset (SO_LINGER 0), so that the
// kernel forgets it at once: nothing of it (a FIN retransmitted to a path
// that is gone, a TIME_WAIT) outlives the run and reaches the next one
// through a device with the same addresses.
func (c *KernelTCPConn) Abort() error {
	c.SetLinger(0)
	return c.Close()
}

// KernelTCPOptions are the socket options of a kernel TCP connection.
type KernelTCPOptions struct {
	// CC is the congestion control (TCP_CONGESTION); "" means the
	// system's default (net.ipv4.tcp_congestion_control).
	CC string
	// SendBuffer and ReceiveBuffer set SO_SNDBUF and SO_RCVBUF before the
	// connection is made (the kernel doubles them, and turns its
	// auto-tuning off for the buffer set); 0 leaves auto-tuning on. A size
	// above net.core.wmem_max or rmem_max, which the kernel would silently
	// cap, is set with SO_SNDBUFFORCE or SO_RCVBUFFORCE where netjam may
	// (CAP_NET_ADMIN over the socket's network namespace), and is an error
	// where it may not.
	SendBuffer, ReceiveBuffer int
	// Local is the address to send from; the zero Addr lets the kernel
	// choose by route.
	Local netip.Addr
}
