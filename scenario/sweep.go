package scenario

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/netjam/netjam/internal/sweepcap"
)

// Limits of a sweep: enough for a study, not a typo's worth of runs.
const (
	maxSweepValues = 1000  // values of one axis
	maxSweepSeeds  = 10000 // seeds
)

// MaxSweepRuns is the most runs a sweep may have: the combinations of its
// keys' values, times its seeds, times the scenario's variants, whether
// they come from the file or the command line (--grid, --seeds).
const MaxSweepRuns = sweepcap.Max

// Len returns the number of points, combinations times seeds, of a sweep
// within MaxSweepRuns; for a larger one, MaxSweepRuns+1, and for one
// whose product overflows an int too (eight keys of 512 values once gave
// 0): a sweep past the limit is refused (Plan.SweepRuns), not listed.
func (s *Sweep) Len() int {
	n, err := s.runs(1)
	if err != nil {
		return MaxSweepRuns + 1
	}
	return n
}

// runs returns the number of runs of s with variants runs per point, or
// why there are too many (sweepcap.Runs).
func (s *Sweep) runs(variants int) (int, error) {
	values := make([]int, len(s.Axes))
	for i, a := range s.Axes {
		values[i] = len(a.Values)
	}
	return sweepcap.Runs(values, len(s.Seeds), variants)
}

// SweepRuns returns the number of runs of the plan's sweep (Sweep as it
// is now: the command line's --grid and --seeds may have changed it): its
// points times the plan's runs (one per variant); an error when it is more
// than MaxSweepRuns. 0 without a sweep.
func (p *Plan) SweepRuns() (int, error) {
	if p.Sweep == nil {
		return 0, nil
	}
	n, err := p.Sweep.runs(max(1, len(p.Runs)))
	if err != nil {
		return 0, &Error{File: p.Path, Path: "sweep", Msg: err.Error()}
	}
	return n, nil
}

// Point returns point i: the last axis varies fastest, the seed fastest
// of all, so that a point's seeds are neighbours.
func (s *Sweep) Point(i int) Point {
	p := Point{Index: i, Values: make([]string, len(s.Axes))}
	p.Seed = s.Seeds[i%len(s.Seeds)]
	i /= len(s.Seeds)
	for j := len(s.Axes) - 1; j >= 0; j-- {
		n := len(s.Axes[j].Values)
		p.Values[j] = s.Axes[j].Values[i%n]
		i /= n
	}
	return p
}

// Sets returns the point's values as --set arguments.
func (s *Sweep) Sets(p Point) []string {
	out := make([]string, len(s.Axes))
	for j, a := range s.Axes {
		out[j] = a.Key + "=" + p.Values[j]
	}
	return out
}

// checkSweepKey returns why key may not be swept, or "".
func checkSweepKey(key string) string {
	if msg := checkOverrideKey(key); msg != "" {
		return msg
	}
	switch head, _, _ := strings.Cut(key, "."); head {
	case "name":
		return "all runs of a sweep share the scenario's name"
	case "seed":
		return "seeds are swept with sweep.seeds"
	case "sweep":
		return "a sweep cannot sweep itself"
	}
	return ""
}

// sweep decodes the sweep key, of a file of variants runs per point.
func (d *decoder) sweep(n *yaml.Node, variants int) *Sweep {
	f, ok := d.fields(n, "sweep", "a mapping with grid and seeds", sweepKeys)
	if !ok {
		return nil
	}
	s := sweepDefaults()
	if g := f["grid"]; g == nil {
		d.errorf(n, "sweep.grid", "not set: a sweep needs at least one swept key (as grid: {link.loss: [0%%, 1%%]})")
	} else if g.Kind != yaml.MappingNode || len(g.Content) == 0 {
		d.errorf(g, "sweep.grid", "expected a mapping of dotted keys to lists of values, got %s", describe(g))
	} else {
		seen := map[string]*yaml.Node{}
		for j := 0; j+1 < len(g.Content); j += 2 {
			k, v := g.Content[j], g.Content[j+1]
			path := "sweep.grid." + k.Value
			if prev, dup := seen[k.Value]; dup {
				d.errorf(k, path, "duplicate key (first at line %d)", prev.Line)
				continue
			}
			seen[k.Value] = k
			if msg := checkSweepKey(k.Value); msg != "" {
				d.errorf(k, path, "%s", msg)
				continue
			}
			if a, ok := d.axis(k.Value, v, path); ok {
				s.Axes = append(s.Axes, a)
			}
		}
	}
	if sn := f["seeds"]; sn != nil {
		s.Seeds = d.sweepSeeds(sn)
	}
	if len(s.Seeds) > 0 {
		if _, err := s.runs(variants); err != nil {
			d.errorf(n, "sweep", "%v", err)
		}
	}
	return s
}

// axis decodes one swept key's list of values.
func (d *decoder) axis(key string, v *yaml.Node, path string) (Axis, bool) {
	if v.Kind != yaml.SequenceNode || len(v.Content) == 0 {
		d.errorf(v, path, "expected a non-empty list of values, got %s", describe(v))
		return Axis{}, false
	}
	if len(v.Content) > maxSweepValues {
		d.errorf(v, path, "%d values, more than %d", len(v.Content), maxSweepValues)
		return Axis{}, false
	}
	a := Axis{Key: key}
	for _, item := range v.Content {
		text, err := valueText(item)
		if err != nil {
			d.errorf(item, path, "%v", err)
			return Axis{}, false
		}
		if slices.Contains(a.Values, text) {
			d.errorf(item, path, "%s is listed twice", quote(text))
			return Axis{}, false
		}
		a.Values = append(a.Values, text)
	}
	return a, true
}

// valueText writes a YAML value on one line, in flow style, as --set
// takes it back.
func valueText(n *yaml.Node) (string, error) {
	c := clone(n, func(m *yaml.Node) {
		m.Style &^= yaml.LiteralStyle | yaml.FoldedStyle
		if m.Kind == yaml.MappingNode || m.Kind == yaml.SequenceNode {
			m.Style |= yaml.FlowStyle
		}
		m.HeadComment, m.LineComment, m.FootComment = "", "", ""
	})
	b, err := yaml.Marshal(c)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// sweepSeeds decodes sweep.seeds: a count (seeds 1 to N) or a list.
func (d *decoder) sweepSeeds(n *yaml.Node) []uint64 {
	if n.Kind == yaml.ScalarNode {
		v, ok := d.integer(n, "sweep.seeds", 1, maxSweepSeeds)
		if !ok {
			return nil
		}
		out := make([]uint64, v)
		for i := range out {
			out[i] = uint64(i + 1)
		}
		return out
	}
	if n.Kind != yaml.SequenceNode || len(n.Content) == 0 || len(n.Content) > maxSweepSeeds {
		d.errorf(n, "sweep.seeds", "expected a count of seeds (1 to %d) or a list of seeds, got %s", maxSweepSeeds, describe(n))
		return nil
	}
	var out []uint64
	for i, item := range n.Content {
		v, ok := d.seed(item, fmt.Sprintf("sweep.seeds[%d]", i))
		if !ok {
			return nil
		}
		if slices.Contains(out, v) {
			d.errorf(item, fmt.Sprintf("sweep.seeds[%d]", i), "seed %d is listed twice", v)
			return nil
		}
		out = append(out, v)
	}
	return out
}

// ParseGrid parses --grid arguments, KEY=V1,V2,...: each value is YAML, and
// the list is read as a YAML flow list, so that a value may hold commas
// inside braces ("link.queue={limit: 100},{limit: 1000}").
func ParseGrid(args []string) ([]Axis, error) {
	var out []Axis
	var errs Errors
	for _, arg := range args {
		key, vals, ok := strings.Cut(arg, "=")
		key = strings.TrimSpace(key)
		if !ok || key == "" || vals == "" {
			errs = append(errs, &Error{Origin: "--grid", Msg: fmt.Sprintf("%s is not KEY=V1,V2,...", quote(arg))})
			continue
		}
		if msg := checkSweepKey(key); msg != "" {
			errs = append(errs, &Error{Origin: "--grid", Msg: key + ": " + msg})
			continue
		}
		n, _, msg := parseYAML([]byte("[" + vals + "]"))
		if msg != "" {
			errs = append(errs, &Error{Origin: "--grid", Msg: key + ": " + msg})
			continue
		}
		d := newDecoder("", nil)
		a, ok := d.axis(key, n, key)
		if !ok {
			for _, e := range d.errs {
				errs = append(errs, &Error{Origin: "--grid", Msg: e.Path + ": " + e.Msg})
			}
			continue
		}
		out = append(out, a)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return out, nil
}

// SeedList returns the seeds 1 to n, as --seeds N means.
func SeedList(n int) ([]uint64, error) {
	if n < 1 || n > maxSweepSeeds {
		return nil, fmt.Errorf("--seeds: %s is out of range (expected 1 to %d)", strconv.Itoa(n), maxSweepSeeds)
	}
	out := make([]uint64, n)
	for i := range out {
		out[i] = uint64(i + 1)
	}
	return out, nil
}

// At returns the plan of point pt of sweep s: the file with pt's values
// and seed applied, after the variants and before the command line's
// --set, one run per variant.
func (p *Plan) At(s *Sweep, pt Point) (*Plan, error) {
	o := p.opts
	o.Sets = append(s.Sets(pt), p.opts.Sets...)
	o.Seed = &pt.Seed
	o.sweep, o.root = s, p.pointRoot()
	plan, err := Parse(p.Path, p.data, o)
	var errs Errors
	if errors.As(err, &errs) {
		// A swept value's error names the point, not the command line.
		for _, e := range errs {
			if e.Origin != originSet {
				continue
			}
			for _, a := range s.Axes {
				if e.Path == a.Key || strings.HasPrefix(e.Path, a.Key+".") {
					e.Origin = "sweep point " + strings.Join(s.Sets(pt), ", ")
					break
				}
			}
		}
	}
	return plan, err
}

// pointRoot returns a copy of the file's tree without its sweep (the
// sweep is decoded once, for Plan.Sweep), for At to resolve a point on;
// nil when the file does not parse, for Parse to say why.
func (p *Plan) pointRoot() *yaml.Node {
	if p.body == nil {
		return nil
	}
	p.body.once.Do(func() {
		root, errs := parseRoot(p.Path, p.data)
		if errs != nil {
			return
		}
		p.body.root = withoutKey(root, "sweep")
	})
	if p.body.root == nil {
		return nil
	}
	x := expander{active: map[*yaml.Node]bool{}}
	root, err := x.copy(p.body.root)
	if err != nil {
		return nil
	}
	return root
}

// CheckSweep counts the runs of the plan's sweep (SweepRuns), then
// resolves every combination (with its first seed: the seed changes no
// value) and returns their errors, each once, at most maxSweepErrors of
// them; nil without a sweep. Call it once the command line's --grid and
// --seeds are in Sweep.
func (p *Plan) CheckSweep() error {
	if p.Sweep == nil {
		return nil
	}
	if _, err := p.SweepRuns(); err != nil {
		return err
	}
	var out []string
	seeds, n := len(p.Sweep.Seeds), p.Sweep.Len()
	for i := 0; i < n && len(out) < maxSweepErrors; i += seeds {
		if _, err := p.At(p.Sweep, p.Sweep.Point(i)); err != nil && !slices.Contains(out, err.Error()) {
			out = append(out, err.Error())
		}
	}
	if len(out) == 0 {
		return nil
	}
	return errors.New(strings.Join(out, "\n"))
}

// maxSweepErrors bounds the errors CheckSweep reports.
const maxSweepErrors = 10

// With returns s with sets applied, as --set applies them ("link.loss=5%"),
// each value checked as a file's is: the settings of a run that changes
// while it runs. s is not changed. A set that names a trace file is
// refused: the changes come from the control API, whose client must not
// have netjam read files for it (a parse error quotes a line).
func (s *Scenario) With(sets ...string) (*Scenario, error) {
	y, err := s.YAML()
	if err != nil {
		return nil, err
	}
	p, err := Parse(s.file, y, Options{Sets: sets, setsNameNoFiles: true, knownTraces: s.traceFiles})
	var es Errors
	if errors.As(err, &es) {
		// A change's own keys are named as the change named them
		// ("link.loss: 150% is out of range"): they came from netjam
		// ctl or the API, not from a --set of the command line.
		for _, e := range es {
			if e.Origin == originSet {
				e.Origin = ""
			}
		}
	}
	if err != nil {
		return nil, err
	}
	out := p.Runs[0]
	// A change of a shared link key that both directions replace with
	// their own changes nothing: where the command line warns (--set), a
	// change made while the run runs is refused, saying what to set.
	if len(out.noEffect) > 0 {
		var es []error
		for _, w := range out.noEffect {
			es = append(es, errors.New(strings.TrimPrefix(w, "--set ")))
		}
		return nil, errors.Join(es...)
	}
	out.Variant = s.Variant
	return out, nil
}

// Value returns the value at the dotted key in s (links.eu.delay
// addresses a named item) as YAML on one line ("5%",
// "{time: 50ms, jitter: 5ms}"), or "" when s does not set it: the old side
// of a change.
func (s *Scenario) Value(key string) string {
	n := nodeAt(s.tree, key)
	if n == nil {
		return ""
	}
	v, err := valueText(n)
	if err != nil {
		return ""
	}
	return v
}

// AddTimeline appends to s's timeline, as YAML writes it, an entry that
// sets sets (--set's form: "link.loss=5%") at at from the run's start: a
// change made while the run ran (netjam ctl), recorded so that running the
// resolved scenario again repeats it. It changes what YAML writes, not s's
// compiled Timeline. sets must have been checked (With) already.
func (s *Scenario) AddTimeline(at time.Duration, sets ...string) error {
	if s.tree == nil {
		return errors.New("scenario: AddTimeline needs a Scenario returned by Parse, Load or NewLink")
	}
	set := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Style: yaml.FlowStyle}
	for _, kv := range sets {
		key, val, _ := strings.Cut(kv, "=")
		n, _, msg := parseYAML([]byte(val))
		if msg != "" {
			return fmt.Errorf("%s: %s", key, msg)
		}
		set.Content = append(set.Content, stringNode(strings.TrimSpace(key)), n)
	}
	s.addTimelineEntry(&yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Style: yaml.FlowStyle,
		Content: []*yaml.Node{stringNode("at"), stringNode(at.String()), stringNode("set"), set}})
	return nil
}

// AddTimelineReset adds to s's resolved tree a timeline entry that resets
// the connection of flow at time at ({at: AT, reset: {flow: FLOW}}), as
// AddTimeline adds a change.
func (s *Scenario) AddTimelineReset(at time.Duration, flow string) error {
	if s.tree == nil {
		return errors.New("scenario: AddTimelineReset needs a Scenario returned by Parse, Load or NewLink")
	}
	reset := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Style: yaml.FlowStyle,
		Content: []*yaml.Node{stringNode("flow"), stringNode(flow)}}
	s.addTimelineEntry(&yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Style: yaml.FlowStyle,
		Content: []*yaml.Node{stringNode("at"), stringNode(at.String()), stringNode("reset"), reset}})
	return nil
}

// addTimelineEntry appends entry to the tree's timeline, making one.
func (s *Scenario) addTimelineEntry(entry *yaml.Node) {
	tl := lookup(s.tree, "timeline")
	if tl == nil || isNull(tl) || tl.Kind != yaml.SequenceNode {
		tl = &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		if i := keyIndex(s.tree, "timeline"); i >= 0 {
			s.tree.Content[i+1] = tl
		} else {
			s.tree.Content = append(s.tree.Content, stringNode("timeline"), tl)
		}
	}
	tl.Content = append(tl.Content, entry)
}
