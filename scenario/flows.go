package scenario

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/netjam/netjam/wifi"
)

// NetstackCC are the congestion controls gVisor's TCP offers. Package stack
// checks at test time that gVisor still offers exactly these.
var NetstackCC = []string{"reno", "cubic"}

// UDPHeaderSize is the smallest UDP payload a netjam UDP flow can send: its
// datagrams carry a header (flow, sequence number, send time) that the sink
// measures with. Package flows checks that it agrees.
const UDPHeaderSize = 24

var (
	flowTypes     = []string{"tcp", "udp"}
	flowStacks    = []string{StackNetstack, StackKernel}
	flowDirection = []string{"up", "down"}
)

// flows decodes the flows list. mtu bounds UDP datagrams (it is valid when
// mtuOK); duration is the run's, which a flow's start must precede; w is
// the Wi-Fi cell and t the TUN device, nil without one; node is whether a
// node's kernel, not the peer, ends kernel flows.
func (d *decoder) flows(n *yaml.Node, mtu int, mtuOK bool, duration time.Duration, w *wifi.Config, t *TUN, node bool) []Flow {
	if n.Kind != yaml.SequenceNode {
		d.errorf(n, "flows", "expected a list of flows, got %s", describe(n))
		return nil
	}
	var out []Flow
	var items []*yaml.Node // out's nodes
	names := map[string]int{}
	for i, item := range n.Content {
		path := fmt.Sprintf("flows[%d]", i)
		f, ok := d.fields(item, path, "a mapping of flow keys", flowKeys)
		if !ok {
			continue
		}
		fl := flowDefaults()
		path = d.flowName(item, f["name"], path, names, &fl)
		d.flowKind(item, f, path, &fl, duration, t)
		d.flowStation(item, f["station"], path, &fl, w, t)
		switch fl.Type {
		case "tcp":
			d.wrongType(f, path, "tcp", udpOnlyKeys)
			d.tcpFlow(item, f, path, &fl, node)
		case "udp":
			d.wrongType(f, path, "udp", tcpOnlyKeys)
			d.udpFlow(item, f, path, &fl, udpPayload(mtu, fl, t), mtuOK)
		}
		out, items = append(out, fl), append(items, item)
	}
	d.stationsAgreeOnSACK(items, out)
	return out
}

// flowName decodes a flow's name, v, unique among names (each with its
// line), and returns the flow's path: flows.NAME once it has a valid one.
func (d *decoder) flowName(item, v *yaml.Node, path string, names map[string]int, fl *Flow) string {
	if v == nil {
		d.errorf(item, path, "a flow needs a name")
		return path
	}
	name, ok := d.text(v, join(path, "name"))
	if !ok {
		return path
	}
	if why := itemNameProblem(name); why != "" {
		d.errorf(v, join(path, "name"), "%s is not a valid name (%s)", quote(name), why)
	} else if line, dup := names[name]; dup {
		d.errorf(v, join(path, "name"), "%s names two flows (first at line %d)", quote(name), line)
	} else {
		names[name] = v.Line
		fl.Name, path = name, "flows."+name
	}
	return path
}

// flowKind decodes what a flow is and when it runs: its type, stack,
// direction, start and duration. duration is the run's; t the TUN device,
// nil without one.
func (d *decoder) flowKind(item *yaml.Node, f map[string]*yaml.Node, path string, fl *Flow, duration time.Duration, t *TUN) {
	if v := f["type"]; v == nil {
		d.errorf(item, join(path, "type"), "a flow needs a type (tcp or udp)")
	} else {
		fl.Type, _ = d.oneOf(v, join(path, "type"), "flow type", flowTypes)
	}
	start, dur := fl.ofType()
	if v := f["stack"]; v != nil {
		fl.Stack, _ = d.oneOf(v, join(path, "stack"), "flow stack", flowStacks)
		if fl.Stack == StackKernel && t == nil {
			d.errorf(v, join(path, "stack"), "stack kernel sends through the TUN device; add a tun section (tun: {} for every default)")
		}
	}
	if v := f["direction"]; v != nil {
		fl.Direction, _ = d.oneOf(v, join(path, "direction"), "direction", flowDirection)
	}
	if v := f["start"]; v != nil {
		if s, ok := d.duration(v, join(path, "start"), false, maxDuration); ok {
			if s >= duration {
				d.errorf(v, join(path, "start"), "%s is not before the end of the run (duration %v)", v.Value, duration)
			}
			*start = s
		}
	}
	if v := f["duration"]; v != nil {
		*dur, _ = d.duration(v, join(path, "duration"), true, maxDuration)
	}
}

// ofType gives fl the spec of its type, with that type's defaults and the
// flow's name, and returns where the flow's start and duration go: in
// that spec (in a throwaway for an invalid type, which is reported).
func (fl *Flow) ofType() (start, duration *time.Duration) {
	switch fl.Type {
	case "tcp":
		fl.TCP.Name = fl.Name
		return &fl.TCP.Start, &fl.TCP.Duration
	case "udp":
		fl.UDP = udpDefaults()
		fl.UDP.Name = fl.Name
		return &fl.UDP.Start, &fl.UDP.Duration
	}
	return new(time.Duration), new(time.Duration)
}

// flowStation decodes a flow's station, v (nil: none): required with a
// Wi-Fi cell w, and only then; the TUN's stations (t's) are the kernel's.
func (d *decoder) flowStation(item, v *yaml.Node, path string, fl *Flow, w *wifi.Config, t *TUN) {
	switch {
	case v != nil && w == nil:
		d.errorf(v, join(path, "station"), "there is no wifi cell in this scenario")
		return
	case v == nil && w != nil:
		d.errorf(item, path, "a flow of a scenario with a wifi cell needs a station")
		return
	case v == nil:
		return
	}
	name, ok := d.station(v, join(path, "station"), w)
	fl.Station = name
	if !ok || t == nil || len(t.Stations) == 0 {
		return
	}
	switch {
	case fl.Stack == StackKernel && t.Station(name) < 0:
		which := "station " + t.Stations[0]
		if len(t.Stations) > 1 {
			which = "stations " + strings.Join(t.Stations, ", ")
		}
		d.errorf(v, join(path, "station"), "the kernel sits behind %s (tun.station), so a kernel flow runs there", which)
	case fl.Stack == StackNetstack && t.Station(name) >= 0:
		d.errorf(v, join(path, "station"), "station %s is the kernel's (tun.station); a netstack flow needs another station, or stack: kernel", name)
	}
}

// udpPayload is the largest UDP payload of flow fl: what one IPv4 packet
// of the path's mtu carries (20 bytes of IP, 8 of UDP), or for a kernel
// flow, one packet of the TUN device t's MTU from its first address (over
// IPv6, 40 bytes of IP).
func udpPayload(mtu int, fl Flow, t *TUN) int {
	if fl.Stack != StackKernel || t == nil || len(t.Device.Addrs) == 0 {
		return mtu - 28
	}
	if t.Device.Addrs[0].Addr().Is6() {
		return t.Device.MTU - 48
	}
	return t.Device.MTU - 28
}

// stationsAgreeOnSACK reports the netstack TCP flows of one station that
// disagree on sack: a station is one host, and gVisor switches SACK per
// host. The kernel's SACK is its own (and always on, for kernel flows).
// items are the flows' nodes.
func (d *decoder) stationsAgreeOnSACK(items []*yaml.Node, fls []Flow) {
	sack := map[string]bool{}
	for i, fl := range fls {
		if fl.Station == "" || fl.Type != "tcp" || fl.Stack != StackNetstack {
			continue
		}
		if prev, ok := sack[fl.Station]; ok && prev != fl.SACK {
			d.errorf(items[i], "flows."+fl.Name+".sack", "the TCP flows of station %s disagree on sack (a station is one host, which has SACK on or off)", fl.Station)
		}
		sack[fl.Station] = fl.SACK
	}
}

// wrongType reports keys of the other flow type.
func (d *decoder) wrongType(f map[string]*yaml.Node, path, typ string, keys []string) {
	other := "udp"
	if typ == "udp" {
		other = "tcp"
	}
	for _, k := range keys {
		if v := f[k]; v != nil {
			d.errorf(v, join(path, k), "applies to %s flows only (this flow is %s)", other, typ)
		}
	}
}

// tcpFlow decodes a TCP flow's keys; node is whether a node's kernel ends
// kernel flows (and sends those down).
func (d *decoder) tcpFlow(item *yaml.Node, f map[string]*yaml.Node, path string, fl *Flow, node bool) {
	if v := f["cc"]; v != nil {
		switch fl.Stack {
		case StackNetstack:
			fl.CC, _ = d.oneOf(v, join(path, "cc"), "congestion control of netstack TCP", NetstackCC)
		case StackKernel:
			if dir := f["direction"]; dir != nil && dir.Value == "down" && !node {
				// The peer sends, to the kernel's receiver.
				fl.CC, _ = d.oneOf(v, join(path, "cc"), "congestion control of the peer's netstack, which sends a kernel flow down", NetstackCC)
				break
			}
			fl.CC, _ = d.kernelCC(v, join(path, "cc"))
		default: // an invalid stack, reported: no list to check against
			fl.CC, _ = d.text(v, join(path, "cc"))
		}
	}
	if v := f["sack"]; v != nil {
		if sack, ok := d.boolean(v, join(path, "sack")); ok {
			if !sack && fl.Stack == StackKernel {
				d.errorf(v, join(path, "sack"), "a kernel flow cannot turn SACK off: the kernel's SACK is the system-wide sysctl net.ipv4.tcp_sack, not a socket option")
			}
			fl.SACK = sack
		}
	}
	if v := f["send_buffer"]; v != nil {
		b, _ := d.size(v, join(path, "send_buffer"), 4096, 256<<20)
		fl.SendBuffer = int(b)
	}
	if v := f["receive_buffer"]; v != nil {
		b, _ := d.size(v, join(path, "receive_buffer"), 4096, 256<<20)
		fl.ReceiveBuffer = int(b)
	}
	if v := f["size"]; v != nil {
		fl.TCP.Size, _ = d.size(v, join(path, "size"), 1, 1<<40)
	}
	if f["size"] == nil && f["duration"] == nil {
		d.errorf(item, path, "a tcp flow needs a size or a duration")
	}
}

// kernelCC decodes the congestion control of a kernel flow: one the
// machine's kernel offers (Options.CongestionControls).
func (d *decoder) kernelCC(n *yaml.Node, path string) (string, bool) {
	if !d.scalar(n, path, "a congestion control") {
		return "", false
	}
	names, err := d.congestionControls()
	switch {
	case err != nil:
		d.errorf(n, path, "cannot check %s against the kernel's congestion controls: %v", quote(n.Value), err)
		return "", false
	case slices.Contains(names, n.Value):
		return n.Value, true
	}
	available := strings.Join(names, ", ")
	if available == "" {
		available = "none"
	}
	if s := suggest(n.Value, names); s != "" {
		d.errorf(n, path, "%s is not a congestion control of this machine's kernel; did you mean %q? (available: %s)", quote(n.Value), s, available)
	} else {
		d.errorf(n, path, "%s is not a congestion control of this machine's kernel (available: %s; loading its module adds one, as modprobe tcp_bbr does bbr)", quote(n.Value), available)
	}
	return "", false
}

// udpFlow decodes the keys of a udp flow. maxPayload bounds packet_size
// (it is valid when mtuOK): the MTU less the IP and UDP headers.
func (d *decoder) udpFlow(item *yaml.Node, f map[string]*yaml.Node, path string, fl *Flow, maxPayload int, mtuOK bool) {
	rate, interval := f["rate"], f["interval"]
	switch {
	case rate != nil && interval != nil:
		d.errorf(interval, join(path, "interval"), "give a rate or an interval, not both")
	case rate == nil && interval == nil:
		d.errorf(item, path, "a udp flow needs a rate or an interval")
	case rate != nil:
		fl.UDP.Rate, _ = d.bitrate(rate, join(path, "rate"))
		if fl.UDP.Rate == 0 && rate.Value == "unlimited" {
			d.errorf(rate, join(path, "rate"), "a udp flow needs a finite rate")
		}
	default:
		fl.UDP.Interval, _ = d.duration(interval, join(path, "interval"), true, maxDelay)
	}
	if v := f["packet_size"]; v != nil {
		hi := int64(65507)
		if mtuOK {
			hi = int64(maxPayload)
		}
		if s, ok := d.integer(v, join(path, "packet_size"), UDPHeaderSize, hi); ok {
			fl.UDP.PacketSize = int(s)
		}
	}
	if v := f["count"]; v != nil {
		fl.UDP.Count, _ = d.integer(v, join(path, "count"), 1, 1<<40)
	}
	if f["count"] == nil && f["duration"] == nil {
		d.errorf(item, path, "a udp flow needs a count or a duration")
	}
}
