package summary

import (
	"github.com/netjam/netjam/hostcfg"
	"github.com/netjam/netjam/topology"
)

// TUNSummary is what TUN mode saw.
type TUNSummary struct {
	Device string   `json:"device"`
	Kernel []string `json:"kernel_addresses"`
	// Peer are the peer's addresses, then its address on each path
	// whose match has a dst ("10.20.0.1 (path to-eu)").
	Peer []string `json:"peer_addresses"`
	// Stations pairs each Wi-Fi station the kernel sits behind with its
	// addresses ("sta1 10.99.0.1").
	Stations []string `json:"stations,omitempty"`
	// DeviceStats are the device's counters (the first direction is
	// the uplink).
	DeviceStats
	// Nodes are the scenario's nodes, the first in the peer's place.
	// With nodes, Relay, PeerTCP, PeerChecksumErrors and PeerMalformed
	// are zero: nothing terminates the kernel's connections in netjam.
	Nodes []NodeSummary `json:"nodes,omitempty"`
	// PartitionDrops counts the packets dropped between the groups of
	// the timeline's partitions (their segments, for a large one).
	PartitionDrops uint64 `json:"partition_drops,omitempty"`
	// Routers are the routers in front of each link's directions, with
	// nodes (see topology.Hop).
	Routers []RouterSummary    `json:"routers,omitempty"`
	Relay   hostcfg.RelayStats `json:"relay"`
	// PeerTCP sums the peer's TCP connections: those it relays and those
	// of the kernel's flows. What the peer sends toward the kernel
	// (iperf3 -R, a download through a forward) is its TCP's, so its
	// retransmissions and timeouts are here and in no tool's report
	// behind the device: iperf3 -R counts the target's.
	PeerTCP hostcfg.TCPStats `json:"peer_tcp"`
	// PeerChecksumErrors and PeerMalformed count the packets the peer
	// dropped on arrival: a TCP or UDP checksum that did not hold (a
	// corrupt stage's work, or the kernel's side's), or headers that do
	// not parse. The path delivered them; nothing behind the peer saw them.
	PeerChecksumErrors uint64   `json:"peer_checksum_errors"`
	PeerMalformed      uint64   `json:"peer_malformed"`
	Forwards           []string `json:"forwards,omitempty"`
}

// DeviceStats are what netjam counted at a TUN device it serves.
type DeviceStats struct {
	// Malformed counts what the device delivered that was not an IPv4
	// or IPv6 packet; WriteErrors what it refused to take while open;
	// AfterClose what reached it once it had closed at the run's end
	// (packets still crossing the path then).
	Malformed   uint64 `json:"malformed"`
	WriteErrors uint64 `json:"write_errors"`
	AfterClose  uint64 `json:"after_close"`
	// Writes counts the writes into the device, and WrittenPackets the
	// MTU-sized packets they carried: segments of one connection that
	// left the path together are written as one large segment.
	Writes         uint64 `json:"writes"`
	WrittenPackets uint64 `json:"packets_written"`
	// Shed counts the packets netjam read from the device and dropped
	// at once because the first direction's input was full (what is
	// behind it could not keep up): netjam's own drops, shed at the
	// entrance before any work was done on them. Each is followed by a
	// pause in reading, during which the kernel drops at the device's
	// queue (KernelDrops).
	Shed uint64 `json:"shed"`
	// KernelDrops counts the packets the kernel dropped at the device's
	// queue because netjam's read loop fell behind (tx_dropped; 0 when
	// it cannot be read, in a rootless shell).
	KernelDrops uint64 `json:"kernel_drops"`
}

// NodeSummary is what a node's device and command did.
type NodeSummary struct {
	Name      string   `json:"name"`
	Device    string   `json:"device"`
	Addresses []string `json:"addresses"`
	// DeviceStats are the node's device's counters (its first
	// direction is the downlink).
	DeviceStats
	// Run is the node's command; ExitStatus its exit status once it
	// ended (128+N for a signal N, as shells say; nil while it runs or
	// without one); EndedByNetjam, whether the run's end ended it.
	Run           string `json:"run,omitempty"`
	ExitStatus    *int   `json:"exit_status,omitempty"`
	EndedByNetjam bool   `json:"ended_by_netjam,omitempty"`
}

// RouterSummary is what a router in front of a link did (see
// topology.Hop): packets whose TTL expired, too big for the link,
// fragmented, and the ICMP errors sent.
type RouterSummary struct {
	Name      string   `json:"name"`
	Addresses []string `json:"addresses"`
	topology.HopStats
}
