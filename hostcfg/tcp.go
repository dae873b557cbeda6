package hostcfg

// TCPOptions are the per-connection TCP settings of a host's DialTCP and
// ListenTCP (package stack). The zero value is a stock connection.
type TCPOptions struct {
	// CC is the congestion control algorithm: "" for the host default
	// ("cubic", as on Linux; gVisor's own default would be "reno"), or one
	// of stack.CongestionControls(): "reno" or "cubic".
	CC string
	// SendBuffer and ReceiveBuffer pin the socket buffer sizes in bytes, as
	// SO_SNDBUF and SO_RCVBUF do, which turns their auto-tuning off. 0
	// keeps the default size with auto-tuning (see stack/options.go). As
	// with setsockopt on Linux (and in gVisor's own socket layer), the
	// stack takes twice the size given, for its bookkeeping, clamped to the
	// host's ranges: half the receive buffer is the window it offers.
	SendBuffer, ReceiveBuffer int
}

// TCPStats are host-wide TCP counters, from gVisor's stack statistics
// (tcpip.Stats.TCP). Those that gVisor keeps only stack-wide, such as the
// number of SACK recoveries, exist only here and not in TCPInfo.
type TCPStats struct {
	SegmentsSent       uint64 `json:"segments_sent"`       // on the wire: a large segment (GSO) counts as its MSS-sized ones
	SegmentsReceived   uint64 `json:"segments_received"`   // on the wire: a merged run or large segment counts as its segments
	Retransmits        uint64 `json:"retransmits"`         // segments sent again, counted as SegmentsSent counts them
	Timeouts           uint64 `json:"timeouts"`            // RTO expiries
	FastRecoveries     uint64 `json:"fast_recoveries"`     // NewReno fast recovery episodes (no SACK)
	SACKRecoveries     uint64 `json:"sack_recoveries"`     // SACK-based (RFC 6675) recovery episodes
	TLPRecoveries      uint64 `json:"tlp_recoveries"`      // losses repaired by a tail loss probe (RACK only)
	SpuriousRecoveries uint64 `json:"spurious_recoveries"` // recoveries later found unnecessary (the timestamp echo of the ACK that ended them, RFC 3522; none without timestamps)
	ResetsSent         uint64 `json:"resets_sent"`
	ResetsReceived     uint64 `json:"resets_received"`
}
