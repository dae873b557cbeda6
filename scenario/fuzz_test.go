package scenario

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/netjam/netjam/impair"
)

// FuzzParse checks that any file, with any one --set, gives either Errors
// or a valid Plan whose runs survive a YAML round trip; never a panic.
func FuzzParse(f *testing.F) {

	files, _ := filepath.Glob("../configs/*.yaml")
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, "")
		f.Add(data, "link.uplink.delay={time: 5ms, jitter: 1ms}")
	}
	for _, src := range []string{
		"",
		"link: {delay: 50ms, loss: 5%, uplink: {rate: 10Mbps, queue: 1000}, downlink: {rate: 100Mbps}}\n",
		"link:\n  delay: 5ms\n uplink: {}\n",                                   // bad indentation
		"link: &l\n  uplink: *l\n",                                             // alias cycle
		"a: &a [1,1]\nb: [*a, *a]\n",                                           // aliases
		"link: {reorder: 5%}\nvariants: [{name: a, set: {link.delay: 1ms}}]\n", // valid only in the variant
		"link: {queue: {discipline: pie, bytes: 1KB, flows: 3}}\n",
		"link: {loss: {model: state, p13: 90%, p14: 20%}}\n",
		"link: {rate: 1Mbps, delay: 5ms}\ntimeline: [{at: 1s, ramp: 35ms, set: {link.rate: 2Mbps, link.delay.jitter: 1ms}}, {every: 2s, for: 1s, set: {link.uplink.loss: 5%}}]\n",
		"timeline: [{at: 1s, set: {link.: 1}}, {at: 1s, set: {link.delay: 1ms}}, {at: 1s, for: 1s, set: {link.delay.time: 2ms}}]\n",
		"variants: [{name: a}, {name: a}, 5, {set: []}]\n",
		"seed: 18446744073709551616\nmtu: 0x600\n",
		"name: !!binary aGVsbG8=\n",
		"? [a]\n: b\n",
		"\"\\xff\": 1\n",
		"link: {delay: {time: !!int 5ms}}\n",
		"tun: {}\nflows: [{name: k, type: tcp, size: 1MB, stack: kernel, cc: bbr}]\n",
		"tun: {address: [10.99.0.1/24, 'fd99::1/64'], peer: ['fd99::2', 10.99.0.2], routes: 192.0.2.0/24, " +
			"forward: [{proto: tcp, listen: 5201, to: 127.0.0.1:5201}], transparent: {allow: [192.0.2.0/24]}, netns: lab}\n",
		"wifi: {stations: [{name: a}, {name: b}]}\ntun: {station: a}\nflows: [{name: k, type: tcp, size: 1MB, stack: kernel, station: a}]\n",
		"mtu: 1280\ntun: {address: 10.0.0.1/31, mtu: 1280, udp_idle: 1h, services: false}\n",
		"tun: {address: 10.99.0.1/32, peer: 10.99.0.1}\nflows: [{name: k, type: tcp, size: 1MB, stack: kernel, sack: false}]\n",
	} {
		f.Add([]byte(src), "")
		f.Add([]byte(src), "link.rate=1Mbps")
	}
	f.Add([]byte("link: {delay: 5ms}\n"), "link.delay.jitter=1ms")
	f.Add([]byte("links: [{name: a}, {name: b, delay: 5ms}]\npaths: [{name: p, via: [a, b], match: {dst: 10.1.0.0/16, port: 80}}, {name: q, via: [a]}]\n"), "links.b.uplink.loss=1%")
	f.Add([]byte("flows: []\n"), "flows.a.b=1")
	f.Add([]byte("flows: [{name: a, type: tcp, size: 1MB}]\n"), "flows.a.stack=kernel")
	f.Add([]byte("flows: [{name: a, type: tcp, size: 1MB, stack: kernel}]\n"), "tun={}")
	f.Add([]byte("tun: {}\n"), "tun.address=[fd99::1/64, 10.1.1.1/16]")

	f.Fuzz(func(t *testing.T, data []byte, set string) {
		o := Options{CongestionControls: testCCs}
		if set != "" {
			o.Sets = []string{set}
		}
		p, err := Parse("fuzz.yaml", data, o)
		if err != nil {
			var es Errors
			if p != nil || !errors.As(err, &es) || len(es) == 0 {
				t.Fatalf("Parse = %v, %T %v; want nil and non-empty Errors", p, err, err)
			}
			for _, e := range es {
				if e.Msg == "" {
					t.Fatalf("error without a message: %+v", *e)
				}
			}
			return
		}
		if len(p.Runs) == 0 {
			t.Fatal("Parse returned a plan without runs")
		}
		for _, run := range p.Runs {
			checkValid(t, run)
			out, err := run.YAML()
			if err != nil {
				t.Fatalf("YAML: %v", err)
			}
			back, err := Parse("fuzz.yaml", out, Options{CongestionControls: testCCs})
			if err != nil {
				t.Fatalf("parsing YAML output: %v\n%s", err, out)
			}
			want := exported(run)
			want.Variant = ""
			if got := exported(back.Runs[0]); len(back.Runs) != 1 || !reflect.DeepEqual(got, want) {
				t.Fatalf("round trip\n got %+v\nwant %+v\nYAML:\n%s", got, want, out)
			}
		}
	})
}

// checkValid checks the invariants a Scenario from Parse promises.
func checkValid(t *testing.T, s *Scenario) {
	t.Helper()
	if s.Name == "" || nameProblem(s.Name) != "" {
		t.Errorf("invalid name %q", s.Name)
	}
	if s.Duration <= 0 || s.Duration > maxDuration {
		t.Errorf("duration %v", s.Duration)
	}
	if s.MTU < 576 || s.MTU > 65535 {
		t.Errorf("mtu %d", s.MTU)
	}
	for _, d := range []impair.Config{s.Uplink, s.Downlink} {
		ratio := func(what string, v float64, max float64) {
			if !(v >= 0 && v <= max) {
				t.Errorf("%s = %v", what, v)
			}
		}
		const belowOne = 1 - 1e-12
		ratio("loss p", d.Loss.P, 1)
		ratio("loss correlation", d.Loss.Correlation, belowOne)
		for _, v := range []float64{d.Loss.R, d.Loss.OneMinusH, d.Loss.OneMinusK, d.Loss.P13, d.Loss.P31, d.Loss.P32, d.Loss.P23, d.Loss.P14} {
			ratio("loss parameter", v, 1)
		}
		ratio("duplicate", d.Duplicate.P, 1)
		ratio("corrupt", d.Corrupt.P, 1)
		ratio("reorder", d.Reorder.P, 1)
		ratio("delay correlation", d.Delay.Correlation, belowOne)
		if d.Loss.Model > impair.LossState {
			t.Errorf("loss model %v", d.Loss.Model)
		}
		if d.Delay.Distribution > impair.ParetoNormal {
			t.Errorf("distribution %v", d.Delay.Distribution)
		}
		if err := d.Validate(); err != nil {
			t.Errorf("impair refuses a direction scenario accepted: %v", err)
		}
		if d.Delay.Time < 0 || d.Delay.Time > maxDelay || d.Delay.Jitter < 0 || d.Delay.Jitter > maxDelay {
			t.Errorf("delay %+v", d.Delay)
		}
		if d.Reorder.P > 0 && d.Delay.Time == 0 {
			t.Errorf("reorder without delay: %+v", d)
		}
		if d.Reorder.Gap < 1 {
			t.Errorf("reorder gap %d", d.Reorder.Gap)
		}
		if d.Rate.Bitrate > MaxRate {
			t.Errorf("rate %d", d.Rate.Bitrate)
		}
		if d.Slot.Min < 0 || d.Slot.Max < d.Slot.Min || d.Slot.Max > maxDelay {
			t.Errorf("slot %+v", d.Slot)
		}
		q := d.Queue
		if q.Discipline > impair.PIE {
			t.Errorf("discipline %v", q.Discipline)
		}
		if q.LimitPackets < 0 || q.LimitBytes < 0 || q.LimitPackets == 0 && q.LimitBytes == 0 {
			t.Errorf("queue limits %+v", q)
		}
		if q.LimitBytes > 0 && q.LimitBytes < int64(s.MTU) {
			t.Errorf("queue bytes %d below mtu %d", q.LimitBytes, s.MTU)
		}
		if (q.Discipline == impair.CoDel || q.Discipline == impair.FQCoDel || q.Discipline == impair.PIE) && (q.Target <= 0 || q.Target > time.Hour) {
			t.Errorf("queue target %+v", q)
		}
		if d.InflightLimit < 1 || d.InflightLimit > maxPackets {
			t.Errorf("inflight limit %d", d.InflightLimit)
		}
	}
	if s.KernelFlows() && s.TUN == nil {
		t.Errorf("kernel flows without tun")
	}
	if tun := s.TUN; tun != nil {
		if tun.Device.Name == "" || ifNameProblem(tun.Device.Name) != "" {
			t.Errorf("tun name %q", tun.Device.Name)
		}
		if len(tun.Device.Addrs) < 1 || len(tun.Device.Addrs) > 2 || len(tun.Peer) != len(tun.Device.Addrs) {
			t.Errorf("tun addresses %v, peers %v", tun.Device.Addrs, tun.Peer)
		} else {
			for i, p := range tun.Device.Addrs {
				if a := tun.Peer[i]; !p.Contains(a) || a == p.Addr() || !hostOf(p, a) || !hostOf(p, p.Addr()) || p.Bits() == 0 {
					t.Errorf("tun address %v, peer %v", p, a)
				}
			}
			if len(tun.Device.Addrs) == 2 && tun.Device.Addrs[0].Addr().Is4() == tun.Device.Addrs[1].Addr().Is4() {
				t.Errorf("tun addresses %v of one family", tun.Device.Addrs)
			}
		}
		if tun.Device.MTU < 576 || tun.Device.MTU > s.MTU {
			t.Errorf("tun mtu %d (scenario %d)", tun.Device.MTU, s.MTU)
		}
		for _, r := range tun.Device.Routes {
			if r != r.Masked() || r.Bits() == 0 {
				t.Errorf("tun route %v", r)
			}
		}
		if tun.Relay.Transparent {
			if len(tun.Relay.Allow) == 0 {
				t.Error("transparent without allow")
			}
			for _, p := range tun.Relay.Allow {
				if p != p.Masked() || p.Bits() == 0 {
					t.Errorf("allow %v", p)
				}
			}
		}
		for _, fw := range tun.Relay.Forwards {
			if fw.Listen == 0 || !fw.To.IsValid() || fw.To.Port() == 0 || tun.Relay.Services && (fw.Listen == 7 || fw.Listen == 9) {
				t.Errorf("forward %+v", fw)
			}
		}
		if tun.Relay.UDPIdle <= 0 || tun.Relay.UDPIdle > time.Hour {
			t.Errorf("udp idle %v", tun.Relay.UDPIdle)
		}
		if tun.Device.Netns != "" && !filepath.IsAbs(tun.Device.Netns) {
			t.Errorf("netns %q", tun.Device.Netns)
		}
		// What the scenario took, the packages it configures take too.
		if err := tun.Device.Validate(); err != nil {
			t.Errorf("tun device: %v", err)
		}
		if err := tun.Relay.Validate(); err != nil {
			t.Errorf("tun relay: %v", err)
		}
	}
}
