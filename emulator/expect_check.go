package emulator

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/netjam/netjam/flows"
	"github.com/netjam/netjam/impair"
	"github.com/netjam/netjam/scenario"
	"github.com/netjam/netjam/summary"
)

// Validate checks the scenario file path, with the overrides sets, as
// netjam validate does: the file, its sweep (every run counted), and
// what CheckExpectations can tell. ok says what the file holds (ok (NAME,
// N runs; a sweep of M runs)); warnings are the file's own.
func Validate(path string, sets []string) (ok string, warnings []string, err error) {
	plan, err := scenario.Load(path, scenario.Options{Sets: sets})
	if err == nil {
		err = plan.CheckSweep()
	}
	if err == nil {
		err = CheckExpectations(plan)
	}
	if err != nil {
		return "", nil, err
	}
	sweep := ""
	if n, _ := plan.SweepRuns(); plan.Sweep != nil {
		sweep = fmt.Sprintf("; a sweep of %d %s", n, plural(n, "run")) // CheckSweep counted them
	}
	return fmt.Sprintf("ok (%s, %d %s%s)", plan.Name, len(plan.Runs), plural(len(plan.Runs), "run"), sweep), plan.Warnings, nil
}

// plural is s for n of them: run, runs.
func plural(n int, s string) string {
	if n == 1 {
		return s
	}
	return s + "s"
}

// CheckExpectations tells, before any run, what is wrong with the
// expectations of plan's runs that the figures of a run's summary
// (RunSummary, as summary.json writes it) can tell: a figure the
// summary does not have, a set of figures where one is wanted, a value
// whose unit is of another kind than the figure's (throughput > 1ms).
// Such an expectation used to be found only once the run was over, as
// "not checked". One error per problem, each expectation once however
// many variants share it. What only a run can tell stays for after it:
// whether the run has the figure at all (a Wi-Fi cell's, TUN mode's, a
// statistic without samples) and whether it holds.
func CheckExpectations(plan *scenario.Plan) error {
	var errs []error
	seen := map[string]bool{}
	for _, s := range plan.Runs {
		types := map[string]string{}
		for _, f := range s.Flows {
			types[f.Name] = f.Type
		}
		for i, e := range s.Expect {
			msg := figureProblem(e, types)
			if msg == "" || seen[e.Text+"\x00"+msg] {
				continue
			}
			seen[e.Text+"\x00"+msg] = true
			errs = append(errs, &scenario.Error{File: plan.Path, Path: fmt.Sprintf("expect[%d]", i), Msg: fmt.Sprintf("%q: %s", e.Text, msg)})
		}
	}
	return errors.Join(errs...)
}

// summaryType is what an expectation's path walks: a run of summary.json.
var summaryType = reflect.TypeFor[summary.RunSummary]()

// flowFigures are the keys of a flow's summary by the flow's type: a TCP
// flow's has no UDP figures, and the other way round.
var flowFigures = func() map[string]map[string]reflect.Type {
	ft := reflect.TypeFor[flows.FlowSummary]()
	own := map[string]reflect.Type{} // FlowSummary's own keys, which win
	for f := range ft.Fields() {
		if !f.Anonymous {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			own[name] = f.Type
		}
	}
	with := func(t reflect.Type) map[string]reflect.Type {
		out := jsonFields(t)
		maps.Copy(out, own)
		return out
	}
	return map[string]map[string]reflect.Type{
		flows.TypeTCP: with(reflect.TypeFor[flows.TCPSummary]()),
		flows.TypeUDP: with(reflect.TypeFor[flows.UDPSummary]()),
	}
}()

// figureProblem walks e's path through summaryType as check walks it
// through a run's summary, and says what check would find wrong whatever
// the run: "" when nothing. types are the flows' types by name.
func figureProblem(e scenario.Expectation, types map[string]string) string {
	dim := scenario.DimNumber
	var figure []string
	t := summaryType
	underDrops := false
	for i, seg := range e.Path {
		here := strings.Join(figure, ".")
		last := i == len(e.Path)-1
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch t.Kind() {
		case reflect.Struct:
			fields := jsonFields(t)
			if i == 2 && e.Path[0] == "flows" && flowFigures[types[e.Path[1]]] != nil {
				fields = flowFigures[types[e.Path[1]]]
			}
			key := withUnit(seg, func(k string) bool { _, ok := fields[k]; return ok })
			if key == "" {
				return noFigure(here, seg, sortedKeys(fields))
			}
			if d, _, ok := unitOf(key); ok {
				dim = d
			}
			figure = append(figure, key)
			t = fields[key]
			underDrops = key == "drops"
		case reflect.Slice, reflect.Array:
			// A list of named things, addressed by name: which names a
			// run has is the run's (the loader checks flows' and links').
			figure = append(figure, seg)
			t = t.Elem()
			underDrops = false
		case reflect.Map:
			if underDrops && last && !slices.Contains(impair.DropReasonNames(), seg) {
				return fmt.Sprintf("%s has no drop reason %q (reasons: %s)", here, seg, strings.Join(impair.DropReasonNames(), ", "))
			}
			figure = append(figure, seg)
			t = t.Elem()
			underDrops = false
		case reflect.Interface:
			return "" // any shape: the run's summary tells
		default:
			return fmt.Sprintf("%s is a single figure; it has no %q", here, seg)
		}
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	name := strings.Join(figure, ".")
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64, reflect.Interface:
	case reflect.Struct:
		keys := sortedKeys(jsonFields(t))
		if len(keys) == 0 {
			return fmt.Sprintf("%s is not a number", name)
		}
		return setOfFigures(name, keys)
	case reflect.Map:
		return setOfFigures(name, nil)
	default:
		return fmt.Sprintf("%s is not a number", name)
	}
	if figure[len(figure)-1] == "count" {
		dim = scenario.DimNumber // a statistic's sample count has no unit
	}
	if e.Dim != scenario.DimNumber && e.Dim != dim {
		return unitMismatch(name, dim, e)
	}
	return ""
}

// jsonFields returns the keys encoding/json writes for a struct type, with
// their types: the fields' JSON names, those of embedded structs
// promoted.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for f := range t.Fields() {
		if !f.IsExported() && !f.Anonymous {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := f.Type
		if f.Anonymous && name == "" {
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range jsonFields(ft) {
					if _, ok := out[k]; !ok {
						out[k] = v
					}
				}
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		out[name] = ft
	}
	return out
}

func sortedKeys(m map[string]reflect.Type) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
