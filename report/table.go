package report

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/netjam/netjam/flows"
	"github.com/netjam/netjam/summary"
)

// The text tables netjam run prints when a run ends, drawn from the same
// summary.json as report.html's tables: one row per run and flow (what the
// traffic got), one per run and Wi-Fi station, one per run and direction
// of the path (what the path did, next to what it was told to do), then a
// line per run for TUN mode, for each stalled flow and for a skipped run.

// PrintSummary writes the tables of sum, as its summary.json has it
// (PrintTable).
func PrintSummary(w io.Writer, sum *summary.Summary) error {
	b, err := json.Marshal(sum)
	if err != nil {
		return err
	}
	return PrintTable(w, b)
}

// PrintTable writes the tables of a run's summary: summaryJSON is the
// content of its summary.json (a summary.Summary, marshalled). It is
// decoded as leniently as Plot and HTML read the file.
func PrintTable(w io.Writer, summaryJSON []byte) error {
	var sum summary.Summary
	if err := json.Unmarshal(summaryJSON, &sum); err != nil {
		return fmt.Errorf("reading the summary: %w", err)
	}
	if err := printFlows(w, sum.Runs); err != nil {
		return err
	}
	if err := printWiFi(w, sum.Runs); err != nil {
		return err
	}
	if err := printPaths(w, sum.Runs); err != nil {
		return err
	}
	if err := printLinks(w, sum.Runs); err != nil {
		return err
	}
	printNotes(w, sum.Runs)
	return nil
}

// flowLegend states the definitions of the flow table's figures (see
// flows.FlowSummary and docs/measurements.md).
const flowLegend = `Mbit/s: payload received after the first arrival, over first to last arrival at the receiver (after-stop drain included).
done s: first write to last byte read. lost: datagrams sent that never arrived (+N in flight when the run was cut short).
`

// lostExtras is what a UDP flow's lost cell adds to lost/sent: the
// datagrams in flight when the run was cut short, and those the receiving
// socket dropped (netjam's own).
func lostExtras(u flows.UDPSummary) string {
	var s string
	if u.InFlight > 0 {
		s += fmt.Sprintf(" +%d in flight", u.InFlight)
	}
	if u.ReceiverDrops > 0 {
		s += fmt.Sprintf(" +%d receiver", u.ReceiverDrops)
	}
	return s
}

// printFlows writes the flow table, the fairness lines and the legend;
// nothing when no run has a flow.
func printFlows(w io.Writer, runs []summary.RunSummary) error {
	hasFlows, hasPaths := false, false
	for _, r := range runs {
		hasFlows = hasFlows || len(r.Flows) > 0
		for _, f := range r.Flows {
			hasPaths = hasPaths || f.Path != ""
		}
	}
	if !hasFlows {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "variant\tflow\ttype\tcc\tMbit/s\tshare\tdone s\tretrans\tRTO\tlost\tdelay mean/p95 ms\tjitter ms\t"
	if hasPaths {
		// Several links: each flow's path, after its name.
		head = strings.Replace(head, "flow\t", "flow\tpath\t", 1)
	}
	fmt.Fprintln(tw, head)
	for _, r := range runs {
		total := 0.0
		for _, f := range r.Flows {
			total += f.ThroughputBps
		}
		for _, f := range r.Flows {
			line := flowLine(r.Variant, f, total)
			if hasPaths {
				v, rest, _ := strings.Cut(line, "\t")
				name, rest, _ := strings.Cut(rest, "\t")
				line = v + "\t" + name + "\t" + dash(f.Path) + "\t" + rest
			}
			fmt.Fprintln(tw, line)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range runs {
		if r.Fairness != nil {
			fmt.Fprintf(w, "variant %s: fairness (Jain's index) %.3f among the TCP flows sharing a direction: %s\n",
				dash(r.Variant), *r.Fairness, strings.Join(r.FairnessFlows, ", "))
		}
	}
	fmt.Fprint(w, flowLegend)
	fmt.Fprintln(w)
	return nil
}

// flowLine is flow f's row of the flow table, its cells ended by tabs;
// total is the throughput of every flow of the run.
func flowLine(variant string, f flows.FlowSummary, total float64) string {
	doneS, retr, rto, lost, delay, jit := "-", "-", "-", "-", "-", "-"
	switch f.Type {
	case flows.TypeTCP:
		t := tcpOf(f)
		doneS = done(t)
		retr, rto = fmt.Sprint(t.Retransmissions), fmt.Sprint(t.Timeouts)
		if t.Stalls > 0 {
			// A stall is the sending stack's defect: see flows.Stall.
			rto += fmt.Sprintf(" STALL %.1fs", t.StalledS)
		}
		if t.RTTMs.Count > 0 {
			delay = fmt.Sprintf("rtt %.1f/%.1f", t.RTTMs.Mean, t.RTTMs.P95)
		}
	case flows.TypeUDP:
		u := udpOf(f)
		lost = fmt.Sprintf("%d/%d", u.Lost, u.PacketsSent) + lostExtras(u)
		delay = fmt.Sprintf("%.1f/%.1f", u.DelayMs.Mean, u.DelayMs.P95)
		jit = fmt.Sprintf("%.2f", u.JitterMs)
	}
	return fmt.Sprintf("%s\t%s\t%s\t%s\t%.2f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t", dash(variant), f.Name, f.Type, dash(f.CC),
		f.ThroughputBps/1e6, share(f.ThroughputBps, total), doneS, retr, rto, lost, delay, jit)
}

// wifiLegend states the definition of the Wi-Fi table's Mbit/s (see
// wifi.StationStats.Throughput): the flow table's, on IP bytes.
const wifiLegend = `Mbit/s: IP bytes delivered after the first delivery, over first to last delivery (a UDP flow's figure plus 28 bytes a datagram).
`

// printWiFi writes one row per run and Wi-Fi station (and AP), when the
// scenario has a cell.
func printWiFi(w io.Writer, runs []summary.RunSummary) error {
	has := false
	for _, r := range runs {
		has = has || r.WiFi != nil
	}
	if !has {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "variant\tstation\tattempts\tok\tcollisions\tretries\tdrops\tairtime %\tMbit/s\taccess delay mean/p95 ms\tmedium busy %\t")
	for _, r := range runs {
		if r.WiFi == nil {
			continue
		}
		for _, st := range stations(r.WiFi) {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%.1f\t%.2f\t%s\t%.1f\t\n", dash(r.Variant), st.name,
				st.Attempts, st.Successes, st.Collisions, st.Retries, st.drops, 100*st.AirtimeShare, st.Throughput/1e6, st.delay, 100*r.WiFi.Utilization)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprint(w, wifiLegend+"\n")
	return err
}

// printPaths writes one row per run and path, when a run has several
// links: its links, what it takes, its servers and flows.
func printPaths(w io.Writer, runs []summary.RunSummary) error {
	has := false
	for _, r := range runs {
		has = has || len(r.Paths) > 0
	}
	if !has {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "variant\tpath\tvia\tmatch\tservers\tflows")
	for _, r := range runs {
		for _, p := range r.Paths {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", dash(r.Variant), p.Name, strings.Join(p.Via, " > "), p.Match,
				dash(strings.Join(p.Servers, " ")), dash(strings.Join(p.Flows, " ")))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w)
	return err
}

// printLinks writes one row per run and direction of the path; only the
// header's absence tells that every run was skipped.
func printLinks(w io.Writer, runs []summary.RunSummary) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	hasLinks := false
	for _, r := range runs {
		hasLinks = hasLinks || len(r.Links) > 0
	}
	if hasLinks {
		fmt.Fprintln(tw, "variant\tlink\tpackets in\tout\tloss% (conf)\tdrops\tMbit/s (conf)\tqueue p50/p99 ms\tadded p50/p99 ms\tlate p99 ms\tconfigured\t")
	}
	for _, r := range runs {
		for _, l := range r.Links {
			rate := "-"
			if l.Configured.RateBps > 0 {
				rate = fmt.Sprintf("%.2f (%.2f)", l.Achieved.RateBps/1e6, float64(l.Configured.RateBps)/1e6)
			}
			late := "-"
			if l.LatenessMs.Count > 0 {
				late = fmt.Sprintf("%.2f", l.LatenessMs.P99)
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.2f (%.2f)\t%s\t%s\t%s\t%s\t%s\t%s\t\n", dash(r.Variant), l.Name, l.PacketsIn, l.PacketsOut,
				100*l.Achieved.LossRatio, 100*l.Configured.LossRatio, formatDrops(l.Drops)+ifAny(", netjam's own %d", l.DeliveryDrops)+
					ifAny(", senders held back %d", l.InputWaits)+ifAny(", held back by the receiver %d", l.DeliveryWaits), rate,
				pair(l.QueueDelayMs), pair(l.TransitMs), late, l.Configured.Summary)
		}
	}
	return tw.Flush()
}

// ifAny formats n with format (", netjam's own %d") when it is not 0,
// and is "" otherwise: the marks of the link table's drops column for
// what netjam itself dropped or held back (see summary.LinkSummary's
// DeliveryDrops, InputWaits and DeliveryWaits).
func ifAny(format string, n uint64) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(format, n)
}

// byReason lists the relay's UDP drops by reason, " (overflow 3,
// to_target 1)"; "" without any.
func byReason(m map[string]uint64) string {
	if len(m) == 0 {
		return ""
	}
	return " (" + formatDrops(m) + ")"
}

// nodeCommand says how a node's command ended: "" without one.
func nodeCommand(run string, status *int, byNetjam bool) string {
	switch {
	case run == "":
		return ""
	case status == nil:
		return fmt.Sprintf("; its command %q was still running", run)
	case byNetjam:
		return fmt.Sprintf("; its command %q ended with the run (status %d)", run, *status)
	}
	return fmt.Sprintf("; its command %q exited with status %d", run, *status)
}

// printNotes writes the lines below the tables: TUN mode's device and
// relay, each flow that stalled, each run that was skipped.
func printNotes(w io.Writer, runs []summary.RunSummary) {
	for _, r := range runs {
		if r.PartitionDrops > 0 {
			fmt.Fprintf(w, "\nvariant %s: %d packets dropped between the groups of a partition of the netstack nodes\n", dash(r.Variant), r.PartitionDrops)
		}
		if t := r.TUN; t != nil && len(t.Nodes) > 0 {
			parted := ""
			if t.PartitionDrops > 0 {
				parted = fmt.Sprintf("; %d packets dropped between the groups of a partition", t.PartitionDrops)
			}
			var expired, tooBig, frag, sent uint64
			for _, h := range t.Routers {
				expired, tooBig, frag, sent = expired+h.Expired, tooBig+h.TooBig, frag+h.Fragmented, sent+h.ErrorsSent
			}
			if expired+tooBig+frag > 0 {
				parted += fmt.Sprintf("; the routers in front of the links dropped %d packets whose TTL ran out and %d too big for a link, fragmented %d, and sent %d ICMP errors", expired, tooBig, frag, sent)
			}
			fmt.Fprintf(w, "\nvariant %s: TUN %s, kernel %s, %d packets shed by netjam at its device (the path behind it full), %d dropped by the kernel before netjam read them, %d malformed; kernel to kernel (netjam terminated nothing)%s:\n",
				dash(r.Variant), t.Device, strings.Join(t.Kernel, " "), t.Shed, t.KernelDrops, t.Malformed, parted)
			for i, n := range t.Nodes {
				place := ""
				if i == 0 {
					place = " in the peer's place"
				}
				fmt.Fprintf(w, "  node %s at %s%s%s; %d packets shed at its device, %d dropped by its kernel, %d malformed\n",
					n.Name, strings.Join(n.Addresses, " "), place, nodeCommand(n.Run, n.ExitStatus, n.EndedByNetjam), n.Shed, n.KernelDrops, n.Malformed)
			}
		} else if t != nil {
			rt, ru := t.Relay.TCP, t.Relay.UDP
			pt := t.PeerTCP
			fmt.Fprintf(w, "\nvariant %s: TUN %s, kernel %s, peer %s; relay TCP %d relayed, %d served, %d refused, %d reset by an end, %d failed; UDP %d relayed, %d served, %d refused, %d datagrams dropped%s; the peer's TCP sent %d segments, %d of them again, and timed out %d time(s); %d packets shed by netjam at the device (the path behind it full), %d dropped by the kernel before netjam read them, %d malformed; the peer dropped %d packets for a bad checksum and %d malformed\n",
				dash(r.Variant), t.Device, strings.Join(t.Kernel, " "), strings.Join(t.Peer, " "),
				rt.Relayed, rt.Served, rt.Refused+rt.NoService+rt.Limited, rt.Resets, rt.DialErrors+rt.Errors, ru.Relayed, ru.Served, ru.Refused+ru.NoService+ru.Limited, ru.Dropped, byReason(ru.DroppedBy),
				pt.SegmentsSent, pt.Retransmits, pt.Timeouts, t.Shed, t.KernelDrops, t.Malformed, t.PeerChecksumErrors, t.PeerMalformed)
		}
	}
	for _, r := range runs {
		for _, h := range r.Hosts {
			if h.ChecksumErrors+h.Malformed > 0 {
				fmt.Fprintf(w, "\nvariant %s: host %s dropped %d packets for a bad checksum and %d malformed as they arrived (what the path corrupted)\n",
					dash(r.Variant), h.Name, h.ChecksumErrors, h.Malformed)
			}
		}
	}
	for _, r := range runs {
		for _, f := range r.Flows {
			if n := udpOf(f).ReceiverDrops; n > 0 {
				fmt.Fprintf(w, "\nvariant %s: flow %s: %d datagrams crossed the path and were dropped by the receiving socket, its buffer full: the machine could not keep up (netjam's own, not in lost)\n",
					dash(r.Variant), f.Name, n)
			}
			if t := tcpOf(f); f.Type == flows.TypeTCP && t.Stalls > 0 {
				fmt.Fprintf(w, "\nvariant %s: flow %s STALLED %d time(s), %.2f s in all: it had data to send and sent nothing, not even a retransmission, for longer than max(1 s, 3 RTO); its figures are the TCP stack's defect, not the path's\n",
					dash(r.Variant), f.Name, t.Stalls, t.StalledS)
			}
		}
	}
	for _, r := range runs {
		if r.Skipped != "" {
			fmt.Fprintf(w, "\nvariant %s: skipped: %s\n", dash(r.Variant), r.Skipped)
		}
	}
}
