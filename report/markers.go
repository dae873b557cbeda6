package report

import (
	"image/color"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/netjam/netjam/summary"
)

// Markers show a run's timeline (summary.json's timeline, the link's
// changes as they applied) in every panel over time: a thin vertical line
// at a step, a shaded band over a `for` window (a change and, later, the
// change back) or a ramp (its steps, 10 ms or less apart), each labelled
// with the key and the value it set.

// marker is a line (from == to) or a band, in seconds.
type marker struct {
	from, to float64
	label    string
}

// rampGap is the longest gap between two steps of one ramp (the timeline
// steps ramps every 10 ms at most), with room for float rounding.
const rampGap = 0.0105

// markersOf groups a run's changes into markers, per key in time order.
func markersOf(tl []summary.TimelineEvent) []marker {
	byKey := map[string][]summary.TimelineEvent{}
	var keys []string
	for _, e := range tl {
		if _, ok := byKey[e.Key]; !ok {
			keys = append(keys, e.Key)
		}
		byKey[e.Key] = append(byKey[e.Key], e)
	}
	var out []marker
	for _, k := range keys {
		es := byKey[k]
		for i := 0; i < len(es); {
			e := es[i]
			j := i
			for j+1 < len(es) && es[j+1].TimeS-es[j].TimeS <= rampGap {
				j++
			}
			switch {
			case j > i: // a ramp: from its first step to its last
				out = append(out, marker{e.TimeS, es[j].TimeS, k + " → " + valueLabel(es[j].New)})
				i = j + 1
			case i+1 < len(es) && es[i+1].Old == e.New && es[i+1].New == e.Old: // a window
				out = append(out, marker{e.TimeS, es[i+1].TimeS, k + "=" + valueLabel(e.New)})
				i += 2
			default:
				out = append(out, marker{e.TimeS, e.TimeS, k + "=" + valueLabel(e.New)})
				i++
			}
		}
	}
	return out
}

func valueLabel(v string) string {
	if v == "" {
		return "default"
	}
	// A trace is named by its file, whose folder the resolved scenario
	// spells out in full.
	if i := strings.Index(v, "trace: "); i >= 0 {
		rest := v[i+len("trace: "):]
		end := strings.IndexAny(rest, ",}")
		if end < 0 {
			end = len(rest)
		}
		v = v[:i+len("trace: ")] + filepath.Base(rest[:end]) + rest[end:]
	}
	return v
}

var (
	markerLine = color.NRGBA{R: 0x55, G: 0x55, B: 0x55, A: 0xff}
	markerBand = color.NRGBA{R: 0x88, G: 0x88, B: 0x88, A: 0x30}
)

// addMarkers draws ms on p over [ymin, ymax], behind what is added later.
func addMarkers(p *plot.Plot, ms []marker, ymin, ymax float64) error {
	if len(ms) == 0 {
		return nil
	}
	var lx []plotter.XY
	var lt []string
	at := map[float64]int{} // label index by x: changes of one instant share a label, a line each
	for _, m := range ms {
		if m.to > m.from {
			band, err := plotter.NewPolygon(plotter.XYs{{X: m.from, Y: ymin}, {X: m.to, Y: ymin}, {X: m.to, Y: ymax}, {X: m.from, Y: ymax}})
			if err != nil {
				return err
			}
			band.Color = markerBand
			band.LineStyle.Width = 0
			p.Add(band)
		} else {
			l, err := plotter.NewLine(plotter.XYs{{X: m.from, Y: ymin}, {X: m.from, Y: ymax}})
			if err != nil {
				return err
			}
			l.LineStyle.Color = markerLine
			l.LineStyle.Width = 0.75 * px
			l.LineStyle.Dashes = []vg.Length{3 * px, 2 * px}
			p.Add(l)
		}
		if i, ok := at[m.from]; ok {
			lt[i] += "\n" + m.label
			continue
		}
		at[m.from] = len(lt)
		lx = append(lx, plotter.XY{X: m.from, Y: ymax})
		lt = append(lt, m.label)
	}
	labels, err := plotter.NewLabels(plotter.XYLabels{XYs: lx, Labels: lt})
	if err != nil {
		return err
	}
	for i := range labels.TextStyle {
		labels.TextStyle[i].Font = sansFont
		labels.TextStyle[i].Font.Size = 9 * px
		labels.TextStyle[i].Color = markerLine
		labels.TextStyle[i].XAlign, labels.TextStyle[i].YAlign = draw.XLeft, draw.YTop
	}
	labels.Offset = vg.Point{X: 3 * px, Y: -2 * px}
	p.Add(labels)
	return nil
}
