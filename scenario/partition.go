package scenario

import (
	"errors"
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

// partitionNode is p as a timeline entry writes it: a list of groups, or
// {from, to} when one way.
func partitionNode(p *Partition) *yaml.Node {
	group := func(g []string) *yaml.Node {
		n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Style: yaml.FlowStyle}
		for _, name := range g {
			n.Content = append(n.Content, stringNode(name))
		}
		return n
	}
	if p.OneWay && len(p.Groups) == 2 {
		return &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Style: yaml.FlowStyle,
			Content: []*yaml.Node{stringNode("from"), group(p.Groups[0]), stringNode("to"), group(p.Groups[1])}}
	}
	n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Style: yaml.FlowStyle}
	for _, g := range p.Groups {
		n.Content = append(n.Content, group(g))
	}
	return n
}

// CheckPartition reports whether p is a partition of s's nodes, as a
// timeline entry's would be checked (a change made while the run runs),
// with the same messages; it returns p as the timeline has it. One way,
// p has two groups: from, then to.
func (s *Scenario) CheckPartition(p *Partition) (*Partition, error) {
	d := newDecoder("", nil)
	if p.OneWay && len(p.Groups) != 2 {
		return nil, errors.New("partition: a one-way partition has two groups: from, then to")
	}
	out := d.partition(partitionNode(p), "partition", s.Nodes)
	if len(d.errs) > 0 {
		return nil, d.errs
	}
	return out, nil
}

// AddTimelinePartition appends to s's tree a timeline entry at at making
// p the partition (no groups: heal: true), so that the scenario as run
// records a change made while it ran.
func (s *Scenario) AddTimelinePartition(at time.Duration, p *Partition) error {
	if s.tree == nil {
		return errors.New("scenario: AddTimelinePartition needs a Scenario returned by Parse, Load or NewLink")
	}
	key, value := stringNode("heal"), &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: "true"}
	if p != nil && len(p.Groups) > 0 {
		key, value = stringNode("partition"), partitionNode(p)
	}
	s.addTimelineEntry(&yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Style: yaml.FlowStyle,
		Content: []*yaml.Node{stringNode("at"), stringNode(at.String()), key, value}})
	return nil
}
