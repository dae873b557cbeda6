package emulator

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/netjam/netjam/scenario"
	"github.com/netjam/netjam/summary"
	"github.com/netjam/netjam/topology"
)

// A lab's paths (scenario.Path): each ends at server hosts of its own,
// addressed from its match's dst (else the lab's server addresses), and a
// flow runs between a client host and a server host of its path.

// pathOf returns the lab's path named name ("": none).
func (l *lab) pathOf(name string) scenario.Path {
	for _, p := range l.s.Paths {
		if p.Name == name {
			return p
		}
	}
	return scenario.Path{}
}

// pathAddr returns the address of the next server host of path p, whose
// match has a dst: the network's first host addresses, in order (the
// network's own address is skipped unless it is the only one), after the
// first in TUN mode, which is the peer's (see tunEnd.pathPeers).
func (l *lab) pathAddr(p scenario.Path) ([]netip.Prefix, error) {
	k := 0
	if l.s.TUN != nil {
		k = 1
	}
	for _, e := range l.servers {
		if e.path == p.Name {
			k++
		}
	}
	dst := p.Match.Dst
	a, ok := nthHost(dst, k)
	if !ok {
		return nil, fmt.Errorf("path %s: its dst %s has no room for %d hosts (one per sack setting of its flows, and the peer in TUN mode)", p.Name, dst, k+1)
	}
	return []netip.Prefix{netip.PrefixFrom(a, dst.Bits())}, nil
}

// nthHost returns host address k (from 0) of network dst: its addresses
// in order after the network's own (which is taken only when it is one of
// at most two); false when dst has no more.
func nthHost(dst netip.Prefix, k int) (netip.Addr, bool) {
	a := dst.Addr()
	if dst.Bits() < a.BitLen()-1 {
		a = a.Next()
	}
	for range k {
		a = a.Next()
	}
	return a, a.IsValid() && dst.Contains(a)
}

// checkPathNets refuses a path of s whose dst holds addresses the lab
// gives its client side (hostAddrs' networks) or, in TUN mode, the
// kernel's or the peer's own: its servers (or the peer on it) would take
// the first of them.
func checkPathNets(s *scenario.Scenario) error {
	taken := hostAddrs(0, false)
	if s.TUN != nil {
		taken = append(taken, s.TUN.Device.Addrs...)
		for _, a := range s.TUN.Peer {
			taken = append(taken, netip.PrefixFrom(a, a.BitLen()))
		}
	}
	for _, p := range s.Paths {
		if p.Match == nil || !p.Match.Dst.IsValid() {
			continue
		}
		for _, t := range taken {
			if p.Match.Dst.Overlaps(t.Masked()) && (t.Bits() != t.Addr().BitLen() || p.Match.Dst.Contains(t.Addr())) {
				return fmt.Errorf("path %s: its dst %s overlaps %s, the lab's own (the client side's, or the TUN device's); give it another network", p.Name, p.Match.Dst, t.Masked())
			}
		}
	}
	return nil
}

// pathMatches returns the topology matches of the paths of s, in order:
// what the lab's path routers choose by.
func pathMatches(s *scenario.Scenario) []topology.Match {
	ms := make([]topology.Match, len(s.Paths))
	for i, p := range s.Paths {
		r := pathRoute(p, 0)
		ms[i] = topology.Match{Prefix: r.Prefix, Proto: r.Proto, Port: r.Port}
	}
	return ms
}

// checkFlowPaths refuses a netstack flow of s whose packets the path
// routers would send along another path than the flow's: a server of the
// default path inside another path's dst, say.
func (l *lab) checkFlowPaths(s *scenario.Scenario) error {
	if len(s.Paths) < 2 && (len(s.Paths) == 0 || s.Paths[0].Match == nil) {
		return nil
	}
	ms := pathMatches(s)
	for i, f := range s.Flows {
		if f.Stack == scenario.StackKernel {
			continue
		}
		_, server := l.ends(f)
		proto := protoNumber(f.Type)
		port := serverPort(s, i, f)
		if f.Direction == "down" {
			port = 0 // the server sends from a port of its own
		}
		want := s.FlowPath(f).Name
		got := "no path"
		if j := topology.Pick(ms, server.v4, proto, port); j >= 0 {
			got = "path " + s.Paths[j].Name
		}
		if got != "path "+want {
			return fmt.Errorf("flow %s: its packets (%s to %s, port %d) would take %s, not its path %s: give the paths matches that tell them apart",
				f.Name, f.Type, server.v4, port, got, want)
		}
	}
	return nil
}

// pathSummaries returns the paths of s as summary.json has them; none
// with the link shorthand.
func (l *lab) pathSummaries(s *scenario.Scenario) []summary.PathSummary {
	if len(s.Links) == 1 && s.Links[0].Name == scenario.DefaultLink {
		return nil
	}
	var out []summary.PathSummary
	for _, p := range s.Paths {
		ps := summary.PathSummary{Name: p.Name, Via: p.Via, Match: matchText(p.Match)}
		for _, e := range l.servers {
			if e.path == p.Name {
				ps.Servers = append(ps.Servers, e.v4.String())
			}
		}
		if l.tun != nil {
			if a, ok := l.tun.pathAddrs[p.Name]; ok {
				ps.Servers = append(ps.Servers, a.String()+" (peer)")
			}
		}
		for _, f := range s.Flows {
			if s.FlowPath(f).Name == p.Name {
				ps.Flows = append(ps.Flows, f.Name)
			}
		}
		out = append(out, ps)
	}
	return out
}

// matchText writes a path's match as the summary has it.
func matchText(m *scenario.Match) string {
	if m == nil {
		return "default"
	}
	var parts []string
	if m.Dst.IsValid() {
		parts = append(parts, "dst "+m.Dst.String())
	}
	if m.Proto != "" {
		parts = append(parts, "proto "+m.Proto)
	}
	if m.Port != 0 {
		parts = append(parts, fmt.Sprintf("port %d", m.Port))
	}
	return strings.Join(parts, ", ")
}

// addDeliveryCounts adds to rows (every direction of s's links, as
// summary.json has them) the packets dropped at the hosts' inboxes, and
// the times the inboxes made a direction wait: each server host's to the
// uplink of its path's last link, which delivered them; the client side's
// to the downlink of the default path's first link (with several paths
// whose first links differ, some of them came from another, which the
// inboxes cannot tell).
func (l *lab) addDeliveryCounts(s *scenario.Scenario, rows []summary.LinkSummary) {
	row := func(name string) *summary.LinkSummary {
		for i := range rows {
			if rows[i].Name == name {
				return &rows[i]
			}
		}
		return &rows[0] // not reached: every direction has a row
	}
	def := s.FlowPath(scenario.Flow{})
	if len(def.Via) == 0 {
		def = s.Paths[0]
	}
	var seen []*topology.Queue // the kernel's ends share the device's
	for _, e := range l.servers {
		if e.in == nil || slices.Contains(seen, e.in) {
			continue
		}
		seen = append(seen, e.in)
		p := l.pathOf(e.path)
		if len(p.Via) == 0 {
			p = def // the peer, a bench's server
		}
		r := row(directionName(s, p.Via[len(p.Via)-1], true))
		r.DeliveryDrops += e.in.Full()
		r.DeliveryWaits += e.in.Waits()
	}
	r := row(directionName(s, def.Via[0], false))
	drops, waits := l.deliveryCounts(false)
	r.DeliveryDrops += drops
	r.DeliveryWaits += waits
}

// serverPort returns the server-side port of flow number i, f, of s: its
// path's match's port, else flowPort's.
func serverPort(s *scenario.Scenario, i int, f scenario.Flow) uint16 {
	if m := s.FlowPath(f).Match; m != nil && m.Port != 0 {
		return m.Port
	}
	return flowPort(s, i)
}
