package scenario

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// ExpectRoots are the first keys of an expectation's path: the figures of
// one run in summary.json.
var ExpectRoots = []string{"duration_s", "flows", "links", "fairness", "wifi", "captures", "tun", "hosts"}

// expectOps are the comparisons, longest first so that "<=" is not read as
// "<" and "=...".
var expectOps = []string{"<=", ">=", "==", "!=", "<", ">"}

// expectForm splits an expectation into its path, operator and value.
var expectForm = regexp.MustCompile(`^\s*([A-Za-z0-9_.-]+)\s*(<=|>=|==|!=|<|>)\s*(\S(?:.*\S)?)\s*$`)

// Holds reports whether the figure got (in the base unit of e.Dim, or as
// it is for DimNumber) satisfies e.
func (e Expectation) Holds(got float64) bool {
	switch e.Op {
	case "<":
		return got < e.Value
	case "<=":
		return got <= e.Value
	case ">":
		return got > e.Value
	case ">=":
		return got >= e.Value
	case "==":
		return got == e.Value
	default:
		return got != e.Value
	}
}

// ParseExpectation parses one expectation, "PATH OP VALUE". It checks the
// form, the operator, the value and its unit, and the path's first key;
// which figures the path names is known once the run has a summary.
func ParseExpectation(s string) (Expectation, error) {
	m := expectForm.FindStringSubmatch(s)
	if m == nil {
		return Expectation{}, fmt.Errorf("%s is not an expectation (expected FIGURE OP VALUE with OP one of %s, as flows.bulk.throughput > 4Mbps)",
			quote(s), strings.Join(expectOps, " "))
	}
	e := Expectation{Text: strings.TrimSpace(s), Op: m[2]}
	e.Path = strings.Split(m[1], ".")
	if slices.Contains(e.Path, "") {
		return Expectation{}, fmt.Errorf("%s: empty key in the figure's path %s", quote(s), quote(m[1]))
	}
	if !slices.Contains(ExpectRoots, e.Path[0]) {
		msg := fmt.Sprintf("%s: %s is not a figure of a run (figures: %s)", quote(s), quote(e.Path[0]), strings.Join(ExpectRoots, ", "))
		if sug := suggest(e.Path[0], ExpectRoots); sug != "" {
			msg += fmt.Sprintf("; did you mean %q?", sug)
		}
		return Expectation{}, fmt.Errorf("%s", msg)
	}
	v, dim, err := expectValue(m[3])
	if err != nil {
		return Expectation{}, fmt.Errorf("%s: %v", quote(s), err)
	}
	e.Value, e.Dim = v, dim
	return e, nil
}

// expectValue parses an expectation's value: a plain number, or a number
// with the unit of a duration, a rate, a size or a percentage.
func expectValue(s string) (float64, Dimension, error) {
	if v, err := strconv.ParseFloat(s, 64); err == nil {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return 0, 0, fmt.Errorf("%s is not a value to compare with: give a finite number", quote(s))
		}
		return v, DimNumber, nil
	}
	if strings.HasSuffix(s, "%") {
		v, err := ParseRatio(s)
		return v, DimRatio, err
	}
	if d, err := parseDuration(s); err == nil {
		return d.Seconds(), DimTime, nil
	}
	if r, err := ParseRate(s); err == nil && s != "unlimited" {
		return float64(r), DimRate, nil
	}
	if b, err := ParseSize(s); err == nil {
		return float64(b), DimSize, nil
	}
	return 0, 0, fmt.Errorf("%s is not a value (a number, or one with a unit: 150ms, 4Mbps, 5MB, 1%%)", quote(s))
}

// expect decodes the expect list: each entry a string. The flows and
// links an expectation names must exist: a direction of links, as
// summary.json names it (uplink; with a links list eu.uplink, whose
// dot the path keeps: links.eu.uplink.drops.queue).
func (d *decoder) expect(n *yaml.Node, fls []Flow, links []Link) []Expectation {
	if n.Kind != yaml.SequenceNode {
		d.errorf(n, "expect", "expected a list of expectations (as flows.bulk.throughput > 4Mbps), got %s", describe(n))
		return nil
	}
	var names []string
	for _, f := range fls {
		names = append(names, f.Name)
	}
	dirs := []string{"uplink", "downlink"}
	if len(links) > 1 || len(links) == 1 && links[0].Name != DefaultLink {
		dirs = nil
		for _, l := range links {
			dirs = append(dirs, l.Name+".uplink", l.Name+".downlink")
		}
	}
	var out []Expectation
	for i, item := range n.Content {
		path := fmt.Sprintf("expect[%d]", i)
		text, ok := d.text(item, path)
		if !ok {
			continue
		}
		e, err := ParseExpectation(text)
		if err != nil {
			d.errorf(item, path, "%v", err)
			continue
		}
		if len(e.Path) > 2 && e.Path[0] == "links" && slices.Contains(dirs, e.Path[1]+"."+e.Path[2]) {
			e.Path = append([]string{"links", e.Path[1] + "." + e.Path[2]}, e.Path[3:]...)
		}
		if len(e.Path) < 2 {
			if e.Path[0] == "flows" || e.Path[0] == "links" {
				d.errorf(item, path, "%s: name the %s item (as %s.%s...)", quote(text), e.Path[0], e.Path[0], map[string]string{"flows": "bulk", "links": "uplink"}[e.Path[0]])
				continue
			}
		} else if known := map[string][]string{"flows": names, "links": dirs}[e.Path[0]]; known != nil && !slices.Contains(known, e.Path[1]) {
			msg := fmt.Sprintf("%s: no %s named %s (names: %s)", quote(text), strings.TrimSuffix(e.Path[0], "s"), quote(e.Path[1]), strings.Join(known, ", "))
			if sug := suggest(e.Path[1], known); sug != "" {
				msg += fmt.Sprintf("; did you mean %q?", sug)
			}
			d.errorf(item, path, "%s", msg)
			continue
		}
		out = append(out, e)
	}
	return out
}
