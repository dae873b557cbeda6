package report

import (
	"bytes"
	"fmt"
	"image/color"
	"image/png"
	"math"
	"slices"
	"strconv"
	"strings"

	xfont "golang.org/x/image/font"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// The size of an image: 1200 x 800 pixels at 96 dpi (the SVG's 900 x 600
// points are the same size in a browser). A figure with more than three
// rows of panels grows by rowPx per row beyond the third, so that no panel
// gets too short to read.
const (
	dpi      = 96
	widthPx  = 1200
	heightPx = 800
	rowPx    = 240
)

// px is one pixel at dpi.
const px = vg.Inch / dpi

// The image formats Plot writes, by file extension.
const (
	formatPNG = "png"
	formatSVG = "svg"
)

// The fonts: Liberation Sans, which gonum/plot embeds, so the images look
// the same everywhere and need no system font.
var (
	sansFont = font.Font{Typeface: "Liberation", Variant: "Sans"}
	boldFont = font.Font{Typeface: "Liberation", Variant: "Sans", Weight: xfont.WeightBold}
)

// palette is Okabe and Ito's colour-blind safe palette, without its
// yellow (too pale on white) and with its black last.
var palette = []color.Color{
	rgb(0x0072B2), // blue
	rgb(0xD55E00), // vermillion
	rgb(0x009E73), // bluish green
	rgb(0xE69F00), // orange
	rgb(0xCC79A7), // reddish purple
	rgb(0x56B4E9), // sky blue
	rgb(0x000000), // black
}

// dashes are used, with the palette's colours, once the palette is used
// up: key i gets colour i%len(palette) and dashes i/len(palette).
var dashes = [][]vg.Length{nil, {6, 3}, {2, 2}, {8, 3, 2, 3}}

func rgb(v uint32) color.Color {
	return color.RGBA{R: uint8(v >> 16), G: uint8(v >> 8), B: uint8(v), A: 0xff}
}

var gridColor = color.Gray{Y: 0xe0}

// size returns the image size of fig: 1200 x 800 px, taller with more than
// three rows of panels.
func (fig *figure) size(runs int) (w, h vg.Length) {
	rows := fig.rows(runs)
	hpx := heightPx
	if rows > 3 {
		hpx += (rows - 3) * rowPx
	}
	return widthPx * px, vg.Length(hpx) * px
}

func (fig *figure) rows(runs int) int {
	if fig.pooled {
		return 1
	}
	return max(runs, 1)
}

// render draws fig for the runs of f in format ("png" or "svg").
func render(f *folder, fig *figure, format string) ([]byte, error) {
	w, h := fig.size(len(f.runs))
	var buf bytes.Buffer
	switch format {
	case formatPNG:
		c := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(dpi))
		if err := drawFigure(f, fig, draw.New(c)); err != nil {
			return nil, err
		}
		// The fastest compression: files 3% larger than the default's,
		// encoded in two thirds of the time.
		enc := png.Encoder{CompressionLevel: png.BestSpeed}
		if err := enc.Encode(&buf, c.Image()); err != nil {
			return nil, err
		}
	case formatSVG:
		c := vgsvg.NewWith(vgsvg.UseWH(w, h))
		if err := drawFigure(f, fig, draw.New(c)); err != nil {
			return nil, err
		}
		if _, err := c.WriteTo(&buf); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("unknown image format %q", format)
	}
	return buf.Bytes(), nil
}

// panel is the content of one panel before it is drawn.
type panel struct {
	title  string
	curves []curve
}

// legendEntry is one entry of a figure's legend.
type legendEntry struct {
	label string
	thumb thumb
}

// drawFigure draws fig on dc: a white background, the header, the panels.
func drawFigure(f *folder, fig *figure, dc draw.Canvas) error {
	dc.FillPolygon(color.White, []vg.Point{dc.Min, {X: dc.Max.X, Y: dc.Min.Y}, dc.Max, {X: dc.Min.X, Y: dc.Max.Y}})
	panels := collectPanels(f, fig)
	keys, legend := legendOf(panels)
	body := drawHeader(dc, f.sum.Scenario+" — "+fig.title, legend, fig.note)
	plots, err := panelPlots(f, fig, panels, keys)
	if err != nil {
		return err
	}
	tiles := draw.Tiles{
		Rows: len(plots), Cols: len(fig.facets),
		PadX: 24 * px, PadY: 10 * px,
		PadTop: 4 * px, PadBottom: 8 * px, PadLeft: 8 * px, PadRight: 16 * px,
	}
	canvases := plot.Align(plots, tiles, body)
	for i := range plots {
		for j := range plots[i] {
			plots[i][j].Draw(canvases[i][j])
		}
	}
	return nil
}

// collectPanels gathers the curves of each panel: a row per run (one row
// in all when the figure pools its runs), a column per facet.
func collectPanels(f *folder, fig *figure) [][]panel {
	rows := fig.rows(len(f.runs))
	panels := make([][]panel, rows)
	for i := range panels {
		panels[i] = make([]panel, len(fig.facets))
	}
	for j, fc := range fig.facets {
		for i, r := range f.runs {
			row := i
			if fig.pooled {
				row = 0
			}
			p := &panels[row][j]
			p.curves = append(p.curves, fc.curves(r)...)
			if !fig.pooled {
				p.title = panelTitle(f, r, fc)
			}
		}
		if fig.pooled {
			panels[0][j].title = fc.title
		}
	}
	return panels
}

// legendOf gives each curve key its colour index, in the order the curves
// come, and the legend: one entry per labelled key and glyph kind, the
// entries of a fixed colour last.
func legendOf(panels [][]panel) (keys map[string]int, legend []legendEntry) {
	keys = map[string]int{}
	var fixed []legendEntry
	inLegend := map[string]bool{}
	for _, row := range panels {
		for _, p := range row {
			for _, c := range p.curves {
				if _, ok := keys[c.key]; !ok && c.color == nil {
					keys[c.key] = len(keys)
				}
				id := fmt.Sprintf("%s\x00%t", c.key, c.glyph != nil)
				if c.label == "" || inLegend[id] {
					continue
				}
				inLegend[id] = true
				e := legendEntry{c.label, styleOf(c, keys[c.key])}
				if c.color != nil {
					fixed = append(fixed, e)
				} else {
					legend = append(legend, e)
				}
			}
		}
	}
	return keys, append(legend, fixed...)
}

// panelPlots makes the plot of every panel, with shared axes per column.
func panelPlots(f *folder, fig *figure, panels [][]panel, keys map[string]int) ([][]*plot.Plot, error) {
	rows := len(panels)
	plots := make([][]*plot.Plot, rows)
	for i := range plots {
		plots[i] = make([]*plot.Plot, len(fig.facets))
	}
	// About one labelled tick per 100 px of width and per 50 px of
	// height.
	xTicks := max(3, widthPx/len(fig.facets)/100)
	_, h := fig.size(len(f.runs))
	yTicks := max(3, int(h/px)/rows/50)
	for j, fc := range fig.facets {
		xmin, xmax, ymin, ymax := columnRange(panels, j, fc)
		for i := range rows {
			pn := panels[i][j]
			p := newPlot(pn.title, fc.xLabel, fc.yLabel)
			p.X.Tick.Marker = niceTicks{n: xTicks}
			p.Y.Tick.Marker = niceTicks{n: yTicks, integer: fc.yInteger}
			if i < rows-1 {
				p.X.Label.Text = "" // the bottom row names the shared axis
			}
			if !fig.pooled && fc.xLabel == timeLabel && i < len(f.runs) {
				if err := addMarkers(p, markersOf(f.runs[i].info.Timeline), ymin, ymax); err != nil {
					return nil, err
				}
			}
			if err := addCurves(p, pn, keys, ymax); err != nil {
				return nil, err
			}
			p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = xmin, xmax, ymin, ymax
			plots[i][j] = p
		}
	}
	return plots, nil
}

// addCurves draws a panel's curves and says in its title when it has no
// data or when a peak lies above the column's shared axis.
func addCurves(p *plot.Plot, pn panel, keys map[string]int, ymax float64) error {
	peak := math.Inf(-1)
	for _, c := range pn.curves {
		if len(c.pts) == 0 {
			continue
		}
		for _, pt := range c.pts {
			peak = max(peak, pt.v)
		}
		pl, err := plotterOf(c, styleOf(c, keys[c.key]))
		if err != nil {
			return err
		}
		p.Add(pl)
	}
	switch {
	case len(pn.curves) == 0:
		p.Title.Text += " (no data)"
	case peak > ymax:
		p.Title.Text += fmt.Sprintf(" (peak %s clipped)", strconv.FormatFloat(peak, 'g', 3, 64))
	}
	return nil
}

// panelTitle names the run's variant (the header names the scenario),
// the facet and the facet's note.
func panelTitle(f *folder, r *run, fc facet) string {
	t := "variant " + r.info.Variant
	if r.info.Variant == "" {
		t = f.sum.Scenario
	}
	if fc.title != "" {
		t += ": " + fc.title
	}
	if fc.note != nil {
		t += " (" + fc.note(r) + ")"
	}
	return t
}

// columnRange returns the axes shared by the panels of column j.
func columnRange(panels [][]panel, j int, fc facet) (xmin, xmax, ymin, ymax float64) {
	xmin, xmax, ymin, ymax = math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	for _, row := range panels {
		for _, c := range row[j].curves {
			for _, p := range c.pts {
				xmin, xmax = min(xmin, p.t), max(xmax, p.t)
				ymin, ymax = min(ymin, p.v), max(ymax, p.v)
			}
		}
	}
	if math.IsInf(xmin, 1) { // no data at all
		xmin, xmax, ymin, ymax = 0, 1, 0, 1
	}
	if fc.xFrom0 {
		xmin = min(xmin, 0)
	}
	if fc.yFrom0 {
		ymin = min(ymin, 0)
	}
	if fc.clipPeaks {
		var vals []float64
		for _, row := range panels {
			for _, c := range row[j].curves {
				for _, p := range c.pts {
					vals = append(vals, p.v)
				}
			}
		}
		ymax = min(ymax, peakCap(vals))
	}
	if fc.yMax > 0 {
		ymax = fc.yMax
	} else {
		ymax += (ymax - ymin) * 0.04 // room above the highest point
	}
	if xmax <= xmin {
		xmax = xmin + 1
	}
	if ymax <= ymin {
		ymax = ymin + 1
	}
	return xmin, xmax, ymin, ymax
}

// peakCap returns where an axis showing vals may stop: 1.5 times their
// 99th percentile, so that a handful of samples towering over the rest
// (fewer than 1%) do not flatten every other line; +Inf (no cap) with
// fewer than 100 values.
func peakCap(vals []float64) float64 {
	if len(vals) < 100 {
		return math.Inf(1)
	}
	slices.Sort(vals)
	return 1.5 * vals[len(vals)*99/100]
}

// newPlot returns an empty panel in the report's style.
func newPlot(title, xLabel, yLabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font = font.From(boldFont, 11)
	p.Title.Padding = 4 * px
	p.X.Label.Text, p.Y.Label.Text = xLabel, yLabel
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font = font.From(sansFont, 11)
		a.Tick.Label.Font = font.From(sansFont, 10)
		a.Padding = 0
	}
	g := plotter.NewGrid()
	g.Horizontal.Color, g.Vertical.Color = gridColor, gridColor
	p.Add(g)
	return p
}

// thumb is how a curve is drawn: a line or markers. It draws its own
// legend thumbnail (plot.Thumbnailer).
type thumb struct {
	line  draw.LineStyle
	glyph draw.GlyphStyle
	marks bool
}

// styleOf returns the style of curve c whose key is the i-th of its figure.
func styleOf(c curve, i int) thumb {
	clr := palette[i%len(palette)]
	if c.color != nil {
		clr = c.color
	}
	if c.glyph != nil {
		return thumb{marks: true, glyph: draw.GlyphStyle{Color: clr, Radius: vg.Points(3), Shape: c.glyph}}
	}
	return thumb{line: draw.LineStyle{Color: clr, Width: vg.Points(1.6), Dashes: dashes[(i/len(palette))%len(dashes)]}}
}

// Thumbnail implements plot.Thumbnailer.
func (t thumb) Thumbnail(c *draw.Canvas) {
	if t.marks {
		c.DrawGlyph(t.glyph, c.Center())
		return
	}
	y := c.Center().Y
	c.StrokeLine2(t.line, c.Min.X, y, c.Max.X, y)
}

// plotterOf returns the plotter that draws c in style s.
func plotterOf(c curve, s thumb) (plot.Plotter, error) {
	xys := make(plotter.XYs, len(c.pts))
	for i, p := range c.pts {
		xys[i] = plotter.XY{X: p.t, Y: p.v}
	}
	if s.marks {
		sc, err := plotter.NewScatter(xys)
		if err != nil {
			return nil, err
		}
		sc.GlyphStyle = s.glyph
		return sc, nil
	}
	l, err := plotter.NewLine(xys)
	if err != nil {
		return nil, err
	}
	l.LineStyle = s.line
	return l, nil
}

// drawHeader draws the figure's title, its legend (wrapped to as many
// lines as it needs) and its note (wrapped too) at the top of dc, and
// returns the canvas left below.
func drawHeader(dc draw.Canvas, title string, legend []legendEntry, note string) draw.Canvas {
	handler := plot.DefaultTextHandler
	ts := text.Style{Color: color.Black, Font: font.From(boldFont, 14), XAlign: draw.XCenter, YAlign: draw.YTop, Handler: handler}
	top := dc.Max.Y - 10*px
	dc.FillText(ts, vg.Point{X: (dc.Min.X + dc.Max.X) / 2, Y: top}, title)
	y := top - ts.Height(title) - 8*px

	ls := text.Style{Color: color.Black, Font: font.From(sansFont, 11), XAlign: draw.XLeft, YAlign: draw.YCenter, Handler: handler}
	const thumbW, gap, sep = 28 * px, 6 * px, 26 * px
	lineH := ls.Height("Xg") + 6*px
	// Lay the entries out in lines, then centre each line.
	type placed struct {
		e legendEntry
		w vg.Length
	}
	var lines [][]placed
	var widths []vg.Length
	maxW := dc.Max.X - dc.Min.X - 40*px
	var cur []placed
	var curW vg.Length
	for _, e := range legend {
		w := thumbW + gap + ls.Width(e.label)
		add := w
		if len(cur) > 0 {
			add += sep
		}
		if len(cur) > 0 && curW+add > maxW {
			lines, widths = append(lines, cur), append(widths, curW)
			cur, curW, add = nil, 0, w
		}
		cur, curW = append(cur, placed{e, w}), curW+add
	}
	if len(cur) > 0 {
		lines, widths = append(lines, cur), append(widths, curW)
	}
	for i, line := range lines {
		x := (dc.Min.X+dc.Max.X)/2 - widths[i]/2
		yc := y - lineH/2
		for _, p := range line {
			tc := draw.Canvas{Canvas: dc.Canvas, Rectangle: vg.Rectangle{
				Min: vg.Point{X: x, Y: yc - lineH/2 + 2*px}, Max: vg.Point{X: x + thumbW, Y: yc + lineH/2 - 2*px}}}
			p.e.thumb.Thumbnail(&tc)
			dc.FillText(ls, vg.Point{X: x + thumbW + gap, Y: yc}, p.e.label)
			x += p.w + sep
		}
		y -= lineH
	}
	if note != "" {
		ns := ls
		ns.Color = color.Gray{Y: 70}
		ns.XAlign = draw.XCenter
		var line string
		flush := func() {
			dc.FillText(ns, vg.Point{X: (dc.Min.X + dc.Max.X) / 2, Y: y - lineH/2}, line)
			y -= lineH
			line = ""
		}
		for _, w := range strings.Fields(note) {
			if line != "" && ns.Width(line+" "+w) > maxW {
				flush()
			}
			line = strings.TrimPrefix(line+" "+w, " ")
		}
		flush()
	}
	return draw.Crop(dc, 0, 0, 0, y-dc.Max.Y-4*px)
}
