package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
	"time"
)

// A toxic, as the API describes it: toxiproxy's fields and attributes.
// Its attributes are decoded strictly (an unknown or ill-typed one is a
// 400 naming it), then turned into what acts on the connections: keys of
// the path (pathSets) and the stream's own rules (streamRules).

// direction is a toxic's stream: upstream carries the client's bytes to
// the upstream server (the path's uplink), downstream the replies (its
// downlink).
type direction uint8

const (
	upstream direction = iota
	downstream
)

func (d direction) String() string { return [...]string{"upstream", "downstream"}[d] }

// link is the scenario's name of d's direction of the path.
func (d direction) link() string { return [...]string{"uplink", "downlink"}[d] }

func parseDirection(s string) (direction, bool) {
	switch strings.ToLower(s) {
	case "upstream":
		return upstream, true
	case "downstream":
		return downstream, true
	}
	return 0, false
}

// Toxic is one toxic of a proxy. Its fields are set under the proxy's
// lock; the API marshals a copy.
type Toxic struct {
	Name     string
	Type     string
	Stream   string // as the client wrote it (toxiproxy keeps it so)
	Toxicity float32
	dir      direction
	// ints are a toxiproxy type's attributes, every one of its type's
	// (absent ones 0, as toxiproxy shows them); raw, a netjam type's, as
	// given (a scenario key's mapping).
	ints map[string]int64
	raw  map[string]any
	// since is when the toxic was added or last changed: a timeout's
	// clock starts there for connections open then.
	since time.Time
}

// MarshalJSON writes the toxic as toxiproxy does.
func (t *Toxic) MarshalJSON() ([]byte, error) {
	var attrs any = t.raw
	if t.ints != nil {
		attrs = t.ints
	}
	if attrs == nil {
		attrs = map[string]any{}
	}
	return json.Marshal(struct {
		Attributes any     `json:"attributes"`
		Name       string  `json:"name"`
		Type       string  `json:"type"`
		Stream     string  `json:"stream"`
		Toxicity   float32 `json:"toxicity"`
	}{attrs, t.Name, t.Type, t.Stream, t.Toxicity})
}

func (t *Toxic) clone() *Toxic {
	c := *t
	if t.ints != nil {
		c.ints = make(map[string]int64, len(t.ints))
		for k, v := range t.ints {
			c.ints[k] = v
		}
	}
	if t.raw != nil {
		c.raw = make(map[string]any, len(t.raw))
		for k, v := range t.raw {
			c.raw[k] = v
		}
	}
	return &c
}

// attribute is one integer attribute of a toxiproxy toxic type.
type attribute struct {
	name string
	max  int64
	unit string
}

// The bounds of the integer attributes: an hour of delay, a TB/s of
// bandwidth, a GiB-sized slice, 2^62 bytes of data.
const (
	maxMillis = int64(time.Hour / time.Millisecond)
	maxMicros = int64(time.Hour / time.Microsecond)
	maxKBps   = int64(1e9)
	maxSize   = int64(1 << 30)
	maxBytes  = int64(1 << 62)
)

// toxiproxyTypes are toxiproxy's toxic types and their attributes.
var toxiproxyTypes = map[string][]attribute{
	"latency":    {{"latency", maxMillis, "milliseconds"}, {"jitter", maxMillis, "milliseconds"}},
	"bandwidth":  {{"rate", maxKBps, "KB/s"}},
	"slow_close": {{"delay", maxMillis, "milliseconds"}},
	"timeout":    {{"timeout", maxMillis, "milliseconds"}},
	"reset_peer": {{"timeout", maxMillis, "milliseconds"}},
	"slicer":     {{"average_size", maxSize, "bytes"}, {"size_variation", maxSize, "bytes"}, {"delay", maxMicros, "microseconds"}},
	"limit_data": {{"bytes", maxBytes, "bytes"}},
}

// netjamTypes are netjam's own toxic types: each is the scenario key of
// its name in the toxic's direction (link.uplink.loss, ...), its
// attributes that key's mapping.
var netjamTypes = []string{"corrupt", "delay", "duplicate", "loss", "queue", "rate", "reorder"}

// wifiType is netjam's Wi-Fi toxic: the path crosses an 802.11 cell, the
// proxy's client side its first station and the upstream's side behind
// its access point, as a scenario's wifi section puts a station's host
// (its attributes that section's keys). A cell carries both directions
// of the path, so its stream is downstream, the default, only.
const wifiType = "wifi"

// traceType is netjam's trace toxic: the direction's rate follows a
// trace whose content the toxic holds (its data attribute), as a
// scenario's rate: {trace_data: ...} does. netjam reads no file on an
// API client's word, so the content comes in the request.
const traceType = "trace"

// traceKeys are the attributes of a trace toxic: its content (data), and
// the keys of a rate that go with a trace, checked by the scenario.
var traceKeys = []string{"data", "trace_bytes", "packet_overhead", "cell_size", "cell_overhead"}

// maxTraceData bounds a trace toxic's content: some 40000 delivery
// opportunities (a minute of a 10 Mbit/s trace) of 6 bytes a line. A
// longer trace belongs in the scenario file (link.rate.trace).
const maxTraceData = 256 << 10

// streamTypes act on a TCP stream, not on packets: a UDP proxy refuses them.
var streamTypes = []string{"slow_close", "slicer", "limit_data", "reset_peer"}

// onStream reports whether t acts on its connections' streams only, not
// on their path: each connection draws it for itself.
func (t *Toxic) onStream() bool { return slices.Contains(streamTypes, t.Type) }

// typeNames lists every toxic type, for messages.
func typeNames() []string {
	var out []string
	for t := range toxiproxyTypes {
		out = append(out, t)
	}
	out = append(out, netjamTypes...)
	out = append(out, traceType, wifiType)
	sort.Strings(out)
	return out
}

// apiError is an error of the API: toxiproxy's status and netjam's
// message.
type apiError struct {
	status int
	msg    string
}

func (e *apiError) Error() string { return e.msg }

func errorf(status int, format string, args ...any) *apiError {
	return &apiError{status, fmt.Sprintf(format, args...)}
}

// decodeStrict decodes one JSON value from data into v.
func decodeJSON(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("more than one JSON value")
	}
	return nil
}

// toxicInput is the body of POST /proxies/{proxy}/toxics.
type toxicInput struct {
	Name       string          `json:"name"`
	Type       string          `json:"type"`
	Stream     *string         `json:"stream"`
	Toxicity   *float64        `json:"toxicity"`
	Attributes json.RawMessage `json:"attributes"`
}

// newToxic decodes a toxic from the API's body, with toxiproxy's defaults
// (downstream, toxicity 1, name TYPE_STREAM). udp refuses stream types.
func newToxic(body []byte, udp bool, now time.Time) (*Toxic, error) {
	var in toxicInput
	if err := decodeJSON(body, &in); err != nil {
		return nil, errorf(400, "bad request body: %v", err)
	}
	t := &Toxic{Name: in.Name, Type: in.Type, Stream: "downstream", Toxicity: 1, since: now}
	if in.Stream != nil {
		t.Stream = *in.Stream
	}
	d, ok := parseDirection(t.Stream)
	if !ok {
		return nil, errorf(400, "stream was invalid, can be either upstream or downstream (got %q)", t.Stream)
	}
	t.dir = d
	if t.Name == "" {
		t.Name = t.Type + "_" + t.Stream
	}
	if err := checkName("toxic", t.Name); err != nil {
		return nil, err
	}
	if in.Toxicity != nil {
		if err := setToxicity(t, *in.Toxicity); err != nil {
			return nil, err
		}
	}
	switch {
	case toxiproxyTypes[t.Type] != nil:
		t.ints = map[string]int64{}
		for _, a := range toxiproxyTypes[t.Type] {
			t.ints[a.name] = 0
		}
	case slices.Contains(netjamTypes, t.Type) || t.Type == traceType || t.Type == wifiType:
		t.raw = map[string]any{}
	case t.Type == "":
		return nil, errorf(400, "invalid toxic type: missing field type (one of %s)", strings.Join(typeNames(), ", "))
	default:
		return nil, errorf(400, "invalid toxic type %q (one of %s)", t.Type, strings.Join(typeNames(), ", "))
	}
	if t.Type == wifiType && t.dir != downstream {
		return nil, errorf(400, "toxic %s: a Wi-Fi cell carries both streams of the path (the client is its station, the upstream behind its access point): give stream downstream, the default, or none", t.Name)
	}
	if udp && slices.Contains(streamTypes, t.Type) {
		return nil, errorf(400, "toxic %s: %s acts on a TCP stream, and this proxy is udp", t.Name, t.Type)
	}
	if err := setAttributes(t, in.Attributes); err != nil {
		return nil, err
	}
	if err := checkTrace(t); err != nil {
		return nil, err
	}
	return t, nil
}

// checkTrace checks what the scenario does not of a trace toxic's
// attributes: their names, and that data, the trace's content, is there,
// is text and is not too long for a request. The content itself is
// checked by the scenario's parser of trace files (Server.check).
func checkTrace(t *Toxic) error {
	if t.Type != traceType {
		return nil
	}
	keys := make([]string, 0, len(t.raw))
	for k := range t.raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !slices.Contains(traceKeys, k) {
			return errorf(400, "toxic %s: trace has no attribute %q (its attributes: %s)", t.Name, k, strings.Join(traceKeys, ", "))
		}
	}
	data, ok := t.raw["data"].(string)
	switch {
	case t.raw["data"] == nil:
		return errorf(400, "toxic %s: trace: missing attribute data, the trace's content as a trace file has it (mahimahi's format: one delivery time in ms per line)", t.Name)
	case !ok:
		return errorf(400, "toxic %s: attribute data: expected the trace's content, a string (one delivery time in ms per line), got %v", t.Name, t.raw["data"])
	case len(data) > maxTraceData:
		return errorf(400, "toxic %s: attribute data: %d bytes, more than %d: give a longer trace in the scenario file (link.rate.trace)", t.Name, len(data), maxTraceData)
	}
	return nil
}

// traceRate is the direction's rate a trace toxic's attributes make: its
// data is the rate's trace_data.
func traceRate(attrs map[string]any) map[string]any {
	out := make(map[string]any, len(attrs))
	for k, v := range attrs {
		if k == "data" {
			k = "trace_data"
		}
		out[k] = v
	}
	return out
}

// maxName bounds the names of proxies and toxics.
const maxName = 256

// checkName refuses a name that a URL path could not carry back.
func checkName(what, name string) error {
	switch {
	case len(name) > maxName:
		return errorf(400, "%s name is %d bytes, more than %d", what, len(name), maxName)
	case strings.ContainsAny(name, "/?#%") || strings.ContainsFunc(name, func(r rune) bool { return r < ' ' || r == 0x7f }):
		return errorf(400, "%s name %q: a name is used in URLs; it may not hold /, ?, #, %% or control characters", what, name)
	}
	return nil
}

func setToxicity(t *Toxic, v float64) error {
	if math.IsNaN(v) || v < 0 || v > 1 {
		return errorf(400, "toxic %s: toxicity %v is out of range (expected 0 to 1, the probability that a connection has the toxic)", t.Name, v)
	}
	t.Toxicity = float32(v)
	return nil
}

// updateToxic applies the body of PATCH /proxies/{proxy}/toxics/{toxic}
// to a copy of t: attributes given replace those of t, the others stay,
// as toxiproxy does.
func updateToxic(t *Toxic, body []byte, now time.Time) (*Toxic, error) {
	var in struct {
		Attributes json.RawMessage `json:"attributes"`
		Toxicity   *float64        `json:"toxicity"`
	}
	if err := decodeJSON(body, &in); err != nil {
		return nil, errorf(400, "bad request body: %v", err)
	}
	c := t.clone()
	c.since = now
	if in.Toxicity != nil {
		if err := setToxicity(c, *in.Toxicity); err != nil {
			return nil, err
		}
	}
	if err := setAttributes(c, in.Attributes); err != nil {
		return nil, err
	}
	if err := checkTrace(c); err != nil {
		return nil, err
	}
	return c, nil
}

// setAttributes decodes attrs (absent, null, or an object) into t.
func setAttributes(t *Toxic, attrs json.RawMessage) error {
	if len(attrs) == 0 || string(attrs) == "null" {
		return nil
	}
	var m map[string]json.RawMessage
	if err := decodeJSON(attrs, &m); err != nil {
		return errorf(400, "bad request body: toxic %s: attributes: expected an object (%v)", t.Name, err)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if t.ints != nil {
		specs := toxiproxyTypes[t.Type]
		for _, k := range keys {
			i := slices.IndexFunc(specs, func(a attribute) bool { return a.name == k })
			if i < 0 {
				var names []string
				for _, a := range specs {
					names = append(names, a.name)
				}
				return errorf(400, "toxic %s: %s has no attribute %q (its attributes: %s)", t.Name, t.Type, k, strings.Join(names, ", "))
			}
			v, err := integer(m[k], specs[i])
			if err != nil {
				return errorf(400, "toxic %s: attribute %s: %v", t.Name, k, err)
			}
			t.ints[k] = v
		}
		return nil
	}
	for _, k := range keys {
		var v any
		if err := decodeJSON(m[k], &v); err != nil {
			return errorf(400, "bad request body: toxic %s: attribute %s: %v", t.Name, k, err)
		}
		if v == nil {
			delete(t.raw, k)
			continue
		}
		t.raw[k] = v
	}
	return nil
}

// integer decodes a whole number in a's range.
func integer(raw json.RawMessage, a attribute) (int64, error) {
	var n json.Number
	if err := decodeJSON(raw, &n); err != nil {
		return 0, fmt.Errorf("%s is not a number (expected %s, 0 to %d)", raw, a.unit, a.max)
	}
	f, err := n.Float64()
	if err != nil || f != math.Trunc(f) || f < 0 || f > float64(a.max) {
		return 0, fmt.Errorf("%s is not a whole number from 0 to %d (%s)", n, a.max, a.unit)
	}
	return int64(f), nil
}

// streamRule is what the toxics of one direction do to a connection's
// bytes there (toxiproxy's semantics, at the stream, not packets).
type streamRule struct {
	// slowClose delays passing on the end of the stream (slow_close; the
	// sum of several).
	slowClose time.Duration
	// slicer, when sliceSize > 0, writes the bytes in slices of
	// sliceSize ± sliceVariation with sliceDelay between them.
	sliceSize, sliceVariation int
	sliceDelay                time.Duration
	// limited: limit_data toxics end the connection once their bytes
	// went this way, each counting from when it began on the connection
	// (tcpConn.limits).
	limited bool
	// reset, when set, discards the direction's bytes and resets the
	// connection resetAfter after the first of them (reset_peer).
	reset      bool
	resetAfter time.Duration
	// timeout, when set, closes the connection timeoutAfter after the
	// toxic began for it (0: never); its packets are lost on the path.
	timeout      bool
	timeoutAfter time.Duration
	timeoutSince time.Time
}

// streamRules returns the rules of each direction for the toxics ts.
func streamRules(ts []*Toxic) [2]streamRule {
	var r [2]streamRule
	for _, t := range ts {
		s := &r[t.dir]
		switch t.Type {
		case "slow_close":
			s.slowClose += time.Duration(t.ints["delay"]) * time.Millisecond
		case "slicer":
			if t.ints["average_size"] > 0 {
				s.sliceSize, s.sliceVariation = int(t.ints["average_size"]), int(t.ints["size_variation"])
				s.sliceDelay = time.Duration(t.ints["delay"]) * time.Microsecond
			}
		case "limit_data":
			s.limited = true
		case "reset_peer":
			if !s.reset {
				s.reset, s.resetAfter = true, time.Duration(t.ints["timeout"])*time.Millisecond
			}
		case "timeout":
			d := time.Duration(t.ints["timeout"]) * time.Millisecond
			// The first to fire wins; 0 (never) only when it is the only one.
			if !s.timeout || d > 0 && (s.timeoutAfter == 0 || t.since.Add(d).Before(s.timeoutSince.Add(s.timeoutAfter))) {
				s.timeout, s.timeoutAfter, s.timeoutSince = true, d, t.since
			}
		}
	}
	return r
}

// The path keys toxics set, in each direction.
var pathKeys = []string{"delay", "rate", "loss", "queue", "reorder", "duplicate", "corrupt"}

// pathSets returns the path's keys for the toxics ts over the base
// scenario's link (base), as --set's KEY=VALUE, every key pathKeys name in
// both directions: a key no toxic sets takes the base's value again.
//
//   - latency adds its latency and jitter to the base's delay (several add up);
//   - bandwidth limits the rate to its KB/s of TCP payload (the least of several
//     and the base's rate);
//   - timeout loses every packet (loss 100%), whatever else sets the loss;
//   - a netjam type sets its key to its attributes, the last added winning,
//     and trace the rate (its data as the rate's trace_data), over a
//     bandwidth's.
func pathSets(base baseLink, ts []*Toxic) []string {
	var out []string
	for _, d := range []direction{upstream, downstream} {
		vals := map[string]string{}
		var lat, jit time.Duration
		var rate int64 // bytes per second
		blackhole := false
		for _, t := range ts {
			if t.dir != d {
				continue
			}
			switch t.Type {
			case "latency":
				lat += time.Duration(t.ints["latency"]) * time.Millisecond
				jit += time.Duration(t.ints["jitter"]) * time.Millisecond
			case "bandwidth":
				if r := t.ints["rate"] * 1000; r > 0 && (rate == 0 || r < rate) {
					rate = r
				}
			case "timeout":
				blackhole = true
			}
		}
		bd := base.dirs[d]
		if lat > 0 || jit > 0 {
			vals["delay"] = fmt.Sprintf("{time: %s, jitter: %s}", bd.delay+lat, bd.jitter+jit)
		}
		if rate > 0 {
			bps := uint64(rate) * 8
			if bd.bitrate > 0 && bd.bitrate < bps {
				bps = bd.bitrate
			}
			// The rate counts what TCP carries of full-sized segments,
			// as toxiproxy's counts the bytes it copies: the packet's
			// IPv4 and TCP headers (with timestamps) are not charged.
			vals["rate"] = fmt.Sprintf("{bitrate: %dbps, packet_overhead: -%d}", bps, headerBytes)
		}
		for _, t := range ts {
			if t.dir == d && t.raw != nil && t.Type != wifiType {
				key, attrs := t.Type, t.raw
				if t.Type == traceType {
					key, attrs = "rate", traceRate(t.raw)
				}
				// JSON is YAML: a trace's lines are "\n" in a
				// double-quoted string.
				b, _ := json.Marshal(attrs)
				vals[key] = string(b)
			}
		}
		if blackhole {
			vals["loss"] = "100%"
		}
		for _, k := range pathKeys {
			key := "link." + d.link() + "." + k
			v, ok := vals[k]
			if !ok {
				v = base.values[key]
			}
			if v == "" {
				v = "null"
			}
			out = append(out, key+"="+v)
		}
	}
	return out
}

// cellSet returns the path's Wi-Fi cell for the toxics ts over the base
// scenario, as --set's KEY=VALUE: the wifi section of ts's wifi toxic
// (one a proxy), its attributes with one station when they name none,
// else the base's cell, or none. A cell is built with its path: Bench.Set
// cannot change it, so it is a key of a new path only (newGroupLocked).
func cellSet(base baseLink, ts []*Toxic) string {
	for _, t := range ts {
		if t.Type != wifiType {
			continue
		}
		attrs := t.raw
		if attrs["stations"] == nil {
			attrs = maps.Clone(attrs)
			attrs["stations"] = []any{map[string]any{}}
		}
		b, _ := json.Marshal(attrs)
		return "wifi=" + string(b)
	}
	if v := base.values["wifi"]; v != "" {
		return "wifi=" + v
	}
	return "wifi=null"
}

// headerBytes is the bytes of IPv4 and TCP headers, with the timestamp
// option, in a full-sized segment; see pathSets.
const headerBytes = 20 + 20 + 12

// baseLink is what pathSets needs of the base scenario.
type baseLink struct {
	dirs [2]struct {
		delay, jitter time.Duration
		bitrate       uint64
	}
	// values are the base's own value of each key of pathKeys in each
	// direction (link.uplink.delay, ...), and of wifi, "" where it sets
	// none.
	values map[string]string
}
