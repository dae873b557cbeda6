package report

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/netjam/netjam/flows"
)

// colouredPixels counts the pixels of r in img that are clearly coloured
// (not white, grey or black): the plotted lines and markers. It reads
// the pixels of the image types png.Decode returns directly, as At would
// make the race detector's runs crawl.
func colouredPixels(img image.Image, r image.Rectangle) int {
	r = r.Intersect(img.Bounds())
	coloured := func(cr, cg, cb uint8) bool { return max(cr, cg, cb)-min(cr, cg, cb) > 60 }
	n := 0
	for y := r.Min.Y; y < r.Max.Y; y++ {
		switch m := img.(type) {
		case *image.RGBA:
			row := m.Pix[m.PixOffset(r.Min.X, y):m.PixOffset(r.Max.X, y)]
			for i := 0; i+2 < len(row); i += 4 {
				if coloured(row[i], row[i+1], row[i+2]) {
					n++
				}
			}
		case *image.NRGBA:
			row := m.Pix[m.PixOffset(r.Min.X, y):m.PixOffset(r.Max.X, y)]
			for i := 0; i+2 < len(row); i += 4 {
				if coloured(row[i], row[i+1], row[i+2]) {
					n++
				}
			}
		default:
			for x := r.Min.X; x < r.Max.X; x++ {
				cr, cg, cb, _ := img.At(x, y).RGBA()
				if coloured(uint8(cr>>8), uint8(cg>>8), uint8(cb>>8)) {
					n++
				}
			}
		}
	}
	return n
}

func readReport(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

var imgRE = regexp.MustCompile(`<img class="plot" src="data:image/png;base64,([A-Za-z0-9+/=]+)" width="(\d+)" height="(\d+)" alt="([^"]*)">`)

func TestHTMLEmbedsEveryFigureAndTable(t *testing.T) {
	dir, names := drawnFolder(t)
	page := readReport(t, dir)

	// Every figure, as a decodable PNG of the right size, and a link to
	// its SVG.
	imgs := imgRE.FindAllStringSubmatch(page, -1)
	if len(imgs) != len(allFigures) {
		t.Fatalf("%d images in the page, want %d", len(imgs), len(allFigures))
	}
	for i, m := range imgs {
		b, err := base64.StdEncoding.DecodeString(m[1])
		if err != nil {
			t.Fatalf("image %d: %v", i, err)
		}
		checkPNG(t, allFigures[i], b, 1200, 800)
		if m[2] != "1200" || m[3] != "800" {
			t.Errorf("image %d: width %s height %s", i, m[2], m[3])
		}
		if !strings.Contains(page, `id="fig-`+allFigures[i]+`"`) || !strings.Contains(page, `<a href="`+allFigures[i]+`.svg">`) {
			t.Errorf("figure %s lacks its anchor or its SVG link", allFigures[i])
		}
	}
	if len(names) != 2*len(imgs) {
		t.Errorf("Plot wrote %d files for %d figures", len(names), len(imgs))
	}

	for _, want := range []string{
		"<title>netjam report: synthetic</title>",
		"Run by netjam v9.9.9-test; report drawn by netjam v1.2.3-report.",
		// Runs, with their seeds.
		`<tr><td>a</td><td class="n">42</td><td class="n">10.01</td></tr>`,
		`<tr><td>b</td><td class="n">43</td><td class="n">10.01</td></tr>`,
		// The flow table: netjam run's columns.
		"<th>variant</th><th>flow</th><th>type</th><th>cc</th><th>Mbit/s</th><th>share</th><th>done s</th><th>retrans</th><th>RTO</th><th>lost</th><th>delay mean/p95 ms</th><th>jitter ms</th></tr>",
		`<tr><td>a</td><td>bulk</td><td>tcp</td><td>cubic</td><td class="n">7.50</td><td class="n">78.9%</td><td class="n">9.60</td><td class="n">12</td><td class="n">1</td><td class="n">-</td><td class="n">rtt 25.0/30.0</td><td class="n">-</td></tr>`,
		`<tr><td>b</td><td>probe</td><td>udp</td><td>-</td><td class="n">2.00</td><td class="n">21.1%</td><td class="n">-</td><td class="n">-</td><td class="n">-</td><td class="n">20/2500</td><td class="n">31.0/42.0</td><td class="n">0.75</td></tr>`,
		// Fairness once per run, naming the flows it is over.
		"<p>a: fairness (Jain&#39;s index) 0.900 among the TCP flows sharing a direction: bulk, other</p>",
		// The link table: netjam run's columns.
		"<th>variant</th><th>link</th><th>packets in</th><th>out</th><th>loss% (conf)</th><th>drops</th><th>Mbit/s (conf)</th><th>queue p50/p99 ms</th><th>added p50/p99 ms</th><th>late p99 ms</th><th>configured</th>",
		`<tr><td>a</td><td>uplink</td><td class="n">9000</td><td class="n">8890</td><td class="n">1.20 (1.00)</td><td>loss 10, queue 100</td><td class="n">9.99 (10.00)</td><td class="n">11.00/22.00</td><td class="n">21.00/32.00</td><td class="n">0.10</td><td>rate 10Mbps, queue droptail 100p, delay 10ms</td></tr>`,
		`<td class="n">-</td><td class="n">21.00/32.00</td>`, // the downlink has no queue
		// Link statistics, with the stages.
		"<h3>b · downlink</h3>",
		`<tr><th>ECN marked</th><td class="n">3</td></tr>`,
		`<tr><th>queue sojourn (ms)</th><td class="n">0</td><td colspan="6">no packets</td></tr>`,
		`<tr><td>queue</td><td class="n">8990</td><td class="n">8890</td><td>queue 100</td><td>busy 9.500 s</td></tr>`,
		// The scenario as run, escaped.
		"<h3>scenario-a.yaml</h3>",
		"<h3>scenario-b.yaml</h3>",
		`seed: 43`,
		`note: &#34;&lt;b&gt;&amp;amp;&lt;/b&gt;&#34;`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("report.html lacks %s", want)
		}
	}
	if strings.Index(page, "scenario-a.yaml") > strings.Index(page, "scenario-b.yaml") {
		t.Error("scenario files are not in the order of the runs")
	}
	// Self-contained: nothing to fetch, no script.
	for _, bad := range []string{"http://", "https://", "<script", "<link", "@import", "url("} {
		if strings.Contains(page, bad) {
			t.Errorf("report.html contains %q", bad)
		}
	}
	// The Wi-Fi table, one row per station and the AP, as the terminal's.
	for _, row := range []string{
		`<td>a</td><td>sta1</td><td class="n">1000</td><td class="n">990</td><td class="n">10</td><td class="n">10</td><td class="n">0</td><td class="n">30.0</td><td class="n">5.00</td><td class="n">2.00/5.00</td><td class="n">35.0</td>`,
		`<td>b</td><td>ap</td><td class="n">500</td><td class="n">499</td><td class="n">1</td><td class="n">1</td><td class="n">1</td><td class="n">5.0</td><td class="n">0.20</td><td class="n">-</td><td class="n">35.0</td>`,
	} {
		if !strings.Contains(page, row) {
			t.Errorf("report.html lacks the Wi-Fi row %s", row)
		}
	}
}

func TestHTMLWithoutPlotHasNoSVGLinks(t *testing.T) {
	dir := t.TempDir()
	writeSynth(t, dir, synthRun{udp: true})
	if err := HTML(openDir(t, dir), "dev"); err != nil {
		t.Fatal(err)
	}
	page := readReport(t, dir)
	imgs := imgRE.FindAllStringSubmatch(page, -1)
	if len(imgs) != 4 { // throughput, delay, delay-cdf, queue-uplink
		t.Errorf("%d images, want 4", len(imgs))
	}
	for _, m := range imgs {
		b, _ := base64.StdEncoding.DecodeString(m[1])
		if _, err := png.Decode(bytes.NewReader(b)); err != nil {
			t.Errorf("image %s: %v", m[4], err)
		}
	}
	if strings.Contains(page, ".svg") {
		t.Error("links to SVG files that Plot has not written")
	}
	if !strings.Contains(page, `<tr><td>-</td><td class="n">42</td>`) {
		t.Error("a run without variants is not shown as -")
	}
}

func TestDoneCell(t *testing.T) {
	for _, tc := range []struct {
		f    flows.TCPSummary
		want string
	}{
		{flows.TCPSummary{CompletionS: 9.6, Completed: true, Size: 5e6, BytesReceived: 5e6}, "9.60"},
		{flows.TCPSummary{Size: 5e6, BytesReceived: 1234567}, "unfinished: 1.2 of 5.0 MB"},
		{flows.TCPSummary{Size: 5 << 20, BytesReceived: 1258291}, "unfinished: 1.2 of 5.0 MiB"},
		// Bounded by a duration: done when the sender stopped.
		{flows.TCPSummary{BytesReceived: 999}, "-"},
		// A summary.json from before "completed": the completion time says.
		{flows.TCPSummary{CompletionS: 2.5}, "2.50"},
		{flows.TCPSummary{BytesReceived: 2e9, Size: 3e9}, "unfinished: 2.0 of 3.0 GB"},
		{flows.TCPSummary{ResetAtS: 1.5, Size: 5e6, BytesReceived: 1234567}, "reset at 1.50"},
	} {
		if got := done(tc.f); got != tc.want {
			t.Errorf("done(%+v) = %q, want %q", tc.f, got, tc.want)
		}
	}
}

// TestHTMLShowsExpectations renders a run with a passing and a failing
// expectation: the page has an Expectations section whose failed row is
// marked for red, with what the run got.
func TestHTMLShowsExpectations(t *testing.T) {
	dir := t.TempDir()
	writeSynth(t, dir, synthRun{udp: true})
	path := filepath.Join(dir, SummaryFile)
	var sum map[string]any
	b, _ := os.ReadFile(path)
	if err := json.Unmarshal(b, &sum); err != nil {
		t.Fatal(err)
	}
	sum["runs"].([]any)[0].(map[string]any)["expectations"] = []map[string]any{
		{"expect": "flows.probe.loss < 1%", "figure": "flows.probe.loss_ratio", "got": 0.008, "got_text": "0.80%", "pass": true},
		{"expect": "flows.probe.delay_ms.p95 < 40ms", "figure": "flows.probe.delay_ms.p95", "got": 42, "got_text": "42.00ms", "pass": false},
	}
	b, _ = json.Marshal(sum)
	os.WriteFile(path, b, 0o644)
	if err := HTML(openDir(t, dir), "dev"); err != nil {
		t.Fatal(err)
	}
	page := readReport(t, dir)
	for _, want := range []string{
		`<h2 id="expectations">Expectations</h2>`,
		`<tr class="pass"><td>-</td><td><code>flows.probe.loss &lt; 1%</code></td><td class="n">0.80%</td><td>pass</td></tr>`,
		`<tr class="fail"><td>-</td><td><code>flows.probe.delay_ms.p95 &lt; 40ms</code></td><td class="n">42.00ms</td><td>FAIL</td></tr>`,
		`tr.fail td { background: #fde2e1; color: #a40e0e; }`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("report.html lacks %s", want)
		}
	}
}

// TestHTMLShowsABusyMachine: a run whose packets left late (summary.json's
// could_not_keep_up) gets a banner at the top of the report, per run, with
// its figure; a run that kept up gets none.
func TestHTMLShowsABusyMachine(t *testing.T) {
	dir := t.TempDir()
	writeSynth(t, dir, synthRun{udp: true})
	if err := HTML(openDir(t, dir), "dev"); err != nil {
		t.Fatal(err)
	}
	if page := readReport(t, dir); strings.Contains(page, "could not keep up") {
		t.Error("a run that kept up has a banner")
	}
	path := filepath.Join(dir, SummaryFile)
	var sum map[string]any
	b, _ := os.ReadFile(path)
	if err := json.Unmarshal(b, &sum); err != nil {
		t.Fatal(err)
	}
	msg := "uplink: packets left 412 ms late at p99 (980 ms at most) against their exact departure times: the machine was busy, and the path's timing that much coarser than configured"
	sum["runs"].([]any)[0].(map[string]any)["could_not_keep_up"] = []map[string]any{
		{"where": "uplink", "what": "late", "value": 412, "message": msg},
	}
	b, _ = json.Marshal(sum)
	os.WriteFile(path, b, 0o644)
	if err := HTML(openDir(t, dir), "dev"); err != nil {
		t.Fatal(err)
	}
	page := readReport(t, dir)
	banner := strings.Index(page, `<div class="busy" id="could-not-keep-up">`)
	if banner < 0 || banner > strings.Index(page, `<h2 id="runs">`) || !strings.Contains(page, "<li>uplink: packets left 412 ms late at p99 (980 ms at most)") {
		t.Errorf("report.html has no banner at its top with the figure:\n%s", page[:min(len(page), 4000)])
	}
}
