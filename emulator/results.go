package emulator

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"time"

	"go.uber.org/zap"

	"github.com/netjam/netjam/flows"
	"github.com/netjam/netjam/outdir"
	"github.com/netjam/netjam/scenario"
	"github.com/netjam/netjam/summary"
)

// writeSeries writes the runs' time series into the file name of dir,
// streaming each from where it was written out during the run.
func writeSeries(dir *outdir.Dir, name string, series []*flows.Series) error {
	f, err := dir.Create(name)
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

// SweepRun is how a sweep runs one of its runs (a sweep.RunFunc): the
// emulator, its results written into dir (WriteResults), then after
// (nil for nothing; netjam sweep --plots draws the plots and report.html
// there), and the expectations it did not meet. version is netjam's.
func SweepRun(version string, after func(dir *outdir.Dir) error) func(ctx context.Context, one *scenario.Plan, dir *outdir.Dir, log *zap.Logger) ([]string, error) {
	return func(ctx context.Context, one *scenario.Plan, dir *outdir.Dir, log *zap.Logger) ([]string, error) {
		sum, runErr := Run(ctx, one, Options{Log: log.Named("emulator"), Version: version, OutDir: dir})
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err := WriteResults(dir, one, sum); err != nil {
			return nil, err
		}
		if after != nil {
			if err := after(dir); err != nil {
				return nil, err
			}
		}
		if runErr != nil {
			return nil, runErr
		}
		return ExpectationFailures(sum), nil
	}
}

// WriteResults writes summary.json, timeseries.csv, events.jsonl (when a
// run had a timeline) and the resolved scenario of each run into the
// folder dir: scenario.yaml for a plan of one run,
// scenario-<variant>.yaml for each variant otherwise. Each resolved file
// carries the seed the run used, so running it repeats the run.
func WriteResults(dir *outdir.Dir, plan *scenario.Plan, sum *summary.Summary) error {
	b, err := json.MarshalIndent(sum, "", "  ")
	if err != nil {
		return err
	}
	if err := dir.WriteFile("summary.json", append(b, '\n')); err != nil {
		return err
	}
	if err := writeSeries(dir, "timeseries.csv", sum.Series); err != nil {
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
		if err := dir.WriteFile(name, y); err != nil {
			return err
		}
	}
	return nil
}
