package report

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"html/template"
	"strings"

	"github.com/netjam/netjam/flows"
	"github.com/netjam/netjam/outdir"
	"github.com/netjam/netjam/stats"
	"github.com/netjam/netjam/summary"
	"github.com/netjam/netjam/wifi"
)

// ReportFile is the name of the page HTML writes.
const ReportFile = "report.html"

// HTML writes report.html into the folder d, the output folder of a run: one page
// that needs nothing else (no network, no script, no other file), with
// the run's identity (scenario, netjam version, seeds), the summary tables
// as netjam run prints them, every figure of Plot embedded as a PNG data:
// URI (with a link to the SVG file beside it, when Plot wrote one), the link
// statistics in full, and the scenario*.yaml files of the folder, the
// scenario as run. version is the netjam that draws the report; the
// version that ran is taken from summary.json. When the folder lacks
// summary.json or timeseries.csv the error wraps ErrNotRun.
//
// HTML draws the figures itself, so it does not need Plot to run first.
func HTML(d *outdir.Dir, version string) error {
	f, err := load(d)
	if err != nil {
		return err
	}
	page := pageData{
		Scenario:      f.sum.Scenario,
		RunVersion:    f.sum.Version,
		ReportVersion: version,
		Scenarios:     f.scenarios,
	}
	for _, r := range f.runs {
		page.Runs = append(page.Runs, runRow{Variant: r.title(), Seed: r.info.Seed, DurationS: r.info.DurationS})
		for _, o := range r.info.CouldNotKeepUp {
			page.Busy = append(page.Busy, busyRow{Variant: r.info.Variant, Message: o.Message})
		}
		page.Expectations = append(page.Expectations, expectRows(r)...)
		page.Flows = append(page.Flows, flowRows(r)...)
		if fr := r.info.Fairness; fr != nil {
			page.Fairness = append(page.Fairness, fmt.Sprintf("%s: fairness (Jain's index) %.3f among the TCP flows sharing a direction: %s",
				r.title(), *fr, strings.Join(r.info.FairnessFlows, ", ")))
		}
		page.Links = append(page.Links, linkRows(r)...)
		for _, p := range r.info.Paths {
			page.Paths = append(page.Paths, pathRow{Variant: r.title(), Path: p.Name, Via: strings.Join(p.Via, " > "), Match: p.Match,
				Servers: dash(strings.Join(p.Servers, " ")), Flows: dash(strings.Join(p.Flows, " "))})
		}
		page.WiFi = append(page.WiFi, wifiRows(r)...)
		for _, l := range r.info.Links {
			page.LinkStats = append(page.LinkStats, linkStats(r, l))
		}
	}
	for _, ri := range f.skipped {
		v := ri.Variant
		if v == "" {
			v = "-"
		}
		page.Runs = append(page.Runs, runRow{Variant: v, Seed: ri.Seed, Skipped: ri.Skipped})
	}
	for _, fig := range figures(f) {
		b, err := render(f, &fig, formatPNG)
		if err != nil {
			return fmt.Errorf("drawing %s: %w", fig.name, err)
		}
		w, h := fig.size(len(f.runs))
		fd := figureData{
			Name:  fig.name,
			Title: fig.title,
			// A whole attribute, so that html/template leaves the base64
			// as it is (as a URL it would escape every "+" as "&#43;");
			// base64 has no character that needs escaping in a quoted
			// attribute.
			Src: template.HTMLAttr(`src="data:image/png;base64,` + base64.StdEncoding.EncodeToString(b) + `"`),
			W:   int(w/px + 0.5), H: int(h/px + 0.5),
		}
		if svg := fig.name + "." + formatSVG; isFile(d, svg) {
			fd.SVG = svg
		}
		page.Figures = append(page.Figures, fd)
	}
	var buf bytes.Buffer
	if err := pageTemplate.Execute(&buf, page); err != nil {
		return err
	}
	return d.WriteFile(ReportFile, buf.Bytes())
}

// pageData is what the page template shows.
type pageData struct {
	Scenario      string
	RunVersion    string
	ReportVersion string
	// Busy are the signs, per run, that netjam could not keep up: the
	// banner at the top, so that figures the machine shaped are not
	// read as the path's.
	Busy         []busyRow
	Runs         []runRow
	Fairness     []string // one line per run whose flows compete
	Expectations []expectRow
	Flows        []flowRow
	Links        []linkRow
	Paths        []pathRow
	WiFi         []wifiRow
	LinkStats    []linkStat
	Figures      []figureData
	Scenarios    []scenarioFile
}

// pathRow is a path of a run with several links, as netjam run's paths
// table has it.
type pathRow struct {
	Variant, Path, Via, Match, Servers, Flows string
}

// busyRow is a sign that netjam could not keep up in a run.
type busyRow struct{ Variant, Message string }

type runRow struct {
	Variant   string
	Seed      uint64
	DurationS float64
	Skipped   string // why the run did not happen; "" when it did
}

// expectRow is one expectation checked against a run.
type expectRow struct {
	Variant, Expect, Got, Result, Error string
	Pass                                bool
}

// expectRows returns r's expectations, in the scenario's order.
func expectRows(r *run) []expectRow {
	var out []expectRow
	for _, e := range r.info.Expectations {
		row := expectRow{Variant: r.title(), Expect: e.Expect, Got: dash(e.GotText), Pass: e.Pass, Error: e.Error, Result: "pass"}
		switch {
		case e.Error != "":
			row.Result = "not checked"
		case !e.Pass:
			row.Result = "FAIL"
		}
		out = append(out, row)
	}
	return out
}

// flowRow has the columns of netjam run's flow table.
type flowRow struct {
	Variant, Flow, Type, CC, Mbps, Share, Done, Retrans, RTO, Lost, Delay, Jitter string
}

// wifiRow has the columns of netjam run's Wi-Fi table.
type wifiRow struct {
	Variant, Station, Attempts, OK, Collisions, Retries, Drops, Airtime, Mbps, Delay, Busy string
}

// wifiRows returns one row per Wi-Fi station and the AP of r, none
// without a cell.
func wifiRows(r *run) []wifiRow {
	w := r.info.WiFi
	if w == nil {
		return nil
	}
	var rows []wifiRow
	for _, st := range stations(w) {
		rows = append(rows, wifiRow{
			Variant: r.title(), Station: st.name,
			Attempts: fmt.Sprint(st.Attempts), OK: fmt.Sprint(st.Successes), Collisions: fmt.Sprint(st.Collisions),
			Retries: fmt.Sprint(st.Retries), Drops: fmt.Sprint(st.drops), Airtime: fmt.Sprintf("%.1f", 100*st.AirtimeShare),
			Mbps: fmt.Sprintf("%.2f", st.Throughput/1e6), Delay: st.delay, Busy: fmt.Sprintf("%.1f", 100*w.Utilization),
		})
	}
	return rows
}

// stationRow is a station's (or the AP's) counters with the cells both
// tables compute from them.
type stationRow struct {
	wifi.StationStats
	name  string // "ap" for the AP
	drops uint64 // of every reason
	delay string // access delay "mean/p95" in ms, or "-"
}

// stations are the cell's stations then its AP, as the tables list them.
func stations(w *wifi.Stats) []stationRow {
	var rows []stationRow
	for i, st := range append(append([]wifi.StationStats(nil), w.Stations...), w.AP) {
		row := stationRow{StationStats: st, name: st.Name, delay: "-"}
		if i == len(w.Stations) {
			row.name = "ap"
		}
		for _, n := range st.Drops {
			row.drops += n
		}
		if st.Delay.Count > 0 {
			row.delay = fmt.Sprintf("%.2f/%.2f", st.Delay.Mean/1e6, st.Delay.P95/1e6)
		}
		rows = append(rows, row)
	}
	return rows
}

// linkRow has the columns of netjam run's link table.
type linkRow struct {
	Variant, Link, PacketsIn, PacketsOut, Loss, Drops, Rate, Queue, Added, Late, Configured string
}

// linkStat is one direction of one run in full.
type linkStat struct {
	Variant, Link, Configured string
	Counters                  [][2]string // name, value
	Delays                    []distRow
	Stages                    []stageRow
}

type distRow struct {
	Name                                 string
	Count                                uint64
	Mean, Min, P50, P95, P99, Max, Empty string
}

type stageRow struct {
	Name, PacketsIn, PacketsOut, Drops, Other string
}

type figureData struct {
	Name, Title string
	Src         template.HTMLAttr // src="data:image/png;base64,..."
	SVG         string            // the SVG file beside the page, "" when there is none
	W, H        int
	// Note, when not empty, says what the figure leaves out (sweep.html).
	Note string
}

// isFile reports whether the folder d has a regular file name.
func isFile(d *outdir.Dir, name string) bool {
	st, err := d.Stat(name)
	return err == nil && st.Mode().IsRegular()
}

// flowRows formats the run's flows as netjam run's table does.
func flowRows(r *run) []flowRow {
	var rows []flowRow
	total := 0.0
	for _, f := range r.info.Flows {
		total += f.ThroughputBps
	}
	for _, f := range r.info.Flows {
		row := flowRow{
			Variant: r.title(), Flow: f.Name, Type: f.Type, CC: dash(f.CC),
			Mbps: fmt.Sprintf("%.2f", f.ThroughputBps/1e6), Share: share(f.ThroughputBps, total),
			Done: "-", Retrans: "-", RTO: "-", Lost: "-", Delay: "-", Jitter: "-",
		}
		if f.Path != "" {
			row.Flow += " (path " + f.Path + ")"
		}
		switch f.Type {
		case flows.TypeTCP:
			t := tcpOf(f)
			row.Done = done(t)
			row.Retrans, row.RTO = fmt.Sprint(t.Retransmissions), fmt.Sprint(t.Timeouts)
			if t.Stalls > 0 {
				// A stall is the sending stack's defect: see flows.Stall.
				row.RTO += fmt.Sprintf(" STALL %.1fs", t.StalledS)
			}
			if t.RTTMs.Count > 0 {
				row.Delay = fmt.Sprintf("rtt %.1f/%.1f", t.RTTMs.Mean, t.RTTMs.P95)
			}
		case flows.TypeUDP:
			u := udpOf(f)
			lost := u.Lost
			if lost == 0 && u.InFlight == 0 {
				// A summary from before lost and in_flight.
				lost = u.PacketsSent - min(u.PacketsReceived, u.PacketsSent)
			}
			row.Lost = fmt.Sprintf("%d/%d", lost, u.PacketsSent) + lostExtras(u)
			row.Delay = fmt.Sprintf("%.1f/%.1f", u.DelayMs.Mean, u.DelayMs.P95)
			row.Jitter = fmt.Sprintf("%.2f", u.JitterMs)
		}
		rows = append(rows, row)
	}
	return rows
}

// done is a TCP flow's "done s" cell, as netjam run's table has it: its
// completion time, or how far a flow the run's end cut short got. A flow
// has a completion time only once it completed, so that one counts as
// completed too: a summary.json from before "completed" was written has
// a completion time for exactly the flows that completed.
func done(f flows.TCPSummary) string {
	completed := f.Completed || f.CompletionS > 0
	switch {
	case completed:
		return fmt.Sprintf("%.2f", f.CompletionS)
	case f.ResetAtS > 0:
		return fmt.Sprintf("reset at %.2f", f.ResetAtS) // by the timeline
	case f.Size == 0:
		return "-" // bounded by a duration: done when its sender stopped
	}
	return flows.Unfinished(f.BytesReceived, f.Size)
}

// share is a flow's part of its run's total throughput, as a percentage.
func share(bps, total float64) string {
	if total <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*bps/total)
}

// linkRows formats the run's directions as netjam run's table does.
func linkRows(r *run) []linkRow {
	var rows []linkRow
	for _, l := range r.info.Links {
		rate := "-"
		if l.Configured.RateBps > 0 {
			rate = fmt.Sprintf("%.2f (%.2f)", l.Achieved.RateBps/1e6, float64(l.Configured.RateBps)/1e6)
		}
		late := "-"
		if l.LatenessMs.Count > 0 {
			late = fmt.Sprintf("%.2f", l.LatenessMs.P99)
		}
		rows = append(rows, linkRow{
			Variant: r.title(), Link: l.Name,
			PacketsIn: fmt.Sprint(l.PacketsIn), PacketsOut: fmt.Sprint(l.PacketsOut),
			Loss:  fmt.Sprintf("%.2f (%.2f)", 100*l.Achieved.LossRatio, 100*l.Configured.LossRatio),
			Drops: formatDrops(l.Drops), Rate: rate,
			Queue: pair(l.QueueDelayMs), Added: pair(l.TransitMs), Late: late,
			Configured: l.Configured.Summary,
		})
	}
	return rows
}

// linkStats lists everything summary.json says of direction l.
func linkStats(r *run, l summary.LinkSummary) linkStat {
	s := linkStat{Variant: r.title(), Link: l.Name, Configured: l.Configured.Summary}
	add := func(name string, v any) { s.Counters = append(s.Counters, [2]string{name, fmt.Sprint(v)}) }
	add("packets in", l.PacketsIn)
	add("bytes in", l.BytesIn)
	add("packets out", l.PacketsOut)
	add("bytes out", l.BytesOut)
	add("drops", formatDrops(l.Drops))
	add("loss % (configured)", fmt.Sprintf("%.3f (%.3f)", 100*l.Achieved.LossRatio, 100*l.Configured.LossRatio))
	if l.Configured.RateBps > 0 {
		add("Mbit/s while busy (configured)", fmt.Sprintf("%.3f (%.3f)", l.Achieved.RateBps/1e6, float64(l.Configured.RateBps)/1e6))
	}
	add("duplicated", l.Duplicated)
	add("corrupted", l.Corrupted)
	add("reordered", l.Reordered)
	add("ECN marked", l.ECNMarked)
	add("delivery drops (receiver overloaded)", l.DeliveryDrops)
	if l.InputWaits > 0 {
		add("senders held back (machine the limit)", l.InputWaits)
	}
	if l.DeliveryWaits > 0 {
		add("held back by the receiver (machine the limit)", l.DeliveryWaits)
	}
	for _, d := range []struct {
		name string
		d    stats.Summary
	}{
		{"queue sojourn (ms)", l.QueueDelayMs},
		{"added delay (ms)", l.TransitMs},
		{"scheduler lateness (ms)", l.LatenessMs},
	} {
		row := distRow{Name: d.name, Count: d.d.Count}
		if d.d.Count == 0 {
			row.Empty = "no packets"
		} else {
			ms := func(v float64) string { return fmt.Sprintf("%.3f", v) }
			row.Mean, row.Min, row.P50, row.P95, row.P99, row.Max = ms(d.d.Mean), ms(d.d.Min), ms(d.d.P50), ms(d.d.P95), ms(d.d.P99), ms(d.d.Max)
		}
		s.Delays = append(s.Delays, row)
	}
	for _, st := range l.Stages {
		var other []string
		for _, c := range []struct {
			n string
			v uint64
		}{{"duplicated", st.Duplicated}, {"corrupted", st.Corrupted}, {"ECN marked", st.Marked}, {"reordered", st.Reordered}} {
			if c.v > 0 {
				other = append(other, fmt.Sprintf("%s %d", c.n, c.v))
			}
		}
		if st.BusyNs > 0 {
			other = append(other, fmt.Sprintf("busy %.3f s", float64(st.BusyNs)/1e9))
		}
		s.Stages = append(s.Stages, stageRow{
			Name: st.Name, PacketsIn: fmt.Sprint(st.InPackets), PacketsOut: fmt.Sprint(st.OutPackets),
			Drops: formatDrops(st.Drops), Other: dash(strings.Join(other, ", ")),
		})
	}
	return s
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func pair(d stats.Summary) string {
	if d.Count == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f/%.2f", d.P50, d.P99)
}

// formatDrops lists drops by reason as netjam run does: "queue 12, aqm 3",
// or "0".
func formatDrops(m map[string]uint64) string {
	rs := sortedDrops(m)
	if len(rs) == 0 {
		return "0"
	}
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = fmt.Sprintf("%s %d", r, m[r])
	}
	return strings.Join(parts, ", ")
}

var pageTemplate = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>netjam report: {{.Scenario}}</title>
<style>
body { font-family: "Liberation Sans", Arial, Helvetica, sans-serif; margin: 24px auto; max-width: 1240px; padding: 0 16px; color: #222; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; }
h2 { border-bottom: 1px solid #ccc; padding-bottom: 4px; margin-top: 1.8em; }
h3 { margin-bottom: 0.4em; }
nav a { margin-right: 1em; }
table { border-collapse: collapse; margin: 8px 0 16px; font-size: 0.9em; }
th, td { border: 1px solid #ddd; padding: 3px 8px; }
th { background: #f3f3f3; }
td.n { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
figure { margin: 16px 0 32px; }
figure img { display: block; max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { font-size: 0.9em; color: #555; margin-top: 4px; }
pre { background: #f7f7f7; border: 1px solid #e3e3e3; padding: 8px 12px; overflow-x: auto; font-size: 0.85em; }
.meta { color: #555; }
.ls { display: flex; flex-wrap: wrap; gap: 0 24px; align-items: flex-start; }
table.linkstat th, table.delays th { text-align: left; }
tr.fail td { background: #fde2e1; color: #a40e0e; }
tr.pass td:last-child { color: #1a7f37; }
.busy { background: #fff4d6; border: 1px solid #e0b400; padding: 4px 16px; margin: 12px 0; }
</style>
</head>
<body>
<h1>netjam report: {{.Scenario}}</h1>
<p class="meta">Run by netjam {{with .RunVersion}}{{.}}{{else}}(version not recorded){{end}}; report drawn by netjam {{.ReportVersion}}.</p>
{{if .Busy}}<div class="busy" id="could-not-keep-up">
<p><strong>netjam could not keep up</strong>: the machine, not the configured path alone, shaped these runs, and their figures show it.</p>
<ul>
{{range .Busy}}<li>{{with .Variant}}variant {{.}}: {{end}}{{.Message}}</li>
{{end}}</ul>
<p>Run them again on an idle machine (or fewer at once), or on the virtual clock (<code>clock: virtual</code>), whose time waits for netjam.</p>
</div>
{{end}}<nav><a href="#runs">Runs</a><a href="#flows">Flows</a><a href="#links">Links</a><a href="#plots">Plots</a><a href="#link-statistics">Link statistics</a><a href="#scenario">Scenario as run</a></nav>

<h2 id="runs">Runs</h2>
<table class="runs">
<tr><th>variant</th><th>seed</th><th>duration s</th></tr>
{{range .Runs}}{{if .Skipped}}<tr><td>{{.Variant}}</td><td colspan="2">skipped: {{.Skipped}}</td></tr>
{{else}}<tr><td>{{.Variant}}</td><td class="n">{{.Seed}}</td><td class="n">{{printf "%.2f" .DurationS}}</td></tr>
{{end}}{{end}}</table>
{{if .Expectations}}
<h2 id="expectations">Expectations</h2>
<table class="expectations">
<tr><th>variant</th><th>expectation</th><th>got</th><th>result</th></tr>
{{range .Expectations}}<tr class="{{if .Pass}}pass{{else}}fail{{end}}"><td>{{.Variant}}</td><td><code>{{.Expect}}</code></td><td class="n">{{.Got}}</td><td>{{.Result}}{{with .Error}}: {{.}}{{end}}</td></tr>
{{end}}</table>
{{end}}
<h2 id="flows">Flows</h2>
{{if .Flows}}<table class="flows">
<tr><th>variant</th><th>flow</th><th>type</th><th>cc</th><th>Mbit/s</th><th>share</th><th>done s</th><th>retrans</th><th>RTO</th><th>lost</th><th>delay mean/p95 ms</th><th>jitter ms</th></tr>
{{range .Flows}}<tr><td>{{.Variant}}</td><td>{{.Flow}}</td><td>{{.Type}}</td><td>{{.CC}}</td><td class="n">{{.Mbps}}</td><td class="n">{{.Share}}</td><td class="n">{{.Done}}</td><td class="n">{{.Retrans}}</td><td class="n">{{.RTO}}</td><td class="n">{{.Lost}}</td><td class="n">{{.Delay}}</td><td class="n">{{.Jitter}}</td></tr>
{{end}}</table>
{{range .Fairness}}<p>{{.}}</p>
{{end}}
<p class="meta">Mbit/s: payload received after the first arrival, over first to last arrival at the receiver (what arrived after the sender stopped included); done: first write to last byte read; unfinished: a TCP flow the run's end cut short, with what it received of its size; reset at: when the timeline reset the connection (s from the flow's start); retrans, RTO: TCP retransmissions and timeouts (STALL: the sender had data and sent nothing for longer than max(1 s, 3 RTO)); lost: UDP datagrams lost of sent, and those still in flight when the run cut the flow; delay: TCP smoothed RTT or UDP one-way delay; jitter: RFC 3550.</p>
{{else}}<p>No flows.</p>
{{end}}
{{if .Paths}}<h2 id="paths">Paths</h2>
<table class="paths">
<tr><th>variant</th><th>path</th><th>via</th><th>match</th><th>servers</th><th>flows</th></tr>
{{range .Paths}}<tr><td>{{.Variant}}</td><td>{{.Path}}</td><td>{{.Via}}</td><td>{{.Match}}</td><td>{{.Servers}}</td><td>{{.Flows}}</td></tr>
{{end}}</table>
{{end}}<h2 id="links">Links</h2>
<table class="links">
<tr><th>variant</th><th>link</th><th>packets in</th><th>out</th><th>loss% (conf)</th><th>drops</th><th>Mbit/s (conf)</th><th>queue p50/p99 ms</th><th>added p50/p99 ms</th><th>late p99 ms</th><th>configured</th></tr>
{{range .Links}}<tr><td>{{.Variant}}</td><td>{{.Link}}</td><td class="n">{{.PacketsIn}}</td><td class="n">{{.PacketsOut}}</td><td class="n">{{.Loss}}</td><td>{{.Drops}}</td><td class="n">{{.Rate}}</td><td class="n">{{.Queue}}</td><td class="n">{{.Added}}</td><td class="n">{{.Late}}</td><td>{{.Configured}}</td></tr>
{{end}}</table>

{{if .WiFi}}<h2 id="wifi">Wi-Fi</h2>
<table class="wifi">
<tr><th>variant</th><th>station</th><th>attempts</th><th>ok</th><th>collisions</th><th>retries</th><th>drops</th><th>airtime %</th><th>Mbit/s</th><th>access delay mean/p95 ms</th><th>medium busy %</th></tr>
{{range .WiFi}}<tr><td>{{.Variant}}</td><td>{{.Station}}</td><td class="n">{{.Attempts}}</td><td class="n">{{.OK}}</td><td class="n">{{.Collisions}}</td><td class="n">{{.Retries}}</td><td class="n">{{.Drops}}</td><td class="n">{{.Airtime}}</td><td class="n">{{.Mbps}}</td><td class="n">{{.Delay}}</td><td class="n">{{.Busy}}</td></tr>
{{end}}</table>
<p class="meta">Mbit/s: IP bytes delivered after the first delivery, over first to last delivery (a UDP flow's figure plus 28 bytes a datagram).</p>
{{end}}<h2 id="plots">Plots</h2>
{{range .Figures}}<figure id="fig-{{.Name}}">
<img class="plot" {{.Src}} width="{{.W}}" height="{{.H}}" alt="{{.Title}}">
<figcaption>{{.Title}}{{with .SVG}} (<a href="{{.}}">{{.}}</a>){{end}}</figcaption>
</figure>
{{else}}<p>No time series to plot.</p>
{{end}}
<h2 id="link-statistics">Link statistics</h2>
{{range .LinkStats}}<h3>{{.Variant}} · {{.Link}}</h3>
<p class="meta">configured: {{.Configured}}</p>
<div class="ls">
<table class="linkstat">
{{range .Counters}}<tr><th>{{index . 0}}</th><td class="n">{{index . 1}}</td></tr>
{{end}}</table>
<div>
<table class="delays">
<tr><th></th><th>count</th><th>mean</th><th>min</th><th>p50</th><th>p95</th><th>p99</th><th>max</th></tr>
{{range .Delays}}<tr><th>{{.Name}}</th><td class="n">{{.Count}}</td>{{if .Empty}}<td colspan="6">{{.Empty}}</td>{{else}}<td class="n">{{.Mean}}</td><td class="n">{{.Min}}</td><td class="n">{{.P50}}</td><td class="n">{{.P95}}</td><td class="n">{{.P99}}</td><td class="n">{{.Max}}</td>{{end}}</tr>
{{end}}</table>
{{if .Stages}}<table class="stages">
<tr><th>stage</th><th>packets in</th><th>out</th><th>drops</th><th>other</th></tr>
{{range .Stages}}<tr><td>{{.Name}}</td><td class="n">{{.PacketsIn}}</td><td class="n">{{.PacketsOut}}</td><td>{{.Drops}}</td><td>{{.Other}}</td></tr>
{{end}}</table>{{end}}
</div>
</div>
{{end}}
<h2 id="scenario">Scenario as run</h2>
{{range .Scenarios}}<h3>{{.Name}}</h3>
<pre class="scenario">{{.Text}}</pre>
{{else}}<p>No scenario*.yaml in the folder.</p>
{{end}}
</body>
</html>
`))
