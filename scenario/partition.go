package scenario

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Partition is a network partition among a scenario's nodes (and the TUN
// device's side, ClientNode), set by the timeline: packets between
// members of two different groups are dropped, in both directions, or,
// OneWay, only those from the first group to the others. A name in no
// group reaches every other. No groups: healed, nothing dropped.
type Partition struct {
	Groups [][]string
	OneWay bool
}

// String writes the partition as the timeline's events say it:
// "[a] | [b c]", "[a] -> [b c]", or "healed".
func (p *Partition) String() string {
	if p == nil || len(p.Groups) == 0 {
		return "healed"
	}
	var gs []string
	for _, g := range p.Groups {
		gs = append(gs, "["+strings.Join(g, " ")+"]")
	}
	if p.OneWay {
		return gs[0] + " -> " + strings.Join(gs[1:], " ")
	}
	return strings.Join(gs, " | ")
}

// timelinePartition decodes and schedules the partition or heal entry at
// path, whose keys are f and times e (valid when ok):
//
//	partition: [[a], [b, c]]             # both ways
//	partition: {from: [a], to: [b, c]}   # a's packets to b and c only
//	heal: true
//
// at a time or every so often, a partition for a while (for: it heals
// then); with no set or ramp. nodes are the scenario's. It reports false
// when the timeline has too many events.
func (d *decoder) timelinePartition(b *tlBuild, e tlEntry, ok bool, f map[string]*yaml.Node, path string, dur time.Duration, nodes []Node) bool {
	keys := []string{"set", "ramp", "reset"}
	if f["heal"] != nil {
		keys = append(keys, "partition", "for")
	}
	for _, k := range keys {
		if f[k] != nil {
			d.errorf(f[k], join(path, k), "a %s entry has no %s (give it an entry of its own)", partitionKind(f), k)
			ok = false
		}
	}
	before := d.count
	p := &Partition{}
	at0 := f["heal"]
	if hn := f["heal"]; hn != nil {
		if heal, hok := d.boolean(hn, join(path, "heal")); hok && !heal {
			d.errorf(hn, join(path, "heal"), "heal: false changes nothing; leave the entry out")
		}
	} else {
		at0 = f["partition"]
		p = d.partition(at0, join(path, "partition"), nodes)
	}
	if !ok || d.count != before {
		return true
	}
	starts, ok := d.starts(e, path, dur, f["every"])
	if !ok {
		return false
	}
	for _, t := range starts {
		if !b.push(&tlEvent{at: t, partition: p, at0: at0, entry: path}) {
			d.tooManyChanges(at0, path)
			return false
		}
		if e.forOK && !b.push(&tlEvent{at: t + e.forD, partition: &Partition{}, at0: at0, entry: path}) {
			d.tooManyChanges(at0, path)
			return false
		}
	}
	return true
}

// partitionKind names the entry f for messages.
func partitionKind(f map[string]*yaml.Node) string {
	if f["heal"] != nil {
		return "heal"
	}
	return "partition"
}

// partition decodes a partition's groups, n: a list of lists of names,
// or {from: [...], to: [...]}.
func (d *decoder) partition(n *yaml.Node, path string, nodes []Node) *Partition {
	p := &Partition{}
	if len(nodes) == 0 {
		d.errorf(n, path, "a partition splits the scenario's nodes: add nodes")
		return p
	}
	names := []string{ClientNode}
	for _, nd := range nodes {
		names = append(names, nd.Name)
	}
	seen := map[string]int{}
	group := func(g *yaml.Node, gpath string) []string {
		var out []string
		if g.Kind != yaml.SequenceNode || len(g.Content) == 0 {
			d.errorf(g, gpath, "expected a list of node names like [a, b], got %s", describe(g))
			return nil
		}
		for _, it := range g.Content {
			name, ok := d.oneOf(it, gpath, "node", names)
			if !ok {
				continue
			}
			if line, dup := seen[name]; dup {
				d.errorf(it, gpath, "%s is in two groups (first at line %d)", quote(name), line)
				continue
			}
			seen[name] = it.Line
			out = append(out, name)
		}
		return out
	}
	switch n.Kind {
	case yaml.SequenceNode:
		if slices.ContainsFunc(n.Content, func(g *yaml.Node) bool { return g.Kind == yaml.ScalarNode }) {
			d.errorf(n, path, "expected groups, each a list of node names, like [[a], [b, c]]")
			return p
		}
		if len(n.Content) < 2 {
			d.errorf(n, path, "a partition needs at least two groups, like [[a], [b, c]]")
			return p
		}
		for i, g := range n.Content {
			p.Groups = append(p.Groups, group(g, fmt.Sprintf("%s[%d]", path, i)))
		}
	case yaml.MappingNode:
		f := d.mapping(n, path, []string{"from", "to"})
		for _, k := range []string{"from", "to"} {
			if f[k] == nil {
				d.errorf(n, path, "missing key %s (a one-way partition drops what from sends to)", k)
				return p
			}
		}
		p.Groups, p.OneWay = [][]string{group(f["from"], join(path, "from")), group(f["to"], join(path, "to"))}, true
	default:
		d.errorf(n, path, "expected groups of nodes like [[a], [b, c]], or {from: [a], to: [b, c]}, got %s", describe(n))
	}
	p.Groups = slices.DeleteFunc(p.Groups, func(g []string) bool { return len(g) == 0 })
	return p
}
