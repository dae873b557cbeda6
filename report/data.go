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

	"github.com/netjam/netjam/outdir"
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

// summary is the part of summary.json the report shows. It mirrors
// summary.Summary field by field (same JSON names) but is decoded
// leniently: fields the report does not know are ignored, so an older
// report reads a newer run.
type summary struct {
	Scenario string    `json:"scenario"`
	Version  string    `json:"netjam_version"`
	Runs     []runInfo `json:"runs"`
}

// runInfo is one run (variant) of summary.json.
type runInfo struct {
	Variant   string     `json:"variant"`
	Seed      uint64     `json:"seed"`
	DurationS float64    `json:"duration_s"`
	Flows     []flowInfo `json:"flows"`
	Links     []linkInfo `json:"links"`
	Paths     []pathInfo `json:"paths"`
	Fairness  *float64   `json:"fairness"`
	// FairnessFlows names the flows Fairness is over.
	FairnessFlows []string  `json:"fairness_flows"`
	WiFi          *wifiInfo `json:"wifi"`
	// Skipped says why the run did not happen (TUN mode without the
	// privileges it needs); such a run has no figures.
	Skipped string `json:"skipped"`
	// Error says why the run failed.
	Error        string       `json:"error"`
	Expectations []expectInfo `json:"expectations"`
	// Timeline is the link's changes as they applied (markers.go).
	Timeline []timelineInfo `json:"timeline"`
	// TUN is TUN mode's device and relay; nil in a run without.
	TUN *tunInfo `json:"tun"`
	// Hosts are the lab's hosts and what each dropped on arrival.
	Hosts []hostInfo `json:"hosts"`
	// CouldNotKeepUp are the signs that the machine, not the path,
	// shaped the run (summary.OwnLimit): the report's banner.
	CouldNotKeepUp []ownLimitInfo `json:"could_not_keep_up"`
}

// ownLimitInfo is a sign that netjam could not keep up in a run.
type ownLimitInfo struct {
	Where   string  `json:"where"`
	What    string  `json:"what"`
	Value   float64 `json:"value"`
	Message string  `json:"message"`
}

// hostInfo is a lab host and the packets it dropped on arrival.
type hostInfo struct {
	Name           string `json:"name"`
	ChecksumErrors uint64 `json:"checksum_errors"`
	Malformed      uint64 `json:"malformed"`
}

// pathInfo is a path of a run with several links.
type pathInfo struct {
	Name    string   `json:"name"`
	Via     []string `json:"via"`
	Match   string   `json:"match"`
	Servers []string `json:"servers"`
	Flows   []string `json:"flows"`
}

// tunInfo is TUN mode's part of a run: the device, the addresses on
// either side, and what the relay and the device counted.
type tunInfo struct {
	Device      string   `json:"device"`
	Kernel      []string `json:"kernel_addresses"`
	Peer        []string `json:"peer_addresses"`
	Malformed   uint64   `json:"malformed"`
	KernelDrops uint64   `json:"kernel_drops"`
	Shed        uint64   `json:"shed"`
	Relay       struct {
		TCP relayInfo `json:"tcp"`
		UDP relayInfo `json:"udp"`
	} `json:"relay"`
	PeerTCP struct {
		SegmentsSent uint64 `json:"segments_sent"`
		Retransmits  uint64 `json:"retransmits"`
		Timeouts     uint64 `json:"timeouts"`
	} `json:"peer_tcp"`
	PeerChecksumErrors uint64 `json:"peer_checksum_errors"`
	PeerMalformed      uint64 `json:"peer_malformed"`
	PartitionDrops     uint64 `json:"partition_drops"`
	Routers            []struct {
		Expired    uint64 `json:"ttl_expired"`
		TooBig     uint64 `json:"too_big"`
		Fragmented uint64 `json:"fragmented"`
		ErrorsSent uint64 `json:"icmp_errors_sent"`
	} `json:"routers"`
	Nodes []struct {
		Name          string   `json:"name"`
		Addresses     []string `json:"addresses"`
		Malformed     uint64   `json:"malformed"`
		KernelDrops   uint64   `json:"kernel_drops"`
		Shed          uint64   `json:"shed"`
		Run           string   `json:"run"`
		ExitStatus    *int     `json:"exit_status"`
		EndedByNetjam bool     `json:"ended_by_netjam"`
	} `json:"nodes"`
}

// relayInfo is what the relay counted for one protocol.
type relayInfo struct {
	Relayed    uint64            `json:"relayed"`
	Served     uint64            `json:"served"`
	Refused    uint64            `json:"refused"`
	NoService  uint64            `json:"no_service"`
	Limited    uint64            `json:"limited"`
	DialErrors uint64            `json:"dial_errors"`
	Resets     uint64            `json:"resets"`
	Errors     uint64            `json:"errors"`
	Dropped    uint64            `json:"dropped"`
	DroppedBy  map[string]uint64 `json:"dropped_by"`
}

// expectInfo is one expectation checked against a run.
type expectInfo struct {
	Expect  string   `json:"expect"`
	Figure  string   `json:"figure"`
	Got     *float64 `json:"got"`
	GotText string   `json:"got_text"`
	Pass    bool     `json:"pass"`
	Error   string   `json:"error"`
}

// wifiInfo is a run's Wi-Fi cell: its medium and each contender.
type wifiInfo struct {
	Utilization float64       `json:"utilization"`
	Stations    []stationInfo `json:"stations"`
	AP          stationInfo   `json:"ap"`
}

// stationInfo is one Wi-Fi contender (a station, or the AP). Delays are in
// nanoseconds.
type stationInfo struct {
	Name         string            `json:"name"`
	Attempts     uint64            `json:"attempts"`
	Successes    uint64            `json:"successes"`
	Collisions   uint64            `json:"collisions"`
	Retries      uint64            `json:"retries"`
	Drops        map[string]uint64 `json:"drops"`
	AirtimeShare float64           `json:"airtime_share"`
	Throughput   float64           `json:"throughput_bps"`
	Delay        dist              `json:"delay_ns"`
}

// flowInfo is one flow of a run: the common fields, then those of TCP and
// of UDP flattened (the JSON has one set or the other, per Type).
type flowInfo struct {
	Name          string  `json:"name"`
	Type          string  `json:"type"`
	Stack         string  `json:"stack"`
	CC            string  `json:"cc"`
	Path          string  `json:"path"` // "" with one link
	ThroughputBps float64 `json:"throughput_bps"`

	BytesSent       uint64  `json:"bytes_sent"`
	BytesReceived   uint64  `json:"bytes_received"`
	CompletionS     float64 `json:"completion_s"`
	Size            uint64  `json:"size"`
	Completed       *bool   `json:"completed"` // nil in a summary.json from before the field
	Retransmissions uint64  `json:"retransmissions"`
	FastRetransmits uint64  `json:"fast_retransmits"`
	Timeouts        uint64  `json:"timeouts"`
	RTTMs           dist    `json:"rtt_ms"`
	CwndMax         uint32  `json:"cwnd_max"`
	Stalls          int     `json:"stalls"`
	StalledS        float64 `json:"stalled_s"`
	ResetAtS        float64 `json:"reset_at_s"`

	PacketsSent     uint64  `json:"packets_sent"`
	PacketsReceived uint64  `json:"packets_received"`
	Lost            uint64  `json:"lost"`
	InFlight        uint64  `json:"in_flight"`
	ReceiverDrops   uint64  `json:"receiver_drops"`
	LossRatio       float64 `json:"loss_ratio"`
	JitterMs        float64 `json:"jitter_ms"`
	Reordered       uint64  `json:"reordered"`
	Duplicates      uint64  `json:"duplicates"`
	Malformed       uint64  `json:"malformed"`
	SendErrors      uint64  `json:"send_errors"`
	DelayMs         dist    `json:"delay_ms"`
}

// The values of flowInfo.Type.
const (
	typeTCP = "tcp"
	typeUDP = "udp"
)

// dist is a distribution summary (stats.Summary in the JSON).
type dist struct {
	Count uint64  `json:"count"`
	Mean  float64 `json:"mean"`
	Min   float64 `json:"min"`
	P50   float64 `json:"p50"`
	P95   float64 `json:"p95"`
	P99   float64 `json:"p99"`
	Max   float64 `json:"max"`
}

// linkInfo is one direction of the path in summary.json.
type linkInfo struct {
	Name       string `json:"name"`
	Configured struct {
		Summary   string  `json:"summary"`
		LossRatio float64 `json:"loss_ratio"`
		RateBps   uint64  `json:"rate_bps"`
	} `json:"configured"`
	Achieved struct {
		RateBps   float64 `json:"rate_bps"`
		LossRatio float64 `json:"loss_ratio"`
	} `json:"achieved"`
	PacketsIn     uint64            `json:"packets_in"`
	BytesIn       uint64            `json:"bytes_in"`
	PacketsOut    uint64            `json:"packets_out"`
	BytesOut      uint64            `json:"bytes_out"`
	Drops         map[string]uint64 `json:"drops"`
	Duplicated    uint64            `json:"duplicated"`
	Corrupted     uint64            `json:"corrupted"`
	Reordered     uint64            `json:"reordered"`
	ECNMarked     uint64            `json:"ecn_marked"`
	QueueDelayMs  dist              `json:"queue_delay_ms"`
	TransitMs     dist              `json:"transit_ms"`
	LatenessMs    dist              `json:"lateness_ms"`
	DeliveryDrops uint64            `json:"delivery_drops"`
	InputWaits    uint64            `json:"input_waits"`
	DeliveryWaits uint64            `json:"delivery_waits"`
	Stages        []stageInfo       `json:"stages"`
}

// stageInfo is one stage of a direction's chain.
type stageInfo struct {
	Name       string            `json:"name"`
	PacketsIn  uint64            `json:"packets_in"`
	PacketsOut uint64            `json:"packets_out"`
	Drops      map[string]uint64 `json:"drops"`
	Duplicated uint64            `json:"duplicated"`
	Corrupted  uint64            `json:"corrupted"`
	Marked     uint64            `json:"ecn_marked"`
	Reordered  uint64            `json:"reordered"`
	BusyNs     int64             `json:"busy_ns"`
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
	info   runInfo
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
	sum       summary
	runs      []*run
	skipped   []runInfo // runs that did not happen
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
			f.runs = append(f.runs, &run{info: runInfo{Variant: v}, series: series[v]})
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
func readScenarios(d *outdir.Dir, runs []runInfo) ([]scenarioFile, error) {
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
