package hostnet

import "net"

// KernelUDPConn is a kernel UDP socket that a flow measures with: its
// receive buffer is large, and it counts what the kernel dropped at it.
type KernelUDPConn struct {
	*net.UDPConn
}
