package flows

import (
	"encoding/json"
	"math"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/netjam/netjam/clock"
	"github.com/netjam/netjam/outdir"
	"github.com/netjam/netjam/stats"
)

func TestJain(t *testing.T) {
	tests := []struct {
		xs   []float64
		want float64
	}{
		{[]float64{5e6, 5e6, 5e6, 5e6}, 1},
		{[]float64{3.3, 3.3, 3.3}, 1},
		{[]float64{7}, 1},
		{[]float64{9e6, 0, 0}, 1.0 / 3},
		{[]float64{1, 0, 0, 0, 0}, 1.0 / 5},
		{[]float64{1, 2, 3}, 36.0 / 42}, // (1+2+3)^2 / (3*(1+4+9))
		{nil, 0},
		{[]float64{0, 0}, 0},
	}
	for _, tt := range tests {
		if got := Jain(tt.xs); math.Abs(got-tt.want) > 1e-12 || got > 1 {
			t.Errorf("Jain(%v) = %v, want %v", tt.xs, got, tt.want)
		}
	}
}

func TestSeriesCSV(t *testing.T) {
	start := clock.Epoch
	at := func(d time.Duration) time.Time { return start.Add(d) }
	s := NewSeries("v1", start)
	// TCP: 125,000 bytes in the first 100 ms, 250,000 in the next.
	s.Observe("bulk", Sample{Time: at(100 * ms), Type: TypeTCP, Bytes: 125000, Cwnd: 10, SRTT: 20500 * time.Microsecond})
	// UDP without datagrams yet: throughput only.
	s.Observe("probe", Sample{Time: at(100 * ms), Type: TypeUDP})
	s.Add(at(100*ms), "queue_packets", "uplink", 17)
	s.Observe("bulk", Sample{Time: at(200 * ms), Type: TypeTCP, Bytes: 375000, Cwnd: 14, SRTT: 22 * ms})
	// Two datagrams of 100 bytes, 30 ms of delay together.
	s.Observe("probe", Sample{Time: at(300 * ms), Type: TypeUDP, Bytes: 200, Packets: 2, DelaySum: 30 * ms})
	// No info yet: no cwnd row.
	s.Observe("other", Sample{Time: at(300 * ms), Type: TypeTCP})
	var sb strings.Builder
	if err := WriteCSV(&sb, s); err != nil {
		t.Fatal(err)
	}
	want := `variant,time_s,kind,name,value
v1,0.1,throughput_bps,bulk,10000000
v1,0.1,cwnd,bulk,10
v1,0.1,srtt_ms,bulk,20.5
v1,0.1,throughput_bps,probe,0
v1,0.1,queue_packets,uplink,17
v1,0.2,throughput_bps,bulk,20000000
v1,0.2,cwnd,bulk,14
v1,0.2,srtt_ms,bulk,22
v1,0.3,throughput_bps,probe,8000
v1,0.3,delay_ms,probe,15
v1,0.3,throughput_bps,other,0
`
	if got := sb.String(); got != want {
		t.Errorf("CSV\n%s\nwant\n%s", got, want)
	}
}

// TestSummaryJSON checks the field names and that each type shows only its
// own fields.
func TestSummaryJSON(t *testing.T) {
	tcp := FlowSummary{Name: "bulk", Type: TypeTCP, Stack: "gvisor", CC: "cubic", ThroughputBps: 7490000, TCPSummary: &TCPSummary{
		BytesSent: 5242880, BytesReceived: 5242880, Size: 5242880, Completed: true, CompletionS: 5.6, Retransmissions: 180, FastRetransmits: 10, Timeouts: 2,
		RTTMs: stats.Summary{Count: 3, Mean: 1, Min: 0.5, P50: 1, P95: 2, P99: 2, Max: 2}, CwndMax: 40,
	}}
	udp := FlowSummary{Name: "probe", Type: TypeUDP, ThroughputBps: 95100, UDPSummary: &UDPSummary{
		PacketsSent: 1000, PacketsReceived: 951, LossRatio: 0.049, JitterMs: 0.1,
	}}
	incomplete := FlowSummary{Name: "bulk", Type: TypeTCP, TCPSummary: &TCPSummary{}}
	tests := []struct {
		s    FlowSummary
		want string
	}{
		{tcp, `{"name":"bulk","type":"tcp","stack":"gvisor","cc":"cubic","throughput_bps":7490000,"bytes_after_stop":0,"bytes_sent":5242880,"bytes_received":5242880,"size":5242880,"completed":true,"completion_s":5.6,"connect_s":0,"retransmissions":180,"fast_retransmits":10,"timeouts":2,"rtt_ms":{"count":3,"mean":1,"min":0.5,"p50":1,"p95":2,"p99":2,"max":2},"cwnd_max":40,"stalls":0,"stalled_s":0}`},
		{udp, `{"name":"probe","type":"udp","throughput_bps":95100,"bytes_after_stop":0,"packets_sent":1000,"packets_received":951,"lost":0,"loss_ratio":0.049,"jitter_ms":0.1,"reordered":0,"duplicates":0,"malformed":0,"delay_ms":{"count":0,"mean":0,"min":0,"p50":0,"p95":0,"p99":0,"max":0}}`},
		{incomplete, `{"name":"bulk","type":"tcp","throughput_bps":0,"bytes_after_stop":0,"bytes_sent":0,"bytes_received":0,"completed":false,"connect_s":0,"retransmissions":0,"fast_retransmits":0,"timeouts":0,"rtt_ms":{"count":0,"mean":0,"min":0,"p50":0,"p95":0,"p99":0,"max":0},"cwnd_max":0,"stalls":0,"stalled_s":0}`},
	}
	for _, tt := range tests {
		b, err := json.Marshal(tt.s)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != tt.want {
			t.Errorf("got  %s\nwant %s", b, tt.want)
		}
		var back FlowSummary
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if (back.TCPSummary == nil) != (tt.s.TCPSummary == nil) || (back.UDPSummary == nil) != (tt.s.UDPSummary == nil) {
			t.Errorf("%s: read back with the wrong parts", b)
		}
	}
}

// TestSeriesBoundedMemory adds half a million rows (a 500 s run sampled
// every millisecond): the series' heap stays flat, no file is left in its
// folder, and WriteCSV writes every row back in order.
func TestSeriesBoundedMemory(t *testing.T) {
	dir := t.TempDir()
	d, err := outdir.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	s := NewSeries("long", clock.Epoch)
	s.SpillTo(d)
	defer s.Close()
	const n = 500_000
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base, peak := ms.HeapAlloc, uint64(0)
	for i := range n {
		s.Add(clock.Epoch.Add(time.Duration(i)*time.Millisecond), "queue_packets", "uplink", float64(i))
		if i%50_000 == 49_999 {
			runtime.GC()
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapAlloc)
		}
	}
	if grew := int64(peak) - int64(base); grew > 8<<20 {
		t.Errorf("the heap grew by %d MiB for %d rows, want at most 8", grew>>20, n)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("files left in the series' folder: %v", ents)
	}
	var b strings.Builder
	if err := WriteCSV(&b, s); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != n+1 || lines[1] != "long,0,queue_packets,uplink,0" || lines[n] != "long,499.999,queue_packets,uplink,499999" {
		t.Errorf("CSV: %d lines, want %d; second %q, last %q", len(lines), n+1, lines[1], lines[len(lines)-1])
	}
}
