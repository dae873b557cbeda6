package netjam_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// consumerTest is a test file of a module that is not netjam's: what a
// user writes after docs/testing.md, with every part of the Go API a test
// needs (Start, DialContext, Listen, Set, Stats, netjamtest).
const consumerTest = `package consumer

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/netjam/netjam"
	"github.com/netjam/netjam/netjamtest"
)

// A GET through 50 ms each way takes two round trips: the handshake and
// the request.
func TestGETThroughPath(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "hello")
	}))
	defer srv.Close()
	p := netjamtest.New(t, netjam.Link{Delay: 50 * time.Millisecond})
	tr := &http.Transport{DialContext: p.DialContext, DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	start := time.Now()
	resp, err := (&http.Client{Transport: tr}).Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	took := time.Since(start)
	if err != nil || string(body) != "hello" {
		t.Fatalf("body %q, %v", body, err)
	}
	if took < 200*time.Millisecond {
		t.Errorf("the GET took %v: less than two round trips of 100 ms", took)
	}
	if err := p.Set("uplink.loss", "0%"); err != nil {
		t.Fatal(err)
	}
	if st := p.Stats(); st.Uplink.PacketsOut == 0 || st.Downlink.PacketsOut == 0 {
		t.Errorf("stats: uplink %d packets, downlink %d", st.Uplink.PacketsOut, st.Downlink.PacketsOut)
	}
}

// A server behind the path, reached from a real socket.
func TestListenBehindPath(t *testing.T) {
	p, err := netjam.Start(context.Background(), netjam.Link{Delay: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ln, err := p.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		c.Write([]byte("behind"))
		c.Close()
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b, err := io.ReadAll(c)
	if err != nil || string(b) != "behind" {
		t.Fatalf("read %q, %v", b, err)
	}
}
`

// TestConsumerModule builds and runs a test of another module that
// requires netjam, as a user's module does: Go ignores the replace
// directives of a module it requires, so a netjam that needed its own
// replace (of gVisor, by the patched copy) built there against another
// gVisor, or not at all. The consumer's one replace points netjam's module
// at this checkout, as a go.mod of a user who has not fetched a release
// would.
func TestConsumerModule(t *testing.T) {
	if testing.Short() {
		t.Skip("builds another module: not with -short")
	}
	goTool := goCommand(t)
	root, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	gomod := "module example.com/consumer\n\ngo " + goVersion(t, root) + "\n\n" +
		"require github.com/netjam/netjam v0.0.0-00010101000000-000000000000\n\n" +
		"replace github.com/netjam/netjam => " + root + "\n"
	// netjam's go.sum holds every module the consumer's build needs.
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"go.mod": []byte(gomod), "go.sum": sum, "consumer_test.go": []byte(consumerTest)} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(goTool, "test", "-count=1", "-mod=mod", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=", "GOWORK=off", "GOTOOLCHAIN=local")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go test in a module that requires netjam: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}

// goCommand returns the go command of the toolchain running the tests.
func goCommand(t *testing.T) string {
	t.Helper()
	p := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(p); err != nil {
		if p, err = exec.LookPath("go"); err != nil {
			t.Skipf("no go command: %v", err)
		}
	}
	return p
}

// goVersion returns the go line of netjam's go.mod, the least version a
// consumer's module may name.
func goVersion(t *testing.T, root string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "go "); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatal("go.mod has no go line")
	return ""
}
