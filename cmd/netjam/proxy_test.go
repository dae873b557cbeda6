package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// toxiproxyVersion is the toxiproxy release whose CLI the tests run
// against netjam proxy (its Go client, in go.mod, is the same release).
const toxiproxyVersion = "v2.5.0"

// toxiproxyCLI builds toxiproxy-cli from the module proxy into a
// temporary folder. Offline it skips, unless NETJAM_REQUIRE_TOXIPROXY=1
// (CI, which reaches the module proxy) makes that a failure.
func toxiproxyCLI(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("go", "install", "github.com/Shopify/toxiproxy/v2/cmd/cli@"+toxiproxyVersion)
	cmd.Env = append(os.Environ(), "GOBIN="+dir, "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		msg := "cannot build toxiproxy-cli " + toxiproxyVersion + ": " + err.Error() + "\n" + string(out)
		if os.Getenv("NETJAM_REQUIRE_TOXIPROXY") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg + " (NETJAM_REQUIRE_TOXIPROXY=1 makes this a failure)")
	}
	return filepath.Join(dir, "cli")
}

// startProxy runs `netjam proxy` with args and returns the API's
// address, from the line it prints.
func startProxy(t *testing.T, args ...string) string {
	t.Helper()
	cmd := netjamProcess(t, append([]string{"proxy", "--listen", "127.0.0.1:0"}, args...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("netjam proxy after SIGTERM: %v", err)
			}
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			t.Errorf("netjam proxy did not end within 10s of SIGTERM")
		}
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("netjam proxy printed %q: %v", line, err)
	}
	m := regexp.MustCompile(`http://(\S+)`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("netjam proxy printed %q", line)
	}
	go io.Copy(io.Discard, out)
	return m[1]
}

// TestToxiproxyCLI runs the steps of toxiproxy's own end-to-end script
// (scripts/test-e2e) with its CLI against netjam proxy, checking each
// step's exit status and, between them, real traffic through the proxy.
func TestToxiproxyCLI(t *testing.T) {
	cli := toxiproxyCLI(t)
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer web.Close()
	api := startProxy(t)
	listen := freePort(t)
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(cli, append([]string{"-h", "http://" + api}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("toxiproxy-cli %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	through := func() {
		t.Helper()
		resp, err := http.Get("http://" + listen + "/test1")
		if err != nil {
			t.Fatalf("GET through the proxy: %v", err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "ok" {
			t.Fatalf("GET through the proxy: %q", b)
		}
	}
	run("create", "-l", listen, "-u", web.Listener.Addr().String(), "shopify_http")
	if out := run("list"); !strings.Contains(out, "shopify_http") {
		t.Errorf("list: %s", out)
	}
	run("toggle", "shopify_http")
	if _, err := net.DialTimeout("tcp", listen, time.Second); err == nil {
		t.Errorf("toggled off, the proxy still listens")
	}
	run("inspect", "shopify_http")
	run("toggle", "shopify_http")
	through()

	run("toxic", "add", "--downstream", "--type=latency", "--toxicName=latency_downstream",
		"--attribute=latency=100", "--attribute=jitter=50", "--toxicity=0.99", "shopify_http")
	if out := run("inspect", "shopify_http"); !strings.Contains(out, "latency_downstream") {
		t.Errorf("inspect: %s", out)
	}
	through()
	run("toxic", "update", "--toxicName=latency_downstream", "--attribute=jitter=20", "--toxicity=0.7", "shopify_http")
	run("inspect", "shopify_http")
	run("toxic", "delete", "--toxicName=latency_downstream", "shopify_http")

	run("toxic", "add", "--upstream", "--type=latency", "--toxicName=latency_upstream",
		"--attribute=latency=100", "--attribute=jitter=50", "--toxicity=1", "shopify_http")
	through()
	run("toxic", "update", "--toxicName=latency_upstream", "--attribute=jitter=20", "--toxicity=0.3", "shopify_http")
	run("toxic", "delete", "--toxicName=latency_upstream", "shopify_http")

	run("toxic", "add", "--type=bandwidth", "--toxicName=bandwidth_kb_per_second", "--attribute=rate=1", "--toxicity=0.5", "shopify_http")
	run("toxic", "update", "--toxicName=bandwidth_kb_per_second", "--attribute=rate=10", "--toxicity=1.0", "shopify_http")
	through()
	run("toxic", "delete", "--toxicName=bandwidth_kb_per_second", "shopify_http")

	run("toxic", "add", "--type=timeout", "--toxicName=timeout_ms", "--attribute=timeout=10", "--toxicity=0.1", "shopify_http")
	run("toxic", "delete", "--toxicName=timeout_ms", "shopify_http")

	run("toxic", "add", "--type=slicer", "--toxicName=slicer_us", "--attribute=average_size=64",
		"--attribute=size_variation=32", "--attribute=delay=10", "--toxicity=1.0", "shopify_http")
	through()
	run("toxic", "delete", "--toxicName=slicer_us", "shopify_http")

	run("toxic", "add", "--type=reset_peer", "--toxicName=reset_peer", "--attribute=timeout=2000", "--toxicity=1.0", "shopify_http")
	run("inspect", "shopify_http")
	run("toxic", "delete", "--toxicName=reset_peer", "shopify_http")

	// netjam's own toxic, through toxiproxy's CLI: a scenario key.
	run("toxic", "add", "--type=loss", "--toxicName=loss", "--attribute=p=0.01", "shopify_http")
	through()
	run("toxic", "delete", "--toxicName=loss", "shopify_http")

	// The metrics toxiproxy's script greps for.
	through()
	resp, err := http.Get("http://" + api + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, re := range []string{
		`(?m)^toxiproxy_proxy_sent_bytes_total\{direction="downstream",listener="` + regexp.QuoteMeta(listen) + `",proxy="shopify_http",upstream="` +
			regexp.QuoteMeta(web.Listener.Addr().String()) + `"\} [1-9][0-9]*`,
		`(?m)^go_info`, `(?m)^go_goroutines`,
	} {
		if !regexp.MustCompile(re).Match(b) {
			t.Errorf("metrics lack %s", re)
		}
	}

	// An error: the CLI exits 1 with the API's message.
	cmd := exec.Command(cli, "-h", "http://"+api, "toxic", "add", "--type=latency", "--attribute=latency=-5", "shopify_http")
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "latency") {
		t.Errorf("a negative latency: %v, %s", err, out)
	}
	run("delete", "shopify_http")
}

// freePort returns a loopback address nothing listens on now.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestProxyBadUsage: what netjam proxy refuses before it serves.
func TestProxyBadUsage(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`[{"name": "a"}]`), 0o600)
	flows := filepath.Join(dir, "flows.yaml")
	os.WriteFile(flows, []byte("name: f\nflows:\n  - {name: a, type: tcp, size: 1MB}\n"), 0o600)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"proxy", "--listen", "0.0.0.0:0"}, "--listen 0.0.0.0:0: not a loopback address"},
		{[]string{"proxy", "--listen", busy.Addr().String()}, "--listen " + busy.Addr().String() + ": listen tcp " + busy.Addr().String() + ": bind: address already in use"},
		{[]string{"proxy", "--config", bad}, "--config " + bad + ": missing required field: upstream at proxy 1"},
		{[]string{"proxy", "--config", filepath.Join(dir, "none.json")}, "no such file"},
		{[]string{"proxy", flows}, "the scenario must have no flows"},
		{[]string{"proxy", "--set", "link.loss=200%"}, "link.loss: 200% is out of range"},
	} {
		code, _, stderr := netjam(t, tc.args...)
		if code != exitBadUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, %q; want 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
}

// TestProxyUIFlag: netjam proxy --ui prints the dashboard's URL after the
// API's, and a browser gets its page there; without --ui the page is a
// browser's request to the API, refused.
func TestProxyUIFlag(t *testing.T) {
	get := func(u string) int {
		t.Helper()
		req, _ := http.NewRequest("GET", u, nil)
		req.Header.Set("User-Agent", "Mozilla/5.0 (X11; Linux x86_64)")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 200 && !strings.Contains(string(b), `src="/ui/proxies.js"`) {
			t.Errorf("GET %s: %.200s, want the dashboard's page", u, b)
		}
		return resp.StatusCode
	}
	if code := get("http://" + startProxy(t) + "/ui/"); code != http.StatusForbidden {
		t.Errorf("without --ui, GET /ui/: %d, want 403", code)
	}

	cmd := netjamProcess(t, "proxy", "--listen", "127.0.0.1:0", "--ui")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}()
	r := bufio.NewReader(out)
	first, _ := r.ReadString('\n')
	second, _ := r.ReadString('\n')
	api := regexp.MustCompile(`http://(\S+)`).FindStringSubmatch(first)
	if api == nil || second != "netjam proxy: dashboard at http://"+api[1]+"/ui/\n" {
		t.Fatalf("netjam proxy --ui printed %q, %q", first, second)
	}
	if code := get("http://" + api[1] + "/ui/"); code != 200 {
		t.Errorf("with --ui, GET /ui/: %d, want 200", code)
	}
}
