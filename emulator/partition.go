package emulator

import (
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/netjam/netjam/clock"
	"github.com/netjam/netjam/impair"
	"github.com/netjam/netjam/scenario"
	"github.com/netjam/netjam/topology"
)

// A partition among nodes (scenario.Partition) is a filter at the two
// entries of the paths, where every packet of a node or the client's
// kernel enters the uplink or the downlink: it drops what goes from one
// group to another, counted, and hands on the rest. A packet between two
// nodes crosses both entries (the downlink's, then the uplink's from the
// hub) and is judged the same at each. The groups are a table of
// addresses swapped whole when the timeline changes them, so a packet is
// judged by the old partition or the new one, never a mix; with none (or
// healed) the filter reads one pointer and hands the packet on.

// partitionTable is a partition as the filter reads it: each listed
// address's group, from 1.
type partitionTable struct {
	group  map[netip.Addr]int
	oneWay bool
}

// blocks reports whether the partition drops a packet from src to dst:
// both are in groups, different ones, and for a one-way partition the
// sender's is the first.
func (t *partitionTable) blocks(src, dst netip.Addr) bool {
	gs, gd := t.group[src], t.group[dst]
	return gs != 0 && gd != 0 && gs != gd && (!t.oneWay || gs == 1)
}

// partition is the lab's partition: its table and the filters reading it.
type partition struct {
	table atomic.Pointer[partitionTable]     // nil: none
	cur   atomic.Pointer[scenario.Partition] // what table holds, for its name; nil: none
	drops atomic.Uint64                      // packets dropped between groups
	// addrs are each name's addresses: the nodes' and the client's.
	addrs map[string][]netip.Addr
}

// set makes p the partition in force (healed when it has no groups).
func (pt *partition) set(p *scenario.Partition) {
	if p == nil || len(p.Groups) == 0 {
		pt.table.Store(nil)
		pt.cur.Store(nil)
		return
	}
	pt.cur.Store(p)
	t := &partitionTable{group: map[netip.Addr]int{}, oneWay: p.OneWay}
	for i, g := range p.Groups {
		for _, name := range g {
			for _, a := range pt.addrs[name] {
				t.group[a] = i + 1
			}
		}
	}
	pt.table.Store(t)
}

// current returns the partition in force; nil: none.
func (pt *partition) current() *scenario.Partition { return pt.cur.Load() }

// filter returns a filter node reading pt, named name.
func (pt *partition) filter(name string) topology.Node {
	f := &partitionFilter{pt: pt}
	return topology.Node{Name: name, In: f, Out: &f.out, Accepts: topology.Accepts{GSO: topology.Yes, Partial: true}}
}

// partitionFilter is one entry's filter.
type partitionFilter struct {
	pt  *partition
	out topology.Port
}

// Push drops p when the partition in force blocks it, else hands it on.
func (f *partitionFilter) Push(now time.Time, p *impair.Packet) {
	if t := f.pt.table.Load(); t != nil && t.blocks(topology.SrcAddr(p.Data), topology.DstAddr(p.Data)) {
		f.pt.drops.Add(uint64(p.Segments()))
		p.Release()
		return
	}
	f.out.Push(now, p)
}

// partitionEntries puts a partition filter in front of the paths'
// entries, up and down, when s has nodes, and returns the new entries.
func (b *pathBuilder) partitionEntries(s *scenario.Scenario) {
	if len(s.Nodes) == 0 {
		return
	}
	pt := &partition{addrs: map[string][]netip.Addr{}}
	b.l.partition = pt
	up, down := b.g.Add(pt.filter("partition up")), b.g.Add(pt.filter("partition down"))
	b.g.Link(up, b.up)
	b.g.Link(down, b.down)
	b.up, b.down = up, down
}

// schedulePartitions arms a timer for each partition point of s's
// timeline, on clk from the timeline's start: at its time the partition
// changes, and the change is recorded.
func (tl *timeline) schedulePartitions(clk clock.Clock, s *scenario.Scenario, pt *partition) {
	if pt == nil {
		return
	}
	for _, p := range s.Timeline {
		if p.Partition == nil || p.At >= s.Duration {
			continue
		}
		at, next := tl.start.Add(p.At), p.Partition
		tl.resets = append(tl.resets, clk.AfterFunc(at.Sub(clk.Now()), func() {
			old := pt.current().String()
			pt.set(next)
			tl.record(at, []scenario.KeyChange{{Key: "partition", Old: old, New: next.String()}}, nil)
		}))
	}
}
