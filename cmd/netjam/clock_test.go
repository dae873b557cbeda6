package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// --clock names itself in its errors, and a scenario's TUN variant is
// refused before anything runs.
func TestClockFlagErrors(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	code, _, errOut := netjam(t, "run", "--out", out, "--clock", "fast")
	if code != 2 || !strings.Contains(errOut, `--clock: "fast" is not a clock (expected real or virtual)`) {
		t.Errorf("--clock fast: exit %d, stderr %q", code, errOut)
	}
	code, _, errOut = netjam(t, "run", "--out", out, "--clock", "virtual", "../../configs/wifi-coexistence.yaml")
	want := "--clock: virtual runs labs of netstack hosts only, and this run has a tun section: TUN mode and kernel flows run on the wall clock (use clock: real) (with variant bbr)"
	if code != 2 || !strings.Contains(errOut, want) {
		t.Errorf("a TUN variant: exit %d, stderr %q, want %q", code, errOut, want)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("the output folder was made before the error (%v)", err)
	}
	// Without the TUN variant, the others run.
	code, _, errOut = netjam(t, "run", "-q", "--out", out, "--clock", "virtual", "--duration", "1s",
		"--variant", "cubic", "../../configs/wifi-coexistence.yaml")
	if code != 0 {
		t.Errorf("--variant cubic: exit %d, stderr %q", code, errOut)
	}
}

// A run on the virtual clock says so in its resolved scenario.yaml, so
// that running that file again runs on the virtual clock too, without
// --clock, and measures the same: its summary.json and timeseries.csv
// are the first run's, byte for byte.
func TestVirtualRunReplays(t *testing.T) {
	if raceEnabled {
		// 45 s under the race detector (its 2 s runs go slower than
		// real time there); CI's pass without it runs this test.
		t.Skip("checked without the race detector (go test -run Virtual)")
	}
	dir := t.TempDir()
	first, again := filepath.Join(dir, "first"), filepath.Join(dir, "again")
	sc := filepath.Join(dir, "s.yaml")
	if err := os.WriteFile(sc, []byte("duration: 2s\nlink: {rate: 5Mbps, delay: 10ms, uplink: {loss: 2%}}\n"+
		"flows: [{name: up, type: udp, rate: 3Mbps, duration: 2s}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := netjam(t, "run", "-q", "--clock", "virtual", "--seed", "3", "--out", first, sc); code != 0 {
		t.Fatalf("first run: exit %d: %s", code, errOut)
	}
	y, err := os.ReadFile(filepath.Join(first, "scenario.yaml"))
	if err != nil || !strings.Contains(string(y), "clock: virtual") {
		t.Fatalf("the resolved scenario does not say clock: virtual (%v):\n%s", err, y)
	}
	if code, _, errOut := netjam(t, "run", "-q", "--out", again, filepath.Join(first, "scenario.yaml")); code != 0 {
		t.Fatalf("replay: exit %d: %s", code, errOut)
	}
	log, err := os.ReadFile(filepath.Join(again, "netjam.log"))
	if err != nil || !strings.Contains(string(log), `"msg":"virtual clock"`) {
		t.Fatalf("the replay did not run on the virtual clock (%v):\n%s", err, log)
	}
	for _, d := range []string{first, again} {
		if b, _ := os.ReadFile(filepath.Join(d, "netjam.log")); !strings.Contains(string(b), `"waits_given_up":0`) {
			// See emulator.TestVirtualSameSeedSameFiles: a clock that
			// gave up waiting for a goroutine (a machine far too
			// loaded) moved time on without it.
			t.Skipf("the run in %s gave up waiting for a goroutine: not comparable", d)
		}
	}
	for _, f := range []string{"summary.json", "timeseries.csv"} {
		a, errA := os.ReadFile(filepath.Join(first, f))
		b, errB := os.ReadFile(filepath.Join(again, f))
		if errA != nil || errB != nil || string(a) != string(b) {
			t.Errorf("%s: the replay's differs from the first run's (%v, %v)", f, errA, errB)
		}
	}
}

// TestRunCaptureList: --capture takes a comma-separated list as well as
// repeated flags; a wrong point in the list is named.
func TestRunCaptureList(t *testing.T) {
	sc := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(sc, []byte("name: c\nclock: virtual\nduration: 1s\nflows: [{name: u, type: udp, rate: 1Mbps, duration: 1s}]\n"), 0o644)
	out := filepath.Join(t.TempDir(), "out")
	if code, _, errOut := netjam(t, "run", "-q", "--out", out, "--capture", "client,server", sc); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, p := range []string{"client.pcap", "server.pcap"} {
		if fi, err := os.Stat(filepath.Join(out, p)); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v, want a pcap file", p, err)
		}
	}
	code, _, errOut := netjam(t, "run", "-q", "--out", out, "--capture", "client,middle", sc)
	if want := `--capture: "middle" is not a capture point`; code != exitBadUsage || !strings.Contains(errOut, want) {
		t.Errorf("exit %d, %q: want exit %d and %q", code, errOut, exitBadUsage, want)
	}
}

// After a retransmission timeout, gVisor's sender started SACK recovery at
// the first ACK, against RFC 6675 (5.1), and counted everything sent
// before the timeout as in flight: it then sent one or two segments per
// RTO. On configs/bottleneck-coexistence.yaml's newreno variant (a UDP
// flow overflows the drop-tail queue TCP shares) the virtual clock gave
// 1.34 Mbit/s and 20 RTOs, where the wall clock gives 3.5 to 3.8 and 1
// or 2. netjam's gVisor carries the fix (third_party/gvisor/patches/0002):
// 3.52 Mbit/s and 3 RTOs. The bounds sit between the two outcomes (a TCP
// lab on the virtual clock may differ a little from run to run, see
// docs/virtual-time.md).
func TestVirtualNewRenoAfterRTO(t *testing.T) {
	if raceEnabled {
		t.Skip("checked without the race detector (go test -run Virtual)")
	}
	out := filepath.Join(t.TempDir(), "out")
	if code, _, errOut := netjam(t, "run", "-q", "--clock", "virtual", "--variant", "newreno", "--out", out, "../../configs/bottleneck-coexistence.yaml"); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	b, err := os.ReadFile(filepath.Join(out, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	var sum struct {
		Runs []struct {
			Flows []struct {
				Name          string
				ThroughputBPS float64 `json:"throughput_bps"`
				Timeouts      int
			}
		}
	}
	if err := json.Unmarshal(b, &sum); err != nil {
		t.Fatal(err)
	}
	for _, f := range sum.Runs[0].Flows {
		if f.Name != "tcp" {
			continue
		}
		t.Logf("newreno: %.2f Mbit/s, %d RTOs", f.ThroughputBPS/1e6, f.Timeouts)
		if f.ThroughputBPS < 2.5e6 || f.Timeouts > 8 {
			t.Errorf("newreno: %.2f Mbit/s with %d RTOs: want at least 2.5 Mbit/s and at most 8 RTOs (the wall clock: 3.5 to 3.8, 1 or 2)", f.ThroughputBPS/1e6, f.Timeouts)
		}
		return
	}
	t.Fatalf("no flow tcp in %s", b)
}

// TestRunFlagsCheckedFirst: flags that would fail only after the runs, or
// be ignored, are usage errors before any run: a capture point at a link
// the scenario does not have, a --junit file netjam cannot write, an
// empty --junit, a --control-token or TLS key that guards nothing.
func TestRunFlagsCheckedFirst(t *testing.T) {
	dir := t.TempDir()
	sc := filepath.Join(dir, "c.yaml")
	os.WriteFile(sc, []byte("name: c\nclock: virtual\nduration: 1s\nflows: [{name: u, type: udp, rate: 1Mbps, duration: 1s}]\n"), 0o644)
	file := filepath.Join(dir, "afile")
	os.WriteFile(file, nil, 0o644)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--capture", "nope.client"}, `--capture: "nope.client": the scenario has no link "nope" in a links list`},
		{[]string{"--junit", filepath.Join(file, "x.xml")}, "is not a folder netjam can write into"},
		{[]string{"--junit", dir}, "is a folder; give a file"},
		{[]string{"--junit="}, "--junit: give the FILE"},
		{[]string{"--control-token", file}, "--control-token: guards --control, --ui or --metrics, and none is given"},
		{[]string{"--control-tls-key", file}, "--control-tls-key: guards --control, --ui or --metrics, and none is given"},
	} {
		out := filepath.Join(dir, "out")
		code, _, errOut := netjam(t, append(append([]string{"run", "-q", "--out", out}, c.args...), sc)...)
		if code != exitBadUsage || !strings.Contains(errOut, c.want) {
			t.Errorf("run %v: exit %d, %q; want exit %d and %q", c.args, code, errOut, exitBadUsage, c.want)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("run %v: it wrote %s before refusing", c.args, out)
		}
	}
	if code, _, errOut := netjam(t, "shell", "--control-token", file, "--", "true"); code != exitBadUsage || !strings.Contains(errOut, "--control-token: guards --control, and none is given") {
		t.Errorf("shell --control-token without --control: exit %d, %q", code, errOut)
	}
}
