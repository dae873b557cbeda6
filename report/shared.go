package report

import (
	"bytes"
	"encoding/json"
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"

	"github.com/netjam/netjam/flows"
	"github.com/netjam/netjam/summary"
)

// What the report lends to the pages drawn elsewhere (a merged sweep's,
// package sweep): a run's figures as numbers, and the look of its plots,
// so that a sweep's figures read as a run's do.

// MaxSummarySize bounds summary.json, read whole: some KB, some MB for
// thousands of flows or events.
const MaxSummarySize = maxSummarySize

// RunFigures returns the figures of each run of a summary.json, named by
// their path in it (flows.bulk.throughput_bps, links.uplink.drops,
// expect.NAME as 1 or 0): the numbers of a sweep's table.
func RunFigures(summaryJSON []byte) ([]map[string]float64, error) {
	var sum summary.Summary
	if err := json.Unmarshal(summaryJSON, &sum); err != nil {
		return nil, err
	}
	out := make([]map[string]float64, len(sum.Runs))
	for i, ri := range sum.Runs {
		out[i] = figuresOf(ri)
	}
	return out, nil
}

// figuresOf picks a run's figures for a sweep's table, named by their
// path in summary.json.
func figuresOf(ri summary.RunSummary) map[string]float64 {
	m := map[string]float64{"duration_s": ri.DurationS}
	if ri.Fairness != nil {
		m["fairness"] = *ri.Fairness
	}
	for _, f := range ri.Flows {
		p := "flows." + f.Name + "."
		m[p+"throughput_bps"] = f.ThroughputBps
		switch f.Type {
		case flows.TypeTCP:
			t := tcpOf(f)
			if t.CompletionS > 0 {
				m[p+"completion_s"] = t.CompletionS
			}
			m[p+"bytes_received"] = float64(t.BytesReceived)
			m[p+"retransmissions"] = float64(t.Retransmissions)
			m[p+"timeouts"] = float64(t.Timeouts)
			if t.RTTMs.Count > 0 {
				m[p+"rtt_ms.p50"] = t.RTTMs.P50
			}
		case flows.TypeUDP:
			u := udpOf(f)
			m[p+"packets_sent"] = float64(u.PacketsSent)
			m[p+"packets_received"] = float64(u.PacketsReceived)
			m[p+"loss_ratio"] = u.LossRatio
			m[p+"jitter_ms"] = u.JitterMs
			if u.DelayMs.Count > 0 {
				m[p+"delay_ms.p50"] = u.DelayMs.P50
				m[p+"delay_ms.p95"] = u.DelayMs.P95
			}
		}
	}
	for _, l := range ri.Links {
		p := "links." + l.Name + "."
		m[p+"packets_out"] = float64(l.PacketsOut)
		m[p+"achieved.loss_ratio"] = l.Achieved.LossRatio
		var drops uint64
		for _, n := range l.Drops {
			drops += n
		}
		m[p+"drops"] = float64(drops)
		if l.QueueDelayMs.Count > 0 {
			m[p+"queue_delay_ms.p95"] = l.QueueDelayMs.P95
		}
	}
	for _, e := range ri.Expectations {
		if e.Pass {
			m["expect."+e.Expect] = 1
		} else {
			m["expect."+e.Expect] = 0
		}
	}
	return m
}

// The size of a figure's images, in pixels.
const (
	FigureWidthPx  = widthPx
	FigureHeightPx = heightPx
)

// Images draws p as report's figures are drawn, FigureWidthPx by
// FigureHeightPx: a PNG and an SVG.
func Images(p *plot.Plot) (pngImage, svgImage []byte, err error) {
	var out [2][]byte
	for i, ext := range []string{formatPNG, formatSVG} {
		wt, err := p.WriterTo(widthPx*px, heightPx*px, ext)
		if err != nil {
			return nil, nil, err
		}
		var buf bytes.Buffer
		if _, err := wt.WriteTo(&buf); err != nil {
			return nil, nil, err
		}
		out[i] = buf.Bytes()
	}
	return out[0], out[1], nil
}

// LineColour is the colour of a figure's line i, from a colour-blind safe
// palette; past its end LineDashes(i) tells lines of one colour apart.
func LineColour(i int) color.Color { return palette[i%len(palette)] }

// LineDashes is the dash pattern of a figure's line i: none for the
// palette's first round of colours.
func LineDashes(i int) []vg.Length { return dashes[(i/len(palette))%len(dashes)] }

// Ticks places about n labelled ticks on round values; with integer, on
// whole numbers only (a count).
func Ticks(n int, integer bool) plot.Ticker { return niceTicks{n: n, integer: integer} }

// FileSafe turns a name into one safe in a file name.
func FileSafe(s string) string { return fileSafe(s) }
