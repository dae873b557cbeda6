package emulator

// Kernel flows: one end is the kernel behind the TUN device, the other
// the peer (netstack) or a node (a kernel of its own).

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"

	"github.com/netjam/netjam/clock"
	"github.com/netjam/netjam/flows"
	"github.com/netjam/netjam/hostcfg"
	"github.com/netjam/netjam/hostnet"
	"github.com/netjam/netjam/netif"
	"github.com/netjam/netjam/scenario"
)

// abortOnClose is a kernel flow's TCP connection, reset when the run
// closes it: the flow half-closed it already when done, and a graceful
// close would leave the kernel retransmitting its FIN (when the path lost
// the ACK) into the next run's device.
type abortOnClose struct{ *hostnet.KernelTCPConn }

func (c abortOnClose) Close() error { return c.Abort() }

// kernelDialer returns the dial of a kernel flow's client end: a
// connection of the kernel's TCP to addr from the device's namespace,
// reset when closed, with its TCP_INFO.
func (t *tunEnd) kernelDialer(ctx context.Context, addr netip.AddrPort, o hostnet.KernelTCPOptions) func() (net.Conn, func() netif.TCPInfo, error) {
	return func() (net.Conn, func() netif.TCPInfo, error) {
		var c *hostnet.KernelTCPConn
		err := t.ns.Do(func() error {
			var err error
			c, err = hostnet.DialKernelTCP(ctx, addr, o)
			return err
		})
		if err != nil {
			return nil, nil, err
		}
		return abortOnClose{c}, c.Info, nil
	}
}

// newKernelFlow connects a flow of the kernel across the path: the
// kernel's socket (in the device's namespace) on the client side, a
// socket of the peer host on the server side. The kernel dials. A TCP
// flow up sends from the kernel, with the kernel's congestion control; a
// TCP flow down sends from the peer, with netstack's, to the kernel's
// receiver (its window, its acknowledgments); a UDP flow sends either
// way.
func (l *lab) newKernelFlow(ctx context.Context, i int, f scenario.Flow, port uint16, clk clock.Clock) (flows.Flow, []closer, error) {
	t := l.tun
	if len(t.nodes) > 0 {
		return l.newNodeFlow(ctx, i, f, port, clk)
	}
	peer := t.peer.host
	// The flow's kernel end sends from its station's address, to the
	// peer's address on its path.
	local, to := l.bp.Flows[i].ClientAddr, l.bp.Flows[i].ServerAddr
	down := f.Direction == "down"
	switch {
	case down && f.Type == "udp" && to != t.peerAddr:
		return nil, nil, fmt.Errorf("flow %s: a kernel UDP flow down runs on the default path only (the peer sends it from its own address)", f.Name)
	case f.Type == "tcp":
		// Both ends take the flow's buffers; the congestion control
		// is the sender's: the kernel's up, the peer's down.
		peerOpts := hostcfg.TCPOptions{SendBuffer: f.SendBuffer, ReceiveBuffer: f.ReceiveBuffer}
		kernelOpts := hostnet.KernelTCPOptions{SendBuffer: f.SendBuffer, ReceiveBuffer: f.ReceiveBuffer, Local: local}
		if down {
			peerOpts.CC = f.CC
		} else {
			kernelOpts.CC = f.CC
		}
		ln, err := peer.ListenTCP(port, peerOpts)
		if err != nil {
			return nil, nil, err
		}
		return newTCPFlow(ctx, f, clk, stackListener{ln}, l.warnStall(f.Name), t.kernelDialer(ctx, netip.AddrPortFrom(to, port), kernelOpts), down)
	default: // udp
		var send net.Conn
		var recv net.PacketConn
		var err error
		if f.Direction == "down" {
			err = t.ns.Do(func() error {
				c, err := hostnet.ListenKernelUDP(netip.AddrPortFrom(local, port))
				if err == nil {
					recv = c
				}
				return err
			})
			if err == nil {
				if send, err = peer.DialUDP(netip.AddrPortFrom(local, port)); err != nil {
					recv.Close()
				}
			}
		} else {
			if recv, err = peer.ListenUDP(port); err == nil {
				err = t.ns.Do(func() error {
					send, err = net.DialUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(local, 0)),
						net.UDPAddrFromAddrPort(netip.AddrPortFrom(to, port)))
					return err
				})
				if err != nil {
					recv.Close()
				}
			}
		}
		if err != nil {
			return nil, nil, fmt.Errorf("flow %s: %w", f.Name, err)
		}
		return newUDPFlow(i, f, clk, send, recv)
	}
}

// kernelListener accepts a kernel's connection (in the namespace the
// listener was made in).
type kernelListener struct{ *net.TCPListener }

func (l kernelListener) accept(ctx context.Context) (net.Conn, func() netif.TCPInfo, error) {
	stop := context.AfterFunc(ctx, func() { l.Close() })
	defer stop()
	c, err := l.AcceptTCP()
	if err != nil {
		return nil, nil, err
	}
	kc := &hostnet.KernelTCPConn{TCPConn: c}
	return abortOnClose{kc}, kc.Info, nil
}

// newNodeFlow connects a kernel flow to the node: kernel to kernel, the
// client's socket in the device's namespace, the node's in the node's.
// The sender's congestion control is the flow's: the client kernel's up,
// the node kernel's down.
func (l *lab) newNodeFlow(ctx context.Context, i int, f scenario.Flow, port uint16, clk clock.Clock) (flows.Flow, []closer, error) {
	t, fl := l.tun, l.bp.Flows[i]
	n := t.nodes[slices.IndexFunc(t.nodes, func(n *nodeEnd) bool { return n.end == l.ends[fl.Server] })]
	local, to := fl.ClientAddr, fl.ServerAddr
	down := f.Direction == "down"
	if f.Type == "tcp" {
		opts := hostnet.KernelTCPOptions{SendBuffer: f.SendBuffer, ReceiveBuffer: f.ReceiveBuffer}
		nodeOpts, clientOpts := opts, opts
		clientOpts.Local = local
		if down {
			nodeOpts.CC = f.CC
		} else {
			clientOpts.CC = f.CC
		}
		var ln *net.TCPListener
		err := n.ns.Do(func() error {
			var err error
			ln, err = hostnet.ListenKernelTCP(netip.AddrPortFrom(to, port), nodeOpts)
			return err
		})
		if err != nil {
			return nil, nil, fmt.Errorf("flow %s: listening in node %s: %w", f.Name, n.cfg.Name, err)
		}
		return newTCPFlow(ctx, f, clk, kernelListener{ln}, l.warnStall(f.Name), t.kernelDialer(ctx, netip.AddrPortFrom(to, port), clientOpts), down)
	}
	// UDP: the sender's socket in one namespace, the receiver's in the
	// other.
	sendNS, recvNS := t.ns, n.ns
	from, dst := local, to
	if down {
		sendNS, recvNS, from, dst = n.ns, t.ns, to, local
	}
	var recv net.PacketConn
	err := recvNS.Do(func() error {
		c, err := hostnet.ListenKernelUDP(netip.AddrPortFrom(dst, port))
		if err == nil {
			recv = c
		}
		return err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("flow %s: %w", f.Name, err)
	}
	var send net.Conn
	err = sendNS.Do(func() error {
		c, err := net.DialUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(from, 0)), net.UDPAddrFromAddrPort(netip.AddrPortFrom(dst, port)))
		if err == nil {
			send = c
		}
		return err
	})
	if err != nil {
		recv.Close()
		return nil, nil, fmt.Errorf("flow %s: %w", f.Name, err)
	}
	return newUDPFlow(i, f, clk, send, recv)
}
