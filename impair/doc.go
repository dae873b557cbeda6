// Package impair is netjam's per-direction packet pipeline: what tc netem does
// to packets, done in userspace, exactly and reproducibly.
//
// A direction of the emulated path is a Chain of small Stages over raw IP
// packets, always in this order:
//
//	loss -> duplicate -> corrupt -> queue+rate (bottleneck) -> slot -> delay (+reorder) -> out
//
// Loss and the other per-packet decisions come first, as in netem, so a lost
// packet takes no room in the bottleneck queue. The bottleneck is a bounded
// queue with a discipline (drop-tail, head-drop, CoDel, FQ-CoDel, PIE) in
// front of a serializer at the configured bit rate; what leaves it may be
// released in bursts (netem's slot) and is then held for the propagation
// delay with its jitter.
//
// # Time
//
// A Chain is a discrete-event simulation that knows nothing of goroutines or
// wall time: Arrive and Advance take the time as an argument, and every
// decision uses the packet's logical time, never the time the code happens
// to run. A 20 ms delay therefore adds exactly 20 ms, a 10 Mbit/s rate
// spaces 1500-byte packets exactly 1.2 ms apart, and a late wakeup does not
// shift later packets. Runner owns one goroutine per direction that feeds a
// Chain from a bounded input channel and wakes it with one reusable timer of
// a clock.Clock; tests use clock.Manual or drive the Chain directly.
//
// # Ownership and memory
//
// Packets come from a Pool and are owned by exactly one party at a time: the
// sender until Send, the chain (one stage) while in flight, the receiver
// after delivery, who must Release them. Queues link packets through an
// intrusive pointer, so nothing allocates per packet in steady state, and
// every place a packet can wait is bounded: when full, the packet is dropped
// and the drop counted with its reason.
//
// # Randomness
//
// Every stage draws from its own PCG stream derived from the direction's seed
// and the stage's name, so the same seed and the same arrivals give the same
// decisions on every run, and adding a stage does not change the decisions
// of the others.
package impair
