// Package hostcfg is the vocabulary of netjam's userspace hosts without
// their network stack: what a host's TCP connections and its relay are
// told (TCPOptions, RelayConfig, Forward) and what they count (TCPStats,
// RelayStats), as plain data.
//
// Package stack runs these on gVisor; the scenario decodes into them, and
// summary.json and the control API print the counters. None of those
// needs a network stack to name a setting or a counter, so the types live
// here, apart from the one package that links gVisor (internal/layering
// checks that this one does not). The name says what most of it is, a
// host's configuration; the counters are beside it because they are the
// same hosts' and must be as free of gVisor.
package hostcfg
