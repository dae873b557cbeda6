// Package topology describes the emulated path as data, a graph of nodes
// (hosts, directions of a link, a Wi-Fi cell's ports, capture taps, queues
// handing packets to another goroutine, routers) joined by edges, and
// compiles it into direct calls before the run.
//
// Every edge is an impair.Sink: a node's input takes Push(now, p), and a
// node's output is a Port that the compiled graph points at the next
// node's input. Each node declares what its input accepts (Accepts):
// whole GSO packets or MTU-sized ones only, partial TCP checksums or only
// final ones, segments merged as a NIC's receive offload would. The
// builder inserts the steps that adapt one neighbour to the next exactly
// on the edges that need them (a split before a node that takes MTU
// packets, a checksum completion before one that checks it, a merge in
// the queue in front of one that wants merged segments), as gVisor's link
// endpoints declare SupportedGSO and no caller branches on it. A capture
// tap sees the wire (each segment, with its final checksum) without
// splitting what it forwards.
//
// Compiling adds no goroutine: packets cross the graph on the goroutine
// of whatever pushed them, until a node that owns one (a direction's
// scheduler, a Wi-Fi cell's, a queue's) takes them over: one goroutine
// per direction, never one per hop.
//
//	host tx ─▶ [split] ─▶ tap ─▶ uplink ═▶ router ─┬▶ queue ═▶ [split, finish] ─▶ host rx
//	                                              └▶ queue ═▶ [merge, finish] ─▶ peer rx
//
// (─▶ a direct call on the sender's goroutine, ═▶ a hand-over to the
// goroutine of the node it leaves; the steps in brackets are the
// builder's.)
//
// The package imports no gVisor: it is tested with fake nodes and the
// manual clock.
package topology
