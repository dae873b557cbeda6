//go:build !linux

package hostnet

import "net/netip"

// ListenKernelUDP returns a *NotLinuxError: kernel flows need Linux (their
// sockets live in the TUN device's network namespace).
func ListenKernelUDP(netip.AddrPort) (*KernelUDPConn, error) {
	return nil, notLinux("a kernel flow (a UDP socket in the device's network namespace)")
}

// ReceiveDrops returns 0: the kernel's count (SO_MEMINFO) is Linux's.
func (c *KernelUDPConn) ReceiveDrops() uint64 { return 0 }
