package emulator

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/netjam/netjam/impair"
	"github.com/netjam/netjam/scenario"
)

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

// PrintTable writes the summary as a table a person reads at a glance: one
// row per run and link direction.
func PrintTable(w io.Writer, sum *Summary) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "variant\tlink\tpackets in\tout\tloss%\tdrops\tqueue p50/p99 ms\ttransit p50/p99 ms\tconfigured\t")
	for _, r := range sum.Runs {
		v := r.Variant
		if v == "" {
			v = "-"
		}
		for _, l := range r.Links {
			lossPct := 0.0
			if l.PacketsIn > 0 {
				var d uint64
				for _, n := range l.Drops {
					d += n
				}
				lossPct = 100 * float64(d) / float64(l.PacketsIn)
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.2f\t%s\t%s\t%s\t%s\t\n", v, l.Name, l.PacketsIn, l.PacketsOut,
				lossPct, drops(l.Drops), pair(l.QueueDelayMs.P50, l.QueueDelayMs.P99, l.QueueDelayMs.Count),
				pair(l.TransitMs.P50, l.TransitMs.P99, l.TransitMs.Count), l.Configured.Summary)
		}
	}
	return tw.Flush()
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
