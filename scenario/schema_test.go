package scenario

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/netjam/netjam/hostcfg"
	"github.com/netjam/netjam/impair"
	"github.com/netjam/netjam/wifi"
)

// TestLinkDecodesIntoImpairConfig decodes every direction key into the
// field of impair.Config it sets: there is no copy between the two.
func TestLinkDecodesIntoImpairConfig(t *testing.T) {
	p, err := parse(`
link:
  delay: {time: 40ms, jitter: 4ms, distribution: pareto, correlation: 10%, allow_reorder: true}
  loss: {model: gemodel, p: 1%, r: 20%, 1-h: 90%, 1-k: 0.1%}
  duplicate: {p: 1%, correlation: 5%}
  corrupt: 0.5%
  reorder: {p: 2%, gap: 3}
  rate: {bitrate: 12Mbps, packet_overhead: 14, cell_size: 48, cell_overhead: 5}
  slot: {min: 1ms, max: 2ms, packets: 8, bytes: 12000}
  queue: {limit: 300, bytes: 400KB, discipline: pie, ecn: true, target: 20ms, tupdate: 30ms, alpha: 0.25, beta: 2, max_burst: 100ms}
  inflight_limit: 5000
`)
	if err != nil {
		t.Fatal(err)
	}
	want := fullDirection()
	for _, got := range []impair.Config{p.Runs[0].Uplink, p.Runs[0].Downlink} {
		if got != want {
			t.Errorf("got  %+v\nwant %+v", got, want)
		}
		if err := got.Validate(); err != nil {
			t.Error(err)
		}
	}
}

// schemaTypes maps each section of the schema that decodes into one type
// to that type, with the fields no key fills and why (a field of a field
// by its dotted path). part marks a section that fills part of its type
// only, the rest being its parent section's: its keys are checked to name
// fields of the type, and no more.
var schemaTypes = map[string]struct {
	typ     reflect.Type
	unkeyed map[string]string
	part    bool
}{
	"": {typ: reflect.TypeFor[Scenario](), unkeyed: map[string]string{"Variant": "the name of the variant the run is"}},
	"link.uplink": {typ: reflect.TypeFor[impair.Config](), unkeyed: map[string]string{
		"Name": "the emulator's", "Seed": "the scenario's seed, given by the emulator",
		"InflightBytes": "impair's default", "InputLimit": "impair's default"}},
	"link.downlink": {typ: reflect.TypeFor[impair.Config]()},
	"capture": {typ: reflect.TypeFor[Capture](), unkeyed: map[string]string{
		"Options.LinkType": "capture's default, raw IP", "Options.Microseconds": "capture's default, nanoseconds",
		"Options.BufferSize": "capture's default", "Options.SortInstants": "the emulator's (on a virtual clock)"}},
	"tun": {typ: reflect.TypeFor[TUN](), unkeyed: map[string]string{
		"Relay.Budget": "the relay's default", "Relay.DialTimeout": "the relay's default",
		"Relay.Dial": "the emulator's (tests dial in a namespace of their own)", "Relay.Log": "the emulator's",
		"Relay.Busy": "the emulator's (the downlink's input is full)"}},
	"tun.forward[]":   {typ: reflect.TypeFor[hostcfg.Forward](), unkeyed: map[string]string{"Addrs": "the emulator's (its path's peer address, from path)"}},
	"tun.transparent": {typ: reflect.TypeFor[hostcfg.RelayConfig](), part: true},
	"wifi": {typ: reflect.TypeFor[wifi.Config](), unkeyed: map[string]string{
		"Seed": "the scenario's seed, given by the emulator", "InputLimit": "wifi's default"}},
	"wifi.stations[]": {typ: reflect.TypeFor[wifi.StationConfig]()},
	"flows[]": {typ: reflect.TypeFor[Flow](), unkeyed: map[string]string{
		"TCP.InfoInterval": "flows' default", "TCP.Connect": "measured by the emulator",
		"TCP.OnStall": "the emulator's (it logs a stall)", "UDP.FlowID": "the emulator's (the flow's number)"}},
	"delay":     {typ: reflect.TypeFor[impair.DelayConfig]()},
	"loss":      {typ: reflect.TypeFor[impair.LossConfig]()},
	"duplicate": {typ: reflect.TypeFor[impair.Chance]()},
	"corrupt":   {typ: reflect.TypeFor[impair.Chance]()},
	"reorder":   {typ: reflect.TypeFor[impair.ReorderConfig]()},
	"rate":      {typ: reflect.TypeFor[impair.RateConfig]()},
	"slot":      {typ: reflect.TypeFor[impair.SlotConfig]()},
	"queue":     {typ: reflect.TypeFor[impair.QueueConfig]()},
	"sweep":     {typ: reflect.TypeFor[Sweep]()},
}

// TestSchemaCoversTypes fails when the key table and the types drift
// apart: a field that no key fills (and is not said to be filled
// otherwise), or a key naming a field that is not there. A field some
// keys fill part of (tun's Device, a flow's TCP) is looked into: each of
// its own fields must be filled or said not to be.
func TestSchemaCoversTypes(t *testing.T) {
	if d := schemaTypes["link.downlink"]; d.unkeyed == nil {
		d.unkeyed = schemaTypes["link.uplink"].unkeyed
		schemaTypes["link.downlink"] = d
	}
	for _, s := range schema {
		st, ok := schemaTypes[s.path]
		if !ok {
			continue
		}
		filled := map[string]bool{}
		for _, k := range s.keys {
			if k.field == "" {
				continue
			}
			for _, f := range strings.Split(k.field, ", ") {
				if !hasField(st.typ, f) {
					t.Errorf("%s: key %s fills %s, which %v does not have", s.path, k.name, f, st.typ)
				}
				filled[f] = true
			}
		}
		if !st.part {
			for _, f := range unfilled(st.typ, "", filled, st.unkeyed) {
				t.Errorf("%s: no key fills %v.%s", s.path, st.typ, f)
			}
		}
	}
	for path := range schemaTypes {
		if !slices.ContainsFunc(schema, func(s section) bool { return s.path == path }) {
			t.Errorf("schemaTypes has %q, which the schema does not", path)
		}
	}
}

// unfilled returns the dotted paths of the exported fields of struct t
// (under prefix) that no key fills and unkeyed does not list; a field
// that keys fill part of is looked into.
func unfilled(t reflect.Type, prefix string, filled map[string]bool, unkeyed map[string]string) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		path := prefix + f.Name
		if _, ok := unkeyed[path]; !f.IsExported() || filled[path] || ok {
			continue
		}
		partly := false
		for p := range filled {
			partly = partly || strings.HasPrefix(p, path+".")
		}
		if partly && f.Type.Kind() == reflect.Struct {
			out = append(out, unfilled(f.Type, path+".", filled, unkeyed)...)
			continue
		}
		out = append(out, path)
	}
	return out
}

// hasField reports whether t (a struct, or a pointer to one) has the
// field at dotted path.
func hasField(t reflect.Type, path string) bool {
	for _, name := range strings.Split(path, ".") {
		if t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct {
			return false
		}
		f, ok := t.FieldByName(name)
		if !ok {
			return false
		}
		t = f.Type
	}
	return true
}

// TestSchemaKeysDocumented fails when a key of the table is missing from
// the reference (docs/scenario.md; docs/timeline.md for the timeline's).
func TestSchemaKeysDocumented(t *testing.T) {
	read := func(name string) string {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	ref, timeline := read("../docs/scenario.md"), read("../docs/timeline.md")
	for _, s := range schema {
		doc := ref
		if strings.HasPrefix(s.path, "timeline[]") {
			doc = timeline
		}
		for _, k := range s.keys {
			// `key` in the text, or key: in a sample.
			asKey := regexp.MustCompile(`(^|[\s{,])` + regexp.QuoteMeta(k.name) + `:`)
			if !strings.Contains(doc, "`"+k.name+"`") && !asKey.MatchString(doc) {
				t.Errorf("the reference does not document %s", join(s.path, k.name))
			}
		}
	}
}

// fullDirection is a direction with every key of the file set (the
// schema's test file writes each of them): what it decodes into.
func fullDirection() impair.Config {
	return impair.Config{
		Delay:     impair.DelayConfig{Time: 40 * time.Millisecond, Jitter: 4 * time.Millisecond, Distribution: impair.Pareto, Correlation: 0.1, AllowReorder: true},
		Loss:      impair.LossConfig{Model: impair.LossGE, P: 0.01, R: 0.2, OneMinusH: 0.9, OneMinusK: 0.001},
		Duplicate: impair.Chance{P: 0.01, Correlation: 0.05},
		Corrupt:   impair.Chance{P: 0.005},
		Reorder:   impair.ReorderConfig{P: 0.02, Gap: 3},
		Rate:      impair.RateConfig{Bitrate: 12e6, PacketOverhead: 14, CellSize: 48, CellOverhead: 5},
		Slot:      impair.SlotConfig{Min: time.Millisecond, Max: 2 * time.Millisecond, Packets: 8, Bytes: 12000},
		Queue: impair.QueueConfig{Discipline: impair.PIE, LimitPackets: 300, LimitBytes: 400000, ECN: true,
			Target: 20 * time.Millisecond, TUpdate: 30 * time.Millisecond, Alpha: 0.25, Beta: 2, MaxBurst: 100 * time.Millisecond},
		InflightLimit: 5000,
	}
}
