//go:build !linux

package hostnet

import (
	"context"
	"net"
	"net/netip"

	"github.com/netjam/netjam/netif"
)

// KernelCongestionControls returns a *NotLinuxError: kernel flows need
// Linux's TCP_CONGESTION and TCP_INFO.
func KernelCongestionControls() ([]string, error) {
	return nil, notLinux("a kernel flow (TCP_CONGESTION, TCP_INFO)")
}

// DialKernelTCP returns a *NotLinuxError: kernel flows need Linux.
func DialKernelTCP(context.Context, netip.AddrPort, KernelTCPOptions) (*KernelTCPConn, error) {
	return nil, notLinux("a kernel flow (TCP_CONGESTION, TCP_INFO)")
}

// ListenKernelTCP returns a *NotLinuxError: kernel flows need Linux.
func ListenKernelTCP(netip.AddrPort, KernelTCPOptions) (*net.TCPListener, error) {
	return nil, notLinux("a kernel flow (TCP_CONGESTION, TCP_INFO)")
}

// Info returns the zero netif.TCPInfo: TCP_INFO is Linux's.
func (c *KernelTCPConn) Info() netif.TCPInfo { return netif.TCPInfo{} }
