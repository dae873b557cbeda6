package report

import (
	"strings"
	"testing"
)

// TestPrintTable prints a summary.json with a flow of each kind, a
// direction, TUN mode, a host that dropped packets and a skipped run: the rows and lines netjam run
// shows, exactly.
func TestPrintTable(t *testing.T) {
	sum := `{"scenario": "x", "runs": [
	  {"variant": "", "fairness": 0.5, "fairness_flows": ["a", "b"],
	   "flows": [
	    {"name": "a", "type": "tcp", "cc": "cubic", "throughput_bps": 3e6, "completed": true, "completion_s": 1.234, "retransmissions": 2, "timeouts": 1, "rtt_ms": {"count": 3, "mean": 10.04, "p95": 12.5}},
	    {"name": "b", "type": "tcp", "throughput_bps": 1e6, "completed": false, "size": 5242880, "bytes_received": 1258291, "stalls": 1, "stalled_s": 2.5},
	    {"name": "u", "type": "udp", "throughput_bps": 0, "lost": 3, "packets_sent": 100, "in_flight": 2, "receiver_drops": 4, "delay_ms": {"count": 97, "mean": 5.01, "p95": 6.2}, "jitter_ms": 0.25}],
	   "links": [{"name": "uplink", "packets_in": 10, "packets_out": 7, "drops": {"queue": 1, "loss": 2}, "delivery_drops": 1, "delivery_waits": 3,
	     "configured": {"summary": "rate 10Mbit", "rate_bps": 10000000, "loss_ratio": 0.01}, "achieved": {"rate_bps": 9.5e6, "loss_ratio": 0.02},
	     "queue_delay_ms": {"count": 7, "p50": 1, "p99": 2}, "transit_ms": {"count": 7, "p50": 3, "p99": 4}, "lateness_ms": {"count": 7, "p99": 0.125}}],
	   "tun": {"device": "netjam0", "kernel_addresses": ["10.99.0.1"], "peer_addresses": ["10.99.0.2"], "malformed": 1, "kernel_drops": 2, "shed": 6,
	     "relay": {"tcp": {"relayed": 3, "refused": 1, "no_service": 1, "dial_errors": 1}, "udp": {"served": 4, "dropped": 5, "dropped_by": {"overflow": 4, "to_client": 1}}},
	     "peer_tcp": {"segments_sent": 900, "segments_received": 40, "retransmits": 7, "timeouts": 1}, "peer_checksum_errors": 8, "peer_malformed": 9},
	   "hosts": [{"name": "client0", "checksum_errors": 0, "malformed": 0}, {"name": "server0", "checksum_errors": 11, "malformed": 0}]},
	  {"variant": "s", "skipped": "TUN mode needs root"}]}`
	var b strings.Builder
	if err := PrintTable(&b, []byte(sum)); err != nil {
		t.Fatal(err)
	}
	if got := b.String(); got != wantTable {
		t.Errorf("got\n%s\nwant\n%s", got, wantTable)
	}
	if strings.Contains(b.String(), "station") {
		t.Errorf("a Wi-Fi table without a cell:\n%s", b.String())
	}
	if err := PrintTable(&b, []byte("{")); err == nil || !strings.HasPrefix(err.Error(), "reading the summary: ") {
		t.Errorf("a broken summary: %v", err)
	}
}

// wantTable is what TestPrintTable prints: the layout emulator.PrintTable
// had before the tables moved here, byte for byte.
const wantTable = `  variant  flow  type     cc  Mbit/s  share                      done s  retrans           RTO                            lost  delay mean/p95 ms  jitter ms
        -     a   tcp  cubic    3.00  75.0%                        1.23        2             1                               -      rtt 10.0/12.5          -
        -     b   tcp      -    1.00  25.0%  unfinished: 1.2 of 5.0 MiB        0  0 STALL 2.5s                               -                  -          -
        -     u   udp      -    0.00   0.0%                           -        -             -  3/100 +2 in flight +4 receiver            5.0/6.2       0.25
variant -: fairness (Jain's index) 0.500 among the TCP flows sharing a direction: a, b
Mbit/s: payload received after the first arrival, over first to last arrival at the receiver (after-stop drain included).
done s: first write to last byte read. lost: datagrams sent that never arrived (+N in flight when the run was cut short).

  variant    link  packets in  out  loss% (conf)                                                         drops  Mbit/s (conf)  queue p50/p99 ms  added p50/p99 ms  late p99 ms   configured
        -  uplink          10    7   2.00 (1.00)  loss 2, queue 1, netjam's own 1, held back by the receiver 3   9.50 (10.00)         1.00/2.00         3.00/4.00         0.12  rate 10Mbit

variant -: TUN netjam0, kernel 10.99.0.1, peer 10.99.0.2; relay TCP 3 relayed, 0 served, 2 refused, 0 reset by an end, 1 failed; UDP 0 relayed, 4 served, 0 refused, 5 datagrams dropped (overflow 4, to_client 1); the peer's TCP sent 900 segments, 7 of them again, and timed out 1 time(s); 6 packets shed by netjam at the device (the path behind it full), 2 dropped by the kernel before netjam read them, 1 malformed; the peer dropped 8 packets for a bad checksum and 9 malformed

variant -: host server0 dropped 11 packets for a bad checksum and 0 malformed as they arrived (what the path corrupted)

variant -: flow b STALLED 1 time(s), 2.50 s in all: it had data to send and sent nothing, not even a retransmission, for longer than max(1 s, 3 RTO); its figures are the TCP stack's defect, not the path's

variant -: flow u: 4 datagrams crossed the path and were dropped by the receiving socket, its buffer full: the machine could not keep up (netjam's own, not in lost)

variant s: skipped: TUN mode needs root
`

// TestPrintTableNode: a run with a node says so instead of the peer's
// relay and TCP, which it did not have.
func TestPrintTableNode(t *testing.T) {
	sum := `{"scenario": "x", "runs": [{"variant": "", "flows": [], "links": [],
	   "tun": {"device": "netjam0", "kernel_addresses": ["10.99.0.1/24"], "peer_addresses": ["10.99.0.2"], "shed": 1, "kernel_drops": 2, "malformed": 3, "partition_drops": 7, "routers": [{"ttl_expired": 2, "too_big": 1, "icmp_errors_sent": 3}, {"fragmented": 4}],
	     "nodes": [{"name": "server", "addresses": ["10.99.0.2/24"], "shed": 4, "kernel_drops": 5, "malformed": 6, "run": "iperf3 -s", "exit_status": 143, "ended_by_netjam": true},
	       {"name": "n2", "addresses": ["10.99.0.3/24"], "run": "false", "exit_status": 1}]}}]}`
	var b strings.Builder
	if err := PrintTable(&b, []byte(sum)); err != nil {
		t.Fatal(err)
	}
	want := `variant -: TUN netjam0, kernel 10.99.0.1/24, 1 packets shed by netjam at its device (the path behind it full), 2 dropped by the kernel before netjam read them, 3 malformed; kernel to kernel (netjam terminated nothing); 7 packets dropped between the groups of a partition; the routers in front of the links dropped 2 packets whose TTL ran out and 1 too big for a link, fragmented 4, and sent 3 ICMP errors:
  node server at 10.99.0.2/24 in the peer's place; its command "iperf3 -s" ended with the run (status 143); 4 packets shed at its device, 5 dropped by its kernel, 6 malformed
  node n2 at 10.99.0.3/24; its command "false" exited with status 1; 0 packets shed at its device, 0 dropped by its kernel, 0 malformed
`
	if got := b.String(); !strings.Contains(got, want) || strings.Contains(got, "relay") {
		t.Errorf("got\n%s\nwant a line\n%s\nand no relay", got, want)
	}
}
