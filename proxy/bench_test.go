package proxy_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/netjam/netjam/clock"
)

// BenchmarkAgainstToxiproxy compares netjam proxy with toxiproxy-server
// (v2.5.0, built from the module proxy in the same run), each in its own
// process, on loopback, alternating them for -count runs (see
// eachServer); each metric's unit begins with the server's name:
//
//	throughput: 64 MB from an upstream through the proxy, no toxics and
//	  with latency 10 ms downstream (MB/s);
//	added latency: the round trip of 1 byte through the proxy over one
//	  connection, less the direct one, p50 and p99 of 2000 (µs);
//	memory: the server's resident set with 1000 connections open (MiB).
//
// go test ./proxy -run '^$' -bench '^BenchmarkAgainstToxiproxy$' -count 5 -benchtime 1x
func BenchmarkAgainstToxiproxy(b *testing.B) {
	bins := buildServers(b)
	source, echo := sourceServer(b), echoServer(b)
	for b.Loop() {
		eachServer(b, bins, func(s *server) {
			src := createProxy(b, s.api, "src", source)
			ech := createProxy(b, s.api, "echo", echo)
			s.report(throughput(b, src, 64<<20), "MB/s")
			p50, p99 := addedLatency(b, ech, echo, 2000)
			s.report(p50, "p50-added-µs")
			s.report(p99, "p99-added-µs")
			post(b, s.api+"/proxies/src/toxics", `{"type": "latency", "attributes": {"latency": 10}}`)
			s.report(throughput(b, src, 16<<20), "MB/s-latency10ms")
			remove(s.api + "/proxies/src/toxics/latency_downstream")
			s.report(memoryWith(b, s.pid, ech, 1000), "MiB-1000conns")
		})
	}
}

// BenchmarkLatencyToxicAgainstToxiproxy measures how exact a latency
// toxic is, in netjam proxy and in toxiproxy-server, alternating them as
// BenchmarkAgainstToxiproxy does: the round trip of 1 byte through the
// proxy over one connection with a latency toxic of 20 ms (jitter 0)
// downstream, less the direct round trip and less the 20 ms asked, p50
// and p99 of 1000 (µs). What remains is what the proxy adds beyond the
// toxic's delay: its own cost, and how late it passes the delayed bytes
// on. Its own cost is measured first, in the same conditions: the round
// trip with no toxic, less the direct one, p50 and p99 of 2000 (µs).
//
// The floor, measured after the two: the same with no proxy, to an echo
// that answers 20 ms after each byte (a nanosleep in its goroutine),
// less 20 ms and the direct round trip: what the machine's wake-ups (the
// echo's, the client's) add to a 20 ms wait whoever waits.
//
// go test ./proxy -run '^$' -bench LatencyToxicAgainstToxiproxy -count 5 -benchtime 1x
func BenchmarkLatencyToxicAgainstToxiproxy(b *testing.B) {
	const asked = 20 * time.Millisecond
	bins := buildServers(b)
	echo, late := echoServer(b), delayedEchoServer(b, asked)
	over := func(us float64) float64 { return us - float64(asked.Microseconds()) }
	for b.Loop() {
		eachServer(b, bins, func(s *server) {
			ech := createProxy(b, s.api, "echo", echo)
			p50, p99 := addedLatency(b, ech, echo, 2000)
			s.report(p50, "p50-added-µs")
			s.report(p99, "p99-added-µs")
			post(b, s.api+"/proxies/echo/toxics", fmt.Sprintf(`{"type": "latency", "attributes": {"latency": %d, "jitter": 0}}`, asked.Milliseconds()))
			p50, p99 = addedLatency(b, ech, echo, 1000)
			s.report(over(p50), "p50-over-20ms-µs")
			s.report(over(p99), "p99-over-20ms-µs")
		})
		p50, p99 := addedLatency(b, late, echo, 1000)
		b.ReportMetric(over(p50), "floor-p50-over-20ms-µs")
		b.ReportMetric(over(p99), "floor-p99-over-20ms-µs")
	}
}

// delayedEchoServer is an echo server that sends each read back d after
// it came, slept with nanosleep(2) (clock.PreciseSleep): a delay as exact
// as this process can make it.
func delayedEchoServer(b *testing.B, d time.Duration) string {
	return tcpServer(b, func(c net.Conn) {
		defer c.Close()
		buf := make([]byte, 64)
		for {
			n, err := c.Read(buf)
			if err != nil {
				return
			}
			clock.PreciseSleep(d)
			if _, err := c.Write(buf[:n]); err != nil {
				return
			}
		}
	})
}

// server is a proxy server a benchmark measures: toxiproxy or netjam.
type server struct {
	b    *testing.B
	name string
	api  string // its API's URL
	pid  int
}

// report reports a metric of the server: its unit begins with its name.
func (s *server) report(v float64, unit string) { s.b.ReportMetric(v, s.name+"-"+unit) }

// servers are the binaries of the servers measured, by name.
type servers map[string]string

// buildServers builds netjam, and toxiproxy-server v2.5.0 from the module
// proxy (the benchmark is skipped when it cannot).
func buildServers(b *testing.B) servers {
	dir := b.TempDir()
	bins := servers{"netjam": filepath.Join(dir, "netjam"), "toxiproxy": filepath.Join(dir, "server")}
	if out, err := exec.Command("go", "build", "-o", bins["netjam"], "../cmd/netjam").CombinedOutput(); err != nil {
		b.Fatalf("build netjam: %v\n%s", err, out)
	}
	cmd := exec.Command("go", "install", "github.com/Shopify/toxiproxy/v2/cmd/server@v2.5.0")
	cmd.Env = append(os.Environ(), "GOBIN="+dir, "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Skipf("cannot build toxiproxy-server: %v\n%s", err, out)
	}
	return bins
}

// eachServer starts each server in turn, toxiproxy then netjam, in its
// own process on loopback, and runs measure on it. Called once in each
// iteration of a benchmark without sub-benchmarks, which -count repeats
// whole, the two alternate: sub-benchmarks, one a server, would each be
// repeated in a row (toxiproxy 5 times, then netjam 5 times), and a busy
// spell of the machine would fall on one of them.
func eachServer(b *testing.B, bins servers, measure func(s *server)) {
	for _, name := range []string{"toxiproxy", "netjam"} {
		port := strings.TrimPrefix(freeAddr(b), "127.0.0.1:")
		cmd := exec.Command(bins[name], "-host", "127.0.0.1", "-port", port)
		if name == "netjam" {
			cmd = exec.Command(bins[name], "--log-level", "error", "proxy", "--listen", "127.0.0.1:"+port)
		}
		runServer(b, cmd, func(pid int) {
			s := &server{b: b, name: name, api: "http://127.0.0.1:" + port, pid: pid}
			waitAPI(b, s.api)
			measure(s)
		})
	}
}

// runServer starts cmd, runs f with its process id, and stops it (also
// when f fails the benchmark).
func runServer(b *testing.B, cmd *exec.Cmd, f func(pid int)) {
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}()
	f(cmd.Process.Pid)
}

// remove sends DELETE url, whatever comes back.
func remove(url string) {
	req, _ := http.NewRequest("DELETE", url, nil)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
}

func waitAPI(b *testing.B, api string) {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if resp, err := http.Get(api + "/version"); err == nil {
			resp.Body.Close()
			return
		}
	}
	b.Fatalf("%s did not answer", api)
}

func post(b *testing.B, url, body string) string {
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		b.Fatalf("POST %s: %d %s", url, resp.StatusCode, out)
	}
	return string(out)
}

// createProxy makes a proxy to upstream and returns its address.
func createProxy(b *testing.B, api, name, upstream string) string {
	listen := freeAddr(b)
	post(b, api+"/proxies", fmt.Sprintf(`{"name": %q, "listen": %q, "upstream": %q}`, name, listen, upstream))
	return listen
}

// sourceServer writes what its client asks for: a decimal count and a
// newline, then that many bytes.
func sourceServer(b *testing.B) string {
	chunk := bytes.Repeat([]byte{'x'}, 64<<10)
	return tcpServer(b, func(c net.Conn) {
		defer c.Close()
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			return
		}
		n, _ := strconv.Atoi(strings.TrimSpace(line))
		for n > 0 {
			k := min(n, len(chunk))
			if _, err := c.Write(chunk[:k]); err != nil {
				return
			}
			n -= k
		}
	})
}

func echoServer(b *testing.B) string { return echoUpstream(b) }

// throughput downloads n bytes through the proxy at addr, in MB/s.
func throughput(b *testing.B, addr string, n int) float64 {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	fmt.Fprintf(c, "%d\n", n)
	got, err := io.Copy(io.Discard, c)
	if err != nil || got != int64(n) {
		b.Fatalf("%d of %d bytes: %v", got, n, err)
	}
	return float64(n) / time.Since(start).Seconds() / 1e6
}

// roundTrips returns n round trips of one byte over one connection to addr.
func roundTrips(b *testing.B, addr string, n int) []time.Duration {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	one := make([]byte, 1)
	out := make([]time.Duration, n)
	for i := range out {
		start := time.Now()
		if _, err := c.Write(one); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(c, one); err != nil {
			b.Fatal(err)
		}
		out[i] = time.Since(start)
	}
	slices.Sort(out)
	return out
}

// addedLatency is the p50 and p99 of the round trip through the proxy
// less those of the direct one, in µs.
func addedLatency(b *testing.B, proxied, direct string, n int) (float64, float64) {
	p, d := roundTrips(b, proxied, n), roundTrips(b, direct, n)
	q := func(s []time.Duration, f float64) float64 { return float64(s[int(f*float64(len(s)-1))].Microseconds()) }
	return q(p, 0.5) - q(d, 0.5), q(p, 0.99) - q(d, 0.99)
}

// memoryWith opens k connections through the proxy at addr, each
// carrying one byte both ways, and returns the server's resident set
// then, in MiB.
func memoryWith(b *testing.B, pid int, addr string, k int) float64 {
	var cs []net.Conn
	defer func() {
		for _, c := range cs {
			c.Close()
		}
	}()
	one := make([]byte, 1)
	for range k {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		cs = append(cs, c)
		c.Write(one)
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.ReadFull(c, one); err != nil {
			b.Fatalf("connection %d: %v", len(cs), err)
		}
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	b.Fatal("no VmRSS")
	return 0
}
