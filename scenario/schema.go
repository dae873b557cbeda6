package scenario

import (
	"net/netip"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/netjam/netjam/impair"
	"github.com/netjam/netjam/wifi"
)

// The schema of a scenario file: the types it decodes into, in the order
// of the reference (docs/scenario.md). A section that configures a package
// of the path (a direction of the link, the Wi-Fi cell) decodes into that
// package's own Config; the types here are the scenario's own.

// Scenario is one validated, fully resolved run of a scenario file: the file
// with a variant's set and the command-line overrides applied and every
// default filled in. It is a description; the emulator builds its running
// stages from it.
type Scenario struct {
	Name        string
	Description string
	Variant     string // "" when the file has no variants
	Seed        uint64
	// SeedSet is false when neither the file nor --seed gave a seed; the
	// emulator then picks one and sets Seed and SeedSet, so that YAML
	// writes the seed the run actually used.
	SeedSet  bool
	Duration time.Duration // how long the run lasts; default 30s
	MTU      int           // default 1500; 576..65535
	// Uplink and Downlink are the link keys, each replaced by the
	// direction's own (link.uplink's, link.downlink's) when it has the key.
	// Their Name and Seed are left for the emulator to fill in.
	Uplink, Downlink impair.Config
	// SampleInterval is the step of the run's time series; default 100ms.
	SampleInterval time.Duration
	// WiFi, when not nil, puts an 802.11 cell in front of the uplink.
	WiFi *wifi.Config
	// Capture, when not nil, writes pcap files of the run's packets.
	Capture *Capture
	// TUN, when not nil, puts the kernel on the client side of the path
	// through a TUN device (TUN mode).
	TUN   *TUN
	Flows []Flow
	// Expect are the figures the run must reach; checked after it.
	Expect []Expectation
	// Timeline is the link's changes during the run, in time order: the
	// file's timeline compiled (ramps into their steps, repeats and
	// reverts into changes), each point's settings validated.
	Timeline []TimelinePoint

	file string // the source file, for YAML's header comment
	// shadowed holds the warnings of shadowedSets for this run.
	shadowed []string
	tree     *yaml.Node // the resolved tree (a mapping) behind YAML
}

// Flow is one traffic flow of a scenario: a TCP bulk transfer or a UDP
// constant-bit-rate stream across the emulated path.
type Flow struct {
	Name string
	Type string // "tcp" or "udp"
	// Stack is where the flow's client-side end lives: StackNetstack
	// ("netstack", the default: gVisor hosts in netjam's own process, no
	// privileges needed) or StackKernel ("kernel": the machine's TCP/IP,
	// through the TUN device; the scenario then has a tun section).
	Stack string
	// Direction is "up" (client side to server side, across the uplink) or
	// "down".
	Direction string
	Start     time.Duration // after the run's start

	// TCP.
	// CC is the congestion control; "" means the stack's default. One of
	// NetstackCC for netstack flows, of the kernel's
	// (Options.CongestionControls) for kernel flows.
	CC string
	// SACK defaults to true; kernel flows cannot turn it off (the
	// kernel's SACK is the sysctl net.ipv4.tcp_sack, for every socket).
	SACK bool
	// SendBuffer and ReceiveBuffer are bytes (SO_SNDBUF and SO_RCVBUF
	// for kernel flows); 0 = the stack's default with auto-tuning.
	SendBuffer, ReceiveBuffer int64
	Size                      int64 // bytes to send; 0 = send for Duration

	// UDP.
	Rate       uint64        // bits/s of UDP payload; 0 = use Interval
	Interval   time.Duration // between datagrams; 0 = use Rate
	PacketSize int           // UDP payload bytes, default 100
	Count      int64         // datagrams to send; 0 = send for Duration

	// Duration bounds a TCP flow without Size and a UDP flow without
	// Count; 0 means until the run ends.
	Duration time.Duration

	// Station is the Wi-Fi station the flow's client-side end runs on;
	// required when the scenario has a wifi cell, and only then. A kernel
	// flow's is the TUN's station, and no netstack flow's is.
	Station string
}

// Flow stacks.
const (
	StackNetstack = "netstack" // gVisor hosts in netjam's process
	StackKernel   = "kernel"   // the machine's kernel, through the TUN device
)

// The Wi-Fi cell is a wifi.Config (its stations wifi.StationConfig):
// package scenario decodes into the wifi package's own types.

// Capture asks for pcap files of the packets at named points of the path.
type Capture struct {
	// Points are where packets are captured: "client" (what the
	// client-side hosts send, before the uplink, and receive, after the
	// downlink) and "server" (what the server-side hosts receive, after the
	// uplink, and send, before the downlink). Comparing the two shows what
	// the path dropped, delayed and reordered.
	Points []string
	// Snaplen is the number of bytes kept of each packet (default 262144:
	// all of it).
	Snaplen int
	// MaxFileBytes rotates to a new file past this size (0: one file);
	// MaxFiles bounds the number of files, after which capture stops and
	// counts what it did not write (0: no bound).
	MaxFileBytes int64
	MaxFiles     int
}

// TUN puts the machine's kernel on the client side of the emulated path: a
// TUN device whose packets cross the uplink to a netstack host that owns
// the peer addresses, and come back across the downlink. Real applications
// and flows with stack "kernel" send through it. It needs /dev/net/tun and
// CAP_NET_ADMIN.
type TUN struct {
	// Name is the device's name; default "netjam0". At most 15 bytes,
	// without '/', ':', '%' or white space.
	Name string
	// Address holds the kernel's addresses on the device with their
	// networks' prefix lengths, at most one IPv4 and one IPv6, in file
	// order (default 10.99.0.1/24). Each is a unicast host address (not
	// an IPv4 network's own or broadcast address) whose network has room
	// for the peer.
	Address []netip.Prefix
	// Peer holds netjam's addresses, the far end of the path: Peer[i] is
	// the peer of Address[i], inside its network and not equal to it.
	// By default the address after the kernel's (10.99.0.1/24 gives
	// 10.99.0.2, fd99::1/64 gives fd99::2), or the one before when that
	// is not a host of the network.
	Peer []netip.Addr
	// MTU is the device's MTU; default the scenario's mtu, and never
	// above it (at least 1280 with an IPv6 address).
	MTU int
	// HostRoutes lets Routes outside the device's networks change the
	// host's routing when netjam holds CAP_NET_ADMIN from its file
	// (setcap) without being root; default false (see
	// stack.TUNConfig.HostRoutes).
	HostRoutes bool
	// Routes are extra networks routed into the device (for
	// transparent relaying): no host bits set, not /0, each of a family
	// of Address.
	Routes []netip.Prefix
	// Forward relays ports of the peer to real servers; each (Proto,
	// Listen) once, and not 7 or 9 while Services is on.
	Forward []Forward
	// Transparent relays connections to any destination routed into the
	// device, when it is in Allow; nil means off.
	Transparent *Transparent
	// Services runs echo (port 7) and discard (port 9) on the peer, TCP
	// and UDP; default true.
	Services bool
	// UDPIdle ends a relayed UDP session idle this long; default 60s.
	UDPIdle time.Duration
	// TCPIdle resets a relayed or served TCP connection that carried no
	// byte either way this long; default 2h, when Linux's keepalive
	// would start probing.
	TCPIdle time.Duration
	// Offload lets the kernel hand over and take TCP segments of up to
	// 64 KiB with checksums left to the receiver (virtio-net headers,
	// TSO); the path still applies every impairment to each MTU-sized
	// segment, splitting where a stage decides per packet. Default true.
	Offload bool
	// Netns puts the device in an existing network namespace, given as
	// the absolute path of its file: as written in the scenario
	// (/proc/PID/ns/net), or /var/run/netns/NAME for a namespace the
	// scenario names as ip netns does. "" means netjam's own namespace.
	// Kernel flows then run in it too.
	Netns string
	// Stations, with a Wi-Fi cell, are the stations the kernel sits
	// behind: required with a cell (at least one), not allowed without.
	// The device's packets are told apart by source address: the first
	// station has Address; each further one an address of its own in
	// each network of Address (StationAddrs).
	Stations []string
	// StationAddrs holds each station's kernel addresses, one per entry
	// of Address and in its order: StationAddrs[0] are Address's own;
	// further stations take the next free host addresses of the
	// networks, after the kernel's and skipping the peers (10.99.0.1,
	// then 10.99.0.3, 10.99.0.4, ...).
	StationAddrs [][]netip.Addr
}

// Forward relays one port of the peer to a fixed target.
type Forward struct {
	Proto  string // "tcp" or "udp"
	Listen uint16 // the peer's port, 1..65535
	// To is the real server, an IP address and a port other than 0
	// (host names are not looked up).
	To netip.AddrPort
}

// Transparent is the allow list of transparent relaying.
type Transparent struct {
	// Allow lists the networks relayed to; at least one, none /0, no
	// host bits set.
	Allow []netip.Prefix
}

// Each direction of the link is an impair.Config: package scenario decodes
// into the impair package's own types.

// TimelinePoint is one moment of the timeline: what changed then, and the
// settings of both directions from then on.
type TimelinePoint struct {
	// At is the time from the start of the run; a point at or after the
	// run's end (a run cut short by --duration) is checked but never
	// applies.
	At       time.Duration
	Changes  []KeyChange
	Uplink   impair.Config
	Downlink impair.Config
}

// KeyChange is one key's change at a TimelinePoint, for events.jsonl and
// summary.json: the values as the file writes them; for a direction's
// key not set, the shared key's value that applies; "" for the default.
type KeyChange struct {
	Key string `json:"key"`
	Old string `json:"old"`
	New string `json:"new"`
}

// Expectation is one entry of a scenario's expect list: a figure of the
// run's summary (summary.json, one run), a comparison, and the value the
// figure is compared with, as "flows.bulk.throughput > 4Mbps". The emulator
// checks each after the run; one that does not hold makes `netjam run` exit
// 3 (the run worked, the network was not good enough).
type Expectation struct {
	// Text is the expectation as written.
	Text string
	// Path is the figure's dotted path in a run of summary.json. Items of
	// the lists of named things (flows, links) are addressed by name, and a
	// key may leave out its unit suffix when the value has a unit
	// (throughput for throughput_bps, delay_ms.p95 as it is).
	Path []string
	// Op is one of < <= > >= == !=.
	Op string
	// Value is what the figure is compared with, in Dim's base unit.
	Value float64
	// Dim is the value's kind, from its unit; DimNumber for a plain number,
	// compared with the figure as summary.json has it.
	Dim Dimension
}

// Dimension is the kind of a value in an expectation, from its unit.
type Dimension int

// The dimensions and their base units.
const (
	DimNumber Dimension = iota // a plain number
	DimTime                    // seconds (50ms, 2s)
	DimRate                    // bits per second (4Mbps)
	DimSize                    // bytes (5MB, 1MiB)
	DimRatio                   // a fraction (5%)
)

// String names the dimension in messages.
func (d Dimension) String() string {
	return [...]string{"a number", "a duration", "a rate", "a size", "a ratio"}[d]
}

// Sweep is a scenario's parameter grid, its sweep key: every combination
// of its axes' values, each run once per seed (and once per variant, the
// variants being one more axis). `netjam run` runs the scenario as
// written; `netjam sweep` runs the grid.
type Sweep struct {
	// Axes are the swept keys, in the file's order (the first varies
	// slowest).
	Axes []Axis
	// Seeds are the seeds each combination runs with; default 1.
	Seeds []uint64
}

// Axis is one swept key and its values, each a YAML value as --set takes
// it ("1%", "{discipline: fq_codel}").
type Axis struct {
	Key    string
	Values []string
}

// Point is one combination of a sweep's values with one seed.
type Point struct {
	Index  int      // its place in the sweep's order, 0..Len()-1
	Values []string // one per axis
	Seed   uint64
}
