package emulator

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/netjam/netjam/flows"
	"github.com/netjam/netjam/impair"
	"github.com/netjam/netjam/scenario"
	"github.com/netjam/netjam/wifi"
)

// writeSeries writes the runs' time series into the file at path, streaming
// each from where it was written out during the run.
func writeSeries(path string, series []*flows.Series) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<16)
	err = flows.WriteCSV(w, series...)
	return errors.Join(err, w.Flush(), f.Close())
}

// DefaultOutDir is where a run writes its results when not told:
// results/<scenario>-<YYYYmmdd-HHMMSS>.
func DefaultOutDir(name string, now time.Time) string {
	return filepath.Join("results", name+"-"+now.Format("20060102-150405"))
}

// WriteResults writes summary.json and the resolved scenario of each run
// into dir (which must exist): scenario.yaml for a plan of one run,
// scenario-<variant>.yaml for each variant otherwise. Each resolved file
// carries the seed the run used, so running it repeats the run.
func WriteResults(dir string, plan *scenario.Plan, sum *Summary) error {
	b, err := json.MarshalIndent(sum, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "summary.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	if err := writeSeries(filepath.Join(dir, "timeseries.csv"), sum.series); err != nil {
		return err
	}
	if err := writeEvents(dir, sum.Runs); err != nil {
		return err
	}
	ran := map[string]bool{}
	for _, r := range sum.Runs {
		ran[r.Variant] = true
	}
	for _, s := range plan.Runs {
		if !ran[s.Variant] {
			continue
		}
		y, err := s.YAML()
		if err != nil {
			return err
		}
		name := "scenario.yaml"
		if s.Variant != "" {
			name = "scenario-" + s.Variant + ".yaml"
		}
		if err := os.WriteFile(filepath.Join(dir, name), y, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// PrintTable writes the summary as tables a person reads at a glance: one
// row per run and flow (what the traffic got), then one row per run and
// link direction (what the path did, next to what it was told to do).
func PrintTable(w io.Writer, sum *Summary) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	hasFlows := false
	for _, r := range sum.Runs {
		hasFlows = hasFlows || len(r.Flows) > 0
	}
	if hasFlows {
		fmt.Fprintln(tw, "variant\tflow\ttype\tcc\tMbit/s\tshare\tdone s\tretrans\tRTO\tlost\tdelay mean/p95 ms\tjitter ms\t")
		for _, r := range sum.Runs {
			total := 0.0
			for _, f := range r.Flows {
				total += f.ThroughputBps
			}
			for _, f := range r.Flows {
				mbps := fmt.Sprintf("%.2f", f.ThroughputBps/1e6)
				done, retr, rto, lost, delay, jit := "-", "-", "-", "-", "-", "-"
				if t := f.TCPSummary; t != nil {
					done = doneCell(t)
					retr, rto = fmt.Sprint(t.Retransmissions), fmt.Sprint(t.Timeouts)+stallMark(t)
					if t.RTTMs.Count > 0 {
						delay = fmt.Sprintf("rtt %.1f/%.1f", t.RTTMs.Mean, t.RTTMs.P95)
					}
				}
				if u := f.UDPSummary; u != nil {
					lost = lostCell(u)
					delay = fmt.Sprintf("%.1f/%.1f", u.DelayMs.Mean, u.DelayMs.P95)
					jit = fmt.Sprintf("%.2f", u.JitterMs)
				}
				cc := f.CC
				if cc == "" {
					cc = "-"
				}
				sh := "-"
				if total > 0 {
					sh = fmt.Sprintf("%.1f%%", 100*f.ThroughputBps/total)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", variantName(r.Variant), f.Name, f.Type, cc,
					mbps, sh, done, retr, rto, lost, delay, jit)
			}
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		for _, r := range sum.Runs {
			if line := fairnessLine(&r); line != "" {
				fmt.Fprintf(w, "variant %s: %s\n", variantName(r.Variant), line)
			}
		}
		fmt.Fprint(w, flowLegend)
		fmt.Fprintln(w)
	}
	if err := printWiFi(w, sum); err != nil {
		return err
	}
	hasLinks := false
	for _, r := range sum.Runs {
		hasLinks = hasLinks || len(r.Links) > 0
	}
	if hasLinks { // not when every run was skipped
		fmt.Fprintln(tw, "variant\tlink\tpackets in\tout\tloss% (conf)\tdrops\tMbit/s (conf)\tqueue p50/p99 ms\tadded p50/p99 ms\tlate p99 ms\tconfigured\t")
	}
	for _, r := range sum.Runs {
		for _, l := range r.Links {
			rate := "-"
			if l.Configured.RateBps > 0 {
				rate = fmt.Sprintf("%.2f (%.2f)", l.Achieved.RateBps/1e6, float64(l.Configured.RateBps)/1e6)
			}
			late := "-"
			if l.LatenessMs.Count > 0 {
				late = fmt.Sprintf("%.2f", l.LatenessMs.P99)
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.2f (%.2f)\t%s\t%s\t%s\t%s\t%s\t%s\t\n", variantName(r.Variant), l.Name, l.PacketsIn, l.PacketsOut,
				100*l.Achieved.LossRatio, 100*l.Configured.LossRatio, drops(l.Drops)+ownDrops(l.DeliveryDrops), rate,
				pair(l.QueueDelayMs.P50, l.QueueDelayMs.P99, l.QueueDelayMs.Count),
				pair(l.TransitMs.P50, l.TransitMs.P99, l.TransitMs.Count), late, l.Configured.Summary)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range sum.Runs {
		if t := r.TUN; t != nil {
			rt, ru := t.Relay.TCP, t.Relay.UDP
			fmt.Fprintf(w, "\nvariant %s: TUN %s, kernel %s, peer %s; relay TCP %d relayed, %d served, %d refused, %d reset by an end, %d failed; UDP %d relayed, %d served, %d refused, %d datagrams dropped; %d packets dropped by the kernel before netjam read them, %d malformed\n",
				variantName(r.Variant), t.Device, strings.Join(t.Kernel, " "), strings.Join(t.Peer, " "),
				rt.Relayed, rt.Served, rt.Refused+rt.NoService+rt.Limited, rt.Resets, rt.DialErrors+rt.Errors, ru.Relayed, ru.Served, ru.Refused+ru.NoService+ru.Limited, ru.Dropped, t.KernelDrops, t.Malformed)
		}
	}
	for _, r := range sum.Runs {
		for _, f := range r.Flows {
			if t := f.TCPSummary; t != nil && t.Stalls > 0 {
				fmt.Fprintf(w, "\nvariant %s: flow %s STALLED %d time(s), %.2f s in all: it had data to send and sent nothing, not even a retransmission, for longer than max(1 s, 3 RTO); its figures are the TCP stack's defect, not the path's\n",
					variantName(r.Variant), f.Name, t.Stalls, t.StalledS)
			}
		}
	}
	for _, r := range sum.Runs {
		if r.Skipped != "" {
			fmt.Fprintf(w, "\nvariant %s: skipped: %s\n", variantName(r.Variant), r.Skipped)
		}
	}
	return nil
}

// ownDrops marks the packets netjam itself dropped delivering a
// direction's packets (see LinkSummary.DeliveryDrops).
func ownDrops(n uint64) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(", netjam's own %d", n)
}

// flowLegend states the definitions of the flow table's figures (see
// flows.FlowSummary and docs/measurements.md).
const flowLegend = `Mbit/s: payload received after the first arrival, over first to last arrival at the receiver (after-stop drain included).
done s: first write to last byte read. lost: datagrams sent that never arrived (+N in flight when the run was cut short).
`

// lostCell is the lost column of a UDP flow: lost/sent, and the datagrams
// still in flight when the flow was cut short.
func lostCell(u *flows.UDPSummary) string {
	s := fmt.Sprintf("%d/%d", u.Lost, u.PacketsSent)
	if u.InFlight > 0 {
		s += fmt.Sprintf(" +%d in flight", u.InFlight)
	}
	return s
}

// stallMark is what the RTO column adds for a flow that stalled (see
// flows.TCPSummary.Stalls).
func stallMark(t *flows.TCPSummary) string {
	if t.Stalls == 0 {
		return ""
	}
	return fmt.Sprintf(" STALL %.1fs", t.StalledS)
}

// doneCell is a TCP flow's "done s" cell: its completion time in seconds, or,
// for a flow of a size the run's end cut short, how far it got. A flow
// bounded by a duration is done when its sender stops: "-" when the run
// ended before its last bytes arrived (they are in bytes_after_stop, or
// were still in flight).
func doneCell(t *flows.TCPSummary) string {
	switch {
	case t.Completed:
		return fmt.Sprintf("%.2f", t.CompletionS)
	case t.Size == 0:
		return "-"
	}
	return flows.Unfinished(t.BytesReceived, t.Size)
}

// fairnessLine says what RunSummary.Fairness is and over which flows; ""
// when no flows compete.
func fairnessLine(r *RunSummary) string {
	if r.Fairness == nil {
		return ""
	}
	return fmt.Sprintf("fairness (Jain's index) %.3f among the TCP flows sharing a direction: %s", *r.Fairness, strings.Join(r.FairnessFlows, ", "))
}

func variantName(v string) string {
	if v == "" {
		return "-"
	}
	return v
}

func pair(a, b float64, n uint64) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f/%.2f", a, b)
}

func drops(m map[string]uint64) string {
	if len(m) == 0 {
		return "0"
	}
	var parts []string
	for r := impair.DropReason(0); r < impair.NumDropReasons; r++ {
		if n := m[r.String()]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", r, n))
		}
	}
	return strings.Join(parts, ", ")
}

// printWiFi writes one row per run and Wi-Fi station (and AP), when the
// scenario has a cell.
func printWiFi(w io.Writer, sum *Summary) error {
	has := false
	for _, r := range sum.Runs {
		has = has || r.WiFi != nil
	}
	if !has {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "variant\tstation\tattempts\tok\tcollisions\tretries\tdrops\tairtime %\tMbit/s\taccess delay mean/p95 ms\tmedium busy %\t")
	for _, r := range sum.Runs {
		if r.WiFi == nil {
			continue
		}
		rows := append(append([]wifi.StationStats(nil), r.WiFi.Stations...), r.WiFi.AP)
		for i, st := range rows {
			name := st.Name
			if i == len(rows)-1 {
				name = "ap"
			}
			var d uint64
			for _, n := range st.Drops {
				d += n
			}
			delay := "-"
			if st.Delay.Count > 0 {
				delay = fmt.Sprintf("%.2f/%.2f", st.Delay.Mean/1e6, st.Delay.P95/1e6)
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%.1f\t%.2f\t%s\t%.1f\t\n", variantName(r.Variant), name,
				st.Attempts, st.Successes, st.Collisions, st.Retries, d, 100*st.AirtimeShare, st.Throughput/1e6, delay, 100*r.WiFi.Utilization)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprint(w, wifiLegend+"\n")
	return err
}

// wifiLegend states the definition of the Wi-Fi table's Mbit/s (see
// wifi.StationStats.Throughput): the flow table's, on IP bytes.
const wifiLegend = `Mbit/s: IP bytes delivered after the first delivery, over first to last delivery (a UDP flow's figure plus 28 bytes a datagram).
`
