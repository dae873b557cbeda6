package scenario

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/netjam/netjam/impair"
	"github.com/netjam/netjam/wifi"
)

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
		if s.path == "timeline[]" {
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
