package summary

import (
	"github.com/netjam/netjam/flows"
	"github.com/netjam/netjam/hostcfg"
	"github.com/netjam/netjam/impair"
	"github.com/netjam/netjam/stats"
	"github.com/netjam/netjam/wifi"
)

// Summary is what a run of a plan measured; it is written as summary.json.
type Summary struct {
	Scenario string       `json:"scenario"`
	Version  string       `json:"netjam_version,omitempty"`
	Runs     []RunSummary `json:"runs"`

	// Series are each run's time series, which the emulator writes as
	// timeseries.csv; not part of summary.json.
	Series []*flows.Series `json:"-"`
}

// RunSummary is one run (one variant) of a plan.
type RunSummary struct {
	Variant   string              `json:"variant"`
	Seed      uint64              `json:"seed"`
	DurationS float64             `json:"duration_s"`
	Flows     []flows.FlowSummary `json:"flows"`
	Links     []LinkSummary       `json:"links"`
	// Paths are the scenario's paths, with a links list (absent with the
	// link shorthand: its one path is the link).
	Paths []PathSummary `json:"paths,omitempty"`
	// Fairness is Jain's index of the throughputs of the flows that
	// compete for one bottleneck, FairnessFlows: the TCP flows of one
	// direction (congestion-controlled, each taking what it can get; a
	// UDP flow sends at its own rate whatever the others do). Absent
	// unless at least two flows compete; with competing flows in both
	// directions, it is the uplink's.
	Fairness      *float64 `json:"fairness,omitempty"`
	FairnessFlows []string `json:"fairness_flows,omitempty"`
	// WiFi is what the Wi-Fi cell's medium saw, per station and for the
	// AP; absent without a cell.
	WiFi *wifi.Stats `json:"wifi,omitempty"`
	// Captures are the pcap writers' counters by point (packets written,
	// truncated, not written because every allowed file was full).
	Captures map[string]CaptureSummary `json:"captures,omitempty"`
	// TUN is what TUN mode's device and relay saw; absent without it.
	TUN *TUNSummary `json:"tun,omitempty"`
	// PartitionDrops counts, with netstack nodes, the packets dropped
	// between the groups of the partitions (with kernel nodes it is
	// TUN's).
	PartitionDrops uint64 `json:"partition_drops,omitempty"`
	// Hosts are the lab's netstack hosts, what each dropped on arrival
	// and its TCP's counters; absent in a run without them.
	Hosts []HostSummary `json:"hosts,omitempty"`
	// Error, when not empty, says why the run failed (a flow reported
	// corrupted data or a broken connection): its figures are partial.
	Error string `json:"error,omitempty"`
	// Expectations are the scenario's expect entries checked against
	// this run, in the file's order.
	Expectations []ExpectResult `json:"expectations,omitempty"`
	// Timeline is the scenario's timeline as it applied during the run,
	// in time order; changes not reached before the run ended are absent.
	Timeline []TimelineEvent `json:"timeline,omitempty"`
	// Skipped, when not empty, says why the run did not happen (TUN mode
	// without the privileges it needs); nothing else is filled then.
	Skipped string `json:"skipped,omitempty"`
	// CouldNotKeepUp are the signs that the machine, not the configured
	// path, shaped the run (packets that left late, drops and waits
	// inside netjam), each with its figure; absent when it kept up.
	CouldNotKeepUp []OwnLimit `json:"could_not_keep_up,omitempty"`
}

// HostSummary is one netstack host of the lab and the packets it dropped
// on arrival: a TCP or UDP checksum that did not hold (ChecksumErrors: a
// corrupt stage's work, the path delivered them) or headers that do not
// parse (Malformed); and its TCP's counters, all its connections summed,
// counted as on the wire (as TUN mode's peer_tcp).
type HostSummary struct {
	Name           string           `json:"name"`
	ChecksumErrors uint64           `json:"checksum_errors"`
	Malformed      uint64           `json:"malformed"`
	TCP            hostcfg.TCPStats `json:"tcp"`
}

// PathSummary is one path of a run: its links, what it takes, and the
// flows on it.
type PathSummary struct {
	Name string   `json:"name"`
	Via  []string `json:"via"`
	// Match is what the path takes ("dst 10.20.0.0/16, proto udp");
	// "default" for the default path.
	Match string `json:"match"`
	// Servers are the addresses of its server hosts (and of the peer on
	// it, in TUN mode).
	Servers []string `json:"servers,omitempty"`
	Flows   []string `json:"flows,omitempty"`
}

// CaptureSummary is one capture point's counters.
type CaptureSummary struct {
	Packets    uint64 `json:"packets"`
	Truncated  uint64 `json:"truncated"`
	Files      int    `json:"files"`
	NotWritten uint64 `json:"not_written"`
	Full       bool   `json:"full"`
}

// LinkSummary is one direction of the path: what was configured and what
// its counters saw. Delays are in milliseconds.
type LinkSummary struct {
	Name       string            `json:"name"`
	Configured Configured        `json:"configured"`
	Achieved   Achieved          `json:"achieved"`
	PacketsIn  uint64            `json:"packets_in"`
	BytesIn    uint64            `json:"bytes_in"`
	PacketsOut uint64            `json:"packets_out"`
	BytesOut   uint64            `json:"bytes_out"`
	Drops      map[string]uint64 `json:"drops"`
	Duplicated uint64            `json:"duplicated"`
	Corrupted  uint64            `json:"corrupted"`
	Reordered  uint64            `json:"reordered"`
	ECNMarked  uint64            `json:"ecn_marked"`
	// QueueDelayMs is the bottleneck queue's sojourn time per packet.
	QueueDelayMs stats.Summary `json:"queue_delay_ms"`
	// TransitMs is the whole delay the direction added per packet.
	TransitMs stats.Summary `json:"transit_ms"`
	// LatenessMs is how late the scheduler delivered packets against
	// their exact departure time: the emulator's own timing error.
	LatenessMs stats.Summary `json:"lateness_ms"`
	// DeliveryDrops counts packets that left the direction but found the
	// receiving host's inbox full for 100 ms (a host that fell behind for
	// less makes the direction wait instead): the emulator's own
	// overload, not an impairment, warned about; 0 in a healthy run.
	DeliveryDrops uint64 `json:"delivery_drops"`
	// DeliveryWaits counts the times the direction found the receiving
	// host's (or the TUN device's) inbox full and waited for room: the
	// receiver fell behind and held the path back, whose packets then
	// left late (LatenessMs); nothing was lost. The emulator's own
	// limit, not the configured path's, warned about; 0 while the
	// machine keeps up.
	DeliveryWaits uint64 `json:"delivery_waits,omitempty"`
	// InputWaits counts the times a netstack host's TCP found the
	// direction's input full and waited for room rather than lose the
	// packet there (as a Linux host's TCP waits for the queue below it):
	// the sender outran what the machine could carry through the
	// direction, which then limited the flow, not the configured path;
	// warned about. 0 while the machine keeps up.
	InputWaits uint64 `json:"input_waits,omitempty"`
	// WholeGSO counts the large TCP segments of segmentation offload (TUN
	// mode) that crossed whole; the packet counts count their segments.
	WholeGSO uint64              `json:"whole_gso,omitempty"`
	Stages   []impair.StageStats `json:"stages"`
}

// Achieved is what a direction did, to set beside Configured: the
// calibration a person checks first.
type Achieved struct {
	// RateBps is the rate the bottleneck delivered while it was busy, in
	// IP bits per second (the configured rate also counts the per-packet
	// overhead); 0 without a rate limit or traffic.
	RateBps float64 `json:"rate_bps"`
	// LossRatio is the share of the packets that entered the direction and
	// were dropped for any reason but the end of the run.
	LossRatio float64 `json:"loss_ratio"`
	// DelayMs is the delay the direction added to each packet delivered.
	DelayMs stats.Summary `json:"delay_ms"`
}

// Configured is a direction's configuration in report units.
type Configured struct {
	Summary        string  `json:"summary"`
	DelayMs        float64 `json:"delay_ms"`
	JitterMs       float64 `json:"jitter_ms"`
	Distribution   string  `json:"distribution,omitempty"`
	LossModel      string  `json:"loss_model,omitempty"`
	LossRatio      float64 `json:"loss_ratio"`      // the model's long-run mean
	RateBps        uint64  `json:"rate_bps"`        // 0: unlimited; a trace's mean
	Trace          string  `json:"trace,omitempty"` // the trace file, for a trace-driven rate
	QueueDiscpline string  `json:"queue_discipline,omitempty"`
	QueuePackets   int     `json:"queue_limit_packets,omitempty"`
	QueueBytes     int64   `json:"queue_limit_bytes,omitempty"`
	Duplicate      float64 `json:"duplicate"`
	Corrupt        float64 `json:"corrupt"`
	Reorder        float64 `json:"reorder"`
}

// OwnLimit is a sign that netjam itself, not the configured path, shaped
// a run: the machine did not keep up (it was busy, or a receiver fell
// behind), and the run's figures are partly the machine's. netjam run
// warns of each; summary.json lists them per run, and the report shows
// them at its top.
type OwnLimit struct {
	// Where is the direction (uplink, eu.downlink) or the flow.
	Where string `json:"where"`
	// What is the sign: late (Value: the p99 lateness of the
	// direction's departures, ms), delivery_drops, input_drops,
	// delivery_waits, input_waits (of a direction), receiver_drops (of a
	// UDP flow); Value is then the count.
	What  string  `json:"what"`
	Value float64 `json:"value"`
	// Message says it in one line, with the figure.
	Message string `json:"message"`
}

// ExpectResult is one of a scenario's expectations checked against a run.
type ExpectResult struct {
	// Expect is the expectation as written.
	Expect string `json:"expect"`
	// Figure is the path of the figure it names in the run's summary,
	// with its unit suffix (flows.bulk.throughput_bps).
	Figure string `json:"figure,omitempty"`
	// Got is the figure as the summary has it; GotText with its unit.
	Got     *float64 `json:"got,omitempty"`
	GotText string   `json:"got_text,omitempty"`
	// Pass is true when the figure satisfies the expectation.
	Pass bool `json:"pass"`
	// Error says why the expectation could not be checked (it then fails).
	Error string `json:"error,omitempty"`
}

// Failed reports whether any expectation of the run did not hold.
func (r *RunSummary) Failed() bool {
	for _, e := range r.Expectations {
		if !e.Pass {
			return true
		}
	}
	return false
}

// TimelineEvent is one change of the scenario's timeline as it applied:
// a line of events.jsonl, an item of summary.json's timeline.
type TimelineEvent struct {
	Variant string  `json:"variant,omitempty"` // events.jsonl only: the run's variant
	TimeS   float64 `json:"time_s"`            // from the run's start, on its clock
	Key     string  `json:"key"`
	Old     string  `json:"old"` // "" for the default (the key not set)
	New     string  `json:"new"`
	// Error, when not empty, says why a direction refused the change; it
	// kept its settings.
	Error string `json:"error,omitempty"`
}
