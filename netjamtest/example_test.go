package netjamtest_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/netjam/netjam"
	"github.com/netjam/netjam/netjamtest"
)

// exampleT stands in for the *testing.T of a test, which an example has
// not: it prints what the test would log and, at end, runs the cleanups
// as a test's end does.
type exampleT struct {
	testing.TB // not set: only the methods below are called
	cleanups   []func()
	failed     bool
}

func (t *exampleT) Helper()                      {}
func (t *exampleT) Cleanup(f func())             { t.cleanups = append(t.cleanups, f) }
func (t *exampleT) Failed() bool                 { return t.failed }
func (t *exampleT) Logf(format string, a ...any) { fmt.Printf(format+"\n", a...) }
func (t *exampleT) Fatalf(format string, a ...any) {
	panic(fmt.Sprintf(format, a...))
}

// end runs the cleanups, last registered first.
func (t *exampleT) end() {
	for i := len(t.cleanups) - 1; i >= 0; i-- {
		t.cleanups[i]()
	}
}

// In a test, New gives a path that is closed when the test ends, and
// whose counters are logged if it failed.
func ExampleNew() {
	t := new(exampleT) // in a test: its t
	defer t.end()

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello")
	}))
	defer srv.Close()
	p := netjamtest.New(t, netjam.Link{Delay: 50 * time.Millisecond, Loss: 0.02, Seed: 1})
	tr := &http.Transport{DialContext: p.DialContext}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get(srv.URL)
	if err != nil {
		panic(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.Status, string(body))
	// Output: 200 OK hello
}

// Load starts a scenario file's link for the test, with overrides.
func ExampleLoad() {
	t := new(exampleT) // in a test: its t
	defer t.end()

	p := netjamtest.Load(t, "testdata/satellite.yaml", "link.loss=0%")
	fmt.Println(p.Stats().Uplink.Configured.Summary)
	// Output: delay 300ms
}

// Log writes the path's counters to the test's log; New and Load call it
// by themselves when the test failed. Nothing has crossed this path yet.
func ExampleLog() {
	t := new(exampleT) // in a test: its t
	defer t.end()

	p := netjamtest.New(t, netjam.Link{Delay: 20 * time.Millisecond, Seed: 1})
	netjamtest.Log(t, p)
	// Output:
	// netjam path (seed 1):
	//   uplink (delay 20ms): 0 packets in, 0 out (0/0 bytes), drops map[]
	//   downlink (delay 20ms): 0 packets in, 0 out (0/0 bytes), drops map[]
}
