package control

import (
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/netjam/netjam/internal/browsertest"
	"github.com/netjam/netjam/summary"
)

// TestDashboardInBrowser drives the dashboard in a real headless Chromium
// while a run runs: the page loads with no console error and no request
// but to the endpoint; after 2 s the throughput plot has points; the
// uplink's rate set to 2 Mbit/s through the page's input is shown, is the
// API's state, and is the achieved rate of the following intervals; a bad
// value shows the API's message next to the input and changes nothing;
// the run's end shows a link to the report. With NETJAM_UPDATE_DOCS=1 a
// screenshot of the page mid-run goes to docs/dashboard.png.
func TestDashboardInBrowser(t *testing.T) {
	browsertest.Chromium(t) // skip before the run when there is none
	// Long enough for Chromium to start and the page to load on a
	// loaded machine (or under the race detector) before the steps
	// below; the test stops the run once they are done.
	// (For the screenshot, a run whose plots fill the axes.)
	duration := "60s"
	if os.Getenv("NETJAM_UPDATE_DOCS") == "1" {
		duration = "14s"
	}
	tr := startRunAt(t, strings.ReplaceAll(`name: dashboard
duration: DUR
sample_interval: 200ms
link: {delay: 10ms, uplink: {rate: 10Mbps}, downlink: {rate: 5Mbps}}
flows:
  - {name: video, type: udp, rate: 4Mbps, packet_size: 1400, duration: DUR}
  - {name: bulk, type: tcp, direction: down, duration: DUR}
`, "DUR", duration), "127.0.0.1:0")
	samples := tr.events(t)
	ctx, problems := browsertest.Start(t, tr.base)
	start := time.Now()
	if err := chromedp.Do(ctx, chromedp.Navigate(tr.base+"/"), chromedp.WaitVisible(chromedp.CSS("#in-uplink-rate"))); err != nil {
		t.Fatal(err)
	}
	// After 2 s, the throughput plot has points.
	time.Sleep(2*time.Second - time.Since(start))
	points, err := chromedp.Run(ctx, chromedp.Evaluate[int](`[...document.querySelectorAll("#plot-throughput polyline.series")].reduce((n, p) => n + p.points.numberOfItems, 0)`))
	if err != nil || points == 0 {
		t.Errorf("the throughput plot has %d points after 2 s (%v)", points, err)
	}

	// The uplink's rate, through the page.
	err = chromedp.Do(ctx, chromedp.SendKeys(chromedp.CSS("#in-uplink-rate"), "2Mbps\r"),
		browsertest.Until(`document.querySelector('.cur[data-key="link.uplink.rate"]').textContent === "2 Mbit/s"`, 10*time.Second))
	if err != nil {
		shown := browsertest.Text(ctx, `.cur[data-key="link.uplink.rate"]`)
		msg := browsertest.Text(ctx, `.err[data-key="link.uplink.rate"]`)
		t.Fatalf("the rate shown after setting 2Mbps: %q (error shown: %q), %v", shown, msg, err)
	}
	if rate := uplinkRate(t, tr); rate != 2e6 {
		t.Errorf("the API's uplink rate after the page set 2Mbps: %v", rate)
	}
	// The achieved rate of the intervals after the change, from the
	// event stream the page reads: the UDP flow sends 4 Mbit/s of
	// payload, so the bottleneck is busy and sends 2 Mbit/s of IP. In a
	// 200 ms interval that is 35 packets of 1428 bytes: one more or less
	// is 3%. A sampler tick late on a loaded machine (or under the race
	// detector), or the whole process stalled, moves bytes from one
	// interval to the next: the median of the intervals of the next 2 s
	// (the one the change fell in left out) is not moved by that unless
	// most of them are; 10% holds the packet and the rest.
	changedAt := -1.0
	seen := map[float64]bool{}
	var rates []float64
	var window []string
	for t0 := 0.0; changedAt < 0 || t0 < 2 || len(rates) < 5; {
		e := next(t, samples, "sample")
		var ev summary.LiveEvent
		json.Unmarshal([]byte(e.data), &ev)
		v, _ := rowValue(ev.Rows, "link_bps", "uplink")
		seen[v] = true
		if changedAt < 0 {
			if rate, ok := rowValue(ev.Rows, "configured_rate_bps", "uplink"); ok && rate == 2e6 {
				changedAt = ev.TimeS // the sample after the change: its interval has it
			}
			continue
		}
		q, _ := rowValue(ev.Rows, "queue_packets", "uplink")
		window = append(window, fmt.Sprintf("%.3f s: %.0f bit/s, queue %.0f", ev.TimeS, v, q))
		rates = append(rates, v)
		t0 = ev.TimeS - changedAt
	}
	slices.Sort(rates)
	if got := rates[len(rates)/2]; math.Abs(got-2e6) > 0.1*2e6 {
		t.Errorf("achieved %.0f bit/s (the median of %d intervals) after the change to 2 Mbit/s:\n%s", got, len(rates), strings.Join(window, "\n"))
	}
	// The page shows the samples it gets: its achieved rate is one of
	// the stream's.
	pageBps, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`parseFloat(document.querySelector('.achieved[data-dir="uplink"]').dataset.bps)`))
	for timeout := time.After(5 * time.Second); err == nil && !seen[pageBps]; {
		select {
		case e := <-samples:
			var ev summary.LiveEvent
			json.Unmarshal([]byte(e.data), &ev)
			if v, ok := rowValue(ev.Rows, "link_bps", "uplink"); ok {
				seen[v] = true
			}
		case <-timeout:
			err = fmt.Errorf("not among the %d samples of the stream", len(seen))
		}
	}
	if err != nil {
		t.Errorf("the page shows %v bit/s achieved: %v", pageBps, err)
	}

	// A bad value: the API's message next to the input, nothing changed.
	err = chromedp.Do(ctx, chromedp.SendKeys(chromedp.CSS("#in-uplink-rate"), "fast\r"),
		browsertest.Until(`document.querySelector('.err[data-key="link.uplink.rate"]').textContent !== ""`, 10*time.Second))
	msg := browsertest.Text(ctx, `.err[data-key="link.uplink.rate"]`)
	if want := `link.uplink.rate: "fast" is not a rate`; err != nil || !strings.Contains(msg, want) {
		t.Errorf("the error shown for a bad rate: %q (%v), want %q", msg, err, want)
	}
	if rate := uplinkRate(t, tr); rate != 2e6 {
		t.Errorf("a bad value changed the uplink's rate to %v", rate)
	}

	if os.Getenv("NETJAM_UPDATE_DOCS") == "1" {
		for {
			_, b := tr.do(t, "GET", "/v1/status", "")
			var st summary.LiveStatus
			if json.Unmarshal(b, &st) != nil || st.ElapsedS > 12 {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join("..", "docs", "dashboard.png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// The TCP flow's connection, reset from the page: offered by name,
	// ended, recorded.
	err = chromedp.Do(ctx, chromedp.WaitReady(chromedp.CSS(`#flow-reset-name option[value="bulk"]`)),
		chromedp.Click(chromedp.CSS("#flow-reset")))
	if err != nil {
		t.Errorf("resetting bulk from the page: %v", err)
	}
	for {
		var chg summary.LiveEvent
		json.Unmarshal([]byte(next(t, samples, "change").data), &chg)
		if len(chg.Changes) > 0 && chg.Changes[0].Key == "reset" {
			break
		}
	}

	// The end, and the report's link.
	if code, b := tr.do(t, "POST", "/v1/stop", ""); code != 200 {
		t.Fatalf("POST /v1/stop: %d %s", code, b)
	}
	sum := tr.wait(t)
	os.WriteFile(filepath.Join(tr.dir, "report.html"), []byte("<!doctype html><title>report</title>"), 0o644)
	tr.srv.Finished(tr.dir)
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS("#report"))); err != nil {
		t.Fatal(err)
	}
	href, _ := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.CSS("#report"), "href"))
	status, err := chromedp.Run(ctx, chromedp.Evaluate[int](`fetch(document.getElementById("report").href).then(r => r.status)`, chromedp.EvalAwaitPromise))
	if err != nil || href.Value != "/results/report.html" || status != 200 {
		t.Errorf("the report's link: %q, GET %d, %v", href.Value, status, err)
	}
	var tl []string
	for _, e := range sum.Runs[0].Timeline {
		tl = append(tl, e.Key+"="+e.New)
	}
	if strings.Join(tl, " ") != "link.uplink.rate=2Mbps reset=bulk" {
		t.Errorf("the run's timeline: %q, want the change and the reset the page made", tl)
	}
	for _, p := range problems() {
		t.Error(p)
	}
}

// uplinkRate is the uplink's configured rate, as the API has it.
func uplinkRate(t *testing.T, tr *testRun) uint64 {
	t.Helper()
	_, b := tr.do(t, "GET", "/v1/links", "")
	var links []summary.LinkSummary
	if err := json.Unmarshal(b, &links); err != nil || len(links) != 2 {
		t.Fatalf("GET /v1/links: %v %s", err, b)
	}
	return links[0].Configured.RateBps
}

// rowValue is the value of kind for name among a sample's rows.
func rowValue(rows []summary.SeriesRow, kind, name string) (float64, bool) {
	for _, r := range rows {
		if r.Kind == kind && r.Name == name {
			return r.Value, true
		}
	}
	return 0, false
}

// TestDashboardFiles: on an endpoint with a token, the dashboard's files
// are served without it, each with its type and the CSP that lets the
// page run its own scripts: the page, its script, its style, and the
// script it shares with netjam proxy's dashboard (api.js, which the page
// loads before its own); the API still needs the token.
func TestDashboardFiles(t *testing.T) {
	base := "http://" + startTokenEndpoint(t).String()
	browsertest.Served(t, base+"/", "text/html; charset=utf-8", "<script src=\"/ui/api.js\" defer></script>\n<script src=\"/ui/app.js\" defer></script>")
	browsertest.Served(t, base+"/ui/app.js", "text/javascript; charset=utf-8", "dashboard({")
	browsertest.Served(t, base+"/ui/api.js", "text/javascript; charset=utf-8", "function dashboard(")
	browsertest.Served(t, base+"/ui/style.css", "text/css; charset=utf-8", "body")
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	for _, path := range []string{"/v1/status", "/v1/links", "/v1/events", "/metrics"} {
		resp, err := client.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 401 {
			t.Errorf("GET %s without the token: %d, want 401", path, resp.StatusCode)
		}
	}
}

// startTokenEndpoint serves an endpoint whose token is s3cret, with no
// run, until the test's end; it returns its address.
func startTokenEndpoint(t *testing.T) *net.TCPAddr {
	t.Helper()
	ln, err := Listen("127.0.0.1:0", ListenOptions{HasToken: true})
	if err != nil {
		t.Fatal(err)
	}
	s := Serve(ln, Endpoint{Token: "s3cret"}, func() {})
	t.Cleanup(func() { s.Close() })
	return ln.Addr().(*net.TCPAddr)
}

// TestDashboardAsksForToken: on an endpoint with a token, the page opened
// without it asks for it, refuses a wrong one with the API's message, and
// with the right one talks to the API (no run yet: it says it waits for
// one). The URL netjam prints (/?token=TOKEN) opens the page at once and
// leaves the address bar without the token; a wrong one there asks. The
// token is kept in a session cookie of the endpoint's port, HttpOnly
// (the page's script cannot read it) and SameSite=Strict, holding a value
// derived from the token rather than the token.
func TestDashboardAsksForToken(t *testing.T) {
	browsertest.Chromium(t)
	addr := startTokenEndpoint(t)
	base := "http://" + addr.String()
	ctx, problems := browsertest.Start(t, base)
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("#token")),
		browsertest.Enter("#token", "nope")); err != nil {
		t.Fatal(err)
	}
	poll := func(expr string) error { return chromedp.Do(ctx, browsertest.Until(expr, 10*time.Second)) }
	cookies := func() []*network.Cookie {
		res, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{})
		if err != nil {
			t.Fatal(err)
		}
		return res.Cookies
	}
	if err := poll(`document.getElementById("login-err").textContent.includes("missing or wrong token")`); err != nil {
		t.Errorf("a wrong token: %v", err)
	}
	if c := cookies(); len(c) != 0 {
		t.Errorf("a wrong token is kept: %+v", c)
	}
	waiting := `document.getElementById("login").hidden && document.getElementById("state").textContent === "waiting for a run"`
	if err := chromedp.Do(ctx, browsertest.Enter("#token", "s3cret"), browsertest.Until(waiting, 10*time.Second)); err != nil {
		t.Errorf("the right token: %v (state %q)", err, browsertest.Text(ctx, "#state"))
	}
	checkCookie := func(when string) {
		t.Helper()
		c := cookies()
		if len(c) != 1 || c[0].Name != cookieName(addr.Port, false) || !c[0].Session || !c[0].HTTPOnly ||
			c[0].SameSite != network.CookieSameSiteStrict || c[0].Path != "/" || strings.Contains(c[0].Value, "s3cret") {
			t.Errorf("%s: cookies %+v, want one session cookie of the port, HttpOnly, SameSite=Strict, not holding the token", when, c)
		}
		if v, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.cookie`)); v != "" {
			t.Errorf("%s: the page's script reads the cookie: %q", when, v)
		}
	}
	checkCookie("the token typed in")

	// The URL netjam prints.
	if _, err := chromedp.Call(ctx, network.ClearBrowserCookies, cdp.Empty{}); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/?token=s3cret")); err != nil {
		t.Fatal(err)
	}
	if err := poll(waiting); err != nil {
		t.Errorf("the URL with the token: %v", err)
	}
	if href, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href`)); href != base+"/" {
		t.Errorf("the address bar after the URL with the token: %q, want %q", href, base+"/")
	}
	checkCookie("the URL with the token")
	if _, err := chromedp.Call(ctx, network.ClearBrowserCookies, cdp.Empty{}); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/?token=stale")); err != nil {
		t.Fatal(err)
	}
	if err := poll(`!document.getElementById("login").hidden && document.getElementById("login-err").textContent.includes("the URL's token")`); err != nil {
		t.Errorf("the URL with a wrong token: %v", err)
	}
	for _, p := range problems() {
		t.Error(p)
	}
}

// TestDashboardLinksList: with a links list the dashboard has each
// link's directions (eu.uplink, ...), and a value typed into one changes
// that link alone (links.eu.uplink.delay).
func TestDashboardLinksList(t *testing.T) {
	browsertest.Chromium(t) // skip before the run when there is none
	tr := startRunAt(t, `name: dashboard
duration: 60s
sample_interval: 200ms
links:
  - {name: access, rate: 20Mbps}
  - {name: eu, delay: 10ms}
paths:
  - {name: to-eu, via: [access, eu], match: {dst: 10.20.0.0/16}}
  - {name: direct, via: [access]}
flows:
  - {name: probe, type: udp, rate: 1Mbps, packet_size: 1000, duration: 60s, path: to-eu}
`, "127.0.0.1:0")
	ctx, problems := browsertest.Start(t, tr.base)
	in := `input[data-key="links.eu.uplink.delay"]`
	err := chromedp.Do(ctx, chromedp.Navigate(tr.base+"/"), chromedp.WaitVisible(chromedp.CSS(in)),
		chromedp.SendKeys(chromedp.CSS(in), "30ms\r"),
		browsertest.Until(`document.querySelector('.cur[data-key="links.eu.uplink.delay"]').textContent === "30 ms"`, 10*time.Second))
	if err != nil {
		msg := browsertest.Text(ctx, `.err[data-key="links.eu.uplink.delay"]`)
		t.Fatalf("setting eu.uplink's delay through the page: %v (error shown: %q)", err, msg)
	}
	code, b := tr.do(t, "GET", "/v1/links/eu.uplink", "")
	if code != 200 || !strings.Contains(string(b), `"delay_ms":30`) {
		t.Errorf("GET /v1/links/eu.uplink after the page set 30ms: %d %s", code, b)
	}
	if code, b := tr.do(t, "GET", "/v1/links/access.uplink", ""); code != 200 || !strings.Contains(string(b), `"delay_ms":0`) {
		t.Errorf("GET /v1/links/access.uplink: %d %s", code, b)
	}
	tr.do(t, "POST", "/v1/stop", "")
	tr.wait(t)
	if p := problems(); len(p) > 0 {
		t.Errorf("the page's problems: %q", p)
	}
}

// For the tests that open the page on a run: its state once it shows
// the run ended; the throughput plot's curve of the flow named probe; and
// JavaScript that defines, on that plot, xs, the x of each of probe's
// points, and time(x), the time at x on its axis (from the positions of
// its first two ticks).
const (
	pageEnded  = `document.getElementById("state").dataset.state === "ended"`
	probeCurve = `#plot-throughput polyline.series[data-name="probe"]`
	probeTimes = `
		const svg = document.querySelector("#plot-throughput svg");
		const ticks = [...svg.querySelectorAll("text")].filter((e) => e.getAttribute("y") === "270");
		const [a, b] = ticks.map((e) => ({ t: +e.textContent, x: +e.getAttribute("x") }));
		const time = (x) => a.t + (x - a.x) * (b.t - a.t) / (b.x - a.x);
		const xs = [...svg.querySelectorAll('` + probeCurve + `')].flatMap((p) => [...p.points].map((q) => q.x));`
)

// TestDashboardOpenedAfterTheRun opens the page once a run has ended (its
// last events replayed): the timeline's ramp of 100 changes is one
// hatched band on the plots, not 100 lines; the UDP flow's delay, of
// which the 1 s outage has no sample, is drawn with a gap there, not a
// straight line across; the loss plot defines its percentage; and the
// Connections list still names the TCP flow, which can no longer be
// reset.
func TestDashboardOpenedAfterTheRun(t *testing.T) {
	browsertest.Chromium(t) // skip before the run when there is none
	tr := startRunAt(t, `name: dashboard
duration: 4s
sample_interval: 100ms
link: {delay: 5ms}
flows:
  - {name: probe, type: udp, rate: 1Mbps, packet_size: 1000, duration: 4s}
  - {name: bulk, type: tcp, duration: 4s}
timeline:
  - {at: 500ms, ramp: 1s, set: {link.delay: 50ms}}
  - {at: 2s, for: 1s, set: {link.loss: 100%}}
`, "127.0.0.1:0")
	tr.wait(t)
	ctx, problems := browsertest.Start(t, tr.base)
	type pageState struct {
		Ramps, Marks, DelaySegments int
		Note                        string
		Flows                       []string
		Disabled                    bool
	}
	err := chromedp.Do(ctx, chromedp.Navigate(tr.base+"/"),
		browsertest.Until(pageEnded+` && document.querySelector("#plot-delay polyline") !== null`, 30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	got, err := chromedp.Run(ctx, chromedp.Evaluate[pageState](`({
		ramps: document.querySelectorAll("#plot-delay rect.ramp").length,
		marks: document.querySelectorAll("#plot-delay line.mark").length,
		delaySegments: document.querySelectorAll('#plot-delay polyline[data-name="probe"]').length,
		note: (document.querySelector("#plot-loss .note") || {}).textContent || "",
		flows: [...document.querySelectorAll("#flow-reset-name option")].map((o) => o.value),
		disabled: document.getElementById("flow-reset").disabled,
	})`))
	if err != nil {
		t.Fatal(err)
	}
	if got.Ramps != 1 || got.Marks > 4 {
		t.Errorf("the delay plot has %d ramp bands and %d change lines, want the ramp as 1 band and the outage's 2 changes as lines", got.Ramps, got.Marks)
	}
	if got.DelaySegments < 2 {
		t.Errorf("the probe's delay is drawn as %d line(s), want a gap at the outage", got.DelaySegments)
	}
	if !strings.Contains(got.Note, "the share found lost, 0 to 100%") {
		t.Errorf("the loss plot's note: %q", got.Note)
	}
	if !slices.Equal(got.Flows, []string{"bulk"}) || !got.Disabled {
		t.Errorf("after the run, Connections lists %q (reset disabled: %v), want bulk, disabled", got.Flows, got.Disabled)
	}
	if p := problems(); len(p) > 0 {
		t.Errorf("the page's problems: %q", p)
	}
}

// TestDashboardOpenedLateShowsTheWholeRun opens the page mid-run, after a
// ramp of 300 changes has pushed the run's start out of the event
// stream's last 300 events: the page takes the series and the timeline
// from the run's start (GET /v1/series, GET /v1/timeline), so that its
// throughput plot starts at the run's first sample (0.05 s) and the ramp
// is one band from 1 s to 4 s (the stream's events alone began at about
// 1.7 s). It then follows the stream to the run's end, without gaps or
// duplicates: the page's points are the run's samples, each once, in
// time order; and the page opened again after the run has them all too.
func TestDashboardOpenedLateShowsTheWholeRun(t *testing.T) {
	browsertest.Chromium(t) // skip before the run when there is none
	tr := startRunAt(t, `name: late
duration: 8s
sample_interval: 50ms
link: {delay: 5ms}
flows:
  - {name: probe, type: udp, rate: 1Mbps, packet_size: 1000, duration: 8s}
timeline:
  - {at: 1s, ramp: 3s, set: {link.delay: 30ms}}
`, "127.0.0.1:0")
	ctx, problems := browsertest.Start(t, tr.base)
	if err := chromedp.Do(ctx); err != nil { // Chromium started, no page yet
		t.Fatal(err)
	}
	// After the ramp, while the run runs (unless Chromium took 8 s).
	for {
		code, b := tr.do(t, "GET", "/v1/status", "")
		var st summary.LiveStatus
		if code != 200 || json.Unmarshal(b, &st) != nil || st.ElapsedS >= 4.5 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	err := chromedp.Do(ctx, chromedp.Navigate(tr.base+"/"),
		browsertest.Until(`document.querySelector('`+probeCurve+`') !== null`, 30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	// Times on the plot's x axis (probeTimes).
	type plotState struct {
		First, Last      float64 // the first and last point's times
		Points           int
		Increasing       bool
		Ramps            int
		RampFrom, RampTo float64
		RampItems        int
		State            string
	}
	measure := func() plotState {
		t.Helper()
		got, err := chromedp.Run(ctx, chromedp.Evaluate[plotState](`(() => {`+probeTimes+`
			const ramps = [...svg.querySelectorAll("rect.ramp")];
			const r = ramps[0];
			return {
				first: time(Math.min(...xs)), last: time(Math.max(...xs)), points: xs.length,
				increasing: xs.every((x, i) => i === 0 || x > xs[i - 1]),
				ramps: ramps.length,
				rampFrom: r ? time(+r.getAttribute("x")) : -1,
				rampTo: r ? time(+r.getAttribute("x") + +r.getAttribute("width")) : -1,
				rampItems: document.querySelectorAll("#timeline li.ramp").length,
				state: document.getElementById("state").dataset.state,
			};
		})()`))
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	got := measure()
	t.Logf("opened at about %.1f s: points from %.2f s to %.2f s (%d), the ramp's band from %.2f s to %.2f s", got.Last, got.First, got.Last, got.Points, got.RampFrom, got.RampTo)
	if got.First > 0.2 {
		t.Errorf("opened late, the throughput plot starts at %.2f s, want the run's first sample (0.05 s)", got.First)
	}
	if got.Ramps != 1 || math.Abs(got.RampFrom-1) > 0.1 || math.Abs(got.RampTo-4) > 0.1 || got.RampItems != 1 {
		t.Errorf("opened late, %d ramp bands, the first from %.2f s to %.2f s, %d ramps in the timeline list; want one from 1 s to 4 s",
			got.Ramps, got.RampFrom, got.RampTo, got.RampItems)
	}

	// To the run's end: every sample once, in order.
	tr.wait(t)
	if err := chromedp.Do(ctx, browsertest.Until(pageEnded, 20*time.Second)); err != nil {
		t.Fatal(err)
	}
	code, b := tr.do(t, "GET", "/v1/series", "")
	var s SeriesSnapshot
	if err := json.Unmarshal(b, &s); code != 200 || err != nil {
		t.Fatalf("GET /v1/series: %d %v", code, err)
	}
	want := 0
	for _, sr := range s.Series {
		if sr.Kind == "throughput_bps" && sr.Name == "probe" {
			for _, v := range sr.Mean {
				if !math.IsNaN(v) {
					want++
				}
			}
		}
	}
	// The last sample may reach the page after the end; the page draws
	// each one at once.
	time.Sleep(500 * time.Millisecond)
	end := measure()
	if end.Points != want || !end.Increasing || s.Level != 0 {
		t.Errorf("after the run the page has %d points of the probe's throughput (in time order: %v), the run's series %d (level %d)", end.Points, end.Increasing, want, s.Level)
	}

	// Opened again once the run has ended: the same, from the start.
	err = chromedp.Do(ctx, chromedp.Navigate(tr.base+"/"),
		browsertest.Until(pageEnded+` && document.querySelector('`+probeCurve+`') !== null`, 30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	after := measure()
	if after.First > 0.2 || after.Points != want || !after.Increasing || after.Ramps != 1 || math.Abs(after.RampFrom-1) > 0.1 || after.RampItems != 1 {
		t.Errorf("opened after the run: %d points from %.2f s (in time order: %v), %d ramp bands from %.2f s, %d in the list; want %d from 0.05 s, one ramp from 1 s",
			after.Points, after.First, after.Increasing, after.Ramps, after.RampFrom, after.RampItems, want)
	}
	if p := problems(); len(p) > 0 {
		t.Errorf("the page's problems: %q", p)
	}
}

// TestDashboardPlotsMergedSeries: with the series store held to 16
// points, a run of 80 samples is merged into points of 8: the page
// opened after it draws each point once at the middle of its samples,
// from the run's start, its mean as the line and its least to greatest
// as a shaded band.
func TestDashboardPlotsMergedSeries(t *testing.T) {
	browsertest.Chromium(t) // skip before the run when there is none
	seriesPoints = 16
	t.Cleanup(func() { seriesPoints = maxSeriesPoints })
	tr := startRunAt(t, `name: merged
duration: 4s
sample_interval: 50ms
link: {delay: 5ms}
flows:
  - {name: probe, type: udp, rate: 1Mbps, packet_size: 1000, duration: 4s}
`, "127.0.0.1:0")
	tr.wait(t)
	code, b := tr.do(t, "GET", "/v1/series", "")
	var s SeriesSnapshot
	if err := json.Unmarshal(b, &s); code != 200 || err != nil || s.Level < 2 || len(s.ToS) > 16 {
		t.Fatalf("GET /v1/series: %d %v, level %d, %d points", code, err, s.Level, len(s.ToS))
	}
	want := 0
	for _, sr := range s.Series {
		if sr.Kind == "throughput_bps" && sr.Name == "probe" {
			for _, v := range sr.Mean {
				if !math.IsNaN(v) {
					want++
				}
			}
		}
	}
	ctx, problems := browsertest.Start(t, tr.base)
	err := chromedp.Do(ctx, chromedp.Navigate(tr.base+"/"),
		browsertest.Until(pageEnded+` && document.querySelector('`+probeCurve+`') !== null`, 30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	type merged struct {
		Points, Ranges int
		First          float64
	}
	got, err := chromedp.Run(ctx, chromedp.Evaluate[merged](`(() => {`+probeTimes+`
		return {
			points: xs.length,
			ranges: svg.querySelectorAll('polygon.range[data-name="probe"]').length,
			first: time(Math.min(...xs)),
		};
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	// The first point merges the samples from 0.05 s to 2^level of them.
	mid := (s.FromS[0] + s.ToS[0]) / 2
	if got.Points != want || got.Ranges == 0 || math.Abs(got.First-mid) > 0.05 {
		t.Errorf("the page has %d points (the series %d), %d shaded ranges, the first at %.3f s (want %.3f s, the middle of its samples)",
			got.Points, want, got.Ranges, got.First, mid)
	}
	if p := problems(); len(p) > 0 {
		t.Errorf("the page's problems: %q", p)
	}
}
