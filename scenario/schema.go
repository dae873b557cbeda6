package scenario

import (
	"fmt"
	"net/netip"
	"slices"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/netjam/netjam/capture"
	"github.com/netjam/netjam/flows"
	"github.com/netjam/netjam/hostcfg"
	"github.com/netjam/netjam/hostnet"
	"github.com/netjam/netjam/impair"
	"github.com/netjam/netjam/wifi"
)

// The schema of a scenario file: the types it decodes into, in the order
// of the reference (docs/scenario.md), then the keys of every mapping, then
// the defaults of each section. A section that configures a package of
// the path decodes into that package's own type (a direction of the link
// into impair.Config, the Wi-Fi cell into wifi.Config, the capture files'
// limits into capture.Options, a flow into flows.TCPBulkSpec or
// flows.UDPSpec, the TUN device into hostnet.TUNConfig and its relay into
// hostcfg.RelayConfig); the types here hold only what is the scenario's own.

// Scenario is one validated, fully resolved run of a scenario file: the file
// with a variant's set and the command-line overrides applied and every
// default filled in. It is a description; the emulator builds its running
// stages from it.
type Scenario struct {
	Name        string
	Description string
	Seed        uint64
	// SeedSet is false when neither the file nor --seed gave a seed; the
	// emulator then picks one and sets Seed and SeedSet, so that YAML
	// writes the seed the run actually used.
	SeedSet  bool
	Duration time.Duration // how long the run lasts; default 30s
	MTU      int           // default 1500; 576..65535
	// Uplink and Downlink are the link keys, each replaced by the
	// direction's own (link.uplink's, link.downlink's) when it has the key.
	// Their Name and Seed are left for the emulator to fill in. With a
	// links list they are its first link's (Links[0]).
	Uplink, Downlink impair.Config
	// Links are the scenario's links, in file order: its links list, or
	// the link key as one link named DefaultLink (link: is the one-link
	// shorthand). Each is one pair of directions, whichever paths cross
	// it: paths that share a link share its queues.
	Links []Link
	// Paths are the routes across Links, in file order: the paths list;
	// without one, one default path (DefaultPath) through every link in
	// order.
	Paths []Path
	// Timeline is the link's changes during the run, in time order: the
	// file's timeline compiled (ramps into their steps, repeats and
	// reverts into changes), each point's settings validated.
	Timeline []TimelinePoint
	// SampleInterval is the step of the run's time series; default 100ms.
	SampleInterval time.Duration
	// Clock is ClockReal or "" (the default: the wall clock), or
	// ClockVirtual (a virtual clock that moves only when the run is idle:
	// faster than real time, and the same from the same seed; no tun
	// section).
	Clock string
	// WiFi, when not nil, puts an 802.11 cell in front of the uplink.
	WiFi *wifi.Config
	// Capture, when not nil, writes pcap files of the run's packets.
	Capture *Capture
	// TUN, when not nil, puts the kernel on the client side of the path
	// through a TUN device (TUN mode).
	TUN *TUN
	// Nodes are the machines at the far end of the TUN device's path,
	// each with a kernel of its own (see Node); nil: the peer, netjam's
	// netstack host, ends the path.
	Nodes []Node
	Flows []Flow
	// Expect are the figures the run must reach; checked after it.
	Expect  []Expectation
	Variant string // the variant this run is; "" when the file has no variants

	file string // the source file, for YAML's header comment
	// shadowed holds the warnings of shadowedSets for this run;
	// noEffect those of them whose set changes nothing at all.
	shadowed, noEffect []string
	tree               *yaml.Node // the resolved tree (a mapping) behind YAML
	// traceFiles are the trace files the scenario was read with (its
	// links', its timeline's, and those of the scenario With made it
	// from), by absolute path: a change (With) may name them again.
	traceFiles map[string][]time.Duration
}

// Flow is one traffic flow of a scenario: a TCP bulk transfer or a UDP
// constant-bit-rate stream across the emulated path. What it sends and
// when is package flows' own spec of its type (TCP or UDP; the other is
// left zero), how its TCP sockets are set up package stack's TCPOptions;
// the fields of its own say where the flow runs in the lab.
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
	// Station is the Wi-Fi station the flow's client-side end runs on;
	// required when the scenario has a wifi cell, and only then. A kernel
	// flow's is the TUN's station, and no netstack flow's is.
	Station string
	// Node is the node the flow runs to, with nodes: a kernel flow's far
	// end is that node's kernel (""  the first node), a netstack flow's
	// that netstack node ("": the lab's server host). Not with Path.
	Node string
	// From is the netstack node a netstack flow starts from, to Node
	// (flows[].from); "" the client side's host. Not with a Station.
	From string

	// TCP is a tcp flow's transfer. The file sets Size (bytes to send; 0:
	// send for Duration), Start (after the run's start) and Duration
	// (bounds a flow without Size; 0: until the run ends); Name is the
	// flow's. InfoInterval keeps its default; Connect and OnStall are the
	// emulator's.
	TCP flows.TCPBulkSpec
	// TCPOptions are a tcp flow's socket settings: CC, the congestion
	// control ("" means the stack's default; one of NetstackCC for
	// netstack flows, of the kernel's (Options.CongestionControls) for
	// kernel flows), and SendBuffer and ReceiveBuffer in bytes, as given
	// to SO_SNDBUF and SO_RCVBUF in either stack (which doubles them; 0:
	// the stack's default with auto-tuning).
	hostcfg.TCPOptions
	// SACK defaults to true; kernel flows cannot turn it off (the
	// kernel's SACK is the sysctl net.ipv4.tcp_sack, for every socket).
	// gVisor sets it per host, not per socket, so the netstack TCP flows
	// of one station agree on it.
	SACK bool

	// UDP is a udp flow's stream. The file sets Rate (bits/s of UDP
	// payload) or Interval (between datagrams), PacketSize (UDP payload
	// bytes; default 100), Count (datagrams to send; 0: send for
	// Duration), Start and Duration (bounds a flow without Count; 0: until
	// the run ends); Name is the flow's. FlowID is the emulator's.
	UDP flows.UDPSpec

	// Path is the name of the path the flow crosses; "" for the default
	// path (the one without a match).
	Path string
}

// Link is one link of a scenario: two directions under a name. The
// uplink carries what the client side sends, the downlink what comes
// back; each direction is an impair.Config, as link's are.
type Link struct {
	Name             string
	Uplink, Downlink impair.Config
	// MTU is the largest packet the link carries, in [576, the
	// scenario's mtu]; 0: the scenario's. Only a scenario with nodes,
	// where netjam routes, acts on a smaller one: its routers answer
	// larger packets with ICMP (see the emulator's hops).
	MTU int
	// Between, when set, names the two nodes the link joins directly
	// (links[].between: [a, b]): what the first sends the second crosses
	// its uplink, what the second sends back its downlink, and no path
	// crosses it. Nil for a link of the paths.
	Between []string
}

// Path is a route across the scenario's links. The client side's packets
// take the path whose Match they meet (the most specific: the longest
// destination prefix, then a port, then a protocol), else the default
// path (the one without a match); replies come back the same links in
// reverse.
type Path struct {
	Name string
	// Via names the links crossed, from the client side, each once.
	Via []string
	// Match is what the path takes; nil for the default path.
	Match *Match
}

// Match is what a path takes of the client side's packets: all of its
// set fields must hold (and the same of a reply, read from its source).
type Match struct {
	Dst   netip.Prefix // the destination's network; the zero Prefix for any
	Proto string       // "tcp" or "udp"; "" for any
	Port  uint16       // the destination port; 0 for any
}

// The names the link shorthand gives its link and path.
const (
	DefaultLink = "link"
	DefaultPath = "default"
)

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
	// the path dropped, delayed and reordered. With a links list, a
	// link's ends too: "eu.client" and "eu.server" (see LinkEnds).
	Points []string
	// Options are the pcap writers': the file sets Snaplen (0: all of a
	// packet), MaxFileBytes (0: one file) and MaxFiles (0: no bound); the
	// others keep capture's defaults.
	capture.Options
}

// TUN puts the machine's kernel on the client side of the emulated path: a
// TUN device whose packets cross the uplink to a netstack host that owns
// the peer addresses, and come back across the downlink. Real applications
// and flows with stack "kernel" send through it. It needs /dev/net/tun and
// CAP_NET_ADMIN. The device is package hostnet's own configuration, the
// peer's relay package stack's; the fields of its own are the peer's
// addresses and the Wi-Fi stations.
type TUN struct {
	// Device is the device, as hostnet opens it. The file sets Name
	// (default "netjam0"; at most 15 bytes, without '/', ':', '%' or
	// white space); Addrs, the kernel's addresses with their networks'
	// prefix lengths, at most one IPv4 and one IPv6, in file order
	// (default 10.99.0.1/24), each a unicast host address (not an IPv4
	// network's own or broadcast address) whose network has room for the
	// peer; MTU (default the scenario's mtu, and never above it; at least
	// 1280 with an IPv6 address); Routes, extra networks routed into the
	// device for transparent relaying (no host bits set, not /0, each of
	// a family of Addrs); HostRoutes (default false); Offload (default
	// true: the path still applies every impairment to each MTU-sized
	// segment, splitting where a stage decides per packet); and Netns,
	// the absolute path of an existing namespace's file, as written in
	// the scenario (/proc/PID/ns/net) or /var/run/netns/NAME for a
	// namespace it names as ip netns does ("": netjam's own; kernel
	// flows then run in it too). The emulator adds the further stations'
	// addresses (StationAddrs) to Addrs.
	Device hostnet.TUNConfig
	// Peer holds netjam's addresses, the far end of the path: Peer[i] is
	// the peer of Device.Addrs[i], inside its network and not equal to
	// it. By default the address after the kernel's (10.99.0.1/24 gives
	// 10.99.0.2, fd99::1/64 gives fd99::2), or the one before when that
	// is not a host of the network.
	Peer []netip.Addr
	// Relay is the peer's relay. The file sets Forwards (each (Proto,
	// Listen) once, and not 7 or 9 while Services is on); Transparent
	// and Allow (relaying connections to any destination routed into the
	// device when it is in Allow; off by default); Services (echo on port
	// 7 and discard on port 9, TCP and UDP; default true); UDPIdle
	// (default 60s) and TCPIdle (default 2h, when Linux's keepalive would
	// start probing). Budget and DialTimeout keep the relay's defaults;
	// Dial and Log are the emulator's.
	Relay hostcfg.RelayConfig
	// Stations, with a Wi-Fi cell, are the stations the kernel sits
	// behind: required with a cell (at least one), not allowed without.
	// The device's packets are told apart by source address: the first
	// station has Device.Addrs; each further one an address of its own
	// in each network of Device.Addrs (StationAddrs).
	Stations []string
	// ForwardPaths holds, for each of Relay.Forwards in order, the path
	// whose peer address alone it answers on ("" for every path's):
	// forward[].path; nil when no forward names a path. The emulator turns
	// it into the forwards' Addrs.
	ForwardPaths []string
	// StationAddrs holds each station's kernel addresses, one per entry
	// of Device.Addrs and in its order: StationAddrs[0] are Addrs's own;
	// further stations take the next free host addresses of the
	// networks, after the kernel's and skipping the peers (10.99.0.1,
	// then 10.99.0.3, 10.99.0.4, ...).
	StationAddrs [][]netip.Addr
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
	// Links are every link's settings from then on, in the scenario's
	// order; Uplink and Downlink are the first's.
	Links []Link
	// Resets are the TCP flows whose connection the point ends with a
	// RST both ways (reset: {flow: NAME}), by name; the link does not
	// change for them.
	Resets []string
	// Partition, when not nil, is the partition among the nodes from
	// then on (partition: ..., heal: true; no groups: healed).
	Partition *Partition
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

// The keys of every mapping of a scenario file, in one table: each with
// the field of the section's type it fills and, for a key of some forms
// only, the forms it applies to. The key lists the decoder checks a
// mapping against are derived from it; schema_test.go checks that every
// field of the types is filled by a key (or says why not) and that the
// reference documents every key.

// key is one key of a mapping.
type key struct {
	name string // as the file writes it
	// field is the field it fills, of the section's type ("Rate" of
	// impair.Config, "Trace.Bytes" of impair.RateConfig); several are
	// separated by ", "; "" when it fills none by itself (variants).
	field string
	// only lists the forms the key applies to (a loss model, a queue
	// discipline, a flow type); nil: all of them.
	only []string
}

// k writes a key of the table.
func k(name, field string, only ...string) key { return key{name, field, only} }

// section is one mapping of a scenario file.
type section struct {
	// path is where the mapping is, "[]" standing for any item of a
	// list. A direction's key (delay) has a section of its own under
	// each of link, link.uplink and link.downlink.
	path string
	keys []key
	// hint: a key misplaced elsewhere is looked for here, for "unknown
	// key at this level; did you mean ...?".
	hint bool
}

// directionSchema holds the keys of a direction (impair.Config): under
// link (for both), link.uplink and link.downlink. impair.Config's Name and
// Seed are the emulator's to set; InflightBytes and InputLimit take
// impair's defaults.
var directionSchema = []key{
	k("delay", "Delay"), k("loss", "Loss"), k("duplicate", "Duplicate"), k("corrupt", "Corrupt"), k("reorder", "Reorder"),
	k("rate", "Rate"), k("slot", "Slot"), k("queue", "Queue"), k("inflight_limit", "InflightLimit"),
}

// Forms of the loss and queue keys that apply to some of them only.
var (
	codels   = []string{"codel", "fq_codel"}
	aqms     = []string{"codel", "fq_codel", "pie"}
	fqCodel  = []string{"fq_codel"}
	pie      = []string{"pie"}
	gemodel  = []string{"gemodel"}
	state    = []string{"state"}
	tcpFlows = []string{"tcp"}
	udpFlows = []string{"udp"}
)

// schema is every mapping of a scenario file, in the order "did you mean"
// looks for a misplaced key (shallow places first; of two equally deep,
// the first listed wins), then those it does not look in.
var schema = []section{
	{path: "", hint: true, keys: []key{
		k("name", "Name"), k("description", "Description"), k("seed", "Seed, SeedSet"), k("duration", "Duration"),
		k("mtu", "MTU"), k("sample_interval", "SampleInterval"), k("clock", "Clock"), k("capture", "Capture"), k("link", "Uplink, Downlink, Links, Paths"),
		k("links", "Links, Uplink, Downlink"), k("paths", "Paths"),
		k("timeline", "Timeline"), k("wifi", "WiFi"), k("tun", "TUN"), k("nodes", "Nodes"), k("flows", "Flows"),
		k("expect", "Expect"), k("variants", ""), k("sweep", ""), // a Plan's Runs and Sweep
	}},
	{path: "link", hint: true, keys: append(slices.Clone(directionSchema), k("uplink", "Uplink"), k("downlink", "Downlink"))},
	{path: "links[]", hint: true, keys: append([]key{k("name", "Name"), k("mtu", "MTU"), k("between", "Between")},
		append(slices.Clone(directionSchema), k("uplink", "Uplink"), k("downlink", "Downlink"))...)},
	{path: "paths[]", hint: true, keys: []key{k("name", "Name"), k("via", "Via"), k("match", "Match")}},
	{path: "capture", hint: true, keys: []key{
		k("points", "Points"), k("snaplen", "Options.Snaplen"), k("max_file_size", "Options.MaxFileBytes"),
		k("max_files", "Options.MaxFiles"),
	}},
	{path: "tun", hint: true, keys: []key{
		k("name", "Device.Name"), k("address", "Device.Addrs"), k("peer", "Peer"), k("mtu", "Device.MTU"),
		k("routes", "Device.Routes"), k("forward", "Relay.Forwards, ForwardPaths"), k("transparent", "Relay.Transparent, Relay.Allow"),
		k("services", "Relay.Services"), k("udp_idle", "Relay.UDPIdle"), k("tcp_idle", "Relay.TCPIdle"),
		k("host_routes", "Device.HostRoutes"), k("netns", "Device.Netns"), k("station", "Stations, StationAddrs"),
		k("offload", "Device.Offload"),
	}},
	{path: "wifi", hint: true, keys: []key{
		k("standard", "Standard"), k("rate", "Rate"), k("basic_rate", "BasicRate"), k("slot", "Slot"), k("sifs", "SIFS"),
		k("cw_min", "CWMin"), k("cw_max", "CWMax"), k("retry_limit", "RetryLimit"), k("rts_threshold", "RTSThreshold"),
		k("queue_limit", "QueueLimit"), k("ampdu", "AMPDU"), k("ampdu_max_bytes", "AMPDUMaxBytes"),
		k("ampdu_max_frames", "AMPDUMaxFrames"), k("stations", "Stations"),
	}},
	{path: "flows[]", hint: true, keys: []key{
		k("name", "Name, TCP.Name, UDP.Name"), k("type", "Type"), k("stack", "Stack"), k("direction", "Direction"),
		k("start", "TCP.Start, UDP.Start"), k("station", "Station"), k("cc", "TCPOptions.CC", tcpFlows...),
		k("sack", "SACK", tcpFlows...), k("send_buffer", "TCPOptions.SendBuffer", tcpFlows...),
		k("receive_buffer", "TCPOptions.ReceiveBuffer", tcpFlows...), k("size", "TCP.Size", tcpFlows...),
		k("rate", "UDP.Rate", udpFlows...), k("interval", "UDP.Interval", udpFlows...),
		k("packet_size", "UDP.PacketSize", udpFlows...), k("count", "UDP.Count", udpFlows...),
		k("duration", "TCP.Duration, UDP.Duration"),
		k("path", "Path"), k("node", "Node"), k("from", "From"),
	}},
	{path: "nodes[]", hint: true, keys: []key{k("name", "Name"), k("stack", "Stack"), k("run", "Run"), k("env", "Env"), k("dir", "Dir"), k("link", "Link")}},
	{path: "variants[]", hint: true, keys: []key{k("name", ""), k("set", "")}},
	{path: "link.uplink", hint: true, keys: directionSchema},
	{path: "link.downlink", hint: true, keys: directionSchema},
	{path: "links[].uplink", hint: true, keys: directionSchema},
	{path: "links[].downlink", hint: true, keys: directionSchema},
	{path: "paths[].match", hint: true, keys: []key{k("dst", "Dst"), k("proto", "Proto"), k("port", "Port")}},
	{path: "tun.transparent", hint: true, keys: []key{k("allow", "Allow")}}, // of tun's Relay
	{path: "tun.forward[]", hint: true, keys: []key{k("proto", "Proto"), k("listen", "Listen"), k("to", "To"), k("path", "")}},
	{path: "wifi.stations[]", hint: true, keys: []key{
		k("name", "Name"), k("rate", "Rate"), k("frame_error_rate", "FrameErrorRate"), k("snr", "SNR"), k("saturate", "Saturate"),
	}},
	// A direction's keys, under each direction (see directionPlaces).
	{path: "delay", hint: true, keys: []key{
		k("time", "Time"), k("jitter", "Jitter"), k("distribution", "Distribution"), k("correlation", "Correlation"),
		k("allow_reorder", "AllowReorder"),
	}},
	{path: "loss", hint: true, keys: []key{
		k("model", "Model"), k("p", "P", "random", "gemodel"), k("correlation", "Correlation", "random"),
		k("r", "R", gemodel...), k("1-h", "OneMinusH", gemodel...), k("1-k", "OneMinusK", gemodel...),
		k("p13", "P13", state...), k("p31", "P31", state...), k("p32", "P32", state...), k("p23", "P23", state...),
		k("p14", "P14", state...),
	}},
	{path: "rate", hint: true, keys: []key{
		k("bitrate", "Bitrate"), k("trace", "Trace"), k("trace_data", "Trace"), k("trace_bytes", "Trace.Bytes"), k("packet_overhead", "PacketOverhead"),
		k("cell_size", "CellSize"), k("cell_overhead", "CellOverhead"),
	}},
	{path: "queue", hint: true, keys: []key{
		k("limit", "LimitPackets"), k("bytes", "LimitBytes"), k("discipline", "Discipline"), k("ecn", "ECN", aqms...),
		k("target", "Target", aqms...), k("interval", "Interval", codels...), k("flows", "Flows", fqCodel...),
		k("quantum", "Quantum", fqCodel...), k("tupdate", "TUpdate", pie...), k("alpha", "Alpha", pie...),
		k("beta", "Beta", pie...), k("max_burst", "MaxBurst", pie...),
	}},
	{path: "reorder", hint: true, keys: []key{k("p", "P"), k("correlation", "Correlation"), k("gap", "Gap")}},
	{path: "slot", hint: true, keys: []key{k("min", "Min"), k("max", "Max"), k("packets", "Packets"), k("bytes", "Bytes")}},
	{path: "duplicate", hint: true, keys: chanceSchema},
	{path: "corrupt", hint: true, keys: chanceSchema},
	// Compiled into TimelinePoints, not decoded field by field.
	{path: "timeline[]", keys: []key{k("at", ""), k("every", ""), k("from", ""), k("for", ""), k("ramp", ""), k("set", ""), k("reset", ""), k("partition", ""), k("heal", "")}},
	{path: "timeline[].reset", keys: []key{k("flow", "")}},
	{path: "sweep", keys: []key{k("grid", "Axes"), k("seeds", "Seeds")}},
}

// chanceSchema holds the keys of duplicate and corrupt (impair.Chance).
var chanceSchema = []key{k("p", "P"), k("correlation", "Correlation")}

// directionPlaces are where a direction's keys are.
var directionPlaces = []string{"link", "link.uplink", "link.downlink", "links[]", "links[].uplink", "links[].downlink"}

// directionSections are the sections of a direction's keys (delay, ...).
var directionSections = []string{"delay", "loss", "rate", "queue", "reorder", "slot", "duplicate", "corrupt"}

// sectionOf returns the section at path.
func sectionOf(path string) section {
	for _, s := range schema {
		if s.path == path {
			return s
		}
	}
	panic("scenario: no section " + path)
}

// keysOf returns the keys of the section at path, in the table's order.
func keysOf(path string) []string {
	var out []string
	for _, k := range sectionOf(path).keys {
		out = append(out, k.name)
	}
	return out
}

// onlyKeys returns the keys of the section at path that apply to some
// forms only, with those forms.
func onlyKeys(path string) map[string][]string {
	out := map[string][]string{}
	for _, k := range sectionOf(path).keys {
		if k.only != nil {
			out[k.name] = k.only
		}
	}
	return out
}

// keysFor returns the keys of the section at path that apply to form only.
func keysFor(path, form string) []string {
	var out []string
	for _, k := range sectionOf(path).keys {
		if slices.Equal(k.only, []string{form}) {
			out = append(out, k.name)
		}
	}
	return out
}

// The key lists the decoder checks each mapping against.
var (
	rootKeys        = keysOf("")
	linkKeys        = keysOf("link")
	linksItemKeys   = keysOf("links[]")
	pathKeys        = keysOf("paths[]")
	matchKeys       = keysOf("paths[].match")
	directionKeys   = keysOf("link.uplink")
	variantKeys     = keysOf("variants[]")
	captureKeys     = keysOf("capture")
	tunKeys         = keysOf("tun")
	forwardKeys     = keysOf("tun.forward[]")
	transparentKeys = keysOf("tun.transparent")
	wifiKeys        = keysOf("wifi")
	stationKeys     = keysOf("wifi.stations[]")
	flowKeys        = keysOf("flows[]")
	nodeKeys        = keysOf("nodes[]")
	tcpOnlyKeys     = keysFor("flows[]", "tcp")
	udpOnlyKeys     = keysFor("flows[]", "udp")
	delayKeys       = keysOf("delay")
	lossKeys        = keysOf("loss")
	chanceKeys      = keysOf("duplicate")
	reorderKeys     = keysOf("reorder")
	rateKeys        = keysOf("rate")
	slotKeys        = keysOf("slot")
	queueKeys       = keysOf("queue")
	timelineKeys    = keysOf("timeline[]")
	resetKeys       = keysOf("timeline[].reset")
	sweepKeys       = keysOf("sweep")
	// lossKeyModels lists the models each key of the loss mapping
	// applies to; queueKeyDisciplines the disciplines of each
	// discipline's own key of the queue mapping.
	lossKeyModels       = onlyKeys("loss")
	queueKeyDisciplines = onlyKeys("queue")
)

// Defaults, one function per section: what each key left out means. A
// default that depends on other keys (a gemodel loss's r is 1-p) is filled
// where those keys are decoded.

// scenarioDefaults is the top level's defaults; name is the file's.
func scenarioDefaults(name string) *Scenario {
	return &Scenario{Name: name, Duration: 30 * time.Second, MTU: 1500, SampleInterval: 100 * time.Millisecond}
}

// flowDefaults is a flow's defaults, of every type.
func flowDefaults() Flow {
	return Flow{Stack: StackNetstack, Direction: "up", SACK: true}
}

// udpDefaults is a udp flow's defaults.
func udpDefaults() flows.UDPSpec { return flows.UDPSpec{PacketSize: 100} }

// wifiDefaults is the wifi section's defaults; zero fields take the
// standard's preset (see wifi.Config).
func wifiDefaults() *wifi.Config { return &wifi.Config{Standard: "802.11g"} }

// stationDefaults is the defaults of station i of a cell, from 0.
func stationDefaults(i int) wifi.StationConfig {
	return wifi.StationConfig{Name: fmt.Sprintf("sta%d", i+1)}
}

// tunDefaults is the tun section's defaults (tun: {}): mtu is the
// scenario's.
func tunDefaults(mtu int) *TUN {
	return &TUN{
		Device: hostnet.TUNConfig{Name: defaultTUNName, Addrs: []netip.Prefix{defaultTUNAddress}, MTU: mtu, Offload: true},
		Peer:   []netip.Addr{defaultTUNAddress.Addr().Next()},
		Relay:  hostcfg.RelayConfig{Services: true, UDPIdle: hostcfg.DefaultUDPIdle, TCPIdle: hostcfg.DefaultTCPIdle},
	}
}

// directionDefaults is a direction's defaults (impair.Config): no
// impairment, a drop-tail queue of impair.DefaultQueueLimit packets.
func directionDefaults() impair.Config {
	return impair.Config{
		Reorder:       impair.ReorderConfig{Gap: 1},
		Queue:         impair.QueueConfig{LimitPackets: impair.DefaultQueueLimit},
		InflightLimit: impair.DefaultInflightLimit,
	}
}

// geDefaults fills the defaults of a gemodel loss, netem's, for the keys
// not given: r = 1-p, 1-h = 100% (the bad state loses everything); 1-k is
// 0% (the good state loses nothing).
func geDefaults(v *impair.LossConfig, rGiven, hGiven bool) {
	if !rGiven {
		v.R = 1 - v.P
	}
	if !hGiven {
		v.OneMinusH = 1
	}
}

// stateDefaults fills the defaults of a state loss, netem's, for the keys
// not given: p31 = 1-p13, p23 = 100%; p32 and p14 are 0%.
func stateDefaults(v *impair.LossConfig, p31Given, p23Given bool) {
	if !p31Given {
		v.P31 = 1 - v.P13
	}
	if !p23Given {
		v.P23 = 1
	}
}

// queueDefaults is the defaults of a queue of discipline disc, on a path
// of mtu: a limit of impair.DefaultQueueLimit packets when neither limit
// nor bytes is given, and the RFCs' values of the discipline's own keys.
// fq_codel's quantum is a full frame with its Ethernet header per round.
func queueDefaults(disc impair.Discipline, mtu int) impair.QueueConfig {
	q := impair.QueueConfig{Discipline: disc, LimitPackets: impair.DefaultQueueLimit}
	switch disc {
	case impair.CoDel:
		q.Target, q.Interval = 5*time.Millisecond, 100*time.Millisecond
	case impair.FQCoDel:
		q.Target, q.Interval = 5*time.Millisecond, 100*time.Millisecond
		q.Flows, q.Quantum = 1024, mtu+14
	case impair.PIE:
		q.Target, q.TUpdate, q.MaxBurst = 15*time.Millisecond, 15*time.Millisecond, 150*time.Millisecond
		q.Alpha, q.Beta = 0.125, 1.25
	}
	return q
}

// sweepDefaults is the sweep section's defaults: one seed, 1.
func sweepDefaults() *Sweep { return &Sweep{Seeds: []uint64{1}} }
