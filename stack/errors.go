package stack

import (
	"errors"
	"net"
	"net/netip"
	"syscall"

	"github.com/netjam/netjam/third_party/gvisor/_pkg/tcpip"
)

// opError is the one place a tcpip.Error becomes a Go error. The result is
// a *net.OpError, as package net returns, naming the operation, the network
// ("tcp", "udp", "ip") and the address involved; its Err is the
// syscall.Errno Linux would report for the same condition where there is an
// obvious one, so callers can use errors.Is(err, syscall.ECONNREFUSED), and
// gVisor's own message otherwise. gVisor's error types never leave the
// package.
func opError(op, network string, addr netip.AddrPort, err tcpip.Error) error {
	var a net.Addr
	if addr.IsValid() {
		switch network {
		case "udp":
			a = net.UDPAddrFromAddrPort(addr)
		case "tcp":
			a = net.TCPAddrFromAddrPort(addr)
		default:
			a = &net.IPAddr{IP: addr.Addr().AsSlice()}
		}
	}
	return &net.OpError{Op: op, Net: network, Addr: a, Err: errnoOf(err)}
}

// errnoOf maps a tcpip.Error to the errno Linux uses for it.
func errnoOf(err tcpip.Error) error {
	switch err.(type) {
	case *tcpip.ErrConnectionRefused:
		return syscall.ECONNREFUSED
	case *tcpip.ErrConnectionReset:
		return syscall.ECONNRESET
	case *tcpip.ErrConnectionAborted, *tcpip.ErrAborted:
		return syscall.ECONNABORTED
	case *tcpip.ErrTimeout:
		return syscall.ETIMEDOUT
	case *tcpip.ErrPortInUse, *tcpip.ErrAlreadyBound:
		return syscall.EADDRINUSE
	case *tcpip.ErrBadLocalAddress:
		return syscall.EADDRNOTAVAIL
	case *tcpip.ErrNoPortAvailable:
		return syscall.EAGAIN // Linux's answer when ephemeral ports run out
	case *tcpip.ErrNetworkUnreachable, *tcpip.ErrNoNet:
		return syscall.ENETUNREACH
	case *tcpip.ErrHostUnreachable:
		return syscall.EHOSTUNREACH
	case *tcpip.ErrHostDown:
		return syscall.EHOSTDOWN
	case *tcpip.ErrMessageTooLong:
		return syscall.EMSGSIZE
	case *tcpip.ErrNoBufferSpace:
		return syscall.ENOBUFS
	case *tcpip.ErrInvalidOptionValue, *tcpip.ErrInvalidEndpointState:
		return syscall.EINVAL
	case *tcpip.ErrAddressFamilyNotSupported:
		return syscall.EAFNOSUPPORT
	case *tcpip.ErrNotConnected:
		return syscall.ENOTCONN
	case *tcpip.ErrAlreadyConnected:
		return syscall.EISCONN
	case *tcpip.ErrClosedForSend:
		return syscall.EPIPE
	case *tcpip.ErrNotPermitted:
		return syscall.EPERM
	case *tcpip.ErrNoSuchFile:
		return syscall.ENOENT
	case *tcpip.ErrWouldBlock:
		return syscall.EAGAIN
	}
	return errors.New(err.String())
}
