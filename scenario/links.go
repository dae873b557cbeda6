package scenario

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/netjam/netjam/netif"
)

// Several links and the paths across them:
//
//	links:
//	  - {name: access, rate: 20Mbps, delay: 5ms}
//	  - {name: eu, delay: 15ms}
//	  - {name: us, delay: 60ms, loss: 0.5%}
//	paths:
//	  - {name: to-eu, via: [access, eu], match: {dst: 10.20.0.0/16}}
//	  - {name: to-us, via: [access, us], match: {dst: 10.30.0.0/16}}
//	  - {name: direct, via: [access]}          # no match: the default path
//
// A link is decoded as link is (its direction keys, uplink, downlink),
// under links.NAME in messages. `link` stays the one-link shorthand: one
// link named DefaultLink on one default path named DefaultPath.

// maxLinks bounds the links and the paths of a scenario: each link is two
// directions with a goroutine each.
const maxLinks = 64

// topology decodes the links and paths of the top level's keys f into s
// (the link shorthand, or the links and paths lists).
func (d *decoder) topology(f map[string]*yaml.Node, s *Scenario, mtu int, mtuOK bool) {
	ln, lsn, pn := f["link"], f["links"], f["paths"]
	if ln != nil && lsn != nil {
		d.errorf(lsn, "links", "link and links cannot both be set: link is the one-link shorthand; move its keys into an item of links")
	}
	if lsn == nil {
		s.Uplink, s.Downlink = d.linkOf(ln, mtu, mtuOK)
		s.Links = []Link{{Name: DefaultLink, Uplink: s.Uplink, Downlink: s.Downlink}}
		s.Paths = []Path{{Name: DefaultPath, Via: []string{DefaultLink}}}
		if pn != nil {
			d.errorf(pn, "paths", "paths go across a links list (link is one link on one path); write the links as links: [{name: ..., ...}]")
		}
		return
	}
	lines := map[string]int{}
	s.Links = d.links(lsn, mtu, mtuOK, lines, s.Nodes)
	if len(s.Links) > 0 {
		s.Uplink, s.Downlink = s.Links[0].Uplink, s.Links[0].Downlink
	}
	if pn == nil {
		// A series of every link between the client's side and the far
		// end, in order.
		p := Path{Name: DefaultPath}
		for _, l := range s.Links {
			if l.Between == nil {
				p.Via = append(p.Via, l.Name)
			}
		}
		if len(p.Via) == 0 && len(s.Links) > 0 {
			d.errorf(lsn, "links", "every link joins two nodes (between): add a link for the client's side, which the default path crosses")
			return
		}
		s.Paths = []Path{p}
		return
	}
	s.Paths = d.paths(pn, s.Links, mtu, mtuOK)
	d.unusedLinks(lsn, s.Links, s.Paths)
}

// links decodes the links list n of a scenario with nodes; lines gets
// each name's line.
func (d *decoder) links(n *yaml.Node, mtu int, mtuOK bool, lines map[string]int, nodes []Node) []Link {
	if !d.boundedList(n, "links", "links like [{name: access, rate: 10Mbps}]") {
		return nil
	}
	var out []Link
	for i, item := range n.Content {
		path := fmt.Sprintf("links[%d]", i)
		shared, ok := d.fields(item, path, "a mapping of link keys with a name", linksItemKeys)
		if !ok {
			continue
		}
		name, at, ok := d.itemName(item, shared["name"], path, "links", "link", lines)
		if !ok {
			continue
		}
		var up, down map[string]*yaml.Node
		if x := shared["uplink"]; x != nil {
			up, _ = d.fields(x, at+".uplink", "a mapping of direction keys", directionKeys)
		}
		if x := shared["downlink"]; x != nil {
			down, _ = d.fields(x, at+".downlink", "a mapping of direction keys", directionKeys)
		}
		l := Link{Name: name}
		l.Uplink, l.Downlink = d.link(at, shared, up, down, mtu, mtuOK)
		if v := shared["mtu"]; v != nil && mtuOK {
			if m, ok := d.integer(v, at+".mtu", minMTU, int64(mtu)); ok {
				l.MTU = int(m)
			}
		}
		if v := shared["between"]; v != nil {
			l.Between = d.between(v, at+".between", nodes, out)
		}
		out = append(out, l)
	}
	return out
}

// itemName decodes the name v of a list's item (a link's, a path's), at
// path (links[0]), unique among names (each with its line): it returns
// the name and the item's path from then on (list.NAME), false when it
// has no valid one. what names the item in messages.
func (d *decoder) itemName(item, v *yaml.Node, path, list, what string, names map[string]int) (string, string, bool) {
	if v == nil {
		d.errorf(item, path, "a %s needs a name", what)
		return "", path, false
	}
	name, ok := d.text(v, join(path, "name"))
	if !ok {
		return "", path, false
	}
	if why := itemNameProblem(name); why != "" {
		d.errorf(v, join(path, "name"), "%s is not a valid name (%s)", quote(name), why)
		return "", path, false
	}
	if line, dup := names[name]; dup {
		d.errorf(v, join(path, "name"), "%s names two %ss (first at line %d)", quote(name), what, line)
		return "", path, false
	}
	names[name] = v.Line
	return name, list + "." + name, true
}

// boundedList reports n, the list at key, unless it holds from 1 to
// maxLinks items; like says what it holds, with an example.
func (d *decoder) boundedList(n *yaml.Node, key, like string) bool {
	switch {
	case n.Kind != yaml.SequenceNode || len(n.Content) == 0:
		d.errorf(n, key, "expected a list of %s, got %s", like, describe(n))
	case len(n.Content) > maxLinks:
		d.errorf(n, key, "%d %s, more than the %d a scenario may have", len(n.Content), key, maxLinks)
	default:
		return true
	}
	return false
}

// paths decodes the paths list n across links.
func (d *decoder) paths(n *yaml.Node, links []Link, mtu int, mtuOK bool) []Path {
	if !d.boundedList(n, "paths", "paths like [{name: to-eu, via: [access, eu], match: {dst: 10.20.0.0/16}}]") {
		return nil
	}
	var out []Path
	names := map[string]int{}
	var matchAt []*yaml.Node // each of out's match node (nil for the default)
	for i, item := range n.Content {
		path := fmt.Sprintf("paths[%d]", i)
		f, ok := d.fields(item, path, "a mapping with name, via and match", pathKeys)
		if !ok {
			continue
		}
		name, at, ok := d.itemName(item, f["name"], path, "paths", "path", names)
		if !ok {
			continue
		}
		p := Path{Name: name}
		if v := f["via"]; v == nil {
			d.errorf(item, at, "a path needs via: the links it crosses, in order from the client side")
		} else {
			p.Via = d.via(v, at+".via", links)
		}
		mn := f["match"]
		if mn != nil {
			p.Match = d.match(mn, at+".match", mtu, mtuOK)
		}
		d.samePathMatch(out, matchAt, p, item, mn, at)
		out, matchAt = append(out, p), append(matchAt, mn)
	}
	return out
}

// samePathMatch refuses path p (at, in item; mn its match node) when a
// path of out takes the same packets: two defaults, or identical
// matches, where no rule could choose.
func (d *decoder) samePathMatch(out []Path, matchAt []*yaml.Node, p Path, item, mn *yaml.Node, at string) {
	for j, q := range out {
		switch {
		case p.Match == nil && mn == nil && q.Match == nil && matchAt[j] == nil:
			d.errorf(item, at, "a second default path (without match): %s is one already; give one of them a match", q.Name)
		case p.Match != nil && q.Match != nil && *p.Match == *q.Match:
			d.errorf(mn, at+".match", "the same match as path %s (line %d): a packet could take either", q.Name, matchAt[j].Line)
		default:
			continue
		}
		return
	}
}

// via decodes a path's via, n: links of the scenario, each once.
func (d *decoder) via(n *yaml.Node, path string, links []Link) []string {
	if n.Kind != yaml.SequenceNode {
		d.errorf(n, path, "expected a list of link names like [access, eu], got %s", describe(n))
		return nil
	}
	if len(n.Content) == 0 {
		d.errorf(n, path, "empty: a path crosses at least one link")
		return nil
	}
	var names, out []string
	for _, l := range links {
		names = append(names, l.Name)
	}
	for _, x := range n.Content {
		name, ok := d.text(x, path)
		if !ok {
			continue
		}
		i := slices.IndexFunc(links, func(l Link) bool { return l.Name == name })
		switch {
		case i >= 0 && links[i].Between != nil:
			d.errorf(x, path, "link %s joins nodes %s and %s (between): no path crosses it", name, links[i].Between[0], links[i].Between[1])
		case !slices.Contains(names, name):
			if s := suggest(name, names); s != "" {
				d.errorf(x, path, "%s names no link; did you mean %q?", quote(name), s)
			} else {
				d.errorf(x, path, "%s names no link (the links: %s)", quote(name), strings.Join(names, ", "))
			}
		case slices.Contains(out, name):
			d.errorf(x, path, "%s is crossed twice: a path crosses each link once", quote(name))
		default:
			out = append(out, name)
		}
	}
	return out
}

// FlowPath returns the path flow f of s crosses: the one it names, else
// the default path (the loader checks that there is one).
func (s *Scenario) FlowPath(f Flow) Path {
	for _, p := range s.Paths {
		if f.Path != "" && p.Name == f.Path || f.Path == "" && p.Match == nil {
			return p
		}
	}
	return Path{Name: DefaultPath}
}

// match decodes a path's match, n, of a scenario whose hosts have the
// MTU mtu (when mtuOK).
func (d *decoder) match(n *yaml.Node, path string, mtu int, mtuOK bool) *Match {
	f, ok := d.fields(n, path, "a mapping of "+strings.Join(matchKeys, ", "), matchKeys)
	if !ok {
		return nil
	}
	if len(f) == 0 {
		d.errorf(n, path, "an empty match takes every packet; leave match out to make the default path")
		return nil
	}
	var m Match
	if x := f["dst"]; x != nil {
		if v, ok := d.text(x, join(path, "dst")); ok {
			p, err := netip.ParsePrefix(v)
			if err != nil {
				if a, aerr := netip.ParseAddr(v); aerr == nil {
					p, err = netip.PrefixFrom(a, a.BitLen()), nil
				}
			}
			switch {
			case err != nil:
				d.errorf(x, join(path, "dst"), "%s is not a network like 10.20.0.0/16 (or an address)", quote(v))
			case p != p.Masked():
				d.errorf(x, join(path, "dst"), "%s has host bits set; did you mean %s?", v, p.Masked())
			case p.Bits() == 0:
				d.errorf(x, join(path, "dst"), "%s takes every destination; leave dst out", v)
			case !p.Masked().Addr().IsGlobalUnicast() && !p.Masked().Addr().IsPrivate():
				// The path's servers take its first addresses.
				d.errorf(x, join(path, "dst"), "%s is not a network of unicast hosts (multicast, loopback, link-local, broadcast and unspecified addresses cannot be a host's); take a private one such as 10.20.0.0/16 or fd20::/64", v)
			case p.Addr().Is6() && mtuOK && mtu < netif.MinMTUIPv6:
				d.errorf(x, join(path, "dst"), "%s is an IPv6 network, and the mtu, %d, is below IPv6's minimum of %d: hosts have no IPv6 below it", v, mtu, netif.MinMTUIPv6)
			}
			m.Dst = p.Masked()
		}
	}
	if x := f["proto"]; x != nil {
		m.Proto, _ = d.oneOf(x, join(path, "proto"), "protocol", flowTypes)
	}
	if x := f["port"]; x != nil {
		v, _ := d.integer(x, join(path, "port"), 1, 65535)
		m.Port = uint16(v)
	}
	return &m
}

// unusedLinks refuses a link of links (the list n) that no path crosses:
// its settings would change nothing, which is almost always a via
// mistyped or a path forgotten (as tc refuses a distribution without a
// jitter to shape).
func (d *decoder) unusedLinks(n *yaml.Node, links []Link, paths []Path) {
	if len(paths) == 0 {
		return // the paths were wrong; say that only
	}
	for _, l := range links {
		used := slices.ContainsFunc(paths, func(p Path) bool { return slices.Contains(p.Via, l.Name) })
		if used || l.Between != nil {
			continue
		}
		for _, item := range n.Content {
			if nn := lookup(item, "name"); nn != nil && nn.Value == l.Name {
				d.errorf(nn, "links."+l.Name, "no path crosses this link; add it to a path's via, or remove it")
			}
		}
	}
}

// flowPaths decodes the path of each flow of the flows list n, into fls:
// a path of paths that takes the flow's packets (its match's proto is the
// flow's type); "" (the default path) when not named, and then the
// scenario must have a default path.
func (d *decoder) flowPaths(n *yaml.Node, fls []Flow, paths []Path) {
	if n == nil || n.Kind != yaml.SequenceNode || len(paths) == 0 {
		return
	}
	var names []string
	def := -1
	for i, p := range paths {
		names = append(names, p.Name)
		if p.Match == nil {
			def = i
		}
	}
	onPort := map[string]string{}
	for _, item := range n.Content {
		nn := lookup(item, "name")
		if nn == nil {
			continue
		}
		i := slices.IndexFunc(fls, func(f Flow) bool { return f.Name == nn.Value })
		if i < 0 {
			continue
		}
		at := "flows." + fls[i].Name + ".path"
		pn := lookup(item, "path")
		j := def
		if pn != nil && !isNull(pn) {
			v, ok := d.oneOf(pn, at, "path", names)
			if !ok {
				continue
			}
			j = slices.Index(names, v)
		} else if def < 0 {
			d.errorf(item, at, "the scenario has no default path (a path without match): name this flow's path (%s)", strings.Join(names, ", "))
			continue
		}
		p := paths[j]
		if p.Match != nil && p.Match.Proto != "" && fls[i].Type != "" && p.Match.Proto != fls[i].Type {
			d.errorf(cmp.Or(pn, item), at, "path %s takes %s packets only, and this is a %s flow", p.Name, p.Match.Proto, fls[i].Type)
			continue
		}
		if pn != nil && !isNull(pn) {
			fls[i].Path = p.Name
		}
		d.portPath(p, fls[i], cmp.Or(pn, item), at, onPort)
	}
}

// forwardPaths checks the path each forward of tun (node n) names: one
// of paths ("default" for the link shorthand's).
func (d *decoder) forwardPaths(n *yaml.Node, tun *TUN, paths []Path) {
	if tun == nil || n == nil || n.Kind != yaml.MappingNode {
		return
	}
	fn := lookup(n, "forward")
	if fn == nil || fn.Kind != yaml.SequenceNode {
		return
	}
	names := []string{"default"}
	if len(paths) > 0 {
		names = names[:0]
		for _, p := range paths {
			names = append(names, p.Name)
		}
	}
	for i, item := range fn.Content {
		pn := lookup(item, "path")
		if pn == nil || isNull(pn) {
			continue
		}
		d.oneOf(pn, fmt.Sprintf("tun.forward[%d].path", i), "path", names)
	}
}

// portPath refuses flow f (at, its path's node n) on path p when p
// matches a port and the flow cannot use it: the flow's server listens
// on the path's port, so a flow down (whose server sends from a port of
// its own) would not be taken by the path, and a second flow of one type
// would listen on the port twice. onPort holds the flows so far by path
// and type.
func (d *decoder) portPath(p Path, f Flow, n *yaml.Node, at string, onPort map[string]string) {
	if p.Match == nil || p.Match.Port == 0 {
		return
	}
	key := p.Name + "/" + f.Type
	switch first, dup := onPort[key]; {
	case f.Direction == "down":
		d.errorf(n, at, "path %s matches port %d, the server's: a flow down sends from a port of its own, which the path does not take; run it up, or on another path", p.Name, p.Match.Port)
	case dup:
		d.errorf(n, at, "path %s matches port %d, where its %s flow %s listens already: one %s flow per such path", p.Name, p.Match.Port, f.Type, first, f.Type)
	default:
		onPort[key] = f.Name
	}
}
