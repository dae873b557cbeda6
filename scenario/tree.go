package scenario

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// The scenario is handled as a yaml.Node tree from parsing to decoding:
// overrides are applied to the tree, so a value from --set or a variant is
// checked by exactly the same code as a value in the file, and every node
// keeps the line it came from for error messages.

// maxNodes bounds the size of a tree once aliases are expanded, so that a
// small file of nested aliases (a "billion laughs") cannot exhaust memory.
const maxNodes = 1 << 16

// maxRunNodes bounds the trees of all runs together (the base scenario and
// every variant, each a copy of the file with its overrides): 400 variants
// of a file near maxNodes would otherwise hold gigabytes.
const maxRunNodes = 1 << 19

// size returns the number of nodes in the tree n.
func size(n *yaml.Node) int {
	c := 1
	for _, child := range n.Content {
		c += size(child)
	}
	return c
}

// yamlLine splits the parser's "yaml: line 3: msg" into its line and message.
var yamlLine = regexp.MustCompile(`(?s)^yaml: line ([0-9]+): (.*)$`)

// parseYAML parses data, which must hold at most one YAML document, and
// returns its top node with aliases expanded: a null scalar when the
// document is empty. On failure it returns the line (0 if unknown) and a
// message starting with "yaml: ".
func parseYAML(data []byte) (*yaml.Node, int, string) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		line, msg := yamlErrorLine(err)
		return nil, line, msg
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case err == nil:
		return nil, extra.Line, "yaml: found a second document; a scenario is one YAML document"
	case !errors.Is(err, io.EOF):
		line, msg := yamlErrorLine(err)
		return nil, line, msg
	}
	top := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null"}
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		top = doc.Content[0]
	}
	x := expander{active: map[*yaml.Node]bool{}}
	expanded, err := x.copy(top)
	if err != nil {
		return nil, expanded.Line, err.Error()
	}
	return expanded, 0, ""
}

// yamlErrorLine returns the line and message of a parser error.
func yamlErrorLine(err error) (int, string) {
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		line, _ := strconv.Atoi(m[1])
		return line, "yaml: " + m[2]
	}
	return 0, err.Error()
}

// expander copies a tree, replacing every alias by a copy of its anchored
// node, so that an override through one alias does not change the others
// and the decoder never sees an alias.
type expander struct {
	nodes  int
	active map[*yaml.Node]bool // the nodes being copied: an alias to one of them is a cycle
}

// copy returns an alias-free deep copy of n. On error it returns the node
// where the problem is.
func (x *expander) copy(n *yaml.Node) (*yaml.Node, error) {
	if n.Kind == yaml.AliasNode {
		if n.Alias == nil || x.active[n.Alias] {
			return n, fmt.Errorf("yaml: alias *%s refers to a node that contains it", n.Value)
		}
		return x.copy(n.Alias)
	}
	if x.nodes++; x.nodes > maxNodes {
		return n, fmt.Errorf("yaml: more than %d nodes (keys, values and list items, aliases expanded): a scenario is at most that big", maxNodes)
	}
	x.active[n] = true
	defer delete(x.active, n)
	c := *n
	c.Anchor = ""
	c.Content = make([]*yaml.Node, len(n.Content))
	for i, child := range n.Content {
		cc, err := x.copy(child)
		if err != nil {
			return cc, err
		}
		c.Content[i] = cc
	}
	return &c, nil
}

// clone returns a deep copy of an alias-free tree. mark, if not nil, is
// called on every node of the copy.
func clone(n *yaml.Node, mark func(*yaml.Node)) *yaml.Node {
	c := *n
	c.Content = make([]*yaml.Node, len(n.Content))
	for i, child := range n.Content {
		c.Content[i] = clone(child, mark)
	}
	if mark != nil {
		mark(&c)
	}
	return &c
}

// isNull reports whether n is a null scalar ("", "~", "null"). A null value
// counts as absent everywhere in a scenario, which is also how an override
// removes a key the file sets.
func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// lookup returns the value of key in mapping m, or nil; with duplicate keys
// (an error reported by the decoder) the first one counts.
func lookup(m *yaml.Node, key string) *yaml.Node {
	if i := keyIndex(m, key); i >= 0 {
		return m.Content[i+1]
	}
	return nil
}

// keyIndex returns the index in m.Content of the first key named key, or -1.
func keyIndex(m *yaml.Node, key string) int {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if k := m.Content[i]; k.Kind == yaml.ScalarNode && k.Value == key {
			return i
		}
	}
	return -1
}

// removeKey deletes every entry named key from mapping m.
func removeKey(m *yaml.Node, key string) {
	out := m.Content[:0]
	for i := 0; i+1 < len(m.Content); i += 2 {
		if k := m.Content[i]; k.Kind == yaml.ScalarNode && k.Value == key {
			continue
		}
		out = append(out, m.Content[i], m.Content[i+1])
	}
	m.Content = out
}

func stringNode(s string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s}
}

// setPath stores value at the dotted key path inside the mapping root: the
// override of "--set KEY=VALUE" and of a variant's set. Missing mapping keys
// (and null values on the way) become mappings; a list is entered through
// the item whose name is the next key. Nodes it creates are passed to made,
// so the caller can record where they came from. The error, if any, says
// what to do instead; the caller adds where.
func setPath(root *yaml.Node, key string, value *yaml.Node, made func(*yaml.Node)) error {
	segs := strings.Split(key, ".")
	for _, s := range segs {
		if s == "" {
			return errors.New("empty key in path (expected dotted keys like link.uplink.rate)")
		}
	}
	n := root
	for i, seg := range segs {
		last := i == len(segs)-1
		here := strings.Join(segs[:i], ".")
		switch n.Kind {
		case yaml.MappingNode:
			k := keyIndex(n, seg)
			switch {
			case last && k >= 0:
				n.Content[k+1] = value
				return nil
			case last:
				kn := stringNode(seg)
				made(kn)
				n.Content = append(n.Content, kn, value)
				return nil
			case k >= 0 && !isNull(n.Content[k+1]):
				n = n.Content[k+1]
			default:
				m := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
				made(m)
				if k >= 0 {
					n.Content[k+1] = m
				} else {
					kn := stringNode(seg)
					made(kn)
					n.Content = append(n.Content, kn, m)
				}
				n = m
			}
		case yaml.SequenceNode:
			j, names := namedItem(n, seg)
			if j < 0 {
				if len(names) == 0 {
					return fmt.Errorf("%s is a list without named items, so %q cannot address one", here, seg)
				}
				return fmt.Errorf("%s has no item named %q (names: %s)", here, seg, strings.Join(names, ", "))
			}
			if last {
				n.Content[j] = value
				return nil
			}
			n = n.Content[j]
		default:
			return fmt.Errorf("cannot set a key inside %s, which holds %s; set %s itself to a mapping instead",
				here, describe(n), here)
		}
	}
	return nil
}

// namedItem returns the index of the item of list n that is a mapping whose
// name is name, or -1 and the names there are.
func namedItem(n *yaml.Node, name string) (int, []string) {
	var names []string
	for j, item := range n.Content {
		if item.Kind != yaml.MappingNode {
			continue
		}
		if v := lookup(item, "name"); v != nil && v.Kind == yaml.ScalarNode {
			if v.Value == name {
				return j, nil
			}
			names = append(names, v.Value)
		}
	}
	return -1, names
}

// describe says what n is, for "expected X, got Y" messages.
func describe(n *yaml.Node) string {
	switch {
	case n.Kind == yaml.MappingNode && len(n.Content) == 0:
		return "an empty mapping"
	case n.Kind == yaml.SequenceNode && len(n.Content) == 0:
		return "an empty list"
	}
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.ShortTag() == "!!str" {
			return "the string " + quote(n.Value)
		}
		if isNull(n) {
			return "null"
		}
		q := quote(n.Value) // escaped and shortened, then shown bare: got 1.5
		return q[1 : len(q)-1]
	}
	return "nothing"
}
