package emulator

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"time"

	"github.com/netjam/netjam/flows"
	"github.com/netjam/netjam/hostcfg"
	"github.com/netjam/netjam/impair"
	"github.com/netjam/netjam/scenario"
	"github.com/netjam/netjam/stats"
	"github.com/netjam/netjam/wifi"
)

// Summary is what a run of a plan measured; it is written as summary.json.
type Summary struct {
	Scenario string       `json:"scenario"`
	Version  string       `json:"netjam_version,omitempty"`
	Runs     []RunSummary `json:"runs"`

	series []*flows.Series // each run's time series, for timeseries.csv
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

const nsPerMs = 1e-6

func linkSummary(d impair.Config, st impair.Stats) LinkSummary {
	l := LinkSummary{
		Name:       st.Name,
		Configured: configured(d),
		PacketsIn:  st.InPackets,
		BytesIn:    st.InBytes,
		PacketsOut: st.OutPackets,
		BytesOut:   st.OutBytes,
		WholeGSO:   st.WholeGSO,
		InputWaits: st.InputWaits,
		Drops:      st.Drops,
		TransitMs:  st.Transit.Scale(nsPerMs),
		LatenessMs: st.Lateness.Scale(nsPerMs),
		Stages:     st.Stages,
	}
	l.Achieved.DelayMs = l.TransitMs
	var dropped uint64
	for r, n := range st.Drops {
		if r != impair.DropFlushed.String() {
			dropped += n
		}
	}
	if st.InPackets > 0 {
		l.Achieved.LossRatio = float64(dropped) / float64(st.InPackets)
	}
	for _, s := range st.Stages {
		if s.BusyNs > 0 {
			l.Achieved.RateBps = float64(s.OutBytes) * 8 / (float64(s.BusyNs) / 1e9)
		}
		l.Duplicated += s.Duplicated
		l.Corrupted += s.Corrupted
		l.Reordered += s.Reordered
		l.ECNMarked += s.Marked
		if s.Name == "queue" && s.Sojourn != nil {
			l.QueueDelayMs = s.Sojourn.Scale(nsPerMs)
		}
	}
	return l
}

func configured(d impair.Config) Configured {
	c := Configured{
		Summary:   describe(d),
		DelayMs:   float64(d.Delay.Time) / float64(time.Millisecond),
		JitterMs:  float64(d.Delay.Jitter) / float64(time.Millisecond),
		RateBps:   d.Rate.Bitrate,
		Duplicate: d.Duplicate.P,
		Corrupt:   d.Corrupt.P,
		Reorder:   d.Reorder.P,
	}
	if d.Loss.Model != impair.LossNone {
		c.LossModel = d.Loss.Model.String()
	}
	if d.Delay.Jitter > 0 {
		c.Distribution = d.Delay.Distribution.String()
	}
	if d.Validate() == nil {
		c.LossRatio = d.Loss.MeanLoss()
	}
	if d.Rate.Trace != nil {
		c.RateBps = uint64(math.Round(d.Rate.Trace.MeanBitrate()))
		c.Trace = d.Rate.Trace.File
	}
	if d.Rate.Limited() {
		c.QueueDiscpline = d.Queue.Discipline.String()
		c.QueuePackets = d.Queue.LimitPackets
		c.QueueBytes = d.Queue.LimitBytes
	}
	return c
}

// describe says in one line what a direction does to packets, in the
// order the chain applies it.
func describe(d impair.Config) string {
	parts := settings(d)
	if len(parts) == 0 {
		return "transparent"
	}
	words := make([]string, len(parts))
	for i, p := range parts {
		words[i] = p.name + " " + p.value
	}
	return strings.Join(words, ", ")
}

// setting is one part of a direction's description: a name (loss, rate,
// delay) and its value as the description words it.
type setting struct{ name, value string }

// settings are the parts of describe's line, in its order; a part is
// left out where the direction does nothing of it (settingUnset).
func settings(d impair.Config) []setting {
	var parts []setting
	switch d.Loss.Model {
	case impair.LossRandom:
		if d.Loss.P == 0 {
			break
		}
		s := pct(d.Loss.P)
		if d.Loss.Correlation > 0 {
			s += " corr " + pct(d.Loss.Correlation)
		}
		parts = append(parts, setting{"loss", s})
	case impair.LossGE:
		parts = append(parts, setting{"loss", fmt.Sprintf("gemodel p %s r %s 1-h %s 1-k %s",
			pct(d.Loss.P), pct(d.Loss.R), pct(d.Loss.OneMinusH), pct(d.Loss.OneMinusK))})
	case impair.LossState:
		parts = append(parts, setting{"loss", fmt.Sprintf("state p13 %s p31 %s p32 %s p23 %s p14 %s",
			pct(d.Loss.P13), pct(d.Loss.P31), pct(d.Loss.P32), pct(d.Loss.P23), pct(d.Loss.P14))})
	}
	if d.Duplicate.P > 0 {
		parts = append(parts, setting{"duplicate", pct(d.Duplicate.P)})
	}
	if d.Corrupt.P > 0 {
		parts = append(parts, setting{"corrupt", pct(d.Corrupt.P)})
	}
	if d.Rate.Limited() {
		q := d.Queue.Discipline.String()
		if d.Queue.LimitPackets > 0 {
			q += fmt.Sprintf(" %dp", d.Queue.LimitPackets)
		}
		if d.Queue.LimitBytes > 0 {
			q += fmt.Sprintf(" %dB", d.Queue.LimitBytes)
		}
		if d.Queue.ECN {
			q += " ecn"
		}
		rate := setting{"rate", scenario.FormatRate(d.Rate.Bitrate)}
		if t := d.Rate.Trace; t != nil {
			rate = setting{"trace", fmt.Sprintf("%s (mean %.3gMbps)", filepath.Base(t.File), t.MeanBitrate()/1e6)}
		}
		parts = append(parts, rate, setting{"queue", q})
	}
	if d.Slot.Min > 0 || d.Slot.Max > 0 {
		parts = append(parts, setting{"slot", fmt.Sprintf("%v-%v", d.Slot.Min, d.Slot.Max)})
	}
	if d.Delay.Time > 0 || d.Delay.Jitter > 0 {
		s := d.Delay.Time.String()
		if d.Delay.Jitter > 0 {
			s += " ±" + d.Delay.Jitter.String() + " " + d.Delay.Distribution.String()
		}
		parts = append(parts, setting{"delay", s})
	}
	if d.Reorder.P > 0 {
		parts = append(parts, setting{"reorder", fmt.Sprintf("%s gap %d", pct(d.Reorder.P), d.Reorder.Gap)})
	}
	return parts
}

// settingNames are the names of settings' parts, in its order.
var settingNames = []string{"loss", "duplicate", "corrupt", "rate", "trace", "queue", "slot", "delay", "reorder"}

// settingUnset is how a change words a setting settings leaves out: what
// the direction then does of it.
func settingUnset(name string) string {
	switch name {
	case "loss", "duplicate", "corrupt", "reorder":
		return "0%"
	case "delay":
		return "0s"
	case "rate":
		return "unlimited"
	}
	return "none"
}

// SettingChange is one setting of a direction a change moved from Old to
// New, each as the direction's summary words it ("10Mbps", "5%",
// "20ms ±5ms normal"; "unlimited", "0%", "0s" or "none" for a setting
// that does nothing).
type SettingChange struct {
	Link    string `json:"link"`    // the direction: uplink, downlink, eu.uplink
	Setting string `json:"setting"` // loss, duplicate, corrupt, rate, trace, queue, slot, delay, reorder
	Old     string `json:"old"`
	New     string `json:"new"`
}

// settingChanges are the settings of direction link that differ between
// before and after, in describe's order.
func settingChanges(link string, before, after impair.Config) []SettingChange {
	old, now := settings(before), settings(after)
	value := func(parts []setting, name string) string {
		for _, p := range parts {
			if p.name == name {
				return p.value
			}
		}
		return settingUnset(name)
	}
	var out []SettingChange
	for _, n := range settingNames {
		if o, v := value(old, n), value(now, n); o != v {
			out = append(out, SettingChange{Link: link, Setting: n, Old: o, New: v})
		}
	}
	return out
}

func pct(v float64) string { return fmt.Sprintf("%g%%", v*100) }
