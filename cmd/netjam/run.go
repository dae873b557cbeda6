package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"go.uber.org/zap"

	"github.com/netjam/netjam/configs"
	"github.com/netjam/netjam/confine"
	"github.com/netjam/netjam/emulator"
	"github.com/netjam/netjam/internal/interrupt"
	"github.com/netjam/netjam/internal/progress"
	"github.com/netjam/netjam/outdir"
	"github.com/netjam/netjam/report"
	"github.com/netjam/netjam/scenario"
	"github.com/netjam/netjam/summary"
)

func runCommand() *cli.Command {
	return &cli.Command{
		Name:      "run",
		Usage:     "run a scenario (the embedded default when none is given) and report what the path did",
		ArgsUsage: "[SCENARIO.yaml]",
		Description: `Runs every variant of the scenario one after another, prints tables, and
writes into the output folder summary.json, timeseries.csv, the resolved
scenario (with the seed used), netjam.log, the plots (PNG and SVG),
report.html, and the packet captures asked for.

Examples:
   netjam run
   netjam run configs/reference.yaml
   netjam run my.yaml --set link.uplink.loss=5% --set link.delay=20ms
   netjam run my.yaml --set 'link.delay={time: 50ms, jitter: 5ms, distribution: normal}'
   netjam run my.yaml --seed 7 --duration 10s --out /tmp/run1 --quiet
   netjam run configs/wifi-coexistence.yaml --variant cubic --variant bbr
   netjam run my.yaml --capture client --capture server   # then: tshark -r client.pcap
   netjam run ci.yaml --junit report.xml   # exit 3 when an expect entry does not hold`,
		Flags: append([]cli.Flag{
			&cli.StringSliceFlag{Name: "set", Usage: "override a scenario key by its dotted path: KEY=VALUE (repeatable); VALUE is YAML"},
			seedFlag(),
			&cli.StringFlag{Name: "duration", Usage: "upper bound of each run, such as 10s (default: the scenario's duration, else 30s)"},
			&cli.StringFlag{Name: "out", Usage: "output folder (default results/<scenario>-<YYYYmmdd-HHMMSS>)"},
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "print no table and log only warnings and errors"},
			&cli.StringSliceFlag{Name: "variant", Usage: "run only this variant (repeatable; default: every variant)"},
			&cli.StringSliceFlag{Name: "capture", Usage: "write a pcap file of the packets at these points: client, server or client,server (repeatable; replaces the scenario's capture points)"},
			&cli.StringFlag{Name: "junit", Usage: "also write the runs and the scenario's expectations as JUnit XML into `FILE`, for CI"},
			&cli.IntFlag{Name: "parallel", Value: 1, Usage: "how many variants may run at once (real-time runs compete for the CPU: keep 1 unless the machine has cores to spare)"},
			clockFlag,
		}, endpointFlags()...),
		OnUsageError: usageError,
		Action:       doRun,
	}
}

// seedFlag is --seed, parsed by planOptions as the scenario file's seed
// is, not by urfave/cli (whose help would show "default: 0", which is not
// the default).
func seedFlag() cli.Flag {
	return &cli.StringFlag{Name: "seed", Usage: "seed for every random decision: the same seed gives the same impairment decisions in the same order (default: the scenario's seed, else a random one, written to the results)"}
}

// planOptions are the overrides the command line gives: --set and --seed,
// and --duration for commands that have it, parsed as the scenario file's
// values are, with the file's messages.
func planOptions(c *cli.Context) (scenario.Options, error) {
	o := scenario.Options{Sets: c.StringSlice("set")}
	if c.IsSet("clock") {
		if err := checkClock(c); err != nil {
			return o, err
		}
		// As a last --set, so that the resolved scenario.yaml says
		// which clock the run took its time from, and a replay does
		// the same.
		o.Sets = append(o.Sets, "clock="+c.String("clock"))
	}
	if c.IsSet("seed") {
		v, err := scenario.ParseSeed(c.String("seed"))
		if err != nil {
			return o, cli.Exit("--seed: "+err.Error(), exitBadUsage)
		}
		o.Seed = &v
	}
	if c.IsSet("duration") {
		v, err := scenario.ParseDuration(c.String("duration"))
		if err != nil {
			return o, cli.Exit("--duration: "+err.Error(), exitBadUsage)
		}
		o.Duration = &v
	}
	return o, nil
}

// loadPlan loads the scenario named by the command's arguments, or the
// embedded default when there are none.
func loadPlan(c *cli.Context) (*scenario.Plan, error) {
	o, err := planOptions(c)
	if err != nil {
		return nil, err
	}
	// Only the variants asked for are resolved: another's problem (a
	// tun section under --clock virtual) does not stop them.
	o.Variants = c.StringSlice("variant")
	var plan *scenario.Plan
	switch c.NArg() {
	case 0:
		plan, err = scenario.Parse(configs.DefaultName, configs.Default, o)
	case 1:
		plan, err = scenario.Load(c.Args().First(), o)
	default:
		return nil, cli.Exit(fmt.Sprintf("run takes one scenario file, got %d arguments", c.NArg()), exitBadUsage)
	}
	if err == nil {
		// What the figures of a run can tell of its expectations is
		// told now, not after the run.
		err = emulator.CheckExpectations(plan)
	}
	if err != nil && c.IsSet("clock") {
		// --clock goes in as a --set (planOptions): name it as typed.
		err = errors.New(strings.ReplaceAll(err.Error(), "--set clock:", "--clock:"))
	}
	return plan, err
}

func doRun(c *cli.Context) error {
	plan, err := runPlan(c)
	if err != nil {
		return err
	}
	if err, done := runRootless(c, plan); done {
		return err
	}
	out := c.String("out")
	if out == "" {
		out = emulator.DefaultOutDir(plan.Name, time.Now())
	}
	dir, owner, err := openOutput(out)
	if err != nil {
		return err
	}
	defer dir.Close()
	log, closeLog, err := commandLog(c, c.Bool("quiet"), dir.Create)
	if err != nil {
		return err
	}
	defer closeLog()

	pending := append([]string(nil), outputNames...)
	if c.String("junit") != "" {
		pending = append(pending, "the JUnit XML")
	}
	written := interrupt.NewOutputs(out, pending...)
	ctx, stop := interrupt.Watch(c.Context, c.App.ErrWriter, written, os.Exit)
	defer stop()
	log.Info("netjam run", zap.String("scenario", plan.Path), zap.Int("runs", len(plan.Runs)),
		zap.String("out", out), zap.String("version", versionString()))
	for _, w := range plan.Warnings {
		log.Warn(w)
	}
	opts := emulator.Options{Log: log.Named("emulator"), Version: versionString(), Parallel: c.Int("parallel"),
		OutDir: dir, Capture: capturePoints(c), ConfineNode: confine.Node(log, false, nil)}
	// The progress bar is for a person at a terminal: never in a pipe, a
	// file or CI's log, and not with --quiet.
	if f, ok := progress.Terminal(c.App.ErrWriter); ok && !c.Bool("quiet") {
		opts.Progress = progress.NewRun(f)
	}
	interrupted := ctx
	srv, ctx, stopRun, err := startControl(c, ctx, dir)
	if err != nil {
		return err
	}
	defer stopRun()
	if srv != nil {
		defer srv.Close()
		opts.Live = attach(srv)
	}
	sum, runErr := emulator.Run(ctx, plan, opts)
	if err := writeOutputs(dir, plan, sum, written); err != nil {
		return err
	}
	if srv != nil {
		finishControl(c, interrupted, srv, out)
	}
	return finishRun(c, dir, owner, sum, runErr, written)
}

// runPlan loads the plan netjam run runs (the variants asked for) and
// checks the flags that depend on nothing else.
func runPlan(c *cli.Context) (*scenario.Plan, error) {
	plan, err := loadPlan(c)
	if err != nil {
		var ec cli.ExitCoder
		if errors.As(err, &ec) {
			return nil, err
		}
		return nil, cli.Exit(err, exitBadUsage)
	}
	if err := scenario.CheckCapture(plan, capturePoints(c)); err != nil {
		return nil, cli.Exit(err, exitBadUsage)
	}
	if c.Int("parallel") < 1 {
		return nil, cli.Exit(fmt.Sprintf("--parallel: %d is out of range (expected 1 or more)", c.Int("parallel")), exitBadUsage)
	}
	if err := checkOutputFlags(c); err != nil {
		return nil, err
	}
	return plan, nil
}

// checkOutputFlags refuses, before any run, what would fail or be
// ignored only after them: a --junit file that cannot be written (its
// folder missing, or a folder itself), an empty --junit, a
// --control-token or TLS certificate without an endpoint to guard.
func checkOutputFlags(c *cli.Context) error {
	if c.IsSet("junit") {
		path := c.String("junit")
		if path == "" {
			return cli.Exit("--junit: give the FILE to write the JUnit XML into", exitBadUsage)
		}
		if st, err := os.Stat(filepath.Dir(path)); err != nil || !st.IsDir() {
			return cli.Exit(fmt.Sprintf("--junit %s: its folder %s is not a folder netjam can write into", path, filepath.Dir(path)), exitBadUsage)
		}
		if st, err := os.Stat(path); err == nil && st.IsDir() {
			return cli.Exit(fmt.Sprintf("--junit %s: is a folder; give a file", path), exitBadUsage)
		}
	}
	for _, f := range []string{"control-token", "control-tls-cert", "control-tls-key"} {
		if c.IsSet(f) && !c.IsSet("control") && !c.Bool("ui") && !c.IsSet("metrics") {
			guards := "--control, --ui or --metrics"
			if c.Command.Name == "shell" {
				guards = "--control"
			}
			return cli.Exit("--"+f+": guards "+guards+", and none is given", exitBadUsage)
		}
	}
	return nil
}

// capturePoints are the points of every --capture, each of which may list
// several separated by commas ("--capture client,server", as tcpdump-like
// tools take lists); the app splits no flag at commas, since --set values
// hold them.
func capturePoints(c *cli.Context) []string {
	var points []string
	for _, v := range c.StringSlice("capture") {
		points = append(points, strings.Split(v, ",")...)
	}
	return points
}

// runRootless readies a run started again in its own user and network
// namespaces, or starts this one there when it needs a TUN device it may
// not make (emulator.NeedsRootless); done says the run happened there,
// with err its outcome.
func runRootless(c *cli.Context, plan *scenario.Plan) (err error, done bool) {
	switch {
	case os.Getenv(emulator.RootlessRunEnv) == "1":
		if err := emulator.InRootlessRun(); err != nil {
			return cli.Exit(fmt.Sprintf("rootless run: %v", err), exitFailed), true
		}
	case emulator.NeedsRootless(plan):
		if !c.Bool("quiet") {
			fmt.Fprintln(c.App.ErrWriter, "netjam: no CAP_NET_ADMIN for the TUN device: running in a user and network namespace of its own (rootless)")
		}
		args, _ := c.App.Metadata["args"].([]string)
		if code, ok := emulator.RerunRootless(args, c.App.Writer, c.App.ErrWriter); ok {
			if code != 0 {
				return cli.Exit("", code), true
			}
			return nil, true
		}
		// No user namespaces here: run what runs without the device.
	}
	return nil, false
}

// finishRun writes the JUnit XML (for owner, when not nil) and the tables
// once the outputs in dir are written, and turns the run's outcome into
// netjam's exit.
func finishRun(c *cli.Context, dir *outdir.Dir, owner *outdir.Owner, sum *summary.Summary, runErr error, written *interrupt.Outputs) error {
	out := dir.Path()
	if path := c.String("junit"); path != "" {
		if err := report.WriteJUnit(path, owner, dir); err != nil {
			return cli.Exit(fmt.Sprintf("writing JUnit XML: %v", err), exitFailed)
		}
		written.Written("the JUnit XML")
	}
	if !c.Bool("quiet") {
		if err := report.PrintSummary(c.App.Writer, sum); err != nil {
			return cli.Exit(err, exitFailed)
		}
		if err := emulator.PrintExpectations(c.App.Writer, sum); err != nil {
			return cli.Exit(err, exitFailed)
		}
		fmt.Fprintf(c.App.Writer, "\nresults in %s\n", out)
	}
	failed := emulator.ExpectationFailures(sum)
	switch {
	case runErr == nil && len(failed) > 0:
		return cli.Exit(fmt.Sprintf("%d expectation(s) not met:\n  %s", len(failed), strings.Join(failed, "\n  ")), exitExpect)
	case runErr == nil:
		return nil
	case errors.Is(runErr, context.Canceled):
		return cli.Exit("interrupted; partial results in "+out, exitFailed)
	default:
		return failure(runErr)
	}
}

// outputNames are the outputs writeOutputs writes, for the message of an
// interrupt while it does.
var outputNames = []string{"summary.json, timeseries.csv and the resolved scenario", "the plots", "report.html"}

// writeOutputs writes what a run leaves in its output folder out besides
// netjam.log and the captures: summary.json, timeseries.csv, the resolved
// scenario, the plots and report.html, marking each as written.
func writeOutputs(out *outdir.Dir, plan *scenario.Plan, sum *summary.Summary, written *interrupt.Outputs) error {
	if err := emulator.WriteResults(out, plan, sum); err != nil {
		return cli.Exit(fmt.Sprintf("writing results: %v", err), exitFailed)
	}
	written.Written(outputNames[0])
	if _, err := report.Plot(out); err != nil {
		return cli.Exit(fmt.Sprintf("drawing plots: %v", err), exitFailed)
	}
	written.Written(outputNames[1])
	if err := report.HTML(out, versionString()); err != nil {
		return cli.Exit(fmt.Sprintf("writing report.html: %v", err), exitFailed)
	}
	written.Written(outputNames[2])
	return nil
}

// clockFlag is --clock of run and sweep.
var clockFlag = &cli.StringFlag{
	Name:  "clock",
	Value: "real",
	Usage: "real, or virtual: run a lab scenario (netstack hosts, no tun section) on a virtual clock, as fast as the CPU allows and the same from the same seed (docs/virtual-time.md)",
}

// checkClock checks --clock's value before the scenario is loaded with
// it (planOptions), so that a wrong one is named as the flag's.
func checkClock(c *cli.Context) error {
	switch v := c.String("clock"); v {
	case scenario.ClockReal, scenario.ClockVirtual:
		return nil
	default:
		return cli.Exit(fmt.Sprintf("--clock: %q is not a clock (expected real or virtual)", v), exitBadUsage)
	}
}
