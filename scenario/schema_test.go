package scenario

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

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
	want := impair.Config{
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
// to that type, with the fields no key fills and why.
var schemaTypes = map[string]struct {
	typ     reflect.Type
	unkeyed map[string]string
}{
	"": {reflect.TypeFor[Scenario](), map[string]string{"Variant": "the name of the variant the run is"}},
	"link.uplink": {reflect.TypeFor[impair.Config](), map[string]string{
		"Name": "the emulator's", "Seed": "the scenario's seed, given by the emulator",
		"InflightBytes": "impair's default", "InputLimit": "impair's default"}},
	"link.downlink":   {reflect.TypeFor[impair.Config](), nil},
	"capture":         {reflect.TypeFor[Capture](), nil},
	"tun":             {reflect.TypeFor[TUN](), nil},
	"tun.forward[]":   {reflect.TypeFor[Forward](), nil},
	"tun.transparent": {reflect.TypeFor[Transparent](), nil},
	"wifi": {reflect.TypeFor[wifi.Config](), map[string]string{
		"Seed": "the scenario's seed, given by the emulator", "InputLimit": "wifi's default"}},
	"wifi.stations[]": {reflect.TypeFor[wifi.StationConfig](), nil},
	"flows[]":         {reflect.TypeFor[Flow](), nil},
	"delay":           {reflect.TypeFor[impair.DelayConfig](), nil},
	"loss":            {reflect.TypeFor[impair.LossConfig](), nil},
	"duplicate":       {reflect.TypeFor[impair.Chance](), nil},
	"corrupt":         {reflect.TypeFor[impair.Chance](), nil},
	"reorder":         {reflect.TypeFor[impair.ReorderConfig](), nil},
	"rate":            {reflect.TypeFor[impair.RateConfig](), nil},
	"slot":            {reflect.TypeFor[impair.SlotConfig](), nil},
	"queue":           {reflect.TypeFor[impair.QueueConfig](), nil},
	"sweep":           {reflect.TypeFor[Sweep](), nil},
}

// TestSchemaCoversTypes fails when the key table and the types drift
// apart: a field that no key fills (and is not said to be filled
// otherwise), or a key naming a field that is not there.
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
				top, _, _ := strings.Cut(f, ".")
				filled[top] = true
			}
		}
		for i := range st.typ.NumField() {
			f := st.typ.Field(i)
			if !f.IsExported() || filled[f.Name] {
				continue
			}
			if _, ok := st.unkeyed[f.Name]; !ok {
				t.Errorf("%s: no key fills %v.%s", s.path, st.typ, f.Name)
			}
		}
	}
	for path := range schemaTypes {
		if !slices.ContainsFunc(schema, func(s section) bool { return s.path == path }) {
			t.Errorf("schemaTypes has %q, which the schema does not", path)
		}
	}
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
