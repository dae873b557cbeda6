package emulator

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"

	"github.com/netjam/netjam/scenario"
	"github.com/netjam/netjam/summary"
)

// virtualLab is a lab with every source of randomness and timing of the
// path: loss, jitter with reordering, a rate-limited queue, a Wi-Fi cell
// with two stations contending, and captures, under UDP flows and TCP
// flows both ways. Packets of one instant race between goroutines there:
// flows starting together, both ends of TCP, a host's TCP taking up what
// its inbox hands it (see docs/virtual-time.md).
const virtualLab = `
name: virtual
seed: 7
duration: 3s
wifi:
  standard: 802.11g
  stations: [{name: sta1}, {name: sta2}]
link:
  rate: 8Mbps
  delay: {time: 10ms, jitter: 2ms, allow_reorder: true}
  queue: 200
  uplink: {loss: 1%}
flows:
  - {name: video, type: udp, rate: 4Mbps, packet_size: 1200, duration: 3s, station: sta1}
  - {name: voip, type: udp, rate: 2Mbps, packet_size: 500, duration: 3s, station: sta2}
  - {name: bulk, type: tcp, duration: 3s, station: sta2}
  - {name: back, type: tcp, direction: down, duration: 3s, station: sta1}
capture: [client, server]
`

// lossyLab is one CUBIC flow across 0.5% loss each way (seed 9). In most
// round trips its receiver's inbox hands gVisor several segments of one
// instant, and every few its sender recovers from a loss.
const lossyLab = `
name: lossy
seed: 9
duration: 10s
link: {delay: 10ms, loss: 0.5%}
flows: [{name: bulk, type: tcp, cc: cubic, duration: 10s}]
capture: [server]
`

// virtualChildEnv names the folder a child test process runs a lab into
// (TestVirtualChild), and virtualLabEnv the file of that lab.
const (
	virtualChildEnv = "NETJAM_TEST_VIRTUAL_OUT"
	virtualLabEnv   = "NETJAM_TEST_VIRTUAL_LAB"
)

// runVirtualInto runs lab (a scenario, run on the virtual clock) into a
// new folder, in a process of its own, and returns the folder and the
// wall time the run took. A virtual run waits for its whole process to be idle, and
// the goroutines other tests of this package leave behind (real-clock
// hosts closing, their timers) may run at any moment of it: in one
// process with them, 2 runs in 20 differed (the topology helper's
// finding). A run of netjam has its process to itself.
func runVirtualInto(t *testing.T, lab string) (string, time.Duration) {
	t.Helper()
	out := t.TempDir()
	labFile := filepath.Join(t.TempDir(), "lab.yaml")
	if err := os.WriteFile(labFile, []byte(lab), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestVirtualChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), virtualChildEnv+"="+out, virtualLabEnv+"="+labFile)
	start := time.Now()
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the child run: %v\n%s", err, b)
	}
	return out, time.Since(start)
}

// readSummary reads the summary.json of the run into dir.
func readSummary(t *testing.T, dir string) summary.Summary {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	var sum summary.Summary
	if err := json.Unmarshal(b, &sum); err != nil {
		t.Fatal(err)
	}
	return sum
}

// gaveUp reads, from the log of the child run into dir, how many times
// its virtual clock gave up waiting for a goroutine.
func gaveUp(t *testing.T, dir string) int {
	b, err := os.ReadFile(filepath.Join(dir, "..", filepath.Base(dir)+".log"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`"waits_given_up":(\d+)`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no virtual clock line in the child's log:\n%s", b)
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// TestVirtualChild is the run of runVirtualInto's child process.
func TestVirtualChild(t *testing.T) {
	out := os.Getenv(virtualChildEnv)
	if out == "" {
		t.Skip("the child process of runVirtualInto")
	}
	lab, err := os.ReadFile(os.Getenv(virtualLabEnv))
	if err != nil {
		t.Fatal(err)
	}
	plan := mustPlan(t, string(lab))
	// The run's log, beside its files, says whether the clock ever gave
	// up waiting for a goroutine (see TestVirtualSameSeedSameFiles).
	logFile := filepath.Join(out, "..", filepath.Base(out)+".log")
	cfg := zap.NewProductionConfig()
	cfg.OutputPaths = []string{logFile}
	log, err := cfg.Build()
	if err != nil {
		t.Fatal(err)
	}
	defer log.Sync()
	sum, err := Run(context.Background(), plan, Options{Virtual: true, OutDir: openOut(t, out), Log: log})
	if err == nil {
		err = WriteResults(openOut(t, out), plan, sum)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// The same seed gives the same files, byte for byte: the summary, the
// time series and the captures. On the real clock two runs differ in
// every file (the goroutine scheduler decides the order of events).
//   - wifi: two UDP and two TCP flows over a Wi-Fi cell with loss and
//     jitter: packets of many instants race between goroutines (flows
//     starting together, both ends of TCP). Measured on a development
//     machine at a load average of 9: 40 runs of 40 identical, 8 of 8
//     under the race detector, after captures sorted each instant's
//     packets and flows dialed from ports of their own (before: 2 runs in
//     30 differed).
//   - lossy: before a host's inbox let its TCP take up each packet of an
//     instant before the next (endHost.inject), 6 runs gave 5 different
//     captures: gVisor's processor found one segment queued or two, as
//     the scheduler ran it, and acknowledged once or twice.
func TestVirtualSameSeedSameFiles(t *testing.T) {
	if raceEnabled {
		// CI's race pass runs every package at once under the race
		// detector: the Wi-Fi lab's 3 s took 10 to 11 s of wall time
		// there, and the two runs parted. The pass without the race
		// detector runs this test (go test -run 'Alloc|Virtual').
		t.Skip("byte-identical runs are checked without the race detector (go test -run Virtual)")
	}
	for _, c := range []struct {
		name, lab string
		want      []string
	}{
		{"wifi", virtualLab, []string{"summary.json", "timeseries.csv", "client.pcap", "server.pcap"}},
		{"lossy", lossyLab, []string{"summary.json", "server.pcap"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, wallA := runVirtualInto(t, c.lab)
			b, wallB := runVirtualInto(t, c.lab)
			t.Logf("the run took %v and %v of wall time", wallA, wallB)
			compared := sameFiles(t, a, b)
			for _, want := range c.want {
				if !slices.Contains(compared, want) {
					t.Errorf("no %s among the run's files %v", want, compared)
				}
			}
		})
	}
}

// sameFiles compares every file two child runs wrote into a and b, and
// returns their names. A virtual clock that gave up waiting for a
// goroutine stuck in a system call (clock.VirtualStats.GaveUp: 200 ms of
// wall time, a machine far too loaded) moved time on without it, and what
// the goroutine did next landed wherever the scheduler put it: those runs
// are not the seed's alone, and the test is skipped.
func sameFiles(t *testing.T, a, b string) []string {
	t.Helper()
	for _, dir := range []string{a, b} {
		if n := gaveUp(t, dir); n > 0 {
			t.Skipf("the run in %s gave up waiting for a goroutine %d times (the machine was too loaded): not comparable", dir, n)
		}
	}
	files, err := filepath.Glob(filepath.Join(a, "*"))
	if err != nil {
		t.Fatal(err)
	}
	var compared []string
	for _, fa := range files {
		name := filepath.Base(fa)
		if name == "netjam.log" {
			continue // not written by Run
		}
		da, err := os.ReadFile(fa)
		if err != nil {
			t.Fatal(err)
		}
		db, err := os.ReadFile(filepath.Join(b, name))
		if err != nil {
			t.Fatal(err)
		}
		compared = append(compared, name)
		if !bytes.Equal(da, db) {
			t.Errorf("%s differs between two runs of the same seed (%d and %d bytes): %s", name, len(da), len(db), firstDifference(name, da, db))
		}
	}
	t.Logf("compared %s", strings.Join(compared, ", "))
	return compared
}

// firstDifference says where a and b, a file of two runs, first differ:
// for a capture, the first packet that differs (its number and both
// times), else the first line that differs, for a rare difference to be
// diagnosed from CI's log alone.
func firstDifference(name string, a, b []byte) string {
	if strings.HasSuffix(name, ".pcap") && len(a) >= 24 && len(b) >= 24 {
		for i, oa, ob := 1, 24, 24; oa+16 <= len(a) && ob+16 <= len(b); i++ {
			na, nb := int(binary.LittleEndian.Uint32(a[oa+8:])), int(binary.LittleEndian.Uint32(b[ob+8:]))
			ra, rb := a[oa:min(len(a), oa+16+na)], b[ob:min(len(b), ob+16+nb)]
			if !bytes.Equal(ra, rb) {
				at := func(r []byte) string {
					return fmt.Sprintf("%d.%09d s, %d bytes", binary.LittleEndian.Uint32(r), binary.LittleEndian.Uint32(r[4:]), binary.LittleEndian.Uint32(r[8:]))
				}
				same := "its bytes differ"
				if bytes.Equal(ra[16:], rb[16:]) {
					same = "the same bytes"
				}
				return fmt.Sprintf("packet %d at %s against %s, %s", i, at(ra), at(rb), same)
			}
			oa, ob = oa+16+na, ob+16+nb
		}
	}
	la, lb := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	for i := range min(len(la), len(lb)) {
		if la[i] != lb[i] {
			cut := func(s string) string { return s[:min(len(s), 200)] }
			return fmt.Sprintf("line %d: %q against %q", i+1, cut(la[i]), cut(lb[i]))
		}
	}
	return fmt.Sprintf("one is a prefix of the other (%d and %d lines)", len(la), len(lb))
}

// TestVirtualLossRetransmitsOnce runs lossyLab with seeds where gVisor's
// RACK sent segments again that were not lost, each loss should be sent
// again once. Its hosts send large segments (GSO), which cross the loss
// whole, split only where a segment of them is lost.
//   - third_party/gvisor/patches/0003: when one recovery ended and the
//     next began within a round trip, the new recovery's fast retransmit
//     resent the first unacknowledged segment, which the old one had just
//     retransmitted. Seed 1 retransmitted 60 segments for 54 lost; after,
//     54 (with the segments apart, as the lab had them before: seed 9 145
//     for 55, seed 1 65 for 54).
//   - patches/0004: a large segment that lost a segment while the receiver
//     had the others, above an earlier hole, was found lost as a whole and
//     sent again an MSS at a time from its head, each SACKed MSS a
//     spurious retransmission: seed 9 retransmitted 92 segments for 57
//     lost, seed 2 71 for 55; after, 57 and 55.
//
// A tail loss probe or a timeout may send a segment that was not lost,
// hence the slack of 3.
func TestVirtualLossRetransmitsOnce(t *testing.T) {
	if raceEnabled {
		// Under the race detector for gVisor's TCP logic, which the
		// pass without it checks (go test -run Virtual).
		t.Skip("checked without the race detector (go test -run Virtual)")
	}
	for _, seed := range []int{1, 2, 9} {
		lab := strings.Replace(lossyLab, "seed: 9", fmt.Sprintf("seed: %d", seed), 1)
		out, _ := runVirtualInto(t, lab)
		r := readSummary(t, out).Runs[0]
		up := r.Links[0]
		retx, lost := r.Flows[0].Retransmissions, up.Drops["loss"]
		t.Logf("seed %d: %d segments retransmitted, %d lost on the %s; %d large segments crossed it whole", seed, retx, lost, up.Name, up.WholeGSO)
		if up.WholeGSO == 0 {
			t.Errorf("seed %d: no large segment crossed the %s whole", seed, up.Name)
		}
		if lost == 0 || retx > lost+3 {
			t.Errorf("seed %d: %d segments retransmitted for %d lost; want at most 3 more", seed, retx, lost)
		}
	}
}

// jitteryLab is one flow over 50 Mbit/s and 20 ms each way with 10 ms of
// jitter, on which HyStart's delay test ends CUBIC's slow start early,
// far below the path's window, on every seed; {cc} is the flow's
// congestion control.
const jitteryLab = `
name: jittery
seed: 1
duration: 5s
link: {rate: 50Mbps, delay: {time: 20ms, jitter: 10ms}, queue: 1000}
flows: [{name: bulk, type: tcp, cc: {cc}, duration: 5s}]
`

// CUBIC finds the path after HyStart has ended its slow start early, as
// Linux's does: before the first loss it grows its window by at least 5%
// a round trip (gVisor patch 0005), and so carries most of what Reno,
// which has no HyStart and slow-starts until the queue overflows, carries
// over the same path in the same seconds. Before, it grew by the cubic
// function from the window it had left at, about half a segment a round
// trip: 7.4 Mbit/s against Reno's 46.6 (seed 1; 9.7 to 17.1 on seeds 2 to
// 5); after, 33.5 (38.0 to 42.3).
func TestVirtualCubicFindsThePathAfterHyStart(t *testing.T) {
	if raceEnabled {
		t.Skip("checked without the race detector (go test -run Virtual)")
	}
	bps := map[string]float64{}
	for _, cc := range []string{"cubic", "reno"} {
		out, _ := runVirtualInto(t, strings.Replace(jitteryLab, "{cc}", cc, 1))
		f := readSummary(t, out).Runs[0].Flows[0]
		bps[cc] = f.ThroughputBps
		t.Logf("%s: %.1f Mbit/s, %d retransmissions", cc, f.ThroughputBps/1e6, f.Retransmissions)
	}
	if bps["cubic"] < 0.6*bps["reno"] {
		t.Errorf("CUBIC carried %.1f Mbit/s, Reno %.1f over the same path: want at least 0.6 of Reno's", bps["cubic"]/1e6, bps["reno"]/1e6)
	}
}

// reorderingLab is one CUBIC flow over 50 Mbit/s and 10 ms each way, with
// no impairment (clean) and with 0.5% of the data sent ahead of the
// delayed packets (reorder): each such packet overtakes 10 ms of others,
// longer than RACK's first reordering window (a quarter of the least RTT),
// so the sender takes the first reordering for a loss, and the timestamps
// its receiver echoes show it was none.
const reorderingLab = `
name: reordering
seed: 1
duration: 5s
link: {rate: 50Mbps, delay: 10ms, queue: 1000}
flows: [{name: bulk, type: tcp, cc: cubic, duration: 5s}]
variants:
  - name: clean
  - name: reorder
    set: {link.uplink.reorder: 0.5%}
`

// A recovery that turns out spurious (the holes were filled by the
// segments first sent, not by their retransmissions) gives back the window
// it took, and the sender learns that the path reorders, as Linux's does.
// gVisor patch 0011 undoes the reduction at the recovery's end
// (tcp_try_undo_recovery); patch 0013 at the first partial ACK whose hole
// a delayed original filled (tcp_try_undo_partial), which also notes the
// reordering, so that RACK's window widens with the DSACKs that follow and
// later reorderings start no recovery. Seeds 1 and 2, throughput with 0.5%
// reordered over the clean path's: 0.25 and 0.20 before either patch,
// 0.53 and 0.49 with 0011 alone (11 retransmissions a reordering, each
// overtaken segment sent again just before its original arrived), 1.00
// with 0013 (6 and 3 retransmissions for 103 and 111 reorderings). Linux's
// CUBIC on the same path through TUN mode (real clock, 10 s) also carries
// as much with the reordering as without (47.8 Mbit/s, 81 retransmissions).
func TestVirtualSpuriousRecoveryUndone(t *testing.T) {
	if raceEnabled {
		t.Skip("checked without the race detector (go test -run Virtual)")
	}
	for _, seed := range []int{1, 2} {
		out, _ := runVirtualInto(t, strings.Replace(reorderingLab, "seed: 1", fmt.Sprintf("seed: %d", seed), 1))
		bps := map[string]float64{}
		var retx, reordered uint64
		for _, r := range readSummary(t, out).Runs {
			f := r.Flows[0]
			bps[r.Variant] = f.ThroughputBps
			t.Logf("seed %d, %s: %.1f Mbit/s, %d retransmissions, %d reordered up", seed, r.Variant, f.ThroughputBps/1e6, f.Retransmissions, r.Links[0].Reordered)
			if r.Variant == "reorder" {
				retx, reordered = f.Retransmissions, r.Links[0].Reordered
			}
		}
		if bps["clean"] == 0 || bps["reorder"] < 0.9*bps["clean"] {
			t.Errorf("seed %d: %.1f Mbit/s with 0.5%% reordered, %.1f without: want at least 0.9 of it", seed, bps["reorder"]/1e6, bps["clean"]/1e6)
		}
		if reordered == 0 || retx > reordered/4 {
			t.Errorf("seed %d: %d retransmissions for %d reordered packets and no loss: want at most a quarter as many", seed, retx, reordered)
		}
	}
}

// lateTailLab is one CUBIC flow over 50 Mbit/s and 20 ms each way whose
// window (a 100 KB receive buffer) stays below the path's, so nothing is
// lost; {timeline}, when set, makes the uplink's delay 150 ms for 300 ms
// every second, a pause in the ACKs longer than the sender's tail loss
// probe timeout and shorter than its retransmission timeout.
const lateTailLab = `
name: late-tail
seed: 1
duration: 6s
link: {rate: 50Mbps, delay: 20ms, queue: 300}
flows: [{name: bulk, type: tcp, cc: cubic, duration: 6s, receive_buffer: 100KB}]
{timeline}
`

// A tail loss probe whose original was only late costs no window, as on
// Linux (gVisor patch 0012): the receiver reports the probe it got again
// in a DSACK block, and the sender ends the probe's episode with a
// congestion response only on an ACK past the probe without one
// (tcp_process_tlp_ack). Before, gVisor's receiver sent no DSACK and its
// sender took the ACK of the late original for a loss: each of the five
// pauses cut the window by 30% though nothing was lost, 11.8 Mbit/s
// against 19.4 without the pauses (0.61); after, 15.2 (0.79). Either way
// the five probes are the only retransmissions.
func TestVirtualLateTailCostsNoWindow(t *testing.T) {
	if raceEnabled {
		t.Skip("checked without the race detector (go test -run Virtual)")
	}
	bps := map[string]float64{}
	for name, tl := range map[string]string{
		"steady": "",
		"pauses": "timeline: [{every: 1s, from: 1s, for: 300ms, set: {link.uplink.delay: 150ms}}]",
	} {
		out, _ := runVirtualInto(t, strings.Replace(lateTailLab, "{timeline}", tl, 1))
		r := readSummary(t, out).Runs[0]
		f := r.Flows[0]
		bps[name] = f.ThroughputBps
		t.Logf("%s: %.1f Mbit/s, %d retransmissions, window up to %d segments, drops up %v", name, f.ThroughputBps/1e6, f.Retransmissions, f.CwndMax, r.Links[0].Drops)
		if len(r.Links[0].Drops) > 0 {
			t.Errorf("%s: the path dropped %v; the test needs a path that loses nothing", name, r.Links[0].Drops)
		}
	}
	if bps["steady"] == 0 || bps["pauses"] < 0.7*bps["steady"] {
		t.Errorf("%.1f Mbit/s with the pauses, %.1f without: want at least 0.7 of it", bps["pauses"]/1e6, bps["steady"]/1e6)
	}
}

// The packets a corrupt stage spoils are dropped by the host they reach,
// for their checksum, and the summary says which host dropped how many
// (seed 1: 30 of the 31 corrupted; the last was flushed from the path when
// the run ended).
func TestVirtualHostsCountCorruptedDrops(t *testing.T) {
	out, _ := runVirtualInto(t, `
name: corrupted
seed: 1
duration: 3s
link: {rate: 50Mbps, delay: 10ms, queue: 1000, uplink: {corrupt: 1%}}
flows: [{name: bulk, type: tcp, duration: 3s}]
`)
	r := readSummary(t, out).Runs[0]
	corrupted := r.Links[0].Corrupted
	dropped := map[string]uint64{}
	for _, h := range r.Hosts {
		dropped[h.Name] = h.ChecksumErrors + h.Malformed
	}
	t.Logf("corrupted up %d; dropped on arrival %v", corrupted, dropped)
	if corrupted == 0 {
		t.Fatal("the uplink corrupted nothing")
	}
	if dropped["client0"] != 0 || dropped["server0"] > corrupted || dropped["server0"] < corrupted*9/10 {
		t.Errorf("the hosts dropped %v on arrival; the uplink, toward server0, corrupted %d", dropped, corrupted)
	}
}

// A sender that its own send buffer or the receiver's window limits does
// not grow a congestion window it does not use, as Linux's does not
// (tcp_is_cwnd_limited; gVisor patch 0007): the window stays within twice
// the most packets the sender had outstanding. A receive buffer of 64 KB
// offers a window of 64 KB (half of the 128 KB the stack takes, as on
// Linux), about 45 segments of 1448 bytes; a send buffer of 64 KB holds
// 128 KB, about 90: 92 and 188 segments of window after. Before, the
// window grew by a segment for every one acknowledged: 4933 segments after
// 4 s with either buffer, either congestion control.
func TestVirtualWindowGrowsOnlyWhileItLimits(t *testing.T) {
	if raceEnabled {
		t.Skip("checked without the race detector (go test -run Virtual)")
	}
	for _, c := range []struct {
		cc, buffer string
		flight     uint32
	}{{"reno", "receive_buffer", 64000/1448 + 1}, {"cubic", "send_buffer", 128000/1448 + 1}} {
		out, _ := runVirtualInto(t, fmt.Sprintf(`
duration: 4s
link: {rate: 100Mbps, delay: 10ms, queue: 100}
flows: [{name: capped, type: tcp, cc: %s, %s: 64KB, duration: 4s}]
`, c.cc, c.buffer))
		f := readSummary(t, out).Runs[0].Flows[0]
		t.Logf("%s, %s 64KB: %.1f Mbit/s, window up to %d segments", c.cc, c.buffer, f.ThroughputBps/1e6, f.CwndMax)
		if f.CwndMax > 3*c.flight {
			t.Errorf("%s, %s 64KB: the window grew to %d segments with about %d in flight; want at most %d", c.cc, c.buffer, f.CwndMax, c.flight, 3*c.flight)
		}
		if want := float64(c.flight) * 1448 * 8 / 0.0215 * 0.6; f.ThroughputBps < want {
			t.Errorf("%s, %s 64KB: %.1f Mbit/s; the buffer allows about %.0f", c.cc, c.buffer, f.ThroughputBps/1e6, want/0.6/1e6)
		}
	}
}

// A writer held back by its send buffer keeps most of the buffer in
// flight, as on Linux: the stack wakes the writer while at least a third
// of the buffer is free (sk_stream_write_space; gVisor patch 0008), so
// between two thirds of the buffer and all of it is unacknowledged, and a
// flow carries at least two thirds of a buffer per round trip. The buffer
// is twice the send_buffer given, as setsockopt(SO_SNDBUF) takes it.
// Before, gVisor woke the writer only when what it held fell below half
// the buffer, which happened once a round trip, an RTT after the writer
// had refilled that half: about half a buffer per round trip (0.54 to
// 0.58 here; 0.72 to 0.78 after).
func TestVirtualSendBufferStaysInFlight(t *testing.T) {
	if raceEnabled {
		t.Skip("checked without the race detector (go test -run Virtual)")
	}
	for _, kb := range []int{32, 64, 128} {
		out, _ := runVirtualInto(t, fmt.Sprintf(`
duration: 4s
link: {rate: 100Mbps, delay: 10ms, queue: 100}
flows: [{name: capped, type: tcp, cc: cubic, send_buffer: %dKiB, duration: 4s}]
`, kb))
		f := readSummary(t, out).Runs[0].Flows[0]
		buffer := float64(2 * kb << 10)
		perRTT := f.ThroughputBps / 8 * f.RTTMs.Mean / 1e3 / buffer
		t.Logf("send buffer %d KiB: %.1f Mbit/s over %.1f ms: %.2f buffers a round trip", kb, f.ThroughputBps/1e6, f.RTTMs.Mean, perRTT)
		if perRTT < 2.0/3 {
			t.Errorf("send buffer %d KiB: %.2f buffers of %.0f bytes a round trip (%.1f Mbit/s over %.1f ms); want at least two thirds, as Linux keeps in flight", kb, perRTT, buffer, f.ThroughputBps/1e6, f.RTTMs.Mean)
		}
	}
}

// BenchmarkVirtual runs the example scenarios' lab variants on the virtual
// clock and reports how much faster than real time they ran (speedup:
// virtual seconds per wall second) and the virtual clock's cost per event.
//
//	go test -run XXX -bench Virtual -benchtime 1x ./emulator/
func BenchmarkVirtual(b *testing.B) {
	for _, c := range []struct{ file, variant string }{
		{"bottleneck-coexistence.yaml", "cubic"},
		{"bottleneck-coexistence.yaml", "newreno"},
		{"bottleneck-coexistence.yaml", "cubic-fq_codel"},
		{"wifi-coexistence.yaml", "newreno"},
		{"wifi-coexistence.yaml", "cubic"},
		{"wifi-coexistence.yaml", "cubic-fq_codel"},
	} {
		b.Run(strings.TrimSuffix(c.file, ".yaml")+"/"+c.variant, func(b *testing.B) {
			plan, err := scenario.Load(filepath.Join("..", "configs", c.file),
				scenario.Options{Sets: []string{"clock=virtual"}, Variants: []string{c.variant}})
			if err != nil {
				b.Fatal(err)
			}
			var virtual time.Duration
			start := time.Now()
			for range b.N {
				if _, err := Run(context.Background(), plan, Options{}); err != nil {
					b.Fatal(err)
				}
				virtual += plan.Runs[0].Duration + drainGrace
			}
			b.ReportMetric(virtual.Seconds()/time.Since(start).Seconds(), "speedup")
		})
	}
}

// BenchmarkVirtualBottleneckCoexistence runs the three variants of
// configs/bottleneck-coexistence.yaml on the virtual clock, as netjam run
// --clock virtual does short of writing the outputs, and reports the CPU
// time the process used (user and system) per emulated second (cpu-s/emu-s:
// over the variants' durations, 3 x 25 s), and the CPU and wall seconds
// of one run of all three. Issue 42 asked for under 10 s of CPU on the
// project's 2-core machine.
//
//	go test -run XXX -bench VirtualBottleneckCoexistence -benchtime 1x ./emulator/
func BenchmarkVirtualBottleneckCoexistence(b *testing.B) {
	plan, err := scenario.Load(filepath.Join("..", "configs", "bottleneck-coexistence.yaml"),
		scenario.Options{Sets: []string{"clock=virtual"}})
	if err != nil {
		b.Fatal(err)
	}
	var emulated time.Duration
	for _, s := range plan.Runs {
		emulated += s.Duration
	}
	cpu0, start := cpuTime(), time.Now()
	for range b.N {
		if _, err := Run(context.Background(), plan, Options{}); err != nil {
			b.Fatal(err)
		}
	}
	cpu := (cpuTime() - cpu0).Seconds() / float64(b.N)
	b.ReportMetric(cpu/emulated.Seconds(), "cpu-s/emu-s")
	b.ReportMetric(cpu, "cpu-s")
	b.ReportMetric(time.Since(start).Seconds()/float64(b.N), "wall-s")
}

// noRateLabs are the first scenarios a user writes to see TCP under loss,
// with {rate} on the link: one CUBIC flow for 10 s over 5 ms each way
// with 5% loss on the uplink only (Mathis's bound for it is about 6.2
// Mbit/s), and one reno flow with 5% loss each way, so that ACKs are lost
// too.
var noRateLabs = map[string]string{
	"uplink-loss": `
name: uplink-loss
seed: {seed}
duration: 10s
link: {delay: 5ms, {rate} uplink: {loss: 5%}}
flows: [{name: bulk, type: tcp, cc: cubic, duration: 10s}]
`,
	"loss-each-way": `
name: loss-each-way
seed: {seed}
duration: 10s
link: {delay: 5ms, {rate} loss: 5%}
flows: [{name: bulk, type: tcp, cc: reno, duration: 10s}]
`,
}

// A path without a rate behaves as one with a rate it never reaches. Its
// hosts send large segments (GSO) that cross it whole and lose single
// MSS-sized parts at the loss stage, where a rate under 2.4 Gbit/s has
// them send MTU-sized packets: the TCP they see must be the same.
//
// With loss on the uplink only, before gVisor's RACK could order the
// parts of one large segment (third_party/gvisor/patches/0020, 0021), the
// path without a rate had 5 to 10 times the retransmission timeouts and
// half the throughput of the one with 1 Gbit/s (seeds 1 to 4: 2.44 to
// 3.53 Mbit/s and 15 to 23 timeouts, against 4.62 to 4.81 and 1 or 2);
// after, 4.64 to 4.89 and 0 to 2, within 0.02 of the rate's on each
// seed. With loss each way, before the hosts
// took large segments split on a lossy path (lab.takeWhole), each lost
// ACK acknowledged a whole large segment: 4.97 to 6.07 Mbit/s against
// 5.36 to 6.53; after, 5.33 to 6.70. Since the receiver acknowledges
// every second segment as Linux's (patches/0024), seeds 1 to 8: uplink
// loss 3.63 to 4.38 Mbit/s without a rate, 3.75 to 4.31 with; loss each
// way 4.71 to 6.18, and 4.74 to 6.44.
//
// Each seed's two runs lose different packets (the segments cross the
// loss stage in different shapes), so they are compared as two samples of
// eight seeds: the difference of their mean throughputs must lie within
// Welch's 99% confidence interval of it (a path that differed would put
// it outside; two that do not, 1 time in 100), and their timeouts within
// a few of each other.
func TestVirtualNoRateIsAnAmpleRate(t *testing.T) {
	if raceEnabled {
		t.Skip("checked without the race detector (go test -run Virtual)")
	}
	for _, name := range []string{"uplink-loss", "loss-each-way"} {
		t.Run(name, func(t *testing.T) { noRateIsAnAmpleRate(t, noRateLabs[name]) })
	}
}

func noRateIsAnAmpleRate(t *testing.T, lab string) {
	seeds := []int{1, 2, 3, 4, 5, 6, 7, 8}
	bps := map[string][]float64{}
	rtos := map[string]int{}
	for _, rate := range []string{"", "rate: 1Gbps,"} {
		name := "no rate"
		if rate != "" {
			name = "1 Gbit/s"
		}
		for _, seed := range seeds {
			lab := strings.NewReplacer("{seed}", fmt.Sprint(seed), "{rate}", rate).Replace(lab)
			out, _ := runVirtualInto(t, lab)
			r := readSummary(t, out).Runs[0]
			f := r.Flows[0]
			t.Logf("%s, seed %d: %.2f Mbit/s, %d timeouts, %d retransmissions; %d large segments crossed the uplink whole", name, seed, f.ThroughputBps/1e6, f.Timeouts, f.Retransmissions, r.Links[0].WholeGSO)
			bps[name] = append(bps[name], f.ThroughputBps/1e6)
			rtos[name] += int(f.Timeouts)
		}
	}
	diff, half := welchInterval(bps["no rate"], bps["1 Gbit/s"], 0.99)
	t.Logf("mean throughput without a rate less with 1 Gbit/s: %.2f ± %.2f Mbit/s (99%%)", diff, half)
	if math.Abs(diff) > half {
		t.Errorf("mean throughput without a rate less with 1 Gbit/s: %.2f Mbit/s, outside its 99%% confidence interval of ± %.2f: the paths differ", diff, half)
	}
	if n, r := rtos["no rate"], rtos["1 Gbit/s"]; n > 2*r+len(seeds) {
		t.Errorf("%d retransmission timeouts without a rate, %d with 1 Gbit/s over %d seeds", n, r, len(seeds))
	}
}

// welchInterval returns the difference of the means of a and b and the
// half-width of its confidence interval at level conf (Welch's t,
// unequal variances).
func welchInterval(a, b []float64, conf float64) (diff, half float64) {
	ma, va := stat.MeanVariance(a, nil)
	mb, vb := stat.MeanVariance(b, nil)
	na, nb := float64(len(a)), float64(len(b))
	sa, sb := va/na, vb/nb
	se := math.Sqrt(sa + sb)
	nu := (sa + sb) * (sa + sb) / (sa*sa/(na-1) + sb*sb/(nb-1))
	q := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: nu}.Quantile(1 - (1-conf)/2)
	return ma - mb, q * se
}

// minMedMax returns the least, the median and the greatest of x.
func minMedMax(x []float64) (lo, med, hi float64) {
	s := slices.Clone(x)
	slices.Sort(s)
	return s[0], (s[(len(s)-1)/2] + s[len(s)/2]) / 2, s[len(s)-1]
}
