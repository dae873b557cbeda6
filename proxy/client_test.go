package proxy_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"

	"github.com/netjam/netjam/proxy"
)

// get fetches url through the proxy and returns the body and how long it
// took.
func get(t *testing.T, url string) ([]byte, time.Duration) {
	t.Helper()
	start := time.Now()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return b, time.Since(start)
}

// fastest is the least time of n GETs of url.
func fastest(t *testing.T, url string, n int) time.Duration {
	var best time.Duration
	for i := range n {
		b, d := get(t, url)
		if string(b) != "hello" {
			t.Fatalf("GET %s: %q", url, b)
		}
		if i == 0 || d < best {
			best = d
		}
	}
	return best
}

// TestGoClient drives netjam proxy with toxiproxy's own Go client,
// unmodified, through a proxy's life, and checks each toxic's effect on
// real traffic.
func TestGoClient(t *testing.T) {
	srv, api := startServer(t, proxy.Options{})
	up := upstream(t)
	tc := toxiproxy.NewClient(api)

	p, err := tc.CreateProxy("web", "127.0.0.1:0", up)
	if err != nil {
		t.Fatal(err)
	}
	if !p.Enabled || p.Upstream != up || strings.HasSuffix(p.Listen, ":0") {
		t.Fatalf("created %+v", p)
	}
	url := "http://" + p.Listen + "/"
	base := fastest(t, url, 3)

	// latency 100 ms downstream: each GET (a new connection) waits for
	// the SYN-ACK and the answer, each delayed 100 ms at least.
	if _, err := p.AddToxic("lat", "latency", "downstream", 1, toxiproxy.Attributes{"latency": 100}); err != nil {
		t.Fatal(err)
	}
	if d := fastest(t, url, 3); d < base+100*time.Millisecond {
		t.Errorf("with latency 100ms: %v, without %v: not 100ms more", d, base)
	}
	if _, err := p.UpdateToxic("lat", 1, toxiproxy.Attributes{"latency": 300}); err != nil {
		t.Fatal(err)
	}
	if d := fastest(t, url, 2); d < base+300*time.Millisecond {
		t.Errorf("with latency 300ms: %v, without %v: not 300ms more", d, base)
	}
	ts, err := p.Toxics()
	if err != nil || len(ts) != 1 || ts[0].Name != "lat" || ts[0].Attributes["latency"] != float64(300) || ts[0].Stream != "downstream" {
		t.Fatalf("toxics %+v, %v", ts, err)
	}
	if err := p.RemoveToxic("lat"); err != nil {
		t.Fatal(err)
	}
	if d := fastest(t, url, 3); d >= 300*time.Millisecond {
		t.Errorf("latency removed: a GET still takes %v", d)
	}

	// Disable closes the listener; enable opens it again.
	if err := p.Disable(); err != nil {
		t.Fatal(err)
	}
	if _, err := net.DialTimeout("tcp", p.Listen, time.Second); err == nil {
		t.Errorf("disabled proxy still listens on %s", p.Listen)
	}
	if err := p.Enable(); err != nil {
		t.Fatal(err)
	}
	fastest(t, url, 1)

	// populate: one kept as it is, one new.
	ps, err := tc.Populate([]toxiproxy.Proxy{{Name: "web", Listen: p.Listen, Upstream: up, Enabled: true},
		{Name: "two", Listen: "127.0.0.1:0", Upstream: up, Enabled: true}})
	if err != nil || len(ps) != 2 {
		t.Fatalf("populate: %v, %v", ps, err)
	}
	if _, err := ps[1].AddToxic("", "latency", "upstream", 1, toxiproxy.Attributes{"latency": 50}); err != nil {
		t.Fatal(err)
	}
	all, err := tc.Proxies()
	if err != nil || len(all) != 2 || len(all["two"].ActiveToxics) != 1 || all["two"].ActiveToxics[0].Name != "latency_upstream" {
		t.Fatalf("proxies %+v, %v", all, err)
	}
	// reset: every toxic gone, every proxy enabled.
	if err := all["two"].Disable(); err != nil {
		t.Fatal(err)
	}
	if err := tc.ResetState(); err != nil {
		t.Fatal(err)
	}
	two, err := tc.Proxy("two")
	if err != nil || !two.Enabled || len(two.ActiveToxics) != 0 {
		t.Fatalf("after reset: %+v, %v", two, err)
	}
	if err := two.Delete(); err != nil {
		t.Fatal(err)
	}
	if _, err := tc.Proxy("two"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("deleted proxy: %v", err)
	}
	if evs := srv.Proxy("web").Events(); len(evs) < 4 {
		t.Errorf("events %+v: want the toxic's add, changes and removal recorded", evs)
	}
}

// TestBandwidth: bandwidth 100 KB/s downstream carries the answer at
// 100 KB/s. The rate is measured from the first byte of the body to its
// last, so that the handshake and the request do not count; 300 KB take
// 3 s. The path's rate limiter is exact, so the tolerance covers only the
// first bytes' burst (the first read) and timer granularity: 5%.
func TestBandwidth(t *testing.T) {
	_, api := startServer(t, proxy.Options{})
	up := upstream(t)
	tc := toxiproxy.NewClient(api)
	p, err := tc.CreateProxy("bw", "127.0.0.1:0", up)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.AddToxic("bw", "bandwidth", "downstream", 1, toxiproxy.Attributes{"rate": 100}); err != nil {
		t.Fatal(err)
	}
	if rate := downloadRate(t, p.Listen, 300_000); rate < 95 || rate > 105 {
		t.Errorf("bandwidth 100 KB/s carried %.1f KB/s", rate)
	}
}

// downloadRate fetches n bytes through the proxy at listen and returns
// the rate of the body in KB/s, from its first read to its last: the
// handshake and the request do not count.
func downloadRate(t *testing.T, listen string, n int) float64 {
	t.Helper()
	resp, err := client.Get("http://" + listen + "/bytes?n=" + strconv.Itoa(n))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := make([]byte, 64<<10)
	var got []byte
	var first time.Time
	firstN := 0
	for {
		k, err := resp.Body.Read(buf)
		if k > 0 && first.IsZero() {
			first, firstN = time.Now(), k
		}
		got = append(got, buf[:k]...)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	elapsed := time.Since(first)
	if sum(got) != sum(body(n)) {
		t.Fatalf("body of %d bytes differs from the upstream's", len(got))
	}
	rate := float64(n-firstN) / elapsed.Seconds() / 1000
	t.Logf("%d bytes at %.1f KB/s (%v)", n, rate, elapsed)
	return rate
}

// TestTimeoutAndReset: timeout blackholes (nothing comes back; with a
// timeout the connection closes after it), reset_peer resets.
func TestTimeoutAndReset(t *testing.T) {
	_, api := startServer(t, proxy.Options{})
	up := upstream(t)
	tc := toxiproxy.NewClient(api)
	p, err := tc.CreateProxy("t", "127.0.0.1:0", up)
	if err != nil {
		t.Fatal(err)
	}
	request := func() (net.Conn, error) {
		c, err := net.Dial("tcp", p.Listen)
		if err != nil {
			return nil, err
		}
		_, err = io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		return c, err
	}

	if _, err := p.AddToxic("to", "timeout", "downstream", 1, toxiproxy.Attributes{"timeout": 0}); err != nil {
		t.Fatal(err)
	}
	c, err := request()
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(time.Second))
	if n, err := c.Read(make([]byte, 100)); !errors.Is(err, timeoutErr) && !isTimeout(err) {
		t.Errorf("timeout 0: read %d bytes, %v; want nothing until the deadline", n, err)
	}
	c.Close()

	if _, err := p.UpdateToxic("to", 1, toxiproxy.Attributes{"timeout": 300}); err != nil {
		t.Fatal(err)
	}
	c, err = request()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := c.Read(make([]byte, 100))
	if err != io.EOF || time.Since(start) < 250*time.Millisecond {
		t.Errorf("timeout 300: read %d bytes, %v after %v; want the connection closed after 300ms", n, err, time.Since(start))
	}
	c.Close()
	if err := p.RemoveToxic("to"); err != nil {
		t.Fatal(err)
	}

	if _, err := p.AddToxic("rp", "reset_peer", "downstream", 1, toxiproxy.Attributes{"timeout": 0}); err != nil {
		t.Fatal(err)
	}
	c, err = request()
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := c.Read(make([]byte, 100)); !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("reset_peer: read %d bytes, %v; want ECONNRESET", n, err)
	}
	c.Close()
}

var timeoutErr = errors.New("timeout")

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// TestLoss: netjam's loss toxic (a scenario key as attributes) loses 5%
// of the answer's packets: TCP retransmits, and not a byte differs.
func TestLoss(t *testing.T) {
	srv, api := startServer(t, proxy.Options{})
	up := upstream(t)
	tc := toxiproxy.NewClient(api)
	p, err := tc.CreateProxy("l", "127.0.0.1:0", up)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.AddToxic("loss", "loss", "downstream", 1, toxiproxy.Attributes{"p": "5%"}); err != nil {
		t.Fatal(err)
	}
	const n = 1 << 20
	b, _ := get(t, "http://"+p.Listen+"/bytes?n=1048576")
	if len(b) != n || sum(b) != sum(body(n)) {
		t.Fatalf("%d bytes came, differing from the upstream's", len(b))
	}
	st := srv.Proxy("l").Stats()
	var lost uint64
	for _, l := range st.Links {
		lost += l[1].Drops["loss"]
	}
	t.Logf("retransmits %d, downlink losses %d", st.Retransmits, lost)
	if st.Retransmits == 0 || lost == 0 {
		t.Errorf("loss 5%%: %d retransmits, %d packets lost: want some of each", st.Retransmits, lost)
	}
}

// TestUnreachableUpstream: a connection to a proxy whose upstream
// refuses is reset, and counted.
func TestUnreachableUpstream(t *testing.T) {
	srv, api := startServer(t, proxy.Options{})
	tc := toxiproxy.NewClient(api)
	p, err := tc.CreateProxy("gone", "127.0.0.1:0", freeAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	// The reset may come before the dialler's goroutine sees its
	// connection made (a slow machine: the race detector's), and then
	// Dial returns it.
	c, err := net.Dial("tcp", p.Listen)
	if err == nil {
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		var n int
		if n, err = c.Read(make([]byte, 10)); err == nil {
			t.Errorf("read %d bytes: want ECONNRESET", n)
		}
	}
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("%v: want ECONNRESET", err)
	}
	if st := srv.Proxy("gone").Stats(); st.UpstreamFailed != 1 {
		t.Errorf("upstream failures counted: %d, want 1", st.UpstreamFailed)
	}
}

var _ = http.StatusOK

// TestLiveChange: a toxic added while a connection is open applies to
// it, between two packets, without breaking it.
func TestLiveChange(t *testing.T) {
	_, api := startServer(t, proxy.Options{})
	up := upstream(t)
	tc := toxiproxy.NewClient(api)
	p, err := tc.CreateProxy("live", "127.0.0.1:0", up)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", p.Listen)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	roundTrip := func() time.Duration {
		t.Helper()
		start := time.Now()
		if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		buf := make([]byte, 4096)
		got := ""
		for !strings.HasSuffix(got, "hello") {
			n, err := c.Read(buf)
			if err != nil {
				t.Fatalf("after %q: %v", got, err)
			}
			got += string(buf[:n])
		}
		return time.Since(start)
	}
	roundTrip()
	if _, err := p.AddToxic("", "latency", "upstream", 1, toxiproxy.Attributes{"latency": 150}); err != nil {
		t.Fatal(err)
	}
	if d := roundTrip(); d < 150*time.Millisecond {
		t.Errorf("latency added on an open connection: %v", d)
	}
	if err := p.RemoveToxic("latency_upstream"); err != nil {
		t.Fatal(err)
	}
	// Packets delayed before the change keep their delay, and the path
	// keeps their order (netem's order-keeping delay): the last ACK sent
	// under the latency holds up what follows it for up to 150 ms.
	time.Sleep(200 * time.Millisecond)
	if d := roundTrip(); d >= 150*time.Millisecond {
		t.Errorf("latency removed on an open connection: %v", d)
	}
}

// TestWiFi: netjam's wifi toxic puts the path behind an 802.11 cell, the
// scenario's wifi keys its attributes, the client its first station. An
// 802.11g cell at 54 Mbit/s carries TCP at what its DCF leaves, below the
// 30.5 Mbit/s one saturated station gets (Bianchi; docs/scenario.md):
// 3680 KB/s of TCP payload (1448 bytes of 1500). Three stations with a
// saturated uplink take most of the medium: the access point, which sends
// the answer, wins about one transmission in four. At 6 Mbit/s the cell
// carries less than 750 KB/s. Each change applies to new connections,
// each on a new path. A GET's round trip grows by what the saturated
// stations take of the medium before each of its frames: at least one
// of their 1500-byte frames (about 0.25 ms at 54 Mbit/s with its
// preamble and ACK) for each of the GET's four or more medium accesses,
// a 2 ms floor. It is judged as that difference, not a ratio: a busy
// machine adds the same to both round trips (1.8 ms alone and 5.4 with
// the three stations on an idle machine, 5.5 and 9.0 on a busy one,
// where a ratio of two failed).
func TestWiFi(t *testing.T) {
	srv, api := startServer(t, proxy.Options{})
	tc := toxiproxy.NewClient(api)
	p, err := tc.CreateProxy("w", "127.0.0.1:0", upstream(t))
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + p.Listen + "/"
	if _, err := p.AddToxic("cell", "wifi", "", 1, toxiproxy.Attributes{"standard": "802.11g", "rate": "54Mbps"}); err != nil {
		t.Fatal(err)
	}
	alone, aloneRTT := downloadRate(t, p.Listen, 2_000_000), fastest(t, url, 5)
	if alone > 3680 || alone < 1500 {
		t.Errorf("802.11g at 54 Mbit/s, one station: %.0f KB/s, want 1500 to 3680", alone)
	}
	sat := map[string]any{"saturate": 1500}
	if _, err := p.UpdateToxic("cell", 1, toxiproxy.Attributes{"stations": []any{map[string]any{}, sat, sat, sat}}); err != nil {
		t.Fatal(err)
	}
	contended, contendedRTT := downloadRate(t, p.Listen, 1_000_000), fastest(t, url, 5)
	t.Logf("one station: %.0f KB/s, GET %v; with three saturated stations: %.0f KB/s, GET %v", alone, aloneRTT, contended, contendedRTT)
	if contended > alone/2 || contendedRTT-aloneRTT < 2*time.Millisecond {
		t.Errorf("three saturated stations: %.0f KB/s and a GET in %v, alone %.0f KB/s and %v: want less than half the rate, and at least 2 ms more",
			contended, contendedRTT, alone, aloneRTT)
	}
	// "stations": null takes the key out: one station again.
	if _, err := p.UpdateToxic("cell", 1, toxiproxy.Attributes{"stations": nil, "rate": "6Mbps"}); err != nil {
		t.Fatal(err)
	}
	if slow := downloadRate(t, p.Listen, 500_000); slow > 750 || slow < 300 {
		t.Errorf("802.11g at 6 Mbit/s: %.0f KB/s, want 300 to 750", slow)
	}
	if _, err := p.AddToxic("cell2", "wifi", "", 1, nil); err == nil || !strings.Contains(err.Error(), "has a wifi toxic already (cell)") {
		t.Errorf("a second wifi toxic: %v", err)
	}
	if err := p.RemoveToxic("cell"); err != nil {
		t.Fatal(err)
	}
	if clean := downloadRate(t, p.Listen, 2_000_000); clean < 3*alone {
		t.Errorf("the cell removed: %.0f KB/s", clean)
	}
	if st := srv.Proxy("w").Stats(); st.Paths != 1 {
		t.Errorf("%d paths: want the one of the last change, the others closed", st.Paths)
	}
}

// TestWiFiOnOpenConnections: a cell cannot change while it runs, so a
// connection open when a wifi toxic is added keeps its path without the
// cell, and still takes the other toxics' changes (a latency); new
// connections cross the cell. The path closes with its last connection.
func TestWiFiOnOpenConnections(t *testing.T) {
	srv, api := startServer(t, proxy.Options{})
	tc := toxiproxy.NewClient(api)
	p, err := tc.CreateProxy("w", "127.0.0.1:0", upstream(t))
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", p.Listen)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	open := keptAlive(t, c)
	if _, err := p.AddToxic("cell", "wifi", "", 1, toxiproxy.Attributes{"standard": "802.11b"}); err != nil {
		t.Fatal(err)
	}
	// 802.11b's 11 Mbit/s carries less than 1375 KB/s.
	if rate := downloadRate(t, p.Listen, 300_000); rate > 1375 {
		t.Errorf("a new connection through an 802.11b cell: %.0f KB/s", rate)
	}
	// Without the cell it goes faster than the cell could ever carry;
	// how much faster is the machine's (4870 KB/s under the race
	// detector on a busy CI machine, about 20000 idle).
	if rate, _ := open(1_000_000); rate < 1.5*1375 {
		t.Errorf("the connection open before the cell: %.0f KB/s, want its path's, more than the cell carries", rate)
	}
	if _, err := p.AddToxic("lat", "latency", "downstream", 1, toxiproxy.Attributes{"latency": 100}); err != nil {
		t.Fatal(err)
	}
	if _, took := open(10); took < 100*time.Millisecond {
		t.Errorf("latency added: the open connection's request took %v", took)
	}
	evs := srv.Proxy("w").Events()
	if !slices.ContainsFunc(evs, func(e proxy.Event) bool {
		return e.Type == "stale" && strings.Contains(e.Detail, "keeps its Wi-Fi cell for its 1 open connections")
	}) {
		t.Errorf("events %+v: want the path kept for the open connection", evs)
	}
	c.Close()
	deadline := time.Now().Add(5 * time.Second)
	for srv.Proxy("w").Stats().Paths != 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := srv.Proxy("w").Stats().Paths; n != 1 {
		t.Errorf("the open connection closed: %d paths, want 1", n)
	}
}

// keptAlive returns a function that GETs n bytes on c, kept open across
// requests, and returns the answer's rate in KB/s (from the request on)
// and the time it took.
func keptAlive(t *testing.T, c net.Conn) func(n int) (float64, time.Duration) {
	br := bufio.NewReader(c)
	return func(n int) (float64, time.Duration) {
		t.Helper()
		start := time.Now()
		if _, err := fmt.Fprintf(c, "GET /bytes?n=%d HTTP/1.1\r\nHost: x\r\n\r\n", n); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || sum(b) != sum(body(n)) {
			t.Fatalf("%d bytes came (%v), differing from the upstream's", len(b), err)
		}
		took := time.Since(start)
		return float64(n) / took.Seconds() / 1000, took
	}
}

// TestScenarioWiFi: a scenario's wifi section is every path's cell; a
// wifi toxic replaces it, and when the toxic is removed it holds again.
func TestScenarioWiFi(t *testing.T) {
	y := "wifi: {standard: 802.11b, stations: [{name: phone}]}\n"
	_, api := startServer(t, proxy.Options{Scenario: []byte(y), ScenarioName: "wifi.yaml"})
	tc := toxiproxy.NewClient(api)
	p, err := tc.CreateProxy("w", "127.0.0.1:0", upstream(t))
	if err != nil {
		t.Fatal(err)
	}
	// 802.11b's 11 Mbit/s: less than 1375 KB/s; 802.11g's 54: more.
	if rate := downloadRate(t, p.Listen, 300_000); rate > 1375 {
		t.Errorf("the scenario's 802.11b cell: %.0f KB/s", rate)
	}
	if _, err := p.AddToxic("cell", "wifi", "", 1, toxiproxy.Attributes{"standard": "802.11g"}); err != nil {
		t.Fatal(err)
	}
	if rate := downloadRate(t, p.Listen, 1_000_000); rate < 1500 {
		t.Errorf("an 802.11g toxic over the scenario's 802.11b cell: %.0f KB/s", rate)
	}
	if err := p.RemoveToxic("cell"); err != nil {
		t.Fatal(err)
	}
	if rate := downloadRate(t, p.Listen, 300_000); rate > 1375 {
		t.Errorf("the toxic removed: %.0f KB/s, want the scenario's 802.11b cell again", rate)
	}
}
