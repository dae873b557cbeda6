package report

import (
	"fmt"
	"image/color"
	"regexp"
	"sort"

	"gonum.org/v1/plot/vg/draw"
)

// A figure is one image: a header (the scenario, what is drawn, and one
// legend for the whole figure), then a grid of panels with one row per
// run (variant) and one column per facet. The panels of a column share
// their axes, so the variants compare at a glance, and a series keeps its
// colour in every panel.
//
// A pooled figure has a single row instead, whose panels hold the series
// of every run, labelled with the variant: the CDF, where comparing
// variants on the same axes is the point.
type figure struct {
	name   string // file name without extension
	title  string // what is drawn; the header adds the scenario
	pooled bool
	facets []facet
	// note, when set, is a sentence under the legend saying how to read
	// what the figure shows.
	note string
}

// A facet is one column of a figure: what each run shows in it.
type facet struct {
	title          string // panel title, after the variant
	xLabel, yLabel string // with units
	// xFrom0 and yFrom0 start the axis at 0 even when the data does not
	// (time, rates, queue lengths); yMax, when positive, fixes the top
	// (a CDF's 1).
	xFrom0, yFrom0 bool
	yMax           float64
	// yInteger keeps the y ticks on whole numbers (packets, segments).
	yInteger bool
	// clipPeaks caps the y axis above the column's usual values when a
	// few samples tower over them (a burst of goodput when a TCP
	// receiver's hole is filled), and says so in the panel's title.
	clipPeaks bool
	curves    func(r *run) []curve
	// note, if set, returns text appended to the panel's title (a drop
	// count, say).
	note func(r *run) string
}

// A curve is one series of a panel.
type curve struct {
	// key picks the colour: curves with the same key have the same colour
	// in every panel of the figure. The legend has one entry per key and
	// kind (line or markers) with a non-empty label.
	key, label string
	pts        []point
	// glyph, when set, draws the points as markers instead of a line.
	glyph draw.GlyphDrawer
	// color, when set, overrides the key's colour.
	color color.Color
}

// figureBuilders make the figures of a folder, in the order of the report.
// Each returns nil when the folder has nothing for it to draw (no UDP
// flow, no bottleneck queue). A new kind of panel (the Wi-Fi cell's
// airtime and retries, say) is one more builder here: it reads its own
// kinds of timeseries.csv rows and returns its figures; the drawing, the
// files and report.html follow.
var figureBuilders = []func(f *folder) []figure{
	throughputFigures,
	delayFigures,
	tcpFigures,
	queueFigures,
	wifiFigures,
}

// figures returns every figure the folder has data for.
func figures(f *folder) []figure {
	var out []figure
	for _, b := range figureBuilders {
		out = append(out, b(f)...)
	}
	return out
}

// flowCurves returns one line per flow of kind in r, scaled by scale.
func flowCurves(kind string, scale float64) func(r *run) []curve {
	return func(r *run) []curve {
		var cs []curve
		for _, name := range r.series.names(kind) {
			cs = append(cs, curve{key: name, label: name, pts: scaled(r.series.get(kind, name), scale)})
		}
		return cs
	}
}

// scaled returns pts with every value multiplied by s.
func scaled(pts []point, s float64) []point {
	if s == 1 {
		return pts
	}
	out := make([]point, len(pts))
	for i, p := range pts {
		out[i] = point{p.t, p.v * s}
	}
	return out
}

// hasKind reports whether any run of f has rows of kind.
func hasKind(f *folder, kind string) bool {
	for _, r := range f.runs {
		if len(r.series.names(kind)) > 0 {
			return true
		}
	}
	return false
}

const timeLabel = "time since the run's start (s)"

func throughputFigures(f *folder) []figure {
	if !hasKind(f, kindThroughput) {
		return nil
	}
	flowsOf := flowCurves(kindThroughput, 1e-6)
	return []figure{{
		name:  "throughput",
		title: "throughput per flow",
		// A TCP receiver holds what arrives behind a lost segment until
		// the retransmission fills the hole, then delivers it all at
		// once: the curve spikes above the link's rate (14 Mbit/s on a
		// 1 Mbit/s link) with nothing wrong.
		note: "Payload delivered in order to the receiving application per sample interval. " +
			"After a loss is repaired, a TCP receiver delivers at once the data it held behind the hole: " +
			"a spike above the link's rate, not a burst on the link.",
		facets: []facet{{
			xLabel: timeLabel, yLabel: "throughput (Mbit/s)",
			xFrom0: true, yFrom0: true, clipPeaks: true,
			// A trace-driven link's capacity is drawn with the flows,
			// in grey: what they could have had.
			curves: func(r *run) []curve {
				cs := flowsOf(r)
				for _, d := range r.series.names(kindCapacity) {
					cs = append(cs, curve{key: d + " capacity", label: d + " capacity (trace, IP bits)",
						pts: scaled(r.series.get(kindCapacity, d), 1e-6), color: color.Gray{Y: 150}})
				}
				return cs
			},
		}},
	}}
}

// delayFigures draws the UDP flows' one-way delay over time and its CDF.
// timeseries.csv has the mean delay of each sample interval, not every
// datagram's delay, so the CDF is that of the interval means (each
// interval counts once, whatever its number of datagrams); the exact
// per-datagram p50, p95 and p99 of summary.json are marked on it.
func delayFigures(f *folder) []figure {
	if !hasKind(f, kindDelay) {
		return nil
	}
	over := figure{
		name:  "delay",
		title: "one-way delay of the UDP flows (mean per sample interval)",
		facets: []facet{{
			xLabel: timeLabel, yLabel: "one-way delay (ms)",
			xFrom0: true, yFrom0: true,
			curves: flowCurves(kindDelay, 1),
		}},
	}
	cdf := figure{
		name:   "delay-cdf",
		title:  "CDF of the UDP flows' one-way delay (means per sample interval)",
		pooled: true,
		facets: []facet{{
			xLabel: "one-way delay (ms)", yLabel: "share of sample intervals",
			xFrom0: true, yFrom0: true, yMax: 1,
			curves: func(r *run) []curve {
				var cs []curve
				for _, name := range r.series.names(kindDelay) {
					key := name
					if r.info.Variant != "" {
						key = r.info.Variant + ": " + name
					}
					cs = append(cs, curve{key: key, label: key, pts: cdfPoints(r.series.get(kindDelay, name))})
					for _, fl := range r.info.Flows {
						if d := udpOf(fl).DelayMs; fl.Name == name && d.Count > 0 {
							cs = append(cs, curve{key: key, glyph: draw.RingGlyph{},
								pts: []point{{d.P50, 0.50}, {d.P95, 0.95}, {d.P99, 0.99}}})
						}
					}
				}
				if len(cs) > 0 {
					cs = append(cs, curve{key: "quantiles", label: "p50, p95, p99 of every datagram (summary.json)",
						glyph: draw.RingGlyph{}, color: color.Black})
				}
				return cs
			},
		}},
	}
	return []figure{over, cdf}
}

// cdfPoints returns the empirical CDF of the values of pts as a step line:
// x the sorted values, y the share of values at most x.
func cdfPoints(pts []point) []point {
	if len(pts) == 0 {
		return nil
	}
	v := make([]float64, len(pts))
	for i, p := range pts {
		v[i] = p.v
	}
	sort.Float64s(v)
	n := float64(len(v))
	out := make([]point, 0, 2*len(v))
	for i, x := range v {
		out = append(out, point{x, float64(i) / n}, point{x, float64(i+1) / n})
	}
	return out
}

func tcpFigures(f *folder) []figure {
	var out []figure
	if hasKind(f, kindSRTT) {
		out = append(out, figure{
			name:  "rtt",
			title: "smoothed RTT of the TCP flows (sender's srtt)",
			facets: []facet{{
				xLabel: timeLabel, yLabel: "smoothed RTT (ms)",
				xFrom0: true, yFrom0: true,
				curves: flowCurves(kindSRTT, 1),
			}},
		})
	}
	if hasKind(f, kindCwnd) {
		out = append(out, figure{
			name:  "cwnd",
			title: "congestion window of the TCP flows",
			facets: []facet{{
				xLabel: timeLabel, yLabel: "cwnd (segments)",
				xFrom0: true, yFrom0: true, yInteger: true,
				curves: flowCurves(kindCwnd, 1),
			}},
		})
	}
	return out
}

// queueFigures draws, for each direction with a bottleneck queue, its
// length and its sojourn time, with a cross on each sample interval that
// had drops (any reason: the drops kind counts them all).
func queueFigures(f *folder) []figure {
	var dirs []string
	seen := map[string]bool{}
	for _, r := range f.runs {
		for _, d := range r.series.names(kindQueue) {
			if !seen[d] {
				seen[d] = true
				dirs = append(dirs, d)
			}
		}
	}
	var out []figure
	for _, d := range dirs {
		note := func(r *run) string {
			var n float64
			for _, p := range r.series.get(kindDrops, d) {
				n += p.v
			}
			return fmt.Sprintf("%.0f drops", n)
		}
		out = append(out, figure{
			name:  "queue-" + fileSafe(d),
			title: d + " bottleneck queue",
			facets: []facet{{
				title:  "queue length",
				xLabel: timeLabel, yLabel: "queue length (packets)",
				xFrom0: true, yFrom0: true, yInteger: true,
				curves: queueCurves(d, kindQueue, "queue length"),
				note:   note,
			}, {
				title:  "sojourn time",
				xLabel: timeLabel, yLabel: "sojourn time (ms)",
				xFrom0: true, yFrom0: true,
				curves: queueCurves(d, kindSojourn, "sojourn time (mean per interval)"),
			}},
		})
	}
	return out
}

// queueCurves returns direction dir's series of kind, and a cross on it
// at each sample with drops in its interval.
func queueCurves(dir, kind, label string) func(r *run) []curve {
	return func(r *run) []curve {
		pts := r.series.get(kind, dir)
		if len(pts) == 0 {
			return nil
		}
		at := make(map[float64]float64, len(pts))
		for _, p := range pts {
			at[p.t] = p.v
		}
		var marks []point
		for _, p := range r.series.get(kindDrops, dir) {
			if p.v <= 0 {
				continue
			}
			// The sampler writes a direction's rows at one instant, so
			// the drop count and the value share their time; a missing
			// value (no packet dequeued) puts the mark on the axis.
			marks = append(marks, point{p.t, at[p.t]})
		}
		return []curve{
			{key: kind, label: label, pts: pts},
			{key: "drops", label: "drops in the interval", pts: marks, glyph: draw.CrossGlyph{}},
		}
	}
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// fileSafe turns a name into something safe in a file name.
func fileSafe(s string) string {
	s = unsafeChars.ReplaceAllString(s, "_")
	if s == "" || s == "." || s == ".." {
		return "_"
	}
	return s
}

// The Wi-Fi cell's kinds of timeseries.csv rows, one per station and "ap".
const (
	kindAirtime    = "airtime_share"
	kindCollisions = "collisions"
)

// wifiFigures draws, for a scenario with a Wi-Fi cell, each station's (and
// the access point's) share of the medium's time and its collisions, per
// sample interval.
func wifiFigures(f *folder) []figure {
	if !hasKind(f, kindAirtime) {
		return nil
	}
	return []figure{{
		name:  "wifi",
		title: "Wi-Fi medium: airtime share and collisions per station",
		facets: []facet{{
			title:  "airtime",
			xLabel: timeLabel, yLabel: "airtime share (%)",
			xFrom0: true, yFrom0: true,
			curves: flowCurves(kindAirtime, 100),
		}, {
			title:  "collisions",
			xLabel: timeLabel, yLabel: "collisions per interval",
			xFrom0: true, yFrom0: true, yInteger: true,
			curves: flowCurves(kindCollisions, 1),
		}},
	}}
}
