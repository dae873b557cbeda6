package report

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// synthRun describes one run of a synthetic output folder.
type synthRun struct {
	variant string
	tcp     bool // a TCP flow "bulk"
	udp     bool // a UDP flow "probe"
	drops   bool // uplink drops every 10th interval
	wifi    bool // a Wi-Fi cell: station sta1 and the AP
	trace   bool // a trace-driven downlink: its capacity
}

// writeSynth writes a small run output folder into dir, shaped like netjam
// run's (summary.json, timeseries.csv, scenario*.yaml): a scenario named
// "synthetic", 10 s sampled every 100 ms, an uplink with a bottleneck
// queue and a downlink without one.
func writeSynth(t testing.TB, dir string, runs ...synthRun) {
	t.Helper()
	type m = map[string]any
	sum := m{"scenario": "synthetic", "netjam_version": "v9.9.9-test"}
	var rs []m
	var csv strings.Builder
	csv.WriteString("variant,time_s,kind,name,value\n")
	row := func(v string, ts float64, kind, name string, val float64) {
		fmt.Fprintf(&csv, "%s,%g,%s,%s,%g\n", v, ts, kind, name, val)
	}
	for ri, r := range runs {
		var flows []m
		if r.tcp {
			flows = append(flows, m{"name": "bulk", "type": "tcp", "stack": "netstack", "cc": "cubic",
				"throughput_bps": 7.5e6, "bytes_sent": 9e6, "bytes_received": 9e6, "completion_s": 9.6,
				"retransmissions": 12, "fast_retransmits": 10, "timeouts": 1,
				"rtt_ms":   m{"count": 900, "mean": 25, "min": 20, "p50": 24, "p95": 30, "p99": 33, "max": 40},
				"cwnd_max": 80})
		}
		if r.udp {
			flows = append(flows, m{"name": "probe", "type": "udp", "stack": "netstack",
				"throughput_bps": 2e6, "packets_sent": 2500, "packets_received": 2480, "loss_ratio": 0.008,
				"jitter_ms": 0.75, "reordered": 0, "duplicates": 0, "malformed": 0,
				"delay_ms": m{"count": 2480, "mean": 31, "min": 20, "p50": 30, "p95": 42, "p99": 45, "max": 50}})
		}
		link := func(name string, queue bool) m {
			l := m{"name": name,
				"configured": m{"summary": "rate 10Mbps, queue droptail 100p, delay 10ms", "delay_ms": 10, "loss_ratio": 0.01, "rate_bps": 10000000},
				"achieved":   m{"rate_bps": 9.99e6, "loss_ratio": 0.012},
				"packets_in": 9000, "bytes_in": 12000000, "packets_out": 8890, "bytes_out": 11900000,
				"drops": m{"queue": 100, "loss": 10}, "duplicated": 0, "corrupted": 0, "reordered": 0, "ecn_marked": 3,
				"queue_delay_ms": m{"count": 8890, "mean": 12, "min": 0, "p50": 11, "p95": 20, "p99": 22, "max": 25},
				"transit_ms":     m{"count": 8890, "mean": 22, "min": 10, "p50": 21, "p95": 30, "p99": 32, "max": 35},
				"lateness_ms":    m{"count": 8890, "mean": 0.02, "min": 0, "p50": 0.01, "p95": 0.05, "p99": 0.1, "max": 1},
				"delivery_drops": 0,
				"stages": []m{{"name": "loss", "packets_in": 9000, "packets_out": 8990, "drops": m{"loss": 10}},
					{"name": "queue", "packets_in": 8990, "packets_out": 8890, "drops": m{"queue": 100}, "busy_ns": 9500000000}},
			}
			if !queue {
				l["queue_delay_ms"] = m{"count": 0}
			}
			return l
		}
		fair := 0.9
		run := m{"variant": r.variant, "seed": 42 + ri, "duration_s": 10.01, "flows": flows,
			"links": []m{link("uplink", true), link("downlink", false)}, "fairness": fair, "fairness_flows": []string{"bulk", "other"}}
		if r.wifi {
			run["wifi"] = m{"utilization": 0.35,
				"stations": []m{{"name": "sta1", "attempts": 1000, "successes": 990, "collisions": 10, "retries": 10,
					"drops": m{}, "airtime_share": 0.3, "throughput_bps": 5e6, "delay_ns": m{"count": 990, "mean": 2e6, "p95": 5e6}}},
				"ap": m{"name": "", "attempts": 500, "successes": 499, "collisions": 1, "retries": 1,
					"drops": m{"retry": 1}, "airtime_share": 0.05, "throughput_bps": 2e5, "delay_ns": m{"count": 0}}}
		}
		rs = append(rs, run)
		for i := 1; i <= 100; i++ {
			ts := float64(i) / 10
			ph := float64(ri) + ts
			if r.tcp {
				row(r.variant, ts, "throughput_bps", "bulk", 7e6+1e6*math.Sin(ph))
				row(r.variant, ts, "cwnd", "bulk", float64(20+i%40))
				row(r.variant, ts, "srtt_ms", "bulk", 22+5*math.Sin(ph/2))
			}
			if r.udp {
				row(r.variant, ts, "throughput_bps", "probe", 2e6)
				row(r.variant, ts, "delay_ms", "probe", 30+10*math.Sin(ph))
			}
			d := 0.0
			if r.drops && i%10 == 0 {
				d = 3
			}
			row(r.variant, ts, "link_bps", "uplink", 9.9e6)
			row(r.variant, ts, "drops", "uplink", d)
			row(r.variant, ts, "queue_packets", "uplink", float64(50+40*math.Sin(ph)))
			row(r.variant, ts, "sojourn_ms", "uplink", 10+8*math.Sin(ph))
			row(r.variant, ts, "link_bps", "downlink", 2e5)
			row(r.variant, ts, "drops", "downlink", 0)
			if r.trace {
				row(r.variant, ts, "capacity_bps", "downlink", 6e6+5e6*math.Sin(ph))
			}
			if r.wifi {
				row(r.variant, ts, "airtime_share", "sta1", 0.3)
				row(r.variant, ts, "airtime_share", "ap", 0.05)
				row(r.variant, ts, "collisions", "sta1", float64(i%3))
				row(r.variant, ts, "collisions", "ap", 0)
			}
		}
		name := "scenario.yaml"
		if r.variant != "" {
			name = "scenario-" + r.variant + ".yaml"
		}
		yaml := fmt.Sprintf("# netjam: the scenario as run\nname: synthetic\nseed: %d\nlink: {rate: 10Mbps, note: \"<b>&amp;</b>\"}\n", 42+ri)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sum["runs"] = rs
	b, err := json.MarshalIndent(sum, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, SummaryFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, TimeseriesFile), []byte(csv.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// twoVariants writes the usual synthetic folder into dir: variants a and
// b with a TCP and a UDP flow each, b with drops.
func twoVariants(t testing.TB, dir string) {
	writeSynth(t, dir,
		synthRun{variant: "a", tcp: true, udp: true, wifi: true},
		synthRun{variant: "b", tcp: true, udp: true, drops: true, wifi: true, trace: true})
}

// drawn is the twoVariants folder after Plot and HTML, drawn once for
// every test that only reads it: drawing is slow under the race detector
// (about 20 s a folder on two cores), so the tests share it. TestMain
// removes it.
var drawn struct {
	once  sync.Once
	dir   string
	names []string // what Plot returned
	err   error
}

// drawnFolder returns the shared drawn folder and the names Plot returned.
func drawnFolder(t *testing.T) (string, []string) {
	t.Helper()
	drawn.once.Do(func() {
		drawn.dir, drawn.err = os.MkdirTemp("", "netjam-report-test-")
		if drawn.err != nil {
			return
		}
		twoVariants(t, drawn.dir)
		if drawn.names, drawn.err = Plot(openDir(t, drawn.dir)); drawn.err == nil {
			drawn.err = HTML(openDir(t, drawn.dir), "v1.2.3-report")
		}
	})
	if drawn.err != nil {
		t.Fatal(drawn.err)
	}
	return drawn.dir, drawn.names
}
