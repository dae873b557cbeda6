package report

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/netjam/netjam/flows"
	"github.com/netjam/netjam/outdir"
	"github.com/netjam/netjam/summary"
)

// The files of a run's output folder this package reads.
const (
	SummaryFile    = "summary.json"
	TimeseriesFile = "timeseries.csv"
)

// ErrNotRun is wrapped by the errors of Plot and HTML when a folder lacks
// summary.json or timeseries.csv, so that callers can tell "this is not a
// run's output folder" (a usage error) from a failure to draw.
var ErrNotRun = errors.New("not a netjam run folder")

// The kinds of timeseries.csv rows that the figures draw. They are the
// file format written by packages flows and emulator, repeated here so
// that report reads a folder without importing the emulator.
const (
	kindThroughput = "throughput_bps" // flow: payload bit/s over the interval
	kindCwnd       = "cwnd"           // TCP flow: congestion window, segments
	kindSRTT       = "srtt_ms"        // TCP flow: smoothed RTT, ms
	kindDelay      = "delay_ms"       // UDP flow: mean one-way delay of the interval, ms
	kindLinkRate   = "link_bps"       // direction: IP bit/s out over the interval
	kindCapacity   = "capacity_bps"   // trace-driven direction: bit/s its opportunities offered
	kindDrops      = "drops"          // direction: packets dropped in the interval
	kindQueue      = "queue_packets"  // direction: bottleneck backlog, packets
	kindSojourn    = "sojourn_ms"     // direction: mean queue sojourn of the interval, ms
)

// The report reads summary.json into package summary's types, the ones
// the emulator writes it from. Decoding is lenient as encoding/json's is:
// fields the report does not know are ignored, so an older report reads a
// newer run, and fields a file lacks are zero.

// tcpOf is a flow's TCP figures; zero for a UDP flow (or a TCP one whose
// summary.json lists none), as they read in the file.
func tcpOf(f flows.FlowSummary) flows.TCPSummary {
	if f.TCPSummary == nil {
		return flows.TCPSummary{}
	}
	return *f.TCPSummary
}

// udpOf is a flow's UDP figures; zero for a TCP flow.
func udpOf(f flows.FlowSummary) flows.UDPSummary {
	if f.UDPSummary == nil {
		return flows.UDPSummary{}
	}
	return *f.UDPSummary
}

// dropOrder is the order in which drop reasons are listed, the emulator's
// (impair.DropReason). Reasons not listed here follow, sorted by name.
var dropOrder = []string{"loss", "burst", "queue", "aqm", "inflight", "input", "flushed"}

// sortedDrops returns m's reasons with a count, in dropOrder.
func sortedDrops(m map[string]uint64) []string {
	var out []string
	known := map[string]bool{}
	for _, r := range dropOrder {
		known[r] = true
		if m[r] > 0 {
			out = append(out, r)
		}
	}
	var extra []string
	for r, n := range m {
		if !known[r] && n > 0 {
			extra = append(extra, r)
		}
	}
	sort.Strings(extra)
	return append(out, extra...)
}

// point is one sample of a time series: t seconds since the run's start.
type point struct{ t, v float64 }

// runSeries is the time series of one run: for each kind, each name's
// points in time order, and the names in order of first appearance.
type runSeries struct {
	variant string
	kinds   map[string]*kindSeries
}

// kindSeries is one kind's series, by name.
type kindSeries struct {
	names []string
	pts   map[string][]point
	th    map[string]*thinner // while the file is read
}

// maxPoints is how many points of one series the report keeps: a figure is
// a thousand pixels wide, and a week sampled every millisecond must not
// take the memory of its 600 million rows.
const maxPoints = 1 << 13

// thinner keeps a series that is read point by point within 2*maxPoints
// points: when it has that many it merges them in pairs, and from then on
// merges each run of stride points as it reads them. A merged point is at
// the mean time of its points, with their mean value, or their sum for
// the kinds that count events per interval (drops). Series of one run
// sampled at the same instants are merged at the same instants.
type thinner struct {
	pts    []point
	sum    bool
	stride int
	acc    point // the sums of the points read since the last one kept
	n      int
}

func newThinner(kind string) *thinner { return &thinner{sum: kind == kindDrops, stride: 1} }

func (th *thinner) add(p point) {
	th.acc.t += p.t
	th.acc.v += p.v
	if th.n++; th.n < th.stride {
		return
	}
	th.keep()
	if len(th.pts) == 2*maxPoints {
		for i := range maxPoints {
			a, b := th.pts[2*i], th.pts[2*i+1]
			th.pts[i] = th.merge(point{a.t + b.t, a.v + b.v}, 2)
		}
		th.pts = th.pts[:maxPoints]
		th.stride *= 2
	}
}

// keep appends the point the sums since the last one stand for.
func (th *thinner) keep() {
	th.pts = append(th.pts, th.merge(th.acc, th.n))
	th.acc, th.n = point{}, 0
}

// merge is the point standing for n points whose sums are in p.
func (th *thinner) merge(p point, n int) point {
	p.t /= float64(n)
	if !th.sum {
		p.v /= float64(n)
	}
	return p
}

// points returns the series read, ending with what the last stride read.
func (th *thinner) points() []point {
	if th.n > 0 {
		th.keep()
	}
	return th.pts
}

// get returns the points of kind for name, or nil.
func (r *runSeries) get(kind, name string) []point {
	if k := r.kinds[kind]; k != nil {
		return k.pts[name]
	}
	return nil
}

// names returns the names that have a series of kind, in the order they
// first appear in the file.
func (r *runSeries) names(kind string) []string {
	if k := r.kinds[kind]; k != nil {
		return k.names
	}
	return nil
}

// run is what the report knows of one run: its summary and its series.
// Either may be empty (a run with no rows, or rows of a variant the
// summary does not list).
type run struct {
	info   summary.RunSummary
	series *runSeries
}

// title names the run in panel titles and table rows.
func (r *run) title() string {
	if r.info.Variant == "" {
		return "-"
	}
	return r.info.Variant
}

// folder is a loaded run output folder.
type folder struct {
	sum       summary.Summary
	runs      []*run
	skipped   []summary.RunSummary // runs that did not happen
	scenarios []scenarioFile
}

// scenarioFile is one scenario*.yaml of the folder: the scenario as run.
type scenarioFile struct {
	Name string
	Text string
}

// load reads the summary.json, timeseries.csv and scenario*.yaml files
// of the folder d.
func load(d *outdir.Dir) (*folder, error) {
	f := &folder{}
	b, err := d.ReadFileMax(SummaryFile, maxSummarySize)
	if err != nil {
		return nil, missing(d.Path(), SummaryFile, err)
	}
	if err := json.Unmarshal(b, &f.sum); err != nil {
		return nil, fmt.Errorf("%s: %w", d.Join(SummaryFile), err)
	}
	csvFile, err := d.Open(TimeseriesFile)
	if err != nil {
		return nil, missing(d.Path(), TimeseriesFile, err)
	}
	defer csvFile.Close()
	series, order, err := readSeries(csvFile)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", d.Join(TimeseriesFile), err)
	}
	// Runs in the summary's order; series of variants the summary lacks
	// (a summary written by an interrupted run, say) after them.
	seen := map[string]bool{}
	for _, ri := range f.sum.Runs {
		if ri.Skipped != "" {
			f.skipped = append(f.skipped, ri)
			continue
		}
		s := series[ri.Variant]
		if s == nil {
			s = &runSeries{variant: ri.Variant, kinds: map[string]*kindSeries{}}
		}
		seen[ri.Variant] = true
		f.runs = append(f.runs, &run{info: ri, series: s})
	}
	for _, v := range order {
		if !seen[v] {
			f.runs = append(f.runs, &run{info: summary.RunSummary{Variant: v}, series: series[v]})
		}
	}
	f.scenarios, err = readScenarios(d, f.sum.Runs)
	if err != nil {
		return nil, err
	}
	return f, nil
}

// Bounds on files of a run folder that the report reads whole (readFile).
// summary.json holds a run's figures, per flow, link and host, and its
// timeline's events: some KB, some MB for thousands of flows or events.
// A scenario*.yaml is the scenario as run, from a file of at most 1 MiB.
const (
	maxSummarySize      = 64 << 20
	maxScenarioCopySize = 16 << 20
)

// missing wraps the error of a file that could not be opened with
// ErrNotRun when the file does not exist.
func missing(dir, name string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: %s has no %s (expected the output folder of netjam run)", ErrNotRun, dir, name)
	}
	return err
}

// readSeries parses timeseries.csv: the header variant,time_s,kind,name,value
// then one row per sample. Rows whose value is not a finite number are
// skipped (nothing to draw); a malformed row is an error naming its line.
// It returns the series by variant and the variants in file order.
func readSeries(r io.Reader) (map[string]*runSeries, []string, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = 5
	cr.ReuseRecord = true
	head, err := cr.Read()
	if err == io.EOF {
		return nil, nil, errors.New("empty file (expected the header variant,time_s,kind,name,value)")
	}
	if err != nil {
		return nil, nil, err
	}
	if strings.Join(head, ",") != "variant,time_s,kind,name,value" {
		return nil, nil, fmt.Errorf("header %q, expected variant,time_s,kind,name,value", strings.Join(head, ","))
	}
	out := map[string]*runSeries{}
	var order []string
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, err
		}
		line, _ := cr.FieldPos(0)
		t, err := strconv.ParseFloat(rec[1], 64)
		if err != nil {
			return nil, nil, fmt.Errorf("line %d: time_s %q is not a number", line, rec[1])
		}
		v, err := strconv.ParseFloat(rec[4], 64)
		if err != nil {
			return nil, nil, fmt.Errorf("line %d: value %q is not a number", line, rec[4])
		}
		if math.IsNaN(t) || math.IsInf(t, 0) || math.IsNaN(v) || math.IsInf(v, 0) {
			continue
		}
		rs := out[rec[0]]
		if rs == nil {
			rs = &runSeries{variant: rec[0], kinds: map[string]*kindSeries{}}
			out[rec[0]] = rs
			order = append(order, rec[0])
		}
		ks := rs.kinds[rec[2]]
		if ks == nil {
			ks = &kindSeries{pts: map[string][]point{}, th: map[string]*thinner{}}
			rs.kinds[rec[2]] = ks
		}
		th := ks.th[rec[3]]
		if th == nil {
			th = newThinner(rec[2])
			ks.th[rec[3]] = th
			ks.names = append(ks.names, rec[3])
		}
		th.add(point{t, v})
	}
	for _, rs := range out {
		for _, ks := range rs.kinds {
			for name, th := range ks.th {
				ks.pts[name] = th.points()
			}
			ks.th = nil
		}
	}
	return out, order, nil
}

// readScenarios reads the folder's scenario*.yaml files, in the order of
// the runs (scenario.yaml, or scenario-VARIANT.yaml per variant), then any
// others by name.
func readScenarios(d *outdir.Dir, runs []summary.RunSummary) ([]scenarioFile, error) {
	names, err := d.Glob("scenario*.yaml")
	if err != nil {
		return nil, err
	}
	rank := map[string]int{"scenario.yaml": -1}
	for i, r := range runs {
		rank["scenario-"+r.Variant+".yaml"] = i
	}
	sort.SliceStable(names, func(i, j int) bool {
		ri, iok := rank[names[i]]
		rj, jok := rank[names[j]]
		switch {
		case iok && jok:
			return ri < rj
		case iok != jok:
			return iok
		}
		return names[i] < names[j]
	})
	var out []scenarioFile
	for _, n := range names {
		b, err := d.ReadFileMax(n, maxScenarioCopySize)
		if err != nil {
			return nil, err
		}
		out = append(out, scenarioFile{Name: n, Text: string(b)})
	}
	return out, nil
}
