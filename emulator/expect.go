package emulator

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/netjam/netjam/impair"
	"github.com/netjam/netjam/scenario"
	"github.com/netjam/netjam/summary"
)

// checkExpectations checks es against rs, through rs as summary.json
// writes it, so that an expectation names any figure by its path there.
func checkExpectations(rs *summary.RunSummary, es []scenario.Expectation) []summary.ExpectResult {
	if len(es) == 0 {
		return nil
	}
	var doc any
	b, err := json.Marshal(rs)
	if err == nil {
		err = json.Unmarshal(b, &doc)
	}
	out := make([]summary.ExpectResult, len(es))
	for i, e := range es {
		out[i] = summary.ExpectResult{Expect: e.Text}
		if err != nil {
			out[i].Error = err.Error()
			continue
		}
		check(&out[i], e, doc)
	}
	return out
}

// unitOf is the kind of a figure and the factor that turns it into the
// kind's base unit (seconds, bits per second, bytes, a fraction), from the
// key that carries its unit.
func unitOf(key string) (scenario.Dimension, float64, bool) {
	for _, u := range []struct {
		suffix string
		dim    scenario.Dimension
		scale  float64
	}{
		{"_ms", scenario.DimTime, 1e-3}, {"_ns", scenario.DimTime, 1e-9}, {"_s", scenario.DimTime, 1},
		{"_bps", scenario.DimRate, 1}, {"_ratio", scenario.DimRatio, 1}, {"_share", scenario.DimRatio, 1},
		{"_bytes", scenario.DimSize, 1},
	} {
		if strings.HasSuffix(key, u.suffix) {
			return u.dim, u.scale, true
		}
	}
	switch {
	case strings.HasPrefix(key, "bytes_"):
		return scenario.DimSize, 1, true
	case key == "fairness" || key == "utilization":
		return scenario.DimRatio, 1, true
	}
	return scenario.DimNumber, 1, false
}

// unitSuffixes are tried, in order, after a key the summary lacks: an
// expectation may say throughput for throughput_bps.
var unitSuffixes = []string{"_bps", "_ms", "_s", "_ratio", "_share", "_bytes"}

// check resolves e's path in doc (summary.json's run, decoded) and compares.
func check(r *summary.ExpectResult, e scenario.Expectation, doc any) {
	dim, scale := scenario.DimNumber, 1.0
	var figure []string
	var holder map[string]any // the mapping that holds the current key
	n := doc
	for i, seg := range e.Path {
		here := strings.Join(figure, ".")
		switch v := n.(type) {
		case map[string]any:
			key, child, err := lookupKey(v, seg, here, i == len(e.Path)-1)
			if err != "" {
				r.Error = err
				return
			}
			if d, s, ok := unitOf(key); ok {
				dim, scale = d, s
			}
			figure = append(figure, key)
			holder, n = v, child
		case []any:
			var names []string
			found := false
			for _, item := range v {
				m, _ := item.(map[string]any)
				name, _ := m["name"].(string)
				names = append(names, name)
				if name == seg && !found {
					n, found = item, true
				}
			}
			if !found {
				r.Error = fmt.Sprintf("%s has no item named %q (names: %s)", here, seg, strings.Join(names, ", "))
				return
			}
			figure = append(figure, seg)
		default:
			r.Error = fmt.Sprintf("%s is a single figure; it has no %q", here, seg)
			return
		}
	}
	r.Figure = strings.Join(figure, ".")
	// A statistic of nothing (no datagram arrived) is no figure: its
	// zeros must not pass for a small delay.
	if c, isStat := holder["count"].(float64); isStat && c == 0 && figure[len(figure)-1] != "count" {
		r.Error = fmt.Sprintf("%s has no samples (count 0)", strings.Join(figure[:len(figure)-1], "."))
		return
	}
	if figure[len(figure)-1] == "count" {
		dim, scale = scenario.DimNumber, 1 // a statistic's sample count has no unit
	}
	got, ok := n.(float64)
	if !ok {
		if m, isMap := n.(map[string]any); isMap {
			r.Error = setOfFigures(r.Figure, slices.Sorted(maps.Keys(m)))
		} else {
			r.Error = fmt.Sprintf("%s is not a number", r.Figure)
		}
		return
	}
	r.Got = &got
	r.GotText = formatFigure(got, dim, scale)
	if e.Dim != scenario.DimNumber && e.Dim != dim {
		r.Error = unitMismatch(r.Figure, dim, e)
		return
	}
	if e.Dim == scenario.DimNumber {
		r.Pass = e.Holds(got)
	} else {
		r.Pass = e.Holds(got * scale)
	}
}

// lookupKey finds seg in the mapping v found at path here: as it is, or
// with a unit suffix (throughput for throughput_bps); a drop reason that
// did not happen (the last key under a drops map) is 0. err says what is
// missing.
func lookupKey(v map[string]any, seg, here string, last bool) (key string, child any, err string) {
	if key := withUnit(seg, func(k string) bool { _, ok := v[k]; return ok }); key != "" {
		return key, v[key], ""
	}
	// A counter by reason lists the reasons that happened.
	if last && strings.HasSuffix(here, ".drops") && slices.Contains(impair.DropReasonNames(), seg) {
		return seg, 0.0, ""
	}
	return "", nil, noFigure(here, seg, slices.Sorted(maps.Keys(v)))
}

// The messages both checks give, before the run (figureProblem) and
// after it (check).

// noFigure says that the mapping at here, with keys, has no seg.
func noFigure(here, seg string, keys []string) string {
	if here == "" {
		here = "the run"
	}
	return fmt.Sprintf("%s has no figure %q (it has: %s)", here, seg, strings.Join(keys, ", "))
}

// setOfFigures says that name, with keys (none known: a map whose keys
// a run makes), is no one figure.
func setOfFigures(name string, keys []string) string {
	if len(keys) == 0 {
		return fmt.Sprintf("%s is a set of figures: name one, as %s.NAME", name, name)
	}
	return fmt.Sprintf("%s is a set of figures (%s): name one, as %s.%s", name, strings.Join(keys, ", "), name, keys[0])
}

// unitMismatch says that name, a figure of kind dim, cannot be compared
// with e's value.
func unitMismatch(name string, dim scenario.Dimension, e scenario.Expectation) string {
	return fmt.Sprintf("%s is %s, but %s is %s", name, dimName(dim), strings.TrimSpace(e.Text[strings.LastIndexAny(e.Text, "<>=!")+1:]), e.Dim)
}

// withUnit returns the key that seg names among those has reports: seg
// itself, or seg with a unit suffix (throughput for throughput_bps); ""
// when none.
func withUnit(seg string, has func(string) bool) string {
	if has(seg) {
		return seg
	}
	for _, suf := range unitSuffixes {
		if has(seg + suf) {
			return seg + suf
		}
	}
	return ""
}

// dimName names a figure's kind in messages.
func dimName(d scenario.Dimension) string {
	if d == scenario.DimNumber {
		return "a count or a plain number"
	}
	return d.String()
}

// formatFigure writes a figure with its unit, as a person reads it.
func formatFigure(v float64, dim scenario.Dimension, scale float64) string {
	base := v * scale
	switch dim {
	case scenario.DimTime:
		switch {
		case base != 0 && base < 1e-3:
			return strconv.FormatFloat(base*1e6, 'f', 1, 64) + "us"
		case base < 1:
			return strconv.FormatFloat(base*1e3, 'f', 2, 64) + "ms"
		}
		return strconv.FormatFloat(base, 'f', 3, 64) + "s"
	case scenario.DimRate:
		for _, u := range []struct {
			mult float64
			name string
		}{{1e9, "Gbps"}, {1e6, "Mbps"}, {1e3, "kbps"}} {
			if base >= u.mult {
				return strconv.FormatFloat(base/u.mult, 'f', 2, 64) + u.name
			}
		}
		return strconv.FormatFloat(base, 'f', 0, 64) + "bps"
	case scenario.DimSize:
		for _, u := range []struct {
			mult float64
			name string
		}{{1e9, "GB"}, {1e6, "MB"}, {1e3, "kB"}} {
			if base >= u.mult {
				return strconv.FormatFloat(base/u.mult, 'f', 2, 64) + u.name
			}
		}
		return strconv.FormatFloat(base, 'f', 0, 64) + "B"
	case scenario.DimRatio:
		return strconv.FormatFloat(base*100, 'f', 2, 64) + "%"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// PrintExpectations writes a table of every run's expectations: what was
// expected, what the run got, and whether it held. It writes nothing when
// the scenario has none.
func PrintExpectations(w io.Writer, sum *summary.Summary) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	printed := false
	for _, r := range sum.Runs {
		for _, e := range r.Expectations {
			if !printed {
				fmt.Fprintln(tw, "\nvariant\texpectation\tgot\tresult")
				printed = true
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", dash(r.Variant), e.Expect, dash(e.GotText), resultOf(e))
		}
	}
	return tw.Flush()
}

// ExpectationFailures returns one line per expectation that did not hold,
// naming the run, for the final error message.
func ExpectationFailures(sum *summary.Summary) []string {
	var out []string
	for _, r := range sum.Runs {
		name := sum.Scenario
		if r.Variant != "" {
			name += "/" + r.Variant
		}
		for _, e := range r.Expectations {
			if !e.Pass {
				out = append(out, fmt.Sprintf("%s: %s: %s", name, e.Expect, resultOf(e)))
			}
		}
	}
	return out
}

// resultOf says how an expectation fared, in a few words.
func resultOf(e summary.ExpectResult) string {
	switch {
	case e.Error != "":
		return "not checked: " + e.Error
	case !e.Pass:
		return "FAIL (got " + e.GotText + ")"
	}
	return "pass"
}

// dash is s, or "-" for an empty s (the variant of a plan without any).
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
