package control

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/netjam/netjam/flows"
	"github.com/netjam/netjam/summary"
)

// Print prints the answer body to call for a person, as netjam ctl does:
// a line per setting changed (set, reset), a short table (status, get),
// as kubectl and toxiproxy-cli print theirs. An answer of another shape
// (another netjam's) is printed as it came.
func (call Call) Print(w io.Writer, body []byte) error {
	verb, forGiven := call.verb, call.until
	switch verb {
	case "set", "reset":
		var ch Changed
		if json.Unmarshal(body, &ch) == nil && ch.Links != nil {
			printChanged(w, verb, ch, forGiven)
			return nil
		}
		var fls []flows.FlowSummary // reset --flow's answer
		if verb == "reset" && json.Unmarshal(body, &fls) == nil {
			printReset(w, fls)
			return nil
		}
	case "schedule", "status":
		var st summary.LiveStatus
		if err := json.Unmarshal(body, &st); err != nil {
			break
		}
		if verb == "status" {
			printStatus(w, st)
			return nil
		}
		printPending(w, st.Pending)
		return nil
	case "get":
		var links []summary.LinkSummary
		if json.Unmarshal(body, &links) != nil {
			var one summary.LinkSummary
			if err := json.Unmarshal(body, &one); err != nil {
				break
			}
			links = []summary.LinkSummary{one}
		}
		printLinks(w, links)
		return nil
	case "partition", "heal":
		var p summary.Partitioned
		if json.Unmarshal(body, &p) == nil && p.New != "" {
			fmt.Fprintf(w, "partition %s → %s at %.2f s\n", p.Old, p.New, p.TimeS)
			return nil
		}
	case "stop":
		var s struct{ Status string }
		if json.Unmarshal(body, &s) == nil && s.Status != "" {
			fmt.Fprintln(w, s.Status)
			return nil
		}
	}
	// An answer of another shape (another netjam's): as it came.
	_, err := w.Write(body)
	return err
}

// printChanged prints a change's settings, one a line: "uplink rate
// 10Mbps → 2Mbps at 4.12 s".
func printChanged(w io.Writer, verb string, ch Changed, forGiven bool) {
	if len(ch.Changes) == 0 {
		if verb == "reset" {
			fmt.Fprintf(w, "nothing to reset at %s s: no key was changed\n", seconds(ch.TimeS))
		} else {
			fmt.Fprintf(w, "nothing changed at %s s: the values were in force already\n", seconds(ch.TimeS))
		}
		return
	}
	until := ""
	switch {
	case ch.BackAtS > 0:
		until = " until " + seconds(ch.BackAtS) + " s"
	case forGiven:
		until = " until the run's end"
	}
	for _, c := range ch.Changes {
		fmt.Fprintf(w, "%s %s %s → %s at %s s%s\n", c.Link, c.Setting, c.Old, c.New, seconds(ch.TimeS), until)
	}
}

// printReset prints reset --flow's flow, the one reset.
func printReset(w io.Writer, fls []flows.FlowSummary) {
	at := -1.0
	name := ""
	for _, f := range fls {
		if f.TCPSummary != nil && f.ResetAtS > at {
			at, name = f.ResetAtS, f.Name
		}
	}
	if name == "" {
		fmt.Fprintln(w, "reset")
		return
	}
	fmt.Fprintf(w, "flow %s: its connection reset at %s s of the flow\n", name, seconds(at))
}

// printPending prints the changes scheduled ahead.
func printPending(w io.Writer, pending []summary.PendingChange) {
	if len(pending) == 0 {
		fmt.Fprintln(w, "nothing pending")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PENDING AT\tSET")
	for _, p := range pending {
		fmt.Fprintf(tw, "%s s\t%s\n", seconds(p.AtS), strings.Join(p.Set, " "))
	}
	tw.Flush()
}

// printStatus prints the run now: where it is, its flows, its links, what
// is pending.
func printStatus(w io.Writer, st summary.LiveStatus) {
	name := st.Scenario
	if st.Variant != "" {
		name += " (" + st.Variant + ")"
	}
	fmt.Fprintf(w, "%s: %s s of %s s\n\n", name, seconds(st.ElapsedS), seconds(st.DurationS))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "FLOW\tTYPE\tRECEIVED\tPACKETS\tCWND\tSRTT")
	for _, f := range st.Flows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", f.Name, f.Type, formatBytes(f.BytesReceived),
			orDash(f.Packets > 0, strconv.FormatUint(f.Packets, 10)),
			orDash(f.CwndSegments > 0, strconv.FormatUint(uint64(f.CwndSegments), 10)),
			orDash(f.SRTTMs > 0, strconv.FormatFloat(math.Round(f.SRTTMs*10)/10, 'f', -1, 64)+" ms"))
	}
	tw.Flush()
	fmt.Fprintln(w)
	printLinks(w, st.Links)
	if len(st.Pending) > 0 {
		fmt.Fprintln(w)
		printPending(w, st.Pending)
	}
}

// printLinks prints each direction's settings in force and counters.
func printLinks(w io.Writer, links []summary.LinkSummary) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "LINK\tSETTINGS\tPACKETS IN\tOUT\tDROPS\tDELAY P50")
	for _, l := range links {
		delay := "-"
		if l.Achieved.DelayMs.Count > 0 {
			delay = strconv.FormatFloat(math.Round(l.Achieved.DelayMs.P50*10)/10, 'f', -1, 64) + " ms"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\n", l.Name, l.Configured.Summary, l.PacketsIn, l.PacketsOut, drops(l.Drops), delay)
	}
	tw.Flush()
}

// drops is a direction's drops, their total and, when any, by reason:
// "12 (loss 10, queue 2)".
func drops(by map[string]uint64) string {
	var total uint64
	var parts []string
	for _, r := range slices.Sorted(maps.Keys(by)) {
		if by[r] > 0 {
			total += by[r]
			parts = append(parts, fmt.Sprintf("%s %d", r, by[r]))
		}
	}
	if total == 0 {
		return "0"
	}
	return fmt.Sprintf("%d (%s)", total, strings.Join(parts, ", "))
}

// seconds is a time in seconds to the hundredth, without trailing zeros:
// 4.12, 20.
func seconds(s float64) string {
	return strconv.FormatFloat(math.Round(s*100)/100, 'f', -1, 64)
}

// formatBytes is a byte count in decimal units: 950 B, 12.3 MB.
func formatBytes(n uint64) string {
	if n < 1000 {
		return strconv.FormatUint(n, 10) + " B"
	}
	v, units := float64(n), []string{"kB", "MB", "GB", "TB"}
	for _, u := range units {
		v /= 1000
		if v < 1000 || u == units[len(units)-1] {
			return strconv.FormatFloat(v, 'f', 3-len(strconv.Itoa(int(v))), 64) + " " + u
		}
	}
	return ""
}

// orDash is s when ok, else "-".
func orDash(ok bool, s string) string {
	if ok {
		return s
	}
	return "-"
}
