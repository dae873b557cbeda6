package emulator

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/netjam/netjam/scenario"
)

// The golden runs of the example scenarios (TestVirtualExamplesGolden).
var (
	updateGolden = flag.Bool("update", false, "TestVirtualExamplesGolden: rewrite testdata/golden from this run's files (say why in the commit)")
	goldenOut    = flag.String("golden-out", "", "TestVirtualExamplesGolden: also copy each config's run folder into `DIR`/<config>, to diff two commits' files")
)

// The golden runs are each example as `netjam run CONFIG --clock virtual
// --seed 7 --duration D --set capture=goldenCapture` runs it. D is 3 s,
// which keeps the test cheap, but for the examples whose timeline is
// what they show: their runs last until the timeline's last change. No
// example captures packets: the golden runs capture both ends' packet
// headers (snaplen 128: an IPv4 header and a TCP header with options), so
// that the path's every packet, its time and its TCP header, is covered.
const (
	goldenSeed     = 7
	goldenDuration = 3 * time.Second
	goldenCapture  = "capture={points: [client, server], snaplen: 128}"
	goldenDir      = "testdata/golden"
	goldenUpdate   = "go test ./emulator -run TestVirtualExamplesGolden -update"

	goldenChildTimeout = 3 * time.Minute // one config's runs
)

// goldenDurations are the durations of the examples whose golden runs
// last longer than goldenDuration.
var goldenDurations = map[string]time.Duration{
	"handover":     21 * time.Second, // the handover at 8 s, the outage at 18 s, Wi-Fi again at 20 s
	"link-changes": 21 * time.Second, // every change, the bursts of loss at 15 and 19 s, the reset at 20 s
}

// goldenRefused are the examples the virtual clock refuses, and why. The
// test checks that loading them for it still fails, with an error that
// says so (refusedBy).
var goldenRefused = map[string]string{
	"sweep-cc-loss": "its flow sends for a duration across no rate, which on the virtual clock would move any amount of data in no time",
}

// refusedBy is what the error of loading a config of goldenRefused says.
const refusedBy = "on the virtual clock"

// goldenDurationOf is the duration of the golden runs of the config at
// path.
func goldenDurationOf(path string) time.Duration {
	if d, ok := goldenDurations[configName(path)]; ok {
		return d
	}
	return goldenDuration
}

// configName is the name of the config at path: its file's, without
// .yaml.
func configName(path string) string {
	return strings.TrimSuffix(filepath.Base(path), ".yaml")
}

// displayPath is path as the repository names it (configs/NAME.yaml).
func displayPath(path string) string {
	return strings.TrimPrefix(filepath.ToSlash(path), "../")
}

// goldenOptions are the options of the golden runs of the config at path.
func goldenOptions(path string) scenario.Options {
	seed, d := uint64(goldenSeed), goldenDurationOf(path)
	return scenario.Options{Sets: []string{"clock=virtual", goldenCapture}, Seed: &seed, Duration: &d}
}

// The golden child process's settings (TestVirtualGoldenChild).
const (
	goldenConfigEnv   = "NETJAM_TEST_GOLDEN_CONFIG"
	goldenVariantsEnv = "NETJAM_TEST_GOLDEN_VARIANTS"
	goldenOutEnv      = "NETJAM_TEST_GOLDEN_OUT"
)

// TestVirtualExamplesGolden runs every run of every example scenario in
// configs/ that the virtual clock can run, and compares the SHA-256 of
// each file the run wrote (summary.json, timeseries.csv, events.jsonl, the
// resolved scenarios, the captures) with those of testdata/golden, one
// file per config: the same seed on the virtual clock gives the same
// files, byte for byte, so a change of the emulator that keeps what it
// computes keeps every hash (issue 44). A change that means to change the
// results updates them (goldenUpdate) and says why in its commit.
//
// Left out, as the virtual clock cannot run them (TUN mode and kernel
// flows live on the wall clock): tun-iperf3.yaml, nodes-bbr-download.yaml
// and nodes-partition.yaml (a tun section), and wifi-coexistence.yaml's
// variant bbr (a kernel flow in TUN mode); its other variants run. Also
// those of goldenRefused. Not a scenario of `netjam run`:
// configs/proxy/mobile.yaml (the path of `netjam proxy`, without flows)
// and configs/proxy.json.
//
// The files hold nothing of the wall clock or the machine but the
// checkout's folder (normalized): summary.json has no netjam_version
// (netjam run sets Options.Version, these runs do not), the virtual clock
// starts at clock.Epoch, so the captures' times are the same on every
// run, and netjam.log, which has wall times, is written beside the run's
// folder, not hashed. report.html and the plots are package report's,
// drawn from the files hashed here, and are not drawn.
func TestVirtualExamplesGolden(t *testing.T) {
	if raceEnabled {
		// Under the race detector the runs took 93 s of wall time
		// instead of 8 (handover alone 40 s), and CI's race pass runs
		// every package at once, where two virtual runs have parted
		// before (TestVirtualSameSeedSameFiles). The pass without it
		// runs this test (go test -run Virtual).
		t.Skip("the golden runs are checked without the race detector (go test -run Virtual)")
	}
	configs, err := filepath.Glob("../configs/*.yaml")
	if err != nil || len(configs) == 0 {
		t.Fatalf("no configs: %v", err)
	}
	var golden []string // the configs with a golden file
	for _, path := range configs {
		name := configName(path)
		variants, left := virtualRuns(t, path)
		why, refused := goldenRefused[name]
		if variants != nil && !refused {
			golden = append(golden, name)
		}
		t.Run(name, func(t *testing.T) {
			if left != "" {
				t.Log(left)
			}
			switch {
			case variants == nil:
				t.Skip("no run the virtual clock can run")
			case refused:
				checkRefused(t, path, why)
				t.Skipf("the virtual clock refuses it: %s", why)
			}
			out := runGoldenChild(t, path, variants)
			got := goldenHashes(t, out, variants)
			file := filepath.Join(goldenDir, name+".sha256")
			if *updateGolden {
				writeGolden(t, file, path, got)
				return
			}
			compareGolden(t, file, path, variants, got)
		})
	}
	checkNoStaleGolden(t, golden)
}

// checkRefused fails unless the golden runs of the config at path are
// refused, as goldenRefused says they are (why).
func checkRefused(t *testing.T, path, why string) {
	t.Helper()
	_, err := scenario.Load(path, goldenOptions(path))
	if err != nil && !strings.Contains(err.Error(), refusedBy) {
		t.Fatalf("%s: loading it for the virtual clock: %v; want the virtual clock's refusal (goldenRefused: %s)", path, err, why)
	}
	if err == nil {
		t.Fatalf("%s runs on the virtual clock now (goldenRefused says: %s): remove it from goldenRefused and write its golden file with `%s`", path, why, goldenUpdate)
	}
}

// virtualRuns returns the variants of the config at path that the
// virtual clock can run ([""] for a file without variants, nil for none),
// and names those it cannot.
func virtualRuns(t *testing.T, path string) (variants []string, left string) {
	t.Helper()
	// Kernel flows name the kernel's congestion controls; none runs here.
	ccs := func() ([]string, error) { return []string{"reno", "cubic", "bbr"}, nil }
	plan, err := scenario.Load(path, scenario.Options{CongestionControls: ccs})
	if err != nil {
		t.Fatal(err)
	}
	var cannot []string
	for _, s := range plan.Runs {
		if s.TUN != nil { // kernel nodes too
			cannot = append(cannot, runName(s))
			continue
		}
		variants = append(variants, s.Variant)
	}
	if len(cannot) > 0 {
		left = fmt.Sprintf("left out: %s (a tun section: TUN mode runs on the wall clock)", strings.Join(cannot, ", "))
	}
	return variants, left
}

// runGoldenChild runs the variants of the config at path as a golden run,
// in a process of its own (see runVirtualInto: the goroutines other tests
// leave behind must not run during a virtual run), into a new folder it
// returns. A run whose virtual clock gave up waiting for a goroutine (a
// machine far too loaded) is not the seed's alone: the test is skipped.
func runGoldenChild(t *testing.T, path string, variants []string) string {
	t.Helper()
	out := t.TempDir()
	// A few seconds each; the bound ends a run that hangs.
	ctx, cancel := context.WithTimeout(context.Background(), goldenChildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestVirtualGoldenChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), goldenConfigEnv+"="+path, goldenOutEnv+"="+out,
		goldenVariantsEnv+"="+strings.Join(variants, ","))
	start := time.Now()
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the golden run of %s: %v\n%s", path, err, b)
	}
	t.Logf("%d run(s) in %v of wall time", len(variants), time.Since(start).Round(time.Millisecond))
	if n := gaveUpAll(t, out); n > 0 {
		t.Skipf("the virtual clock gave up waiting for a goroutine %d times (the machine was too loaded): the run is not comparable", n)
	}
	if *goldenOut != "" {
		keepGoldenRun(t, out, filepath.Join(*goldenOut, configName(path)))
	}
	return out
}

// gaveUpAll sums, over every run's virtual clock line in the log of the
// child run into dir, the times it gave up waiting for a goroutine.
func gaveUpAll(t *testing.T, dir string) int {
	t.Helper()
	b, err := os.ReadFile(dir + ".log")
	if err != nil {
		t.Fatal(err)
	}
	ms := regexp.MustCompile(`"waits_given_up":(\d+)`).FindAllSubmatch(b, -1)
	if len(ms) == 0 {
		t.Fatalf("no virtual clock line in the child's log:\n%s", b)
	}
	n := 0
	for _, m := range ms {
		k, _ := strconv.Atoi(string(m[1]))
		n += k
	}
	return n
}

// TestVirtualGoldenChild is the run of runGoldenChild's child process:
// netjam run's emulator.Run and WriteResults, with its options.
func TestVirtualGoldenChild(t *testing.T) {
	path, out := os.Getenv(goldenConfigEnv), os.Getenv(goldenOutEnv)
	if out == "" {
		t.Skip("the child process of runGoldenChild")
	}
	o := goldenOptions(path)
	if v := os.Getenv(goldenVariantsEnv); v != "" {
		o.Variants = strings.Split(v, ",")
	}
	plan, err := scenario.Load(path, o)
	if err != nil {
		t.Fatal(err)
	}
	cfg := zap.NewProductionConfig()
	cfg.OutputPaths = []string{out + ".log"}
	log, err := cfg.Build()
	if err != nil {
		t.Fatal(err)
	}
	defer log.Sync()
	dir := openOut(t, out)
	sum, err := Run(context.Background(), plan, Options{Log: log, OutDir: dir})
	if err == nil {
		err = WriteResults(dir, plan, sum)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// goldenHashes returns the SHA-256 of every file in the run folder dir,
// by name, and for a folder of several runs also of each run's part of
// the files that hold every run (runParts), as "FILE [VARIANT]", so that
// a difference names its run.
func goldenHashes(t *testing.T, dir string, variants []string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	sums := map[string]string{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		b = normalizeCheckout(t, e.Name(), b)
		sums[e.Name()] = sha256Hex(b)
		if len(variants) < 2 {
			continue
		}
		parts, err := runParts(e.Name(), b)
		if err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		for v, p := range parts {
			sums[e.Name()+" ["+v+"]"] = sha256Hex(p)
		}
	}
	return sums
}

// normalizeCheckout replaces, in the text file name, the absolute path of
// the checkout's configs/ with "configs": a resolved scenario, and
// summary.json's configured settings of a link, name a trace by its
// absolute path (so that a resolved scenario runs from any folder), and
// the checkout's folder differs from machine to machine. Captures are binary and left as they are.
func normalizeCheckout(t *testing.T, name string, b []byte) []byte {
	t.Helper()
	if strings.HasSuffix(name, ".pcap") {
		return b
	}
	abs, err := filepath.Abs("../configs")
	if err != nil {
		t.Fatal(err)
	}
	quoted, _ := json.Marshal(abs) // as summary.json writes it
	b = bytes.ReplaceAll(b, quoted[1:len(quoted)-1], []byte("configs"))
	return bytes.ReplaceAll(b, []byte(abs), []byte("configs"))
}

func sha256Hex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// runParts splits a file that holds every run's results into each run's
// part, by variant: summary.json's runs, timeseries.csv's rows and
// events.jsonl's lines. Other files are a run's own (scenario-V.yaml,
// client-V.pcap) and give none.
func runParts(name string, b []byte) (map[string][]byte, error) {
	parts := map[string][]byte{}
	switch name {
	case "summary.json":
		var sum struct {
			Runs []json.RawMessage `json:"runs"`
		}
		if err := json.Unmarshal(b, &sum); err != nil {
			return nil, err
		}
		for _, r := range sum.Runs {
			var v struct {
				Variant string `json:"variant"`
			}
			if err := json.Unmarshal(r, &v); err != nil {
				return nil, err
			}
			parts[v.Variant] = r
		}
	case "timeseries.csv":
		lines := strings.SplitAfter(string(b), "\n")
		for _, l := range lines[1:] { // after the header
			if l == "" {
				continue
			}
			v, _, _ := strings.Cut(l, ",")
			parts[v] = append(parts[v], l...)
		}
	case "events.jsonl":
		for _, l := range bytes.SplitAfter(b, []byte("\n")) {
			var v struct {
				Variant string `json:"variant"`
			}
			if len(l) == 0 {
				continue
			}
			if err := json.Unmarshal(l, &v); err != nil {
				return nil, err
			}
			parts[v.Variant] = append(parts[v.Variant], l...)
		}
	}
	return parts, nil
}

// writeGolden writes sums into the golden file of the config at path.
func writeGolden(t *testing.T, file, path string, sums map[string]string) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "# SHA-256 of the files of `netjam run %s --clock virtual --seed %d --duration %v --set '%s'`\n",
		displayPath(path), goldenSeed, goldenDurationOf(path), goldenCapture)
	fmt.Fprintf(&b, "# (\"FILE [VARIANT]\": that run's part of FILE; the checkout's folder in text files made \"configs\"),\n# checked by TestVirtualExamplesGolden.\n")
	fmt.Fprintf(&b, "# Rewritten by `%s`: say why in the commit.\n", goldenUpdate)
	for _, k := range slices.Sorted(maps.Keys(sums)) {
		fmt.Fprintf(&b, "%s  %s\n", sums[k], k)
	}
	if err := os.MkdirAll(goldenDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", file)
}

// readGolden reads a golden file's hashes by name.
func readGolden(t *testing.T, file string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(file)
	if os.IsNotExist(err) {
		t.Fatalf("%s: no golden file for this config; write it with `%s`, and commit it", file, goldenUpdate)
	}
	if err != nil {
		t.Fatal(err)
	}
	sums := map[string]string{}
	for i, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if strings.HasPrefix(l, "#") {
			continue
		}
		sum, name, ok := strings.Cut(l, "  ")
		if !ok || len(sum) != 64 {
			t.Fatalf("%s:%d: want a SHA-256 in hex, two spaces and a file name, got %q", file, i+1, l)
		}
		sums[name] = sum
	}
	return sums
}

// compareGolden compares the run's hashes with the golden file's, and
// names every file (and run) that differs.
func compareGolden(t *testing.T, file, path string, variants []string, got map[string]string) {
	t.Helper()
	want := readGolden(t, file)
	union := maps.Clone(want)
	maps.Copy(union, got)
	var diffs []string
	for _, k := range slices.Sorted(maps.Keys(union)) {
		w, okW := want[k]
		g, okG := got[k]
		switch {
		case !okG:
			diffs = append(diffs, describeKey(k, variants)+": no longer written")
		case !okW:
			diffs = append(diffs, describeKey(k, variants)+": new, not in the golden file")
		case w != g:
			diffs = append(diffs, fmt.Sprintf("%s: differs (sha256 %.12s…, golden %.12s…)", describeKey(k, variants), g, w))
		}
	}
	if len(diffs) > 0 {
		t.Errorf("%s on the virtual clock, seed %d, %v: its files differ from %s:\n  %s\n"+
			"A change meant to change the results: run `%s` and say why in the commit message.\n"+
			"To see what changed: run this test with -golden-out DIR at both commits and diff -r the folders.",
			displayPath(path), goldenSeed, goldenDurationOf(path), file, strings.Join(diffs, "\n  "), goldenUpdate)
	}
}

// describeKey names the run and the file of a golden file's key: "run V:
// FILE" for a run's own file (scenario-V.yaml, client-V.pcap) or its part
// of a file of every run ("FILE [V]"), "every run: FILE" for such a file
// whole, and "the run: FILE" when the config has one run.
func describeKey(key string, variants []string) string {
	if len(variants) < 2 {
		return "the run: " + key
	}
	if file, v, ok := strings.Cut(key, " ["); ok {
		return "run " + strings.TrimSuffix(v, "]") + ": " + file + " (its part)"
	}
	// The longest variant that ends the name: client-cubic-fq_codel.pcap
	// is cubic-fq_codel's, not fq_codel's.
	stem, run := strings.TrimSuffix(key, filepath.Ext(key)), ""
	for _, v := range variants {
		if strings.HasSuffix(stem, "-"+v) && len(v) > len(run) {
			run = v
		}
	}
	if run == "" {
		return "every run: " + key
	}
	return "run " + run + ": " + key
}

// checkNoStaleGolden fails on a golden file whose config is gone or no
// longer runs on the virtual clock (golden are those that do), or with
// -update removes it.
func checkNoStaleGolden(t *testing.T, golden []string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(goldenDir, "*.sha256"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if slices.Contains(golden, strings.TrimSuffix(filepath.Base(f), ".sha256")) {
			continue
		}
		if !*updateGolden {
			t.Errorf("%s: no config of configs/ runs on the virtual clock under this name; remove the file (or run `%s`)", f, goldenUpdate)
			continue
		}
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
		t.Logf("removed %s: no config of configs/ runs on the virtual clock under this name", f)
	}
}

// keepGoldenRun copies the run folder from into to (-golden-out).
func keepGoldenRun(t *testing.T, from, to string) {
	t.Helper()
	if err := os.RemoveAll(to); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(to, os.DirFS(from)); err != nil {
		t.Fatal(err)
	}
}
