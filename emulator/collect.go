package emulator

// A run's summary: what each flow, link and host measured, collected
// after the run.

import (
	"fmt"
	"strings"

	"go.uber.org/zap"

	"github.com/netjam/netjam/flows"
	"github.com/netjam/netjam/impair"
	"github.com/netjam/netjam/scenario"
	"github.com/netjam/netjam/summary"
)

// collect returns the run's summary, and logs what netjam itself lost.
func (r *run) collect() *summary.RunSummary {
	s, l := r.s, r.l
	rs := &summary.RunSummary{
		Variant:   s.Variant,
		Seed:      s.Seed,
		DurationS: r.elapsed.Seconds(),
		Flows:     make([]flows.FlowSummary, len(r.fls)),
		Links:     l.path.summaries(s),
	}
	if l.cell != nil {
		ws := l.cell.Stats()
		rs.WiFi = &ws
	}
	rs.Timeline = r.tl.applied()
	rs.Captures = l.captureStats()
	rs.TUN = l.tunSummary()
	if l.tun == nil && l.partition != nil {
		rs.PartitionDrops = l.partition.drops.Load()
	}
	rs.Hosts = l.hostSummaries()
	l.addDeliveryCounts(l.s, rs.Links)
	rs.Paths = l.pathSummaries(l.s)
	for i, f := range r.fls {
		rs.Flows[i] = r.flowSummary(i, f)
	}
	rs.CouldNotKeepUp = r.warnOwnDrops(rs.Links)
	for _, f := range rs.Flows {
		if u := f.UDPSummary; u != nil && u.ReceiverDrops > 0 {
			rs.CouldNotKeepUp = append(rs.CouldNotKeepUp, summary.OwnLimit{Where: f.Name, What: "receiver_drops", Value: float64(u.ReceiverDrops),
				Message: fmt.Sprintf("flow %s: %d datagrams crossed the path and were dropped by the receiving socket, its buffer full (not counted as lost)", f.Name, u.ReceiverDrops)})
		}
	}
	rs.Fairness, rs.FairnessFlows = fairness(s.Flows, rs.Flows)
	r.log.Info("run end", zap.Duration("elapsed", r.elapsed),
		zap.Uint64("uplink_packets", rs.Links[0].PacketsOut), zap.Uint64("downlink_packets", rs.Links[1].PacketsOut),
		zap.Uint64("no_route", l.noRoute()), zap.Uint64("too_large", l.tooLarge()))
	for _, l := range rs.Links {
		for _, st := range l.Stages {
			r.log.Debug("stage", zap.String("link", l.Name), zap.String("stage", st.Name),
				zap.Uint64("packets_in", st.InPackets), zap.Uint64("packets_out", st.OutPackets), zap.Any("drops", st.Drops))
		}
	}
	rs.Expectations = checkExpectations(rs, s.Expect)
	return rs
}

// flowSummary returns the summary of flow number i, warning when it did
// not finish.
func (r *run) flowSummary(i int, f flows.Flow) flows.FlowSummary {
	fs := f.Summary()
	fs.Stack = r.s.Flows[i].Stack
	// A flow to or from a node crosses the nodes' links, not a path.
	if sf := r.s.Flows[i]; sf.Node == "" && sf.From == "" && (len(r.s.Links) > 1 || len(r.s.Paths) > 1 || len(r.s.Links) == 1 && r.s.Links[0].Name != scenario.DefaultLink) {
		fs.Path = r.s.FlowPath(sf).Name
	}
	if fs.Type == flows.TypeTCP {
		fs.CC = r.s.Flows[i].CC
		if fs.CC == "" {
			fs.CC = "cubic" // the host default, see hostcfg.TCPOptions
		}
	}
	if u := fs.UDPSummary; u != nil && u.ReceiverDrops > 0 {
		r.log.Warn("netjam could not keep up: datagrams that crossed the path were dropped by the flow's receiving socket, its buffer full (not counted as lost)",
			zap.String("flow", fs.Name), zap.Uint64("receiver_drops", u.ReceiverDrops))
	}
	if t := fs.TCPSummary; t != nil && !t.Completed && t.Size > 0 && t.ResetAtS == 0 {
		r.log.Warn("flow "+fs.Name+" did not finish when the run ended: "+strings.TrimPrefix(flows.Unfinished(t.BytesReceived, t.Size), "unfinished: ")+" received",
			zap.String("flow", fs.Name), zap.Uint64("bytes_received", t.BytesReceived), zap.Uint64("size", t.Size))
	}
	return fs
}

// warnOwnDrops warns of what netjam itself, not the configured path, did
// to the packets: drops and waits inside netjam, and departures later
// than lateWarnMs at p99 (of at least lateWarnMin); and returns each, for
// the run's summary and the report's banner.
func (r *run) warnOwnDrops(links []summary.LinkSummary) []summary.OwnLimit {
	var out []summary.OwnLimit
	for _, l := range links {
		if l.DeliveryDrops > 0 {
			r.log.Warn("netjam could not keep up: packets dropped inside netjam, not by the path (a receiving host was stuck)",
				zap.String("link", l.Name), zap.Uint64("delivery_drops", l.DeliveryDrops))
			out = append(out, summary.OwnLimit{Where: l.Name, What: "delivery_drops", Value: float64(l.DeliveryDrops),
				Message: fmt.Sprintf("%s: %d packets dropped inside netjam, not by the path (a receiving host was stuck)", l.Name, l.DeliveryDrops)})
		}
		if n := l.Drops[impair.DropInput.String()]; n > 0 {
			r.log.Warn("netjam could not keep up: packets dropped at a direction's input, not by the configured path",
				zap.String("link", l.Name), zap.Uint64("input_drops", n))
			out = append(out, summary.OwnLimit{Where: l.Name, What: "input_drops", Value: float64(n),
				Message: fmt.Sprintf("%s: %d packets dropped at the direction's input, not by the configured path", l.Name, n)})
		}
		if l.DeliveryWaits > 0 {
			r.log.Warn("netjam could not keep up: a direction waited for a receiver that fell behind (nothing lost): its packets left late, see lateness_ms",
				zap.String("link", l.Name), zap.Uint64("delivery_waits", l.DeliveryWaits))
			out = append(out, summary.OwnLimit{Where: l.Name, What: "delivery_waits", Value: float64(l.DeliveryWaits),
				Message: fmt.Sprintf("%s: waited %d times for a receiver that fell behind (nothing lost): its packets left late", l.Name, l.DeliveryWaits)})
		}
		if l.InputWaits > 0 {
			r.log.Warn("netjam could not keep up: TCP senders were held back at a direction's full input (nothing lost): the machine, not the configured path, limited them",
				zap.String("link", l.Name), zap.Uint64("input_waits", l.InputWaits))
			out = append(out, summary.OwnLimit{Where: l.Name, What: "input_waits", Value: float64(l.InputWaits),
				Message: fmt.Sprintf("%s: TCP senders held back %d times at the direction's full input (nothing lost): the machine, not the configured path, limited them", l.Name, l.InputWaits)})
		}
		if l.LatenessMs.Count >= lateWarnMin && l.LatenessMs.P99 > lateWarnMs {
			r.log.Warn("netjam could not keep up: packets left the direction late against their exact departure times (the machine was busy): its timing was that much coarser than configured, see lateness_ms",
				zap.String("link", l.Name), zap.Float64("lateness_p99_ms", l.LatenessMs.P99), zap.Float64("lateness_max_ms", l.LatenessMs.Max))
			out = append(out, summary.OwnLimit{Where: l.Name, What: "late", Value: l.LatenessMs.P99,
				Message: fmt.Sprintf("%s: packets left %.3g ms late at p99 (%.3g ms at most) against their exact departure times: the machine was busy, and the path's timing that much coarser than configured",
					l.Name, l.LatenessMs.P99, l.LatenessMs.Max)})
		}
	}
	return out
}

// fairness is Jain's index of the flows that compete for one bottleneck,
// and their names (see RunSummary.Fairness): the TCP flows of the uplink,
// else of the downlink, when there are at least two.
func fairness(specs []scenario.Flow, sums []flows.FlowSummary) (*float64, []string) {
	for _, dir := range []string{"up", "down"} {
		var names []string
		var tputs []float64
		for i, f := range specs {
			if f.Type == flows.TypeTCP && f.Direction == dir {
				names = append(names, sums[i].Name)
				tputs = append(tputs, sums[i].ThroughputBps)
			}
		}
		if len(tputs) > 1 {
			j := flows.Jain(tputs)
			return &j, names
		}
	}
	return nil, nil
}
