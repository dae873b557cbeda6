package proxy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/netjam/netjam/control"
	"github.com/netjam/netjam/internal/browsertest"
	"github.com/netjam/netjam/proxy"
)

// TestProxyDashboardInBrowser drives netjam proxy's dashboard in a real
// headless Chromium: a proxy and a toxic made through the API, both with
// names that are HTML, are listed as text (no element made of them, no
// script run), with the bytes a request through the proxy carried; a
// change of the toxic through the API is shown within the polls; the
// page's browser still cannot call the API itself.
func TestProxyDashboardInBrowser(t *testing.T) {
	browsertest.Chromium(t)
	_, api := startServer(t, proxy.Options{UI: true})
	up := upstream(t)
	const name, toxic = `<img src=x onerror=alert(1)>`, `<svg onload=alert(2)>`
	esc := url.PathEscape(name)
	body, _ := json.Marshal(map[string]string{"name": name, "upstream": up})
	code, resp := call(t, api, "POST", "/proxies", string(body))
	if code != 201 {
		t.Fatalf("create: %d %s", code, resp)
	}
	var p struct{ Listen string }
	if err := json.Unmarshal([]byte(resp), &p); err != nil {
		t.Fatal(err)
	}
	body, _ = json.Marshal(map[string]any{"name": toxic, "type": "latency", "attributes": map[string]int{"latency": 100}})
	if code, resp := call(t, api, "POST", "/proxies/"+esc+"/toxics", string(body)); code != 200 {
		t.Fatalf("add the toxic: %d %s", code, resp)
	}
	r, err := client.Get("http://" + p.Listen + "/")
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()

	base := "http://" + api
	ctx, problems := browsertest.Start(t, base)
	js := func(v string) string { b, _ := json.Marshal(v); return string(b) }
	// shows is true once the proxy's box has the toxic with attributes
	// holding want.
	shows := func(want string) string {
		return fmt.Sprintf(`(() => {
  const b = [...document.querySelectorAll("section.proxy")].find((s) => s.dataset.proxy === %s);
  const tr = b && [...b.querySelectorAll("tr[data-toxic]")].find((r) => r.dataset.toxic === %s);
  return !!tr && tr.cells[0].textContent === %[2]s && tr.cells[1].textContent === "latency" &&
    tr.cells[2].textContent === "downstream" && tr.cells[3].textContent === "1" && tr.cells[4].textContent.includes(%s);
})()`, js(name), js(toxic), js(want))
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/ui/")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the proxy and its toxic", shows("latency=100"))
	waitFor(t, ctx, "the bytes of the request", `document.querySelector('section.proxy [data-key="downstream-bytes"]').textContent !== "0 B in, 0 B out"`)
	checks := map[string]string{
		"the proxy's name, as text": `document.querySelector("section.proxy h3 .name").textContent === ` + js(name),
		"its upstream":              `document.querySelector('section.proxy [data-key="upstream"]').textContent === ` + js(up),
		"its listen":                `document.querySelector('section.proxy [data-key="listen"]').textContent === ` + js(p.Listen),
		"no element of the names":   `document.querySelectorAll("img, svg").length === 0`,
		"the state":                 `document.getElementById("state").textContent === "live"`,
	}
	for what, expr := range checks {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](expr))
		if err != nil || !ok {
			t.Errorf("%s: %v (%s)", what, err, expr)
		}
	}

	body, _ = json.Marshal(map[string]any{"attributes": map[string]int{"latency": 250}})
	if code, resp := call(t, api, "POST", "/proxies/"+esc+"/toxics/"+url.PathEscape(toxic), string(body)); code != 200 {
		t.Fatalf("change the toxic: %d %s", code, resp)
	}
	waitFor(t, ctx, "the toxic changed", shows("latency=250"))

	status, err := chromedp.Run(ctx, chromedp.Evaluate[int](`fetch("/proxies", {method: "POST", body: "{}"}).then((r) => r.status)`, chromedp.EvalAwaitPromise))
	if err != nil || status != http.StatusForbidden {
		t.Errorf("the page's POST /proxies: %d %v, want 403: the API stays closed to browsers", status, err)
	}
	for _, p := range problems() {
		t.Error(p)
	}
}

// TestProxyDashboardGuard: the dashboard is served with --ui only; its
// paths take a browser's requests of its own origin and loopback Host,
// with the token when there is one (Bearer, or the cookie its URL sets);
// the API's paths stay closed to browsers, and the cookie opens only the
// dashboard's. Its answer cuts long attributes (a trace's data).
func TestProxyDashboardGuard(t *testing.T) {
	const ua = "Mozilla/5.0 (X11; Linux x86_64)"
	_, off := startServer(t, proxy.Options{})
	if code, _ := call(t, off, "GET", "/ui/", "", "User-Agent", ua); code != 403 {
		t.Errorf("without --ui, a browser's GET /ui/: %d, want 403", code)
	}
	if code, _ := call(t, off, "GET", "/ui/proxies", ""); code != 404 {
		t.Errorf("without --ui, GET /ui/proxies: %d, want 404", code)
	}

	_, api := startServer(t, proxy.Options{UI: true})
	trace := strings.Repeat("1\n", 5000)
	call(t, api, "POST", "/proxies", `{"name": "p", "upstream": "127.0.0.1:9"}`)
	body, _ := json.Marshal(map[string]any{"type": "trace", "attributes": map[string]string{"data": trace}})
	if code, resp := call(t, api, "POST", "/proxies/p/toxics", string(body)); code != 200 {
		t.Fatalf("a trace toxic: %d %s", code, resp)
	}
	for _, c := range []struct {
		path   string
		header []string
		want   int
	}{
		{"/ui/", []string{"User-Agent", ua}, 200},
		{"/ui/proxies.js", []string{"User-Agent", ua}, 200},
		{"/ui/style.css", []string{"User-Agent", ua}, 200},
		{"/ui/api.js", []string{"User-Agent", ua}, 200},
		{"/ui/proxies", []string{"User-Agent", ua, "Origin", "http://" + api}, 200},
		{"/ui/proxies", []string{"User-Agent", ua, "Origin", "http://evil.example"}, 403},
		{"/ui/proxies", []string{"User-Agent", ua, "Host", "evil.example:8474"}, 403},
		{"/ui/nothing", nil, 404},
		{"/proxies", []string{"User-Agent", ua}, 403},
	} {
		if code, resp := call(t, api, "GET", c.path, "", c.header...); code != c.want {
			t.Errorf("GET %s %v: %d %.200s, want %d", c.path, c.header, code, resp, c.want)
		}
	}
	_, resp := call(t, api, "GET", "/ui/proxies", "")
	var st struct {
		Proxies []struct {
			Toxics []struct{ Attributes [][2]string }
		}
	}
	if err := json.Unmarshal([]byte(resp), &st); err != nil || len(st.Proxies) != 1 || len(st.Proxies[0].Toxics) != 1 {
		t.Fatalf("GET /ui/proxies: %v %.300s", err, resp)
	}
	for _, a := range st.Proxies[0].Toxics[0].Attributes {
		if a[0] == "data" && (len(a[1]) > 200 || !strings.HasSuffix(a[1], "(10000 bytes)")) {
			t.Errorf("a trace's data in GET /ui/proxies: %d bytes %q, want it cut", len(a[1]), a[1])
		}
	}

	a := startTokenServer(t)
	if code, _ := call(t, a, "GET", "/ui/", "", "User-Agent", ua); code != 200 {
		t.Errorf("with a token, the page without it: %d, want 200 (it asks for the token)", code)
	}
	if code, _ := call(t, a, "GET", "/ui/proxies", "", "User-Agent", ua); code != 401 {
		t.Errorf("with a token, GET /ui/proxies without it: %d, want 401", code)
	}
	get := func(path string, header ...string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("GET", "http://"+a+path, nil)
		for i := 0; i+1 < len(header); i += 2 {
			if header[i] == "Host" {
				req.Host = header[i+1]
			}
			req.Header.Set(header[i], header[i+1])
		}
		r, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		return r
	}
	if r := get("/ui/?token=stale"); len(r.Cookies()) != 0 {
		t.Errorf("a wrong token in the URL sets %v", r.Cookies())
	}
	cs := get("/ui/?token=s3cret").Cookies()
	if len(cs) != 1 || !cs[0].HttpOnly || cs[0].SameSite != http.SameSiteStrictMode || cs[0].Path != "/ui/" || strings.Contains(cs[0].Value, "s3cret") {
		t.Fatalf("the URL with the token sets %+v, want one HttpOnly, SameSite=Strict cookie for /ui/, not holding the token", cs)
	}
	cookie := cs[0].Name + "=" + cs[0].Value
	if r := get("/ui/proxies", "User-Agent", ua, "Cookie", cookie); r.StatusCode != 200 {
		t.Errorf("GET /ui/proxies with the cookie: %d, want 200", r.StatusCode)
	}
	if r := get("/proxies", "Cookie", cookie); r.StatusCode != 401 {
		t.Errorf("GET /proxies with the dashboard's cookie: %d, want 401: it opens the dashboard only", r.StatusCode)
	}
	if r := get("/ui/proxies", "Authorization", "Bearer s3cret", "Host", "proxy.example:8474"); r.StatusCode != 200 {
		t.Errorf("GET /ui/proxies with the token: %d, want 200", r.StatusCode)
	}
}

// TestProxyDashboardFiles: with a token, the dashboard's files and none
// else are served without it, each with its type and the page's CSP: the
// page, its script, and the run dashboard's style and the script the two
// dashboards share (control's api.js, which the page loads before its
// own); every other path under /ui/, the run dashboard's other files
// included, needs the token.
func TestProxyDashboardFiles(t *testing.T) {
	api := startTokenServer(t)
	base := "http://" + api
	shared, err := fs.ReadFile(control.UIFiles(), "api.js")
	if err != nil {
		t.Fatal(err)
	}
	browsertest.Served(t, base+"/ui/", "text/html; charset=utf-8", "<script src=\"/ui/api.js\" defer></script>\n<script src=\"/ui/proxies.js\" defer></script>")
	browsertest.Served(t, base+"/ui/proxies.js", "text/javascript; charset=utf-8", "dashboard({")
	browsertest.Served(t, base+"/ui/api.js", "text/javascript; charset=utf-8", string(shared))
	browsertest.Served(t, base+"/ui/style.css", "text/css; charset=utf-8", "body")
	for _, path := range []string{"/ui/proxies", "/ui/index.html", "/ui/app.js", "/ui/api.js/", "/ui//api.js", "/ui/API.js", "/ui/nothing"} {
		if code, resp := call(t, api, "GET", path, "", "User-Agent", "Mozilla/5.0 (X11; Linux x86_64)"); code != 401 {
			t.Errorf("GET %s without the token: %d %.100s, want 401", path, code, resp)
		}
	}
}

// startTokenServer starts a server with the dashboard, whose API takes
// the token s3cret, until the test's end; it returns the API's address.
func startTokenServer(t *testing.T) string {
	t.Helper()
	srv, err := proxy.New(proxy.Options{UI: true})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := proxy.ListenAPI("127.0.0.1:0", true)
	if err != nil {
		srv.Close()
		t.Fatal(err)
	}
	hs := srv.Serve(ln, proxy.Guard{Token: "s3cret"})
	t.Cleanup(func() {
		hs.Close()
		srv.Close()
	})
	return ln.Addr().String()
}

// TestProxyDashboardAsksForToken: with --token, the page opened without
// it asks for it (the form of the script it shares with the run
// dashboard, api.js), says what to give when nothing is typed, refuses a
// wrong token with the API's message, and with the right one lists the
// proxies. The URL with the token (/ui/?token=TOKEN) opens the page at
// once and leaves the address bar without it.
func TestProxyDashboardAsksForToken(t *testing.T) {
	browsertest.Chromium(t)
	api := startTokenServer(t)
	if code, resp := call(t, api, "POST", "/proxies", `{"name": "p", "upstream": "127.0.0.1:9"}`, "Authorization", "Bearer s3cret"); code != 201 {
		t.Fatalf("create: %d %s", code, resp)
	}
	base := "http://" + api
	ctx, problems := browsertest.Start(t, base)
	loginErr := `document.getElementById("login-err").textContent`
	listed := `document.getElementById("login").hidden && document.getElementById("state").textContent === "live" &&
  document.querySelector("section.proxy h3 .name").textContent === "p"`

	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/ui/"), chromedp.WaitVisible(chromedp.CSS("#token")),
		browsertest.Enter("#token", "")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "nothing typed", loginErr+` === "give the token of netjam proxy's --token file"`)
	waitFor(t, ctx, "the state without the token", `document.getElementById("state").textContent === "needs the token"`)
	if err := chromedp.Do(ctx, browsertest.Enter("#token", "nope")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "a wrong token", loginErr+` === "missing or wrong token (Authorization: Bearer TOKEN)"`)
	if err := chromedp.Do(ctx, browsertest.Enter("#token", "s3cret")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the right token", listed+` && `+loginErr+` === "" && document.getElementById("token").value === ""`)

	if _, err := chromedp.Call(ctx, network.ClearBrowserCookies, cdp.Empty{}); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/ui/?token=s3cret")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the URL with the token", listed)
	if href, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href`)); href != base+"/ui/" {
		t.Errorf("the address bar after the URL with the token: %q, want %q", href, base+"/ui/")
	}
	for _, p := range problems() {
		t.Error(p)
	}
}

// waitFor waits up to 10 s for the JavaScript expression expr to be true
// on the page, and else ends the test with what (what it waited for) and
// the page's text.
func waitFor(t *testing.T, ctx context.Context, what, expr string) {
	t.Helper()
	if err := chromedp.Do(ctx, browsertest.Until(expr, 10*time.Second)); err != nil {
		t.Fatalf("%s: %v; the page:\n%s", what, err, browsertest.Text(ctx, "body"))
	}
}
