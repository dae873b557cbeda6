package sweep

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/netjam/netjam/scenario"
)

// Overrides are the command line's changes to a scenario's sweep.
type Overrides struct {
	// Grid are --grid's KEY=V1,V2,...: each replaces the file's values of
	// KEY, or adds KEY to the grid.
	Grid []string
	// Seeds is --seeds N, seeds 1 to N in place of the file's; nil when
	// not given.
	Seeds *int
	// Sets are --set's KEY=VALUE, applied to every run: a swept key may
	// not be among them.
	Sets []string
}

// Runs applies o to the sweep of plan (a scenario loaded with o.Sets),
// which is then the sweep as run, checks every combination, and lists the
// sweep's runs in its order: a point's variants, each with the point's
// seeds. An invalid point stops the sweep before anything runs. Every
// error is the user's: a bad --grid, --seeds or --set, or a point whose
// values the scenario refuses.
func Runs(plan *scenario.Plan, o Overrides) ([]Run, error) {
	sw, err := withOverrides(plan, o)
	if err != nil {
		return nil, err
	}
	plan.Sweep = sw
	if err := plan.CheckSweep(); err != nil {
		return nil, err
	}
	runs := list(plan)
	nameFolders(runs)
	return runs, nil
}

// withOverrides returns plan's sweep with o's --grid and --seeds applied,
// checking that o's --set names no swept key.
func withOverrides(plan *scenario.Plan, o Overrides) (*scenario.Sweep, error) {
	sw := plan.Sweep
	if sw == nil {
		sw = &scenario.Sweep{Seeds: []uint64{1}}
	}
	grid, err := scenario.ParseGrid(o.Grid)
	if err != nil {
		return nil, err
	}
	for _, a := range grid {
		if i := slices.IndexFunc(sw.Axes, func(b scenario.Axis) bool { return b.Key == a.Key }); i >= 0 {
			sw.Axes[i] = a
		} else {
			sw.Axes = append(sw.Axes, a)
		}
	}
	if o.Seeds != nil {
		if sw.Seeds, err = scenario.SeedList(*o.Seeds); err != nil {
			return nil, err
		}
	}
	if len(sw.Axes) == 0 {
		return nil, fmt.Errorf("%s has no sweep: give it a sweep key or use --grid KEY=V1,V2", plan.Path)
	}
	for _, s := range o.Sets {
		key, _, _ := strings.Cut(s, "=")
		for _, a := range sw.Axes {
			if strings.TrimSpace(key) == a.Key {
				return nil, fmt.Errorf("--set %s: the key is swept; sweep it over one value with --grid %s", key, s)
			}
		}
	}
	return sw, nil
}

// list lists the runs of plan's sweep, each named from its parameters.
// Every point has the plan's variants: CheckSweep resolved each
// combination already, and a point's seed changes no value. (Resolving
// every point again here took 17 s and 148 MB for 100000 runs.)
func list(plan *scenario.Plan) []Run {
	sw := plan.Sweep
	labels := axisLabels(sw.Axes)
	var runs []Run
	for i := range sw.Len() {
		pt := sw.Point(i)
		params := map[string]string{}
		var name []string
		for j, a := range sw.Axes {
			params[a.Key] = pt.Values[j]
			name = append(name, labels[j]+"="+fileValue(pt.Values[j]))
		}
		for v, s := range plan.Runs {
			id := slices.Clone(name)
			if s.Variant != "" {
				id = append(id, "variant="+s.Variant)
			}
			id = append(id, "seed="+strconv.FormatUint(pt.Seed, 10))
			runs = append(runs, Run{Index: len(runs), ID: strings.Join(id, ","), Params: params,
				Seed: pt.Seed, Variant: s.Variant, Scenario: plan.Name, point: pt, variant: v})
		}
	}
	return runs
}

// nameFolders fits each run's ID, its folder's name, into a file name, and
// tells apart two that read the same.
func nameFolders(runs []Run) {
	seen := map[string]bool{}
	for i := range runs {
		runs[i].ID = fitName(runs[i].ID)
		if seen[runs[i].ID] {
			runs[i].ID += ",run=" + strconv.Itoa(runs[i].Index) // two values that read the same in a file name
		}
		seen[runs[i].ID] = true
	}
}

// MaxRunName bounds a run's folder name, below the 255 bytes a file name
// may have on Linux, with room for the ",run=N" of two equal names.
const MaxRunName = 200

// fitName returns id, a run's folder name, whole when it fits
// MaxRunName, else its head and a hash of the whole (the same for the
// same id, so that a sweep run again finds its runs' folders); its
// parameters are whole in sweep-run.json and sweep.csv.
func fitName(id string) string {
	if len(id) <= MaxRunName {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	head := id[:MaxRunName-17]
	for !utf8.ValidString(head) {
		head = head[:len(head)-1]
	}
	return head + "~" + hex.EncodeToString(sum[:8])
}

// axisLabels names each axis in run folders by the last part of its key,
// or more of it where two axes would read the same (flows.a.cc, flows.b.cc).
func axisLabels(axes []scenario.Axis) []string {
	labels := make([]string, len(axes))
	for depth := 1; ; depth++ {
		count := map[string]int{}
		for i, a := range axes {
			segs := strings.Split(a.Key, ".")
			labels[i] = strings.Join(segs[max(0, len(segs)-depth):], ".")
			count[labels[i]]++
		}
		unique := true
		for _, n := range count {
			unique = unique && n == 1
		}
		if unique {
			return labels
		}
	}
}

// unsafeInName are the characters a value loses in a folder name.
var unsafeInName = regexp.MustCompile(`[^A-Za-z0-9.+-]+`)

// fileValue writes a swept value for a folder name: 1% is 1pct,
// {discipline: fq_codel} is discipline_fq_codel.
func fileValue(v string) string {
	v = strings.ReplaceAll(v, "%", "pct")
	v = strings.Trim(unsafeInName.ReplaceAllString(v, "_"), "_")
	if v == "" {
		v = "_"
	}
	return v
}

// PlanOf is what sweep-plan.json says of plan's sweep (as Runs left it),
// of total runs, run as shard.
func PlanOf(plan *scenario.Plan, total int, shard Shard) Plan {
	sp := Plan{Scenario: plan.Name, Seeds: plan.Sweep.Seeds, Runs: total, Shard: shard.Name(), Batch: shard.Batch}
	for _, a := range plan.Sweep.Axes {
		sp.Axes = append(sp.Axes, Axis{Key: a.Key, Values: a.Values})
	}
	for _, s := range plan.Runs {
		if s.Variant != "" {
			sp.Variants = append(sp.Variants, s.Variant)
		}
	}
	return sp
}
