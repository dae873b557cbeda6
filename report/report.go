// Package report draws a saved run: it reads the output folder that
// netjam run wrote (summary.json, timeseries.csv, the scenario*.yaml files)
// and writes plots (PNG and SVG) and a self-contained report.html beside
// them; PrintTable writes the text tables netjam run prints at a run's
// end, from the same summary.
//
// It reads the files, not the emulator's types: report imports nothing of
// netjam but outdir, through which it reads and writes the folder (never
// following a link in it), and its own decoding structs name only the fields it shows, so
// the emulator can grow its output without breaking a report, and a saved
// run can be redrawn by any later netjam (netjam plot DIR).
//
// # Figures
//
// Each figure is one image of 1200 x 800 pixels (taller with more than
// three variants), written as NAME.png and NAME.svg: a header with the
// scenario, what is drawn and one legend, then one row of panels per
// variant sharing their axes:
//
//   - throughput: each flow's throughput over time;
//   - delay: each UDP flow's one-way delay over time, the mean of each
//     sample interval (timeseries.csv does not keep every datagram's
//     delay);
//   - delay-cdf: one panel, the CDF of those interval means for every
//     variant and UDP flow, with the exact per-datagram p50, p95 and p99
//     of summary.json marked on it;
//   - rtt and cwnd: each TCP flow's smoothed RTT and congestion window;
//   - queue-DIRECTION: for each direction with a bottleneck queue, its
//     length and sojourn time over time, a cross on every sample interval
//     that had drops.
//
// A figure without data (no UDP flow, no queue) is not written.
package report

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"

	"github.com/netjam/netjam/outdir"
)

// OpenRun opens the output folder of a saved run at path, for Plot and
// HTML to read and write, as outdir.Open does; a path that is not a folder
// is an error wrapping ErrNotRun.
func OpenRun(path string, owner *outdir.Owner) (*outdir.Dir, error) {
	d, err := outdir.Open(path, owner)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return nil, fmt.Errorf("%w: %s is not a folder", ErrNotRun, path)
	}
	return d, err
}

// Redraw draws the plots and report.html of the run saved in the folder
// at path (netjam plot), as owner when not nil (under sudo the user who
// ran it), and returns the names written. version is netjam's, which
// the report names.
func Redraw(path string, owner *outdir.Owner, version string) ([]string, error) {
	d, err := OpenRun(path, owner)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	names, err := Plot(d)
	if err == nil {
		names = append(names, ReportFile)
		err = HTML(d, version)
	}
	return names, err
}

// Plot draws the figures of the run saved in the folder d and writes them
// into it as PNG and SVG files, each whole (a reader, such as a browser
// showing the old report, never sees half an image). It returns the names
// of the files written, in the report's order (each figure's PNG then its
// SVG). When the folder lacks summary.json or timeseries.csv the error
// wraps ErrNotRun.
func Plot(d *outdir.Dir) ([]string, error) {
	f, err := load(d)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, fig := range figures(f) {
		for _, format := range []string{formatPNG, formatSVG} {
			b, err := render(f, &fig, format)
			if err != nil {
				return names, fmt.Errorf("drawing %s: %w", fig.name, err)
			}
			name := fig.name + "." + format
			if err := d.WriteFile(name, b); err != nil {
				return names, err
			}
			names = append(names, name)
		}
	}
	return names, nil
}
