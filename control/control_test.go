package control

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// TestOpenAPIMatchesServer checks openapi.yaml against the server both
// ways: every route it describes is served (409: no run yet), and a route
// it does not describe is not (404 or 405).
func TestOpenAPIMatchesServer(t *testing.T) {
	b, err := os.ReadFile("openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		OpenAPI string                               `yaml:"openapi"`
		Paths   map[string]map[string]map[string]any `yaml:"paths"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil || !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Fatalf("openapi.yaml: %v (version %q)", err, doc.OpenAPI)
	}
	ln, err := Listen("unix:"+filepath.Join(t.TempDir(), "c.sock"), ListenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var stopped atomic.Bool
	s := Serve(ln, Endpoint{}, func() { stopped.Store(true) })
	defer s.Close()
	client := unixClient(ln.Addr().String())
	described := map[string]bool{}
	for path, methods := range doc.Paths {
		for m := range methods {
			described[strings.ToUpper(m)+" "+path] = true
			req, _ := http.NewRequest(strings.ToUpper(m), "http://netjam"+path, strings.NewReader(`{"set": {"link.loss": "1%"}}`))
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusMethodNotAllowed {
				t.Errorf("%s %s is described but not served (%d)", m, path, resp.StatusCode)
			}
		}
	}
	if !stopped.Load() {
		t.Error("POST /v1/stop did not stop the run")
	}
	for _, route := range []string{"DELETE /v1/timeline", "DELETE /v1/links", "GET /v2/status", "PUT /v1/stop"} {
		method, path, _ := strings.Cut(route, " ")
		req, _ := http.NewRequest(method, "http://netjam"+path, nil)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if !described[route] && resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("%s is served (%d) but not described", route, resp.StatusCode)
		}
	}
}

// TestToken: with a token, a request without it or with another one gets
// 401; a non-loopback address without a token is refused at start.
func TestToken(t *testing.T) {
	ln, err := Listen("127.0.0.1:0", ListenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := Serve(ln, Endpoint{Token: "s3cret"}, func() {})
	defer s.Close()
	for _, c := range []struct {
		auth string
		want int
	}{{"", 401}, {"Bearer nope", 401}, {"Bearer s3cret", 409}} {
		req, _ := http.NewRequest("GET", "http://"+ln.Addr().String()+"/v1/status", nil)
		if c.auth != "" {
			req.Header.Set("Authorization", c.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("Authorization %q: %d, want %d", c.auth, resp.StatusCode, c.want)
		}
	}
	http.DefaultClient.CloseIdleConnections()
	if _, err := Listen("0.0.0.0:0", ListenOptions{}); err == nil || !strings.Contains(err.Error(), "not a loopback address") {
		t.Errorf("0.0.0.0 without a token: %v", err)
	}
	if ents, _ := os.ReadDir("."); slices.ContainsFunc(ents, func(e os.DirEntry) bool { return strings.HasSuffix(e.Name(), ".sock") }) {
		t.Error("a socket left in the package folder")
	}
}

func unixClient(path string) *http.Client {
	return &http.Client{Transport: &http.Transport{Dial: func(_, _ string) (net.Conn, error) { return net.Dial("unix", path) }}}
}

// TestOtherOrigins: what a page of another site could make a browser
// send to a loopback endpoint is refused: a request with another Origin
// (a form's POST /v1/stop), one with a Host that is not a loopback name
// (DNS rebinding). curl's requests (no Origin) and the page's own pass.
func TestOtherOrigins(t *testing.T) {
	ln, err := Listen("127.0.0.1:0", ListenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var stopped atomic.Bool
	s := Serve(ln, Endpoint{}, func() { stopped.Store(true) })
	defer s.Close()
	defer http.DefaultClient.CloseIdleConnections()
	addr := ln.Addr().String()
	for _, c := range []struct {
		origin, host string
		want         int
	}{
		{"http://evil.example", "", 403},
		{"null", "", 403},
		{"", "evil.example:80", 403},
		{"", "", 200},
		{"http://" + addr, "", 200},
		{"", "localhost", 200},
	} {
		if code := statusOf(t, "POST", "http://"+addr+"/v1/stop", c.host, "Origin", c.origin); code != c.want {
			t.Errorf("Origin %q Host %q: %d, want %d", c.origin, c.host, code, c.want)
		}
		if c.want == 403 && stopped.Load() {
			t.Fatalf("Origin %q Host %q stopped the run", c.origin, c.host)
		}
	}
}

// TestCloseTwice: Close is idempotent (it panicked closing its channel
// twice).
func TestCloseTwice(t *testing.T) {
	ln, err := Listen("unix:"+filepath.Join(t.TempDir(), "c.sock"), ListenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := Serve(ln, Endpoint{}, func() {})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestHostileClients: no client holds a connection for nothing or gets
// an answer that is not the API's. A request that stalls in its body and
// a connection idle between requests are closed after the server's
// timeouts (before, both stayed open for good, before the token was even
// checked: 300 stalled clients held 300 connections); a body with more
// after its JSON is refused, one over 64 KiB gets 413, an unknown route
// a JSON 404 and a wrong method a JSON 405 with Allow; a result's name
// that is not a plain file name is 404 (it was a 500).
func TestHostileClients(t *testing.T) {
	defer func(r, i time.Duration) { readTimeout, idleTimeout = r, i }(readTimeout, idleTimeout)
	readTimeout, idleTimeout = 300*time.Millisecond, 300*time.Millisecond
	ln, err := Listen("127.0.0.1:0", ListenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := Serve(ln, Endpoint{}, func() {})
	defer s.Close()
	addr := ln.Addr().String()

	closedWithin := func(what, send string) {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, send)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		start := time.Now()
		_, err = io.Copy(io.Discard, c)
		if err != nil || time.Since(start) > 3*time.Second {
			t.Errorf("%s: the connection stayed open %s (%v); want it closed after the server's timeouts", what, time.Since(start).Round(time.Millisecond), err)
		}
	}
	closedWithin("a body that stalls", "PATCH /v1/links HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{")
	closedWithin("a connection idle after a request", "GET /ui/ HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")

	out := t.TempDir()
	os.WriteFile(filepath.Join(out, "summary.json"), []byte("{}"), 0o644)
	s.Finished(out)
	for _, c := range []struct {
		method, path, body string
		want               int
		has                string
	}{
		{"PATCH", "/v1/links", `{"set": {"link.delay": "20ms"}} GARBAGE`, 409, ""}, // no run: the body is not read
		{"POST", "/v1/stop", "", 200, ""},
		{"GET", "/v1/nothing", "", 404, `"error":"GET /v1/nothing: no such endpoint`},
		{"DELETE", "/v1/links", "", 405, `"error":"DELETE /v1/links: the method is not allowed (allowed: GET, PATCH)"`},
		{"GET", "/results/summary.json", "", 200, "{}"},
		{"GET", "/results/.%2fsummary.json", "", 404, "not among the results"},
		{"GET", "/results/a%2fsummary.json", "", 404, ""},
	} {
		req, _ := http.NewRequest(c.method, "http://"+addr+c.path, strings.NewReader(c.body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.want || !strings.Contains(string(b), c.has) {
			t.Errorf("%s %s: %d %s, want %d with %q", c.method, c.path, resp.StatusCode, b, c.want, c.has)
		}
	}
	http.DefaultClient.CloseIdleConnections()
}

// TestDecodeStrict: decode takes one JSON value, known fields only, at
// most maxBody bytes: more after it is 400, a larger body 413.
func TestDecodeStrict(t *testing.T) {
	for _, c := range []struct {
		body string
		want int
	}{
		{`{"set": {"link.delay": "20ms"}}`, 200},
		{"{\"set\": {\"link.delay\": \"20ms\"}}\n \t", 200},
		{`{"set": {"link.delay": "20ms"}} GARBAGE`, 400},
		{`{"set": {}} {"set": {}}`, 400},
		{`{"sets": {}}`, 400},
		{`{"set": {"link.delay": "` + strings.Repeat("1", maxBody) + `"}}`, 413},
	} {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("PATCH", "/v1/links", strings.NewReader(c.body))
		var req SetRequest
		if decode(w, r, &req, "{}") {
			w.WriteHeader(200)
		}
		if w.Code != c.want {
			t.Errorf("body %.40q: %d %s, want %d", c.body, w.Code, w.Body, c.want)
		}
	}
}

// TestEventStreamHistoryDeadline: a client of the event stream that
// never reads is dropped while the history is still being written to it
// (about 1.2 MB here), after the stream's write timeout; before, the
// history was written without a deadline, and the connection and its
// goroutine stayed until the endpoint closed.
func TestEventStreamHistoryDeadline(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "c.sock")
	ln, err := Listen("unix:"+sock, ListenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := Serve(ln, Endpoint{}, func() {})
	defer s.Close()
	s.hub.writeTimeout = 300 * time.Millisecond
	for range historyLen {
		s.hub.publish("sample", strings.Repeat("x", 4000))
	}
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET /v1/events HTTP/1.1\r\nHost: x\r\n\r\n")
	clients := func() int {
		s.hub.mu.Lock()
		defer s.hub.mu.Unlock()
		return len(s.hub.clients)
	}
	deadline := time.Now().Add(5 * time.Second)
	for subscribed := false; !subscribed || clients() > 0; subscribed = subscribed || clients() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("a client that reads nothing: subscribed %v, still served after 5 s (write timeout 300 ms)", subscribed)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestMetricsEndpointGuarded: --metrics is guarded as the control API
// is: a non-loopback address needs the token, which every scrape then
// carries; a loopback one answers loopback names only (before, it
// listened on any address for anyone, with any Host).
func TestMetricsEndpointGuarded(t *testing.T) {
	if _, err := ListenMetrics("0.0.0.0:0", false); err == nil || !strings.Contains(err.Error(), "not a loopback address") {
		t.Errorf("--metrics 0.0.0.0 without a token: %v", err)
	}
	// A listener's error names the flag and the address.
	if _, err := ListenMetrics("127.0.0.1:99999", false); err == nil || !strings.HasPrefix(err.Error(), "--metrics 127.0.0.1:99999: ") {
		t.Errorf("--metrics on port 99999: %v", err)
	}
	if _, err := Listen("unix:/nonexistent/dir/c.sock", ListenOptions{}); err == nil || !strings.HasPrefix(err.Error(), "--control unix:/nonexistent/dir/c.sock: ") {
		t.Errorf("--control in a missing folder: %v", err)
	}
	for _, token := range []string{"", "s3cret"} {
		ln, err := ListenMetrics("127.0.0.1:0", token != "")
		if err != nil {
			t.Fatal(err)
		}
		s := New(func() {})
		s.ServeMetrics(ln, Endpoint{Token: token})
		for _, c := range []struct {
			auth, host string
			want       int
		}{{"", "", 200}, {"", "evil.example", 403}, {"Bearer s3cret", "", 200}, {"Bearer nope", "", 401}} {
			if token == "" && c.auth != "" || token != "" && c.host != "" {
				continue
			}
			want := c.want
			if token != "" && c.auth == "" {
				want = 401
			}
			if code := statusOf(t, "GET", "http://"+ln.Addr().String()+"/metrics", c.host, "Authorization", c.auth); code != want {
				t.Errorf("token %q, Authorization %q, Host %q: %d, want %d", token, c.auth, c.host, code, want)
			}
		}
		http.DefaultClient.CloseIdleConnections()
		s.Close()
	}
}

// statusOf sends a request without a body, with Host host and the header
// key: value (each when not empty), and returns its status.
func statusOf(t *testing.T, method, url, host, key, value string) int {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	if value != "" {
		req.Header.Set(key, value)
	}
	if host != "" {
		req.Host = host
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestResultsStayInTheFolder: /results/ serves regular files of the
// output folder only: a symbolic link there that leads out of it (to
// /etc/shadow, here a file of the test's) is refused with 404 and its
// target's content never sent (before, it was served); a link inside the
// folder is followed; a FIFO is refused at once (it would have held the
// request open for good).
func TestResultsStayInTheFolder(t *testing.T) {
	ln, err := Listen("127.0.0.1:0", ListenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := Serve(ln, Endpoint{}, func() {})
	defer s.Close()
	out, elsewhere := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(out, "report.html"), []byte("<!doctype html><title>report</title>"), 0o644)
	os.WriteFile(filepath.Join(elsewhere, "shadow"), []byte("root:secret"), 0o600)
	os.Symlink(filepath.Join(elsewhere, "shadow"), filepath.Join(out, "summary.json"))
	os.Symlink("../"+filepath.Base(elsewhere)+"/shadow", filepath.Join(out, "relative.json"))
	os.Symlink("report.html", filepath.Join(out, "index.html"))
	if err := mkfifo(filepath.Join(out, "timeseries.csv")); err != nil {
		t.Fatal(err)
	}
	s.Finished(out)
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	for _, c := range []struct {
		name string
		want int
	}{
		{"report.html", 200},
		{"index.html", 200},
		{"summary.json", 404},
		{"relative.json", 404},
		{"timeseries.csv", 404},
	} {
		resp, err := client.Get("http://" + ln.Addr().String() + "/results/" + c.name)
		if err != nil {
			t.Errorf("GET /results/%s: %v", c.name, err)
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.want || strings.Contains(string(b), "secret") {
			t.Errorf("GET /results/%s: %d %s, want %d", c.name, resp.StatusCode, b, c.want)
		}
	}
}
