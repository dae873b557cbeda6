package summary

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/schema.txt from the types")

// schemaFile is summary.json's fields as the types write them, one line
// each: its path (runs[].links[].drops.* for a map's values) and its JSON
// type, in the order encoding/json writes them.
const schemaFile = "testdata/schema.txt"

const schemaHeader = `# summary.json's fields, as encoding/json writes a Summary whose every field
# is set: a field's path (runs[] an array's items, .* a map's values) and
# its JSON type, in the file's order. Scripts, older reports and sweeps read
# these names: a change here is a change of the file format. When it is
# meant: go test ./summary -run TestSchema -update
`

// TestSchema pins summary.json's field names and types: renaming,
// removing, moving or retyping a field of Summary (or of a type it holds,
// in flows, impair, wifi, stats, hostcfg or topology) fails it, adding one
// too, until testdata/schema.txt says so.
func TestSchema(t *testing.T) {
	got, err := schema(reflect.TypeFor[Summary]())
	if err != nil {
		t.Fatal(err)
	}
	text := schemaHeader + strings.Join(got, "\n") + "\n"
	if *update {
		if err := os.WriteFile(schemaFile, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	b, err := os.ReadFile(schemaFile)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) == text {
		return
	}
	want := strings.Split(strings.TrimSuffix(strings.TrimPrefix(string(b), schemaHeader), "\n"), "\n")
	gone, added := difference(want, got), difference(got, want)
	t.Errorf("summary.json's fields differ from %s\nno longer written:\n\t%s\nnew:\n\t%s\n(the order may differ too). A change of the file format? Then: go test ./summary -run TestSchema -update",
		schemaFile, strings.Join(gone, "\n\t"), strings.Join(added, "\n\t"))
}

// TestSchemaSeesRenames checks the check: a type like Summary's with one
// JSON name changed gives another schema.
func TestSchemaSeesRenames(t *testing.T) {
	type run struct {
		Variant string `json:"variant"`
	}
	type renamed struct {
		Variant string `json:"variant_name"`
	}
	a, errA := schema(reflect.TypeFor[struct {
		Runs []run `json:"runs"`
	}]())
	b, errB := schema(reflect.TypeFor[struct {
		Runs []renamed `json:"runs"`
	}]())
	if err := errors.Join(errA, errB); err != nil {
		t.Fatal(err)
	}
	if want := []string{"runs[].variant string"}; !reflect.DeepEqual(a, want) {
		t.Errorf("schema %q, want %q", a, want)
	}
	if reflect.DeepEqual(a, b) {
		t.Errorf("a renamed field gives the same schema %q", a)
	}
}

// schema lists the fields encoding/json writes of a value of type t whose
// every field is set: the encoder itself decides names, embedding and
// omission, so the list is what the file holds.
func schema(t reflect.Type) ([]string, error) {
	v := reflect.New(t).Elem()
	fill(v, map[reflect.Type]bool{})
	b, err := json.Marshal(v.Interface())
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var out []string
	if err := walk(dec, "", &out); err != nil {
		return nil, err
	}
	return out, nil
}

// fill sets every field of v that encoding/json writes to a value that is
// not zero, so that no omitempty leaves it out: a pointer to a filled
// value, a slice of one filled item, a map of one (key "*"). A type met
// again inside itself is left zero, which ends a recursive type.
func fill(v reflect.Value, seen map[reflect.Type]bool) {
	switch v.Kind() {
	case reflect.Pointer:
		if seen[v.Type().Elem()] {
			return
		}
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), seen)
	case reflect.Struct:
		t := v.Type()
		if seen[t] {
			return
		}
		seen[t] = true
		defer delete(seen, t)
		for i := range t.NumField() {
			if f := v.Field(i); f.CanSet() && t.Field(i).Tag.Get("json") != "-" {
				fill(f, seen)
			}
		}
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fill(s.Index(0), seen)
		v.Set(s)
	case reflect.Map:
		if v.Type().Key().Kind() != reflect.String {
			return
		}
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		k.SetString("*")
		fill(e, seen)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.String:
		v.SetString("s")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(1)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1.5)
	}
}

// walk reads one JSON value from dec and appends a line per leaf under
// path: "path type".
func walk(dec *json.Decoder, path string, out *[]string) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch tok := tok.(type) {
	case json.Delim:
		return walkIn(dec, tok, path, out)
	case string:
		*out = append(*out, path+" string")
	case json.Number:
		*out = append(*out, path+" number")
	case bool:
		*out = append(*out, path+" bool")
	case nil:
		*out = append(*out, path+" null")
	default:
		return fmt.Errorf("%s: unexpected %v", path, tok)
	}
	return nil
}

// walkIn walks an object's members or an array's items, open the
// delimiter read, through its closing one.
func walkIn(dec *json.Decoder, open json.Delim, path string, out *[]string) error {
	for dec.More() {
		sub := path + "[]"
		if open == '{' {
			key, err := dec.Token()
			if err != nil {
				return err
			}
			sub = strings.TrimPrefix(path+"."+key.(string), ".")
		}
		if err := walk(dec, sub, out); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil && err != io.EOF {
		return err
	}
	return nil
}

// difference is the lines of a that b lacks.
func difference(a, b []string) []string {
	in := make(map[string]bool, len(b))
	for _, l := range b {
		in[l] = true
	}
	var out []string
	for _, l := range a {
		if !in[l] {
			out = append(out, l)
		}
	}
	return out
}
