package report

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/netjam/netjam/outdir"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if drawn.dir != "" {
		os.RemoveAll(drawn.dir)
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

var allFigures = []string{"throughput", "delay", "delay-cdf", "rtt", "cwnd", "queue-uplink", "wifi"}

func withFormats(figs ...string) []string {
	var out []string
	for _, f := range figs {
		out = append(out, f+".png", f+".svg")
	}
	return out
}

func TestPlotWritesEveryFigureAsPNGAndSVG(t *testing.T) {
	dir, names := drawnFolder(t)
	if want := withFormats(allFigures...); !slices.Equal(names, want) {
		t.Fatalf("Plot wrote %q, want %q", names, want)
	}
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(n, ".png") {
			checkPNG(t, n, b, 1200, 800)
		} else {
			checkSVG(t, n, b)
		}
	}
	// No temporary file is left behind.
	left, _ := filepath.Glob(filepath.Join(dir, ".*"))
	if len(left) > 0 {
		t.Errorf("temporary files left: %q", left)
	}
}

// checkPNG decodes b and checks its size and that it is not blank.
func checkPNG(t *testing.T, name string, b []byte, w, h int) {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if sz := img.Bounds().Size(); sz.X != w || sz.Y != h {
		t.Errorf("%s: %dx%d, want %dx%d", name, sz.X, sz.Y, w, h)
	}
	if n := colouredPixels(img, img.Bounds()); n < 500 {
		t.Errorf("%s: only %d coloured pixels: no lines drawn?", name, n)
	}
}

// checkSVG checks that b is well-formed XML of a 900 x 600 pt (1200 x 800
// px) SVG, and returns its text elements.
func checkSVG(t *testing.T, name string, b []byte) []string {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(b))
	var texts []string
	var inText bool
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s: not well-formed: %v", name, err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if tok.Name.Local == "svg" {
				for _, a := range tok.Attr {
					if a.Name.Local == "width" && a.Value != "900pt" || a.Name.Local == "height" && a.Value != "600pt" {
						t.Errorf("%s: %s=%q, want 900pt x 600pt", name, a.Name.Local, a.Value)
					}
				}
			}
			inText = tok.Name.Local == "text"
		case xml.CharData:
			if inText {
				texts = append(texts, string(tok))
			}
		case xml.EndElement:
			inText = false
		}
	}
	return texts
}

func svgTexts(t *testing.T, dir, name string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return checkSVG(t, name, b)
}

func TestSVGTitlesAxesAndLegends(t *testing.T) {
	dir, _ := drawnFolder(t)
	for _, tc := range []struct {
		file string
		want []string
	}{
		{"throughput.svg", []string{"synthetic — throughput per flow", "variant a", "variant b", "bulk", "probe",
			"downlink capacity (trace, IP bits)", "throughput (Mbit/s)", "time since the run's start (s)"}},
		{"delay.svg", []string{"synthetic — one-way delay of the UDP flows (mean per sample interval)", "variant a", "variant b", "probe", "one-way delay (ms)"}},
		{"delay-cdf.svg", []string{"a: probe", "b: probe", "p50, p95, p99 of every datagram (summary.json)", "share of sample intervals", "one-way delay (ms)"}},
		{"rtt.svg", []string{"synthetic — smoothed RTT of the TCP flows (sender's srtt)", "bulk", "smoothed RTT (ms)"}},
		{"cwnd.svg", []string{"bulk", "cwnd (segments)"}},
		{"wifi.svg", []string{"synthetic — Wi-Fi medium: airtime share and collisions per station", "variant a: airtime", "variant b: collisions", "sta1", "ap", "airtime share (%)", "collisions per interval"}},
		{"queue-uplink.svg", []string{"synthetic — uplink bottleneck queue", "variant a: queue length (0 drops)", "variant b: queue length (30 drops)",
			"variant b: sojourn time", "queue length", "drops in the interval", "queue length (packets)", "sojourn time (ms)"}},
	} {
		texts := svgTexts(t, dir, tc.file)
		for _, w := range tc.want {
			if !slices.Contains(texts, w) {
				t.Errorf("%s lacks the text %q; it has %q", tc.file, w, texts)
			}
		}
	}
	// The throughput figure says why a TCP flow can spike above the
	// link's rate (in lines wrapped to the figure's width).
	if all := strings.Join(svgTexts(t, dir, "throughput.svg"), " "); !strings.Contains(all,
		"After a loss is repaired, a TCP receiver delivers at once the data it held behind the hole: a spike above the link's rate, not a burst on the link.") {
		t.Errorf("throughput.svg does not explain the spikes: %q", all)
	}
	// The UDP flow is not in the TCP figures, nor the TCP flow in the
	// UDP ones.
	if slices.Contains(svgTexts(t, dir, "rtt.svg"), "probe") || slices.Contains(svgTexts(t, dir, "delay.svg"), "bulk") {
		t.Error("a flow is drawn in a figure of the other type")
	}
}

func TestPlotWithoutVariantsOrUDP(t *testing.T) {
	dir := t.TempDir()
	writeSynth(t, dir, synthRun{tcp: true})
	names, err := Plot(openDir(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	if want := withFormats("throughput", "rtt", "cwnd", "queue-uplink"); !slices.Equal(names, want) {
		t.Fatalf("Plot wrote %q, want %q", names, want)
	}
	texts := svgTexts(t, dir, "throughput.svg")
	if !slices.Contains(texts, "synthetic") || slices.ContainsFunc(texts, func(s string) bool { return strings.HasPrefix(s, "variant") }) {
		t.Errorf("a run without variants should have panels titled by the scenario: %q", texts)
	}
}

func TestManyVariantsMakeTallerImages(t *testing.T) {
	dir := t.TempDir()
	var runs []synthRun
	for _, v := range []string{"v1", "v2", "v3", "v4", "v5"} {
		runs = append(runs, synthRun{variant: v, udp: true})
	}
	writeSynth(t, dir, runs...)
	f, err := load(openDir(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"throughput": 800 + 2*rowPx, "delay-cdf": 800}
	for _, fig := range figures(f) {
		h, ok := want[fig.name]
		if !ok {
			continue // drawing is slow under the race detector: two will do
		}
		delete(want, fig.name)
		b, err := render(f, &fig, formatPNG)
		if err != nil {
			t.Fatal(err)
		}
		checkPNG(t, fig.name, b, 1200, h)
	}
	if len(want) > 0 {
		t.Errorf("figures %v not drawn", want)
	}
}

func TestNotARunFolder(t *testing.T) {
	dir := t.TempDir()
	for _, setup := range []struct {
		name string
		do   func(dir string)
	}{
		{"empty", func(string) {}},
		{"no timeseries", func(d string) { os.WriteFile(filepath.Join(d, SummaryFile), []byte(`{"runs":[]}`), 0o644) }},
		{"no summary", func(d string) {
			os.WriteFile(filepath.Join(d, TimeseriesFile), []byte("variant,time_s,kind,name,value\n"), 0o644)
		}},
	} {
		d := filepath.Join(dir, setup.name)
		os.Mkdir(d, 0o755)
		setup.do(d)
		if _, err := Plot(openDir(t, d)); !errors.Is(err, ErrNotRun) {
			t.Errorf("%s: Plot: %v, want ErrNotRun", setup.name, err)
		}
		if err := HTML(openDir(t, d), "v"); !errors.Is(err, ErrNotRun) {
			t.Errorf("%s: HTML: %v, want ErrNotRun", setup.name, err)
		}
	}
	if _, err := OpenRun(filepath.Join(dir, "missing"), nil); !errors.Is(err, ErrNotRun) || !strings.Contains(err.Error(), "is not a folder") {
		t.Errorf("missing folder: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "file"), nil, 0o644)
	if _, err := OpenRun(filepath.Join(dir, "file"), nil); !errors.Is(err, ErrNotRun) || !strings.Contains(err.Error(), "is not a folder") {
		t.Errorf("a file: %v", err)
	}
}

// TestReportFollowsNoLink: a scenario file in the folder that is a link
// (to a file outside it, or inside) is refused, not shown in report.html,
// and the plots and the report replace links of their names rather than
// write where they point.
func TestReportFollowsNoLink(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "run")
	os.Mkdir(dir, 0o755)
	writeSynth(t, dir, synthRun{udp: true})
	secret := filepath.Join(base, "secret")
	os.WriteFile(secret, []byte("SECRET\n"), 0o600)
	for _, name := range []string{ReportFile, "throughput.png"} {
		os.Symlink(secret, filepath.Join(dir, name))
	}
	if _, err := Plot(openDir(t, dir)); err != nil {
		t.Fatal(err)
	}
	for target, name := range map[string]string{secret: "scenario-x.yaml", "summary.json": "scenario-y.yaml"} {
		link := filepath.Join(dir, name)
		os.Symlink(target, link)
		if err := HTML(openDir(t, dir), "v"); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("a scenario file linked to %s: %v, want an error naming it", target, err)
		}
		os.Remove(link)
	}
	if err := HTML(openDir(t, dir), "v"); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{ReportFile, "throughput.png"} {
		if st, err := os.Lstat(filepath.Join(dir, name)); err != nil || !st.Mode().IsRegular() {
			t.Errorf("%s: %v, want a file in place of the link", name, err)
		}
	}
	if b, _ := os.ReadFile(secret); string(b) != "SECRET\n" {
		t.Errorf("the file outside: %.40q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, ReportFile)); strings.Contains(string(b), "SECRET") {
		t.Error("report.html shows the file outside")
	}
}

func TestMalformedFilesAreErrors(t *testing.T) {
	for _, tc := range []struct{ summary, csv, want string }{
		{`{"runs": [`, "variant,time_s,kind,name,value\n", "summary.json: unexpected end of JSON input"},
		{`{"runs":[]}`, "", "empty file"},
		{`{"runs":[]}`, "a,b,c,d,e\n", `header "a,b,c,d,e"`},
		{`{"runs":[]}`, "variant,time_s,kind,name,value\nx,0.1,cwnd,f,1\nx,zero,cwnd,f,1\n", `line 3: time_s "zero" is not a number`},
		{`{"runs":[]}`, "variant,time_s,kind,name,value\nx,0.1,cwnd,f\n", "wrong number of fields"},
	} {
		d := t.TempDir()
		os.WriteFile(filepath.Join(d, SummaryFile), []byte(tc.summary), 0o644)
		os.WriteFile(filepath.Join(d, TimeseriesFile), []byte(tc.csv), 0o644)
		_, err := Plot(openDir(t, d))
		if err == nil || errors.Is(err, ErrNotRun) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Plot: %v, want an error containing %q", err, tc.want)
		}
	}
}

func TestNonFiniteValuesAreSkipped(t *testing.T) {
	d := t.TempDir()
	os.WriteFile(filepath.Join(d, SummaryFile), []byte(`{"scenario":"s","runs":[{"variant":"","flows":[{"name":"f","type":"tcp"}]}]}`), 0o644)
	os.WriteFile(filepath.Join(d, TimeseriesFile), []byte("variant,time_s,kind,name,value\n,0.1,throughput_bps,f,NaN\n,0.2,throughput_bps,f,+Inf\n,0.3,throughput_bps,f,5e6\n"), 0o644)
	f, err := load(openDir(t, d))
	if err != nil {
		t.Fatal(err)
	}
	if got := f.runs[0].series.get(kindThroughput, "f"); len(got) != 1 || got[0] != (point{0.3, 5e6}) {
		t.Fatalf("points %v", got)
	}
	figs := figures(f)
	if len(figs) != 1 || figs[0].name != "throughput" {
		t.Fatalf("figures %+v", figs)
	}
	if _, err := render(f, &figs[0], formatSVG); err != nil {
		t.Fatal(err)
	}
}

func TestNiceTicks(t *testing.T) {
	labels := func(lo, hi float64, nt niceTicks) []string {
		var out []string
		for _, tk := range nt.Ticks(lo, hi) {
			if tk.Label != "" {
				out = append(out, tk.Label)
			}
		}
		return out
	}
	for _, tc := range []struct {
		lo, hi float64
		nt     niceTicks
		want   string
	}{
		{0, 23.5, niceTicks{n: 12}, "0 2 4 6 8 10 12 14 16 18 20 22"},
		{0, 1, niceTicks{n: 5}, "0.0 0.2 0.4 0.6 0.8 1.0"},
		{0, 1, niceTicks{n: 4}, "0.00 0.25 0.50 0.75 1.00"},
		{0, 0.0055, niceTicks{n: 3}, "0.000 0.002 0.004"},
		{0, 1, niceTicks{n: 5, integer: true}, "0 1"},
		{-7, 7, niceTicks{n: 3}, "-5 0 5"},
		{0, 1040, niceTicks{n: 5}, "0 250 500 750 1000"},
		{0, 1040, niceTicks{n: 4}, "0 500 1000"},
		{0, 29, niceTicks{n: 12}, "0.0 2.5 5.0 7.5 10.0 12.5 15.0 17.5 20.0 22.5 25.0 27.5"}, // not 2, 8, 12 for 2.5, 7.5, 12.5
	} {
		if got := strings.Join(labels(tc.lo, tc.hi, tc.nt), " "); got != tc.want {
			t.Errorf("Ticks(%g, %g) with %+v: %q, want %q", tc.lo, tc.hi, tc.nt, got, tc.want)
		}
	}
}

func TestCDFPoints(t *testing.T) {
	got := cdfPoints([]point{{1, 30}, {2, 10}, {3, 20}, {4, 10}})
	want := []point{{10, 0}, {10, 0.25}, {10, 0.25}, {10, 0.5}, {20, 0.5}, {20, 0.75}, {30, 0.75}, {30, 1}}
	if !slices.Equal(got, want) {
		t.Fatalf("cdfPoints = %v, want %v", got, want)
	}
	if cdfPoints(nil) != nil {
		t.Fatal("CDF of nothing")
	}
}

func TestPeakCapClipsOnlyRarePeaks(t *testing.T) {
	vals := make([]float64, 200)
	for i := range vals {
		vals[i] = 10
	}
	if c := peakCap(slices.Clone(vals)); c != 15 {
		t.Errorf("cap of a flat series: %g, want 15", c)
	}
	vals[7] = 60 // one burst of goodput
	if c := peakCap(slices.Clone(vals)); c != 15 {
		t.Errorf("cap with one peak: %g, want 15", c)
	}
	if c := peakCap(vals[:50]); c < 1e300 {
		t.Errorf("cap of 50 values: %g, want none", c)
	}
}

func TestFileSafe(t *testing.T) {
	for in, want := range map[string]string{"uplink": "uplink", "wifi cell/1": "wifi_cell_1", "..": "_", "": "_"} {
		if got := fileSafe(in); got != want {
			t.Errorf("fileSafe(%q) = %q, want %q", in, got, want)
		}
	}
}

// openDir opens the folder dir for a test, closed when it ends.
func openDir(t testing.TB, dir string) *outdir.Dir {
	t.Helper()
	d, err := OpenRun(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// TestRedraw: netjam plot's redraw writes the plots and report.html of a
// saved run and names them; a path that is no run's folder is ErrNotRun.
func TestRedraw(t *testing.T) {
	dir := t.TempDir()
	writeSynth(t, dir, synthRun{udp: true})
	names, err := Redraw(dir, nil, "v")
	if err != nil || len(names) < 2 || names[len(names)-1] != ReportFile || !slices.Contains(names, "throughput.png") {
		t.Fatalf("%v, %v", names, err)
	}
	for _, n := range names {
		if _, err := os.Stat(filepath.Join(dir, n)); err != nil {
			t.Error(err)
		}
	}
	if _, err := Redraw(filepath.Join(dir, "none"), nil, "v"); !errors.Is(err, ErrNotRun) {
		t.Errorf("no folder: %v, want ErrNotRun", err)
	}
}
