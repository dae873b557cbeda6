package control

import (
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

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
	ln, _, err := Listen("unix:"+filepath.Join(t.TempDir(), "c.sock"), false)
	if err != nil {
		t.Fatal(err)
	}
	var stopped atomic.Bool
	s := Serve(ln, "", "", func() { stopped.Store(true) })
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
	for _, route := range []string{"GET /v1/timeline", "DELETE /v1/links", "GET /v2/status", "PUT /v1/stop"} {
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
	ln, _, err := Listen("127.0.0.1:0", false)
	if err != nil {
		t.Fatal(err)
	}
	s := Serve(ln, "", "s3cret", func() {})
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
	if _, _, err := Listen("0.0.0.0:0", false); err == nil || !strings.Contains(err.Error(), "not a loopback address") {
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
	ln, _, err := Listen("127.0.0.1:0", false)
	if err != nil {
		t.Fatal(err)
	}
	var stopped atomic.Bool
	s := Serve(ln, "", "", func() { stopped.Store(true) })
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
		req, _ := http.NewRequest("POST", "http://"+addr+"/v1/stop", nil)
		if c.origin != "" {
			req.Header.Set("Origin", c.origin)
		}
		if c.host != "" {
			req.Host = c.host
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("Origin %q Host %q: %d, want %d", c.origin, c.host, resp.StatusCode, c.want)
		}
		if c.want == 403 && stopped.Load() {
			t.Fatalf("Origin %q Host %q stopped the run", c.origin, c.host)
		}
	}
}

// TestCloseTwice: Close is idempotent (it panicked closing its channel
// twice).
func TestCloseTwice(t *testing.T) {
	ln, _, err := Listen("unix:"+filepath.Join(t.TempDir(), "c.sock"), false)
	if err != nil {
		t.Fatal(err)
	}
	s := Serve(ln, "", "", func() {})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}
