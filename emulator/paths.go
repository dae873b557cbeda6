package emulator

import (
	"fmt"
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
			if f.Node == "" && f.From == "" && s.FlowPath(f).Name == p.Name {
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
