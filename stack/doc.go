// Package stack holds netjam's end hosts: gVisor network stacks, each with
// one IP-only network interface whose far side is the emulated path, and
// the Relay on a Host that terminates the kernel's connections and relays
// them to real servers.
//
// The package is the only one of netjam that imports gVisor: what goes in
// and out are plain IP packets (Inject and HostConfig.Output), what
// applications see are net.Conn and net.PacketConn values, and every gVisor
// error becomes a Go error (a *net.OpError wrapping a syscall.Errno where
// one fits) before it leaves the package. The host's own networking (TUN
// devices, netlink, namespaces, kernel sockets) is package hostnet's, and
// what both agree on (the GSO description, MTU bounds, address rules,
// TCPInfo) is package netif's: stack and hostnet do not import each other.
// What a connection and a Relay are told and what they count, plain data
// (hostcfg.TCPOptions, hostcfg.RelayConfig, hostcfg.RelayStats,
// hostcfg.TCPStats), is package hostcfg's, so that the scenario and the
// summary name them without gVisor.
// The emulator joins two Hosts through package impair with function
// values; this package imports neither impair nor anything above it.
//
// # The interface
//
// A Host's NIC behaves like a TUN device: no link header, no ARP or
// neighbour discovery, every destination reached through a default route on
// the NIC. Packets the host sends are handed to Output synchronously, on the
// goroutine gVisor happens to send from (a TCP processor, the writer of a
// connection, or the caller of Inject when the packet is a reply such as an
// ICMP echo reply or a TCP reset). Packets arriving from the path are handed
// to Inject, which parses nothing beyond the IP version and length and leaves
// the rest to gVisor.
//
// # Tuning
//
// Every choice that differs from gVisor's defaults, or that a reader might
// expect to differ, is in options.go with the reason for it: the aim is an
// end host that behaves like a stock Linux one (CUBIC, SACK, receive buffer
// auto-tuning, TTL 64) without leaving throughput on the table. The
// differences from Linux that no option removes are listed there too.
//
// # Time and randomness
//
// gVisor reads time only through the Host's clock.Clock (adapted to
// tcpip.Clock) and draws its random numbers (initial sequence numbers,
// timestamp offsets, ephemeral ports, hash seeds) from streams derived from
// HostConfig.Seed, so two runs with the same seed and the same packet timing
// make the same choices where gVisor lets them: the IPv4 identification
// field is seeded from crypto/rand inside gVisor and is not reproducible.
//
// # Lifecycle
//
// NewHost validates the configuration and builds the stack; gVisor starts
// its TCP processor goroutines (one per GOMAXPROCS) inside stack.New, so
// there is no separate Start. Close aborts every connection, closes every
// endpoint the Host made, and waits for gVisor's goroutines; no goroutine of
// the Host outlives it.
package stack
