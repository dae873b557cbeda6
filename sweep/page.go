package sweep

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"html/template"
	"math"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/netjam/netjam/outdir"
	"github.com/netjam/netjam/report"
)

// HTMLFile is the merged sweep's page.
const HTMLFile = "sweep.html"

// sweepFigureSuffixes are the figures a sweep draws, by the end of their
// column's name, with their axis label and scale; a count's axis has
// whole numbers only (no "0.5 retransmissions"). absent says why a run
// may have no value of the figure.
var sweepFigureSuffixes = []figureKind{
	{".throughput_bps", "throughput (Mbit/s)", 1e-6, false, ""},
	{".completion_s", "completion time (s)", 1, false,
		"a flow has a completion time only when it completed before the run ended (a flow bounded by a duration rarely does: give it a size, or the run a longer duration than the flow)"},
	{".retransmissions", "retransmissions", 1, true, ""},
	{".timeouts", "retransmission timeouts", 1, true, ""},
	{".rtt_ms.p50", "smoothed RTT, median (ms)", 1, false, "a flow that sampled no RTT has none"},
	{".loss_ratio", "datagrams lost (%)", 100, false, ""},
	{".delay_ms.p95", "one-way delay, p95 (ms)", 1, false, "a flow none of whose datagrams arrived has none"},
	{".jitter_ms", "jitter (ms)", 1, false, ""},
}

// figureKind is a figure a sweep draws: see sweepFigureSuffixes.
type figureKind struct {
	suffix, label string
	scale         float64
	count         bool
	absent        string
}

// kindOf returns the figure that column col of a sweep is, if it draws
// one: a flow's.
func kindOf(col string) (kind figureKind, ok bool) {
	for _, f := range sweepFigureSuffixes {
		if strings.HasSuffix(col, f.suffix) && strings.HasPrefix(col, "flows.") {
			kind, ok = f, true
		}
	}
	return kind, ok
}

// sweepYTicks are about how many labelled ticks a sweep figure's y axis
// gets.
const sweepYTicks = 6

// WriteReport writes sweep.json, sweep.csv, one plot per figure (PNG
// and SVG) and sweep.html into the folder d, and returns the files' names.
func WriteReport(d *outdir.Dir, res *Result, version string) ([]string, error) {
	if err := WriteTable(d, res); err != nil {
		return nil, err
	}
	names := []string{JSONFile, CSVFile}
	page := sweepPage{Res: res, Version: version}
	for _, col := range res.Columns {
		fig, note, ok := sweepFigure(res, col)
		if !ok {
			if note != "" {
				page.Omitted = append(page.Omitted, note)
			}
			continue
		}
		base := "sweep-" + report.FileSafe(col)
		pngImage, svgImage, err := report.Images(fig)
		if err != nil {
			return nil, fmt.Errorf("drawing %s: %w", col, err)
		}
		for _, f := range []struct {
			ext string
			b   []byte
		}{{"png", pngImage}, {"svg", svgImage}} {
			if err := d.WriteFile(base+"."+f.ext, f.b); err != nil {
				return nil, err
			}
			names = append(names, base+"."+f.ext)
		}
		page.Figures = append(page.Figures, figure{Name: base, Title: fig.Title.Text, SVG: base + ".svg", Note: note,
			Src: template.HTMLAttr(`src="data:image/png;base64,` + base64.StdEncoding.EncodeToString(pngImage) + `"`),
			W:   report.FigureWidthPx, H: report.FigureHeightPx})
	}
	var buf bytes.Buffer
	if err := sweepTemplate.Execute(&buf, page); err != nil {
		return nil, err
	}
	if err := d.WriteFile(HTMLFile, buf.Bytes()); err != nil {
		return nil, err
	}
	return append(names, HTMLFile), nil
}

// xValue reads a swept value as a number for the x axis: its number and
// unit ("10ms" is 10 and "ms", "1%" is 1 and "%"); ok is false for a value
// that is not a number with a unit (reno, {limit: 100}).
func xValue(v string) (x float64, unit string, ok bool) {
	i := strings.IndexFunc(v, func(r rune) bool { return !(r >= '0' && r <= '9' || r == '.' || r == '-' || r == '+' || r == 'e') })
	if i == 0 {
		return 0, "", false
	}
	if i < 0 {
		i = len(v)
	}
	x, err := strconv.ParseFloat(v[:i], 64)
	if err != nil {
		return 0, "", false
	}
	return x, strings.TrimSpace(v[i:]), true
}

// sweepFigure draws column col of res against the first swept key: for
// each combination of the other keys (and the variant), the mean across
// seeds with its 95% confidence interval (Student's t). A TCP flow's
// throughput against a loss rate gets the Mathis model beside it.
//
// Runs without a value of col (a flow that did not complete has no
// completion time) are left out, and note says how many; a figure left
// with at most one point where the sweep has several values of its key
// is not drawn (ok false), and note says why, for the page.
func sweepFigure(res *Result, col string) (p *plot.Plot, note string, ok bool) {
	kind, ok := kindOf(col)
	if !ok || len(res.Axes) == 0 {
		return nil, "", false
	}
	flow := strings.TrimPrefix(col, "flows.")
	flow = flow[:strings.Index(flow, ".")]
	lines := sweepLines(res, col, flow, kind.scale)
	if note, ok = gapNote(res, col, flow, kind, lines); !ok {
		return nil, note, false
	}
	return drawFigure(res, col, flow, kind, lines), note, true
}

// gapNote says, for the page, how many runs with flow have no value of
// column col, and why a run may have none; ok is false, and the note
// says why, when the lines leave too few points to draw: none, or one
// where the first key has several values.
func gapNote(res *Result, col, flow string, kind figureKind, lines []*sweepLine) (note string, ok bool) {
	have, of, points := 0, 0, 0
	for _, r := range res.Results {
		if _, ok := r.Figures[col]; ok {
			have++
		}
		if hasFlow(r.Figures, flow) {
			of++
		}
	}
	for _, l := range lines {
		points += len(l.byX)
	}
	if have < of {
		note = fmt.Sprintf("%d of the %d runs with flow %s have no %s", of-have, of, flow, kind.label)
		if kind.absent != "" {
			note += ": " + kind.absent
		}
	}
	xa := res.Axes[0]
	if points == 0 || points == 1 && len(xa.Values) > 1 {
		if note == "" {
			note = fmt.Sprintf("no run has a %s of flow %s", kind.label, flow)
		}
		return fmt.Sprintf("Not drawn: %s against %s, %d point(s) to draw; %s.", kind.label, xa.Key, points, note), false
	}
	if note != "" {
		note = "Drawn from the " + strconv.Itoa(have) + " runs that have it; " + note + "."
	}
	return note, true
}

// drawFigure draws lines, column col of flow, against the first key.
func drawFigure(res *Result, col, flow string, kind figureKind, lines []*sweepLine) *plot.Plot {
	xa := res.Axes[0]
	xs, unit, numeric := xPositions(xa.Values)
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s: %s against %s (mean and 95%% CI over %d seed(s))", flow, kind.label, xa.Key, len(res.Seeds))
	p.X.Label.Text = xa.Key
	if unit != "" {
		p.X.Label.Text += " (" + unit + ")"
	}
	p.Y.Label.Text = kind.label
	p.Add(plotter.NewGrid())
	if !numeric {
		p.NominalX(xa.Values...)
	}
	mathis := strings.HasSuffix(col, ".throughput_bps") && unit == "%" && strings.HasSuffix(xa.Key, "loss")
	for i, l := range lines {
		name := l.name
		if name == "" {
			name = flow
		}
		drawLine(p, i, name, l, xs, kind.scale, mathis)
	}
	// Confidence intervals of few seeds reach below zero; the figures do not.
	p.Y.Min = 0
	p.Y.Tick.Marker = report.Ticks(sweepYTicks, kind.count)
	p.Legend.Top = true
	p.Legend.Left = false
	return p
}

// drawLine draws line l, the i-th, named name: its mean at each x of xs
// that has values, with the 95% confidence interval; with mathis, the
// Mathis model beside it, at the line's mean RTT, in the figure's scale.
func drawLine(p *plot.Plot, i int, name string, l *sweepLine, xs []float64, scale float64, mathis bool) {
	var pts plotter.XYs
	var errs plotter.YErrors
	for xi := range xs {
		ys := l.byX[xi]
		if len(ys) == 0 {
			continue
		}
		mean, half := meanCI(ys)
		pts = append(pts, plotter.XY{X: xs[xi], Y: mean})
		errs = append(errs, struct{ Low, High float64 }{half, half})
	}
	clr := report.LineColour(i)
	ln, sc, err := plotter.NewLinePoints(pts)
	if err != nil {
		return
	}
	ln.Color, ln.Width, ln.Dashes = clr, vg.Points(1.6), report.LineDashes(i)
	sc.Color, sc.Shape = clr, draw.CircleGlyph{}
	eb := &plotter.YErrorBars{XYs: pts, YErrors: errs, LineStyle: draw.LineStyle{Color: clr, Width: vg.Points(1)}, CapWidth: vg.Points(6)}
	p.Add(ln, sc, eb)
	p.Legend.Add(name, ln, sc)
	if !mathis || len(l.rtts) == 0 {
		return
	}
	if m := mathisLine(xs, stat.Mean(l.rtts, nil), scale); m != nil {
		m.Color, m.Width, m.Dashes = clr, vg.Points(1), []vg.Length{vg.Points(2), vg.Points(3)}
		p.Add(m)
		p.Legend.Add(name+": Mathis, MSS 1460 B / RTT "+strconv.FormatFloat(stat.Mean(l.rtts, nil), 'f', 0, 64)+" ms · 1.22/√p", m)
	}
}

// hasFlow reports whether a run's figures have any of flow's.
func hasFlow(figures map[string]float64, flow string) bool {
	for k := range figures {
		if strings.HasPrefix(k, "flows."+flow+".") {
			return true
		}
	}
	return false
}

// xPositions places the first key's values on the x axis: at their
// numbers when all are numbers with one unit ("10ms", "25ms"), else at
// 0, 1, 2... (numeric is then false).
func xPositions(values []string) (xs []float64, unit string, numeric bool) {
	numeric = true
	xs = make([]float64, len(values))
	for i, v := range values {
		x, u, ok := xValue(v)
		numeric = numeric && ok && (i == 0 || u == unit)
		xs[i], unit = x, u
	}
	if !numeric {
		for i := range xs {
			xs[i] = float64(i)
		}
		unit = ""
	}
	return xs, unit, numeric
}

// sweepLine is one line of a sweep's figure: a combination of the swept
// keys but the first (and a variant), and the figure's values at each of
// the first key's values, one per seed.
type sweepLine struct {
	name    string
	byX     map[int][]float64 // by the index of the first key's value
	rtts    []float64         // the flow's median smoothed RTTs, ms, for the Mathis model
	ordinal int
}

// sweepLines gathers column col of res (a figure of flow) into lines, in
// the order the sweep met them, values scaled.
func sweepLines(res *Result, col, flow string, scale float64) []*sweepLine {
	xa := res.Axes[0]
	lines := map[string]*sweepLine{}
	for _, r := range res.Results {
		v, ok := r.Figures[col]
		if !ok {
			continue
		}
		xi := slices.Index(xa.Values, r.Params[xa.Key])
		var parts []string
		for _, a := range res.Axes[1:] {
			parts = append(parts, shortKey(a.Key)+"="+r.Params[a.Key])
		}
		if r.Variant != "" {
			parts = append(parts, "variant "+r.Variant)
		}
		name := strings.Join(parts, ", ")
		l := lines[name]
		if l == nil {
			l = &sweepLine{name: name, byX: map[int][]float64{}, ordinal: len(lines)}
			lines[name] = l
		}
		l.byX[xi] = append(l.byX[xi], v*scale)
		if rtt, ok := r.Figures["flows."+flow+".rtt_ms.p50"]; ok {
			l.rtts = append(l.rtts, rtt)
		}
	}
	ordered := make([]*sweepLine, 0, len(lines))
	for _, l := range lines {
		ordered = append(ordered, l)
	}
	slices.SortFunc(ordered, func(a, b *sweepLine) int { return a.ordinal - b.ordinal })
	return ordered
}

// mathisLine is the Mathis model's throughput, MSS/RTT·sqrt(3/2)/sqrt(p),
// over the loss rates xs (in %), for MSS 1460 bytes and the RTT in ms,
// drawn in the figure's scale.
func mathisLine(xs []float64, rttMs, scale float64) *plotter.Line {
	var pts plotter.XYs
	lo, hi := slices.Min(xs), slices.Max(xs)
	for i := 0; i <= 100; i++ {
		x := lo + (hi-lo)*float64(i)/100
		if x <= 0 || rttMs <= 0 {
			continue
		}
		bps := 1460 * 8 / (rttMs / 1e3) * math.Sqrt(1.5) / math.Sqrt(x/100)
		pts = append(pts, plotter.XY{X: x, Y: bps * scale})
	}
	if len(pts) < 2 {
		return nil
	}
	l, err := plotter.NewLine(pts)
	if err != nil {
		return nil
	}
	return l
}

// meanCI returns the mean of ys and the half-width of its 95% confidence
// interval (Student's t with n-1 degrees of freedom; 0 for one value).
func meanCI(ys []float64) (mean, half float64) {
	mean, sd := stat.MeanStdDev(ys, nil)
	n := float64(len(ys))
	if len(ys) < 2 {
		return mean, 0
	}
	t := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: n - 1}.Quantile(0.975)
	return mean, t * sd / math.Sqrt(n)
}

// shortKey is a swept key's last part, for legends.
func shortKey(k string) string { return k[strings.LastIndex(k, ".")+1:] }

// figure is a figure of sweep.html.
type figure struct {
	Name, Title string
	Src         template.HTMLAttr // src="data:image/png;base64,..."
	SVG         string            // the SVG file beside the page
	W, H        int
	// Note, when not empty, says what the figure leaves out.
	Note string
}

// sweepPage is what sweep.html shows.
type sweepPage struct {
	Res     *Result
	Version string
	Figures []figure
	// Omitted say which figures were not drawn, and why.
	Omitted []string
}

var sweepTemplate = template.Must(template.New("sweep").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>netjam sweep: {{.Res.Scenario}}</title>
<style>
body { font-family: "Liberation Sans", Arial, Helvetica, sans-serif; margin: 24px auto; max-width: 1240px; padding: 0 16px; color: #222; }
h2 { border-bottom: 1px solid #ccc; padding-bottom: 4px; margin-top: 1.8em; }
table { border-collapse: collapse; margin: 8px 0 16px; font-size: 0.9em; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: left; }
th { background: #f3f3f3; }
figure { margin: 16px 0 32px; }
figure img { display: block; max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { font-size: 0.9em; color: #555; margin-top: 4px; }
.meta { color: #555; }
.missing { color: #a40e0e; }
</style>
</head>
<body>
<h1>netjam sweep: {{.Res.Scenario}}</h1>
<p class="meta">Merged by netjam {{.Version}}: {{.Res.Found}} of {{.Res.Runs}} runs{{with .Res.MissingCount}} <span class="missing">({{.}} missing)</span>{{end}}; every run's figures are in <a href="sweep.csv">sweep.csv</a> and <a href="sweep.json">sweep.json</a>.</p>
<h2>Grid</h2>
<table>
<tr><th>key</th><th>values</th></tr>
{{range .Res.Axes}}<tr><td><code>{{.Key}}</code></td><td>{{range $i, $v := .Values}}{{if $i}}, {{end}}<code>{{$v}}</code>{{end}}</td></tr>
{{end}}<tr><td>seeds</td><td>{{range $i, $v := .Res.Seeds}}{{if $i}}, {{end}}{{$v}}{{end}}</td></tr>
{{with .Res.Variants}}<tr><td>variants</td><td>{{range $i, $v := .}}{{if $i}}, {{end}}{{$v}}{{end}}</td></tr>{{end}}
</table>
<h2>Figures</h2>
<p class="meta">Each point is the mean across seeds, its bar the 95% confidence interval of that mean (Student's t).</p>
{{range .Figures}}<figure id="fig-{{.Name}}">
<img {{.Src}} width="{{.W}}" height="{{.H}}" alt="{{.Title}}">
<figcaption>{{.Title}} (<a href="{{.SVG}}">{{.SVG}}</a>){{with .Note}} {{.}}{{end}}</figcaption>
</figure>
{{else}}<p>No figure to draw.</p>
{{end}}{{range .Omitted}}<p class="meta omitted">{{.}}</p>
{{end}}
</body>
</html>
`))
