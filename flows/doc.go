// Package flows generates the traffic of a netjam run, measures it at the
// receiving end, and summarizes it: bulk TCP transfers (TCPBulk) and
// constant-bit-rate UDP probes (UDPFlow).
//
// The package knows nothing of gVisor, TUN devices or the emulated path. The
// emulator sets up the connections and hands them over: a flow works on a
// net.Conn (a TCP connection, a connected UDP socket) and a net.Conn or
// net.PacketConn at the other end, plus, for TCP, a function reporting the
// sending stack's internals (TCPInfo). Sender and receiver of a flow run in
// one process on one clock.Clock, so one-way delays are exact: no clock
// synchronization is involved.
//
// # Lifecycle
//
// NewTCPBulk and NewUDP validate a spec and allocate; they start nothing.
// Run runs the flow to its end on goroutines it owns and joins before it
// returns, and may be called once. Name, Sample and Summary may be called at
// any time from any goroutine, before, during and after Run: they read
// atomics and a small mutex, never the connections.
//
// The caller keeps owning the connections and closes them after Run
// returns. Run half-closes the sending side when the transfer is over (TCP:
// CloseWrite, or Close when the connection has no CloseWrite), and to stop a
// goroutine blocked in Read or Write (context cancelled, duration over, an
// error at the other end) it sets a read or write deadline in the past, so a
// connection may be left with an expired deadline. A deadline in the past is
// in the past on any clock, which is why this works with a manual clock too.
//
// # TCP
//
// The sender writes a deterministic pattern, periodic with a prime period
// (patternPeriod bytes) and derived from the flow's name, and the receiver
// compares every byte it reads against the pattern at the same stream
// offset (one memory comparison per read), so a corrupted, lost, duplicated
// or misordered byte ends the run with a *DataError naming its offset.
// Displacements by an exact multiple of the period would go unseen; TCP
// bugs do not produce those.
//
// # UDP
//
// Each datagram starts with a HeaderSize-byte header, big-endian:
//
//	offset  size  field
//	     0     4  magic "NJU1"
//	     4     4  flow id (UDPSpec.FlowID)
//	     8     8  sequence number, from 0
//	    16     8  send time: nanoseconds since the flow's start on its clock
//
// and is padded with zeros to UDPSpec.PacketSize. Each UDPFlow has its own
// receiving PacketConn (the emulator opens one port per flow); the flow id
// only guards against crossed wiring. See UDPFlow for what the receiver
// measures and how.
//
// # Reports
//
// Summary returns the FlowSummary that summary.json prints per flow. Sample
// returns cumulative counters cheap enough to take every sampling interval;
// a Series turns successive samples into the rows of a time-series CSV. Jain
// computes the fairness index of a set of throughputs.
package flows
