package emulator

// A run's flows: each connected between its two ends (blueprint.Flow),
// netstack to netstack here, a kernel's in kernelflows.go, and run for
// its spec.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/netjam/netjam/clock"
	"github.com/netjam/netjam/flows"
	"github.com/netjam/netjam/netif"
	"github.com/netjam/netjam/scenario"
	"github.com/netjam/netjam/stack"
)

// setupTimeout bounds connection setup of one flow: a SYN lost on a lossy
// path costs gVisor's initial RTO of 1 s, and several in a row are possible.
const setupTimeout = 30 * time.Second

// flowSetup is how long s's flows may take to connect: setupTimeout, or
// the run's duration when shorter (at least a second), so that a path
// that loses every handshake does not hold a short run for 30 s.
func flowSetup(s *scenario.Scenario) time.Duration {
	return min(setupTimeout, max(s.Duration, time.Second))
}

// newFlow connects flow number i of s across the lab and returns it ready
// to run. conns are the connections the caller closes after the run.
func (l *lab) newFlow(ctx context.Context, s *scenario.Scenario, i int, f scenario.Flow, clk clock.Clock) (flows.Flow, []closer, error) {
	// A flow sends until its own duration or the run's end, whichever
	// comes first. (A flow bounded by size or count instead is cut by the
	// run's deadline.) Of its two specs, the one of the other type is
	// zero, and stays so.
	untilEnd(f.TCP.Start, &f.TCP.Duration, s.Duration)
	untilEnd(f.UDP.Start, &f.UDP.Duration, s.Duration)
	port := l.bp.Flows[i].Port
	ctx, cancel := context.WithTimeout(ctx, flowSetup(s))
	defer cancel()
	if f.Stack == scenario.StackKernel {
		return l.newKernelFlow(ctx, i, f, port, clk)
	}
	client, server := l.flowEnds(i)
	from, to := client.host, server.host
	toAddr := l.bp.Flows[i].ServerAddr
	if f.Direction == "down" {
		from, to = to, from
		toAddr = l.bp.Flows[i].ClientAddr
	}
	dst := netip.AddrPortFrom(toAddr, port)
	switch f.Type {
	case "tcp":
		o := f.TCPOptions
		ln, err := to.ListenTCP(port, o)
		if err != nil {
			return nil, nil, err
		}
		return newTCPFlow(ctx, f, clk, stackListener{ln}, l.warnStall(f.Name), func() (net.Conn, func() netif.TCPInfo, error) {
			c, err := from.DialTCPFrom(ctx, dialPort(i), dst, o)
			if err != nil {
				return nil, nil, err
			}
			return c, c.Info, nil
		}, false)
	default: // udp
		recv, err := to.ListenUDP(port)
		if err != nil {
			return nil, nil, err
		}
		send, err := from.DialUDPFrom(dialPort(i), dst)
		if err != nil {
			recv.Close()
			return nil, nil, err
		}
		return newUDPFlow(i, f, clk, send, recv)
	}
}

// dialPort is the local port of flow number i's dialing end: the same in
// every run, where an ephemeral port's draw from the host's random source
// races with the other flows connecting at the same time (and with it the
// connection's initial sequence number, a hash of the ports).
func dialPort(i int) uint16 { return firstDialPort + uint16(i) }

// firstDialPort is flow 0's dialing port, in the range gVisor picks
// ephemeral ports from and far above the flows' listening ports (5001,
// 5002, ...).
const firstDialPort = 40000

// newUDPFlow makes flow number i, f, of its connected ends; on error it
// closes them.
func newUDPFlow(i int, f scenario.Flow, clk clock.Clock, send net.Conn, recv net.PacketConn) (flows.Flow, []closer, error) {
	spec := f.UDP
	spec.FlowID = uint32(i + 1)
	fl, err := flows.NewUDP(spec, clk, send, recv)
	if err != nil {
		send.Close()
		recv.Close()
		return nil, nil, err
	}
	return fl, []closer{send, recv}, nil
}

type closer interface{ Close() error }

// untilEnd cuts a flow's duration, *d, at the end of a run of the given
// length: the flow starts at start.
func untilEnd(start time.Duration, d *time.Duration, run time.Duration) {
	if end := run - start; *d > end {
		*d = end
	}
}

// newTCPFlow connects a TCP bulk flow: dial connects its sender while ln
// (closed on return) accepts its receiver. dial returns the sender and
// how to read its TCP state. With acceptedSends the roles swap: what ln
// accepts sends (a kernel flow down: the peer sends to the kernel,
// which dials).
func newTCPFlow(ctx context.Context, f scenario.Flow, clk clock.Clock, ln tcpAcceptor, onStall func(flows.Stall),
	dial func() (net.Conn, func() netif.TCPInfo, error), acceptedSends bool) (flows.Flow, []closer, error) {
	defer ln.Close()
	type accepted struct {
		c    net.Conn
		info func() netif.TCPInfo
		err  error
	}
	ach := make(chan accepted, 1)
	go func() {
		c, info, err := ln.accept(ctx)
		ach <- accepted{c, info, err}
	}()
	// The handshake's time, lost SYNs included: on the path's clock, from
	// the dial (the first SYN) to the connection established.
	began := clk.Now()
	send, info, err := dial()
	connect := clk.Now().Sub(began)
	if err != nil {
		ln.Close()
		if a := <-ach; a.c != nil {
			a.c.Close()
		}
		return nil, nil, fmt.Errorf("flow %s: %w", f.Name, err)
	}
	a := <-ach
	if a.err != nil {
		send.Close()
		return nil, nil, fmt.Errorf("flow %s: accept: %w", f.Name, a.err)
	}
	spec := f.TCP
	spec.Connect, spec.OnStall = connect, onStall
	recv := a.c
	if acceptedSends {
		send, recv, info = a.c, send, a.info
	}
	fl, err := flows.NewTCPBulk(spec, clk, send, recv,
		func() flows.TCPInfo {
			in := info()
			return flows.TCPInfo{SRTT: in.SRTT, RTTVar: in.RTTVar, RTO: in.RTO, Cwnd: in.Cwnd, Ssthresh: in.Ssthresh,
				Retransmits: in.Retransmits, FastRetransmits: in.FastRetransmits, Timeouts: in.Timeouts,
				SegmentsSent: in.SegmentsSent}
		})
	if err != nil {
		send.Close()
		recv.Close()
		return nil, nil, err
	}
	return fl, []closer{send, recv}, nil
}

// tcpAcceptor is the server-side end of a TCP flow: it accepts the
// flow's one connection, with a reader of its TCP_INFO.
type tcpAcceptor interface {
	accept(ctx context.Context) (net.Conn, func() netif.TCPInfo, error)
	Close() error
}

// stackListener accepts a netstack host's connection.
type stackListener struct{ *stack.TCPListener }

func (l stackListener) accept(ctx context.Context) (net.Conn, func() netif.TCPInfo, error) {
	c, err := l.Accept(ctx)
	if err != nil {
		return nil, nil, err
	}
	return c, c.Info, nil
}

// warnStall returns the function that logs a stall of the named flow as
// it begins: the flow's figures are the sending stack's, not the path's,
// from then on (see flows.Stall).
func (l *lab) warnStall(flow string) func(flows.Stall) {
	return func(st flows.Stall) {
		l.log.Warn("tcp flow stalled: it has data to send and has sent nothing, not even a retransmission, for longer than max(1s, 3 RTO)",
			zap.String("flow", flow), zap.Duration("silent_since", st.At), zap.Duration("rto", st.Info.RTO),
			zap.Uint32("cwnd", st.Info.Cwnd), zap.Uint32("ssthresh", st.Info.Ssthresh), zap.Uint64("timeouts", st.Info.Timeouts))
	}
}

// connectFlows connects every flow at once and returns them with the
// connections to close after the run. On error, the flows that did
// connect are returned too, so that the caller closes their connections.
func (l *lab) connectFlows(ctx context.Context, s *scenario.Scenario, clk clock.Clock) ([]flows.Flow, []closer, error) {
	fls := make([]flows.Flow, len(s.Flows))
	conns := make([][]closer, len(s.Flows))
	errs := make([]error, len(s.Flows))
	var wg sync.WaitGroup
	for i, f := range s.Flows {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fls[i], conns[i], errs[i] = l.newFlow(ctx, s, i, f, clk)
		}()
	}
	wg.Wait()
	var all []closer
	for _, c := range conns {
		all = append(all, c...)
	}
	for i, err := range errs {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			errs[i] = fmt.Errorf("%w: flow %s did not connect within %s (the run's duration, at most %s): the path lost or held its handshake", err, s.Flows[i].Name, flowSetup(s), setupTimeout)
		}
	}
	return fls, all, errors.Join(errs...)
}
