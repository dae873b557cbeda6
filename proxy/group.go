package proxy

import (
	"context"
	"net"
	"net/netip"

	"go.uber.org/zap"

	"github.com/netjam/netjam/emulator"
	"github.com/netjam/netjam/stack"
)

// A group is one emulated path of a proxy and the connections crossing
// it: two netstack hosts (emulator.Bench), the near one where the
// proxy's connections to the upstream start, the far one relaying them to
// the upstream's real address. A proxy's connections share a group when
// they drew the same toxics of the path (toxicity), so a proxy whose
// toxics all have toxicity 1 has one group, and one with a latency of
// toxicity 0.5 two: the connections with it, and those crossing a path
// without it. Stream toxics, which each connection draws for itself,
// make no group of their own.
//
// Its fields are guarded by the proxy's lock.
type group struct {
	b *emulator.Bench
	// names are the path's toxics the group's connections drew, by
	// name.
	names map[string]bool
	// toxics are those in force on its path now (a copy each), timeout's
	// close on its connections' streams too.
	toxics []*Toxic
	// cell is the Wi-Fi cell its path was built with (cellSet's
	// wifi=...): a running path keeps its cell.
	cell string
	// stale is set when the path cannot take a change: the group keeps
	// its connections, takes no new connection, and closes with its last
	// connection. A group whose cell differs from the toxics' still takes
	// their other changes; a frozen one, whose path refused a live change
	// (a queue's discipline, say), keeps all its settings.
	stale, frozen bool
	conns         int
}

// virtualUpstream is the address the near host dials for every
// connection: a destination of emulator.BenchPrefixes, which the far
// host relays to the proxy's upstream (Proxy.dialUpstream) whatever the
// address, since a proxy has one upstream.
func virtualUpstream(port uint16) netip.AddrPort {
	return netip.AddrPortFrom(emulator.BenchPrefixes[0].Addr().Next(), port)
}

// newGroup starts the path of the toxics ts (those a connection drew).
func (p *Proxy) newGroupLocked(ts []*Toxic) (*group, error) {
	cell := cellSet(p.srv.baseLink, ts)
	s, err := p.srv.base.With(append(pathSets(p.srv.baseLink, ts), cell)...)
	if err != nil {
		return nil, err
	}
	b, err := emulator.NewBench(s, emulator.BenchOptions{Dial: p.dialUpstream, RelayBudget: relayBudget, Log: p.log.Named("path"), WiFi: true})
	if err != nil {
		return nil, err
	}
	g := &group{b: b, names: map[string]bool{}, toxics: ts, cell: cell}
	for _, t := range ts {
		g.names[t.Name] = true
	}
	p.groups = append(p.groups, g)
	p.counts.paths.Add(1)
	return g, nil
}

// relayBudget bounds the buffers of a path's relayed connections (its far
// host's side of each): 1 GiB admits about 3600 connections at their
// first sizes (288 KiB each, stack's relay_buffers.go), beside the
// relay's own bound of 4096, which DefaultMaxConns matches.
const relayBudget = 1 << 30

// dialUpstream is the far host's dial: to the proxy's upstream, whatever
// virtual address the near host dialled.
func (p *Proxy) dialUpstream(ctx context.Context, network, _ string) (net.Conn, error) {
	p.mu.Lock()
	up := p.upstream
	p.mu.Unlock()
	var d net.Dialer
	c, err := d.DialContext(ctx, network, up)
	if err != nil {
		p.log.Debug("upstream unreachable", zap.String("upstream", up), zap.Error(err))
	}
	return c, err
}

// closeGroup stops g's path (without the proxy's lock: it waits for the
// hosts' goroutines), keeping its counters for the metrics.
func (p *Proxy) closeGroup(g *group) {
	g.b.Close()
	st := hostStats(g)
	p.mu.Lock()
	p.closedStats.add(st)
	p.mu.Unlock()
}

// pathStats are a proxy's counters of its paths' hosts.
type pathStats struct {
	retransmits, timeouts, resetsSent uint64
}

func (a *pathStats) add(b pathStats) {
	a.retransmits += b.retransmits
	a.timeouts += b.timeouts
	a.resetsSent += b.resetsSent
}

// hostStats sums the TCP counters of g's two hosts: the near host sends
// the upstream stream, the far host the downstream, and each retransmits
// what its direction lost.
func hostStats(g *group) pathStats {
	var s pathStats
	for _, h := range []*stack.Host{g.b.Client(), g.b.Server()} {
		st := h.Stats().TCP
		s.add(pathStats{st.Retransmits, st.Timeouts, st.ResetsSent})
	}
	return s
}
