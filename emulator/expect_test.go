package emulator

import (
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/netjam/netjam/flows"
	"github.com/netjam/netjam/hostcfg"
	"github.com/netjam/netjam/scenario"
	"github.com/netjam/netjam/stats"
	"github.com/netjam/netjam/summary"
)

// TestExpectations checks expectations against a run's summary: figures
// found by path, named items and units, and what cannot be checked.
func TestExpectations(t *testing.T) {
	fair := 0.97
	rs := &summary.RunSummary{
		DurationS: 10,
		Flows: []flows.FlowSummary{
			{Name: "bulk", Type: flows.TypeTCP, ThroughputBps: 3.21e6, TCPSummary: &flows.TCPSummary{BytesReceived: 5e6, Retransmissions: 51, CompletionS: 4.5}},
			{Name: "video", Type: flows.TypeUDP, ThroughputBps: 1e6, UDPSummary: &flows.UDPSummary{LossRatio: 0.025, DelayMs: stats.Summary{Count: 10, P95: 142.5}}},
		},
		Links:    []summary.LinkSummary{{Name: "uplink", Drops: map[string]uint64{"loss": 12}}, {Name: "downlink", Drops: map[string]uint64{}}},
		Fairness: &fair,
		Hosts:    []summary.HostSummary{{Name: "client0", TCP: hostcfg.TCPStats{Retransmits: 51, Timeouts: 2}}, {Name: "server0", ChecksumErrors: 3}},
	}
	for _, c := range []struct {
		expect, figure, got, err string
		pass                     bool
	}{
		{"flows.video.delay_ms.p95 < 150ms", "flows.video.delay_ms.p95", "142.50ms", "", true},
		{"flows.video.delay_ms.p95 < 0.1s", "flows.video.delay_ms.p95", "142.50ms", "", false},
		{"flows.bulk.throughput > 4Mbps", "flows.bulk.throughput_bps", "3.21Mbps", "", false},
		{"flows.bulk.throughput >= 3.2Mbps", "flows.bulk.throughput_bps", "3.21Mbps", "", true},
		{"flows.bulk.retransmissions <= 50", "flows.bulk.retransmissions", "51", "", false},
		{"flows.bulk.completion <= 5s", "flows.bulk.completion_s", "4.500s", "", true},
		{"flows.bulk.bytes_received == 5MB", "flows.bulk.bytes_received", "5.00MB", "", true},
		{"flows.video.loss < 3%", "flows.video.loss_ratio", "2.50%", "", true},
		{"links.uplink.drops.loss == 12", "links.uplink.drops.loss", "12", "", true},
		{"links.downlink.drops.queue == 0", "links.downlink.drops.queue", "0", "", true},
		{"fairness > 95%", "fairness", "97.00%", "", true},
		{"duration_s <= 10", "duration_s", "10.000s", "", true},
		{"hosts.client0.tcp.timeouts == 0", "hosts.client0.tcp.timeouts", "2", "", false},
		{"hosts.client0.tcp.retransmits <= 51", "hosts.client0.tcp.retransmits", "51", "", true},
		{"hosts.server0.checksum_errors == 0", "hosts.server0.checksum_errors", "3", "", false},
		{"hosts.server1.malformed == 0", "", "", `hosts has no item named "server1" (names: client0, server0)`, false},
		{"flows.bulk.retransmissions < 5Mbps", "flows.bulk.retransmissions", "51", "flows.bulk.retransmissions is a count or a plain number, but 5Mbps is a rate", false},
		{"flows.video.delay_ms > 1ms", "flows.video.delay_ms", "", "flows.video.delay_ms is a set of figures (count, max, mean, min, p50, p95, p99): name one, as flows.video.delay_ms.count", false},
		{"flows.bulk.goodput > 1Mbps", "", "", `flows.bulk has no figure "goodput" (it has: bytes_after_stop, bytes_received, bytes_sent, completed, completion_s, connect_s, cwnd_max, fast_retransmits, name, retransmissions, rtt_ms, stalled_s, stalls, throughput_bps, timeouts, type)`, false},
		{"links.uplink.drops.nosuch == 0", "", "", `links.uplink.drops has no figure "nosuch" (it has: loss)`, false},
		{"wifi.ap.drops == 0", "", "", `the run has no figure "wifi" (it has: duration_s, fairness, flows, hosts, links, seed, variant)`, false},
		{"flows.bulk.type == 1", "flows.bulk.type", "", "flows.bulk.type is not a number", false},
		{"flows.bulk.rtt_ms.p95 < 10ms", "flows.bulk.rtt_ms.p95", "", "flows.bulk.rtt_ms has no samples (count 0)", false},
		{"flows.bulk.rtt_ms.count == 0", "flows.bulk.rtt_ms.count", "0", "", true},
		// A set of figures a run left empty (no drops): an error, not a panic.
		{"links.downlink.drops == 0", "links.downlink.drops", "", "links.downlink.drops is a set of figures: name one, as links.downlink.drops.NAME", false},
	} {
		e, err := scenario.ParseExpectation(c.expect)
		if err != nil {
			t.Fatal(err)
		}
		r := checkExpectations(rs, []scenario.Expectation{e})[0]
		if r.Expect != c.expect || r.Figure != c.figure || r.GotText != c.got || r.Error != c.err || r.Pass != c.pass {
			t.Errorf("%s: %+v\nwant figure %q, got %q, error %q, pass %v", c.expect, r, c.figure, c.got, c.err, c.pass)
		}
	}
}

// What the figures of a run's summary can tell about an expectation is
// told before the run (CheckExpectations): the same verdicts as after it
// (TestExpectations), where they do not depend on the run.
func TestExpectationsCheckedBeforeTheRun(t *testing.T) {
	types := map[string]string{"bulk": "tcp", "video": "udp"}
	for _, c := range []struct{ expect, err string }{
		{"flows.video.delay_ms.p95 < 150ms", ""},
		{"flows.bulk.throughput > 4Mbps", ""},
		{"flows.bulk.retransmissions <= 50", ""},
		{"flows.bulk.completion <= 5s", ""},
		{"flows.bulk.bytes_received == 5MB", ""},
		{"flows.video.loss < 3%", ""},
		{"links.uplink.drops.loss == 12", ""},
		{"links.downlink.drops.queue == 0", ""},
		{"links.uplink.queue_delay_ms.p99 < 20ms", ""},
		{"fairness > 95%", ""},
		{"duration_s <= 10", ""},
		{"flows.bulk.rtt_ms.count == 0", ""},
		{"wifi.ap.delivered > 0", ""},
		{"hosts.client0.tcp.timeouts == 0", ""},
		{"hosts.server0.checksum_errors == 0", ""},
		{"hosts.client0.tcp.lost == 0", `hosts.client0.tcp has no figure "lost"`},
		{"hosts.client0.tcp > 1", "hosts.client0.tcp is a set of figures"},
		{"flows.bulk.retransmissions < 5Mbps", "flows.bulk.retransmissions is a count or a plain number, but 5Mbps is a rate"},
		{"flows.bulk.throughput > 1ms", "flows.bulk.throughput_bps is a rate, but 1ms is a duration"},
		{"flows.video.delay_ms > 1ms", "flows.video.delay_ms is a set of figures (count, max, mean, min, p50, p95, p99): name one, as flows.video.delay_ms.count"},
		{"flows.bulk.goodput > 1Mbps", `flows.bulk has no figure "goodput" (it has: bytes_after_stop, bytes_received, bytes_sent, cc, completed, completion_s, connect_s, cwnd_max, fast_retransmits, name, path, reset_at_s, retransmissions, rtt_ms, size, stack, stalled_s, stalls, throughput_bps, timeouts, total_s, type)`},
		{"flows.video.retransmissions == 0", `flows.video has no figure "retransmissions"`},
		{"flows.bulk.loss < 1%", `flows.bulk has no figure "loss"`},
		{"links.uplink.drops.nosuch == 0", `links.uplink.drops has no drop reason "nosuch"`},
		{"flows.bulk.type == 1", "flows.bulk.type is not a number"},
		{"duration_s.p95 < 1s", `duration_s is a single figure; it has no "p95"`},
	} {
		e, err := scenario.ParseExpectation(c.expect)
		if err != nil {
			t.Fatal(err)
		}
		got := figureProblem(e, types)
		if c.err == "" && got != "" || c.err != "" && !strings.HasPrefix(got, c.err) {
			t.Errorf("%s: %q, want %q", c.expect, got, c.err)
		}
	}

	plan, err := scenario.Parse("x.yaml", []byte(`
duration: 1s
flows:
  - {name: bulk, type: tcp, duration: 1s}
variants:
  - {name: a}
  - {name: b}
expect:
  - flows.bulk.throughput > 1Mbps
  - flows.bulk.throughput > 10ms
  - flows.bulk.thruput > 1Mbps
`), scenario.Options{})
	if err != nil {
		t.Fatal(err)
	}
	err = CheckExpectations(plan)
	want := `x.yaml: expect[1]: "flows.bulk.throughput > 10ms": flows.bulk.throughput_bps is a rate, but 10ms is a duration` + "\n" +
		`x.yaml: expect[2]: "flows.bulk.thruput > 1Mbps": flows.bulk has no figure "thruput"`
	if err == nil || !strings.HasPrefix(err.Error(), want) || strings.Count(err.Error(), "\n") != 1 {
		t.Errorf("got %v\nwant, once for both variants:\n%s (...)", err, want)
	}
}

// Every expectation of the scenarios netjam ships holds up before a run.
func TestShippedExpectationsChecked(t *testing.T) {
	files, _ := filepath.Glob("../configs/*.yaml")
	n := 0
	for _, f := range files {
		plan, err := scenario.Load(f, scenario.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range plan.Runs {
			n += len(s.Expect)
		}
		if err := CheckExpectations(plan); err != nil {
			t.Error(err)
		}
	}
	if n == 0 {
		t.Fatal("no shipped scenario has an expectation")
	}
}

// Whatever figure an expectation names, and whatever follows it, the
// check before the run answers without a panic: every path into a run's
// summary, and each with a key more, with a value of each kind.
func TestExpectationsCheckedOnAnyPath(t *testing.T) {
	var paths [][]string
	var walk func(t reflect.Type, path []string)
	walk = func(t reflect.Type, path []string) {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if len(path) > 0 {
			paths = append(paths, path, append(slices.Clone(path), "x"))
		}
		if len(path) > 6 {
			return
		}
		switch t.Kind() {
		case reflect.Struct:
			for k, ft := range jsonFields(t) {
				walk(ft, append(slices.Clone(path), k))
			}
		case reflect.Slice, reflect.Map:
			walk(t.Elem(), append(slices.Clone(path), "item"))
		}
	}
	walk(summaryType, nil)
	if len(paths) < 100 {
		t.Fatalf("only %d paths into a run's summary", len(paths))
	}
	for _, p := range paths {
		for _, v := range []string{"1", "1ms", "1Mbps", "1%", "1MB"} {
			text := strings.Join(p, ".") + " > " + v
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Errorf("%s: %v", text, r)
					}
				}()
				e := scenario.Expectation{Text: text, Path: p, Op: ">"}
				if parsed, err := scenario.ParseExpectation("duration_s > " + v); err == nil {
					e.Dim = parsed.Dim
				}
				figureProblem(e, map[string]string{"item": "tcp"})
			}()
		}
	}
}
