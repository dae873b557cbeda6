// Package proxy is netjam proxy: a server of toxiproxy's HTTP API whose
// toxics act on packets. Each proxy listens on its address and carries
// every connection it accepts to its upstream across an emulated path
// (two gVisor netstack hosts inside the process, emulator.Bench), so that
// the client's bytes and the upstream's replies cross the path as TCP
// segments: a latency toxic delays packets, a bandwidth toxic is a rate
// with a queue, netjam's own toxics (loss, queue, reorder, duplicate,
// corrupt, ...) are a scenario's link keys, and wifi a scenario's Wi-Fi
// cell, the client its station (a cell is built with its path: a change
// applies to new connections).
//
// toxiproxy's toxics that act on the stream itself (slow_close, slicer,
// limit_data, reset_peer, timeout's close) keep toxiproxy's meaning and
// act in the copy between the client's socket and the path. docs/proxy.md
// says which toxic means what.
//
// The pieces: toxic.go (the API's toxics and what they set), proxy.go (a
// proxy, its paths and its changes), group.go (one path), conn.go (one
// TCP connection), udp.go (UDP proxies), server.go (the set of proxies),
// api.go (HTTP), metrics.go (Prometheus).
package proxy
