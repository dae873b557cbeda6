package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"
)

// The README and docs/ quote netjam's output. Each quote is a fenced block
// under a marker naming the command that produces it, and this test runs
// that command and compares, so the quotes cannot drift from the program:
//
//	<!-- sample exact stderr: netjam validate docs/examples/errors.yaml -->
//	<!-- sample shape stdout: netjam run -->
//
// "exact" compares byte for byte; "shape" compares the lines, the tables'
// headers and the names of their rows (a run's figures vary; see
// sameShape). A file a doc quotes whole is marked
//
//	<!-- file: docs/examples/errors.yaml -->
//
// Regenerate every quote (and docs/throughput.png, the README's picture of
// the default run) with
//
//	NETJAM_UPDATE_DOCS=1 go test ./cmd/netjam -run DocSamples

// docFiles are the files whose quotes are checked, from the repository's
// root.
var docFiles = []string{"README.md", "docs/testing.md", "docs/security.md", "docs/usage.md", "docs/scenario.md", "docs/tun.md", "docs/timeline.md", "docs/impairments.md", "docs/accuracy.md", "docs/experiments.md"}

var (
	sampleMarker = regexp.MustCompile(`^<!-- sample (exact|shape) (stdout|stderr): netjam (.*) -->$`)
	fileMarker   = regexp.MustCompile(`^<!-- file: (.*) -->$`)
	// A number, possibly with a unit sign, a percentage, a ratio or a
	// sign around it: 4.21, 78.9%, 0/1000, (5.00), -12.
	numberWord = regexp.MustCompile(`^[-+(]?[0-9][0-9.,/%]*[)%:]?$`)
)

// outPlaceholder stands for the default run's output folder in a quote;
// another scenario's is named after it (outFolder).
const outPlaceholder = "results/tcp-vs-udp-loss-YYYYmmdd-HHMMSS"

// outFolder stands for the output folder of a run of scenario name in a
// quote, as netjam names it by default (emulator.DefaultOutDir).
func outFolder(name string) string { return "results/" + name + "-YYYYmmdd-HHMMSS" }

// virtualRun tells the samples that are runs on the virtual clock:
// TestVirtualDocSamples checks those, TestDocSamples the others.
func virtualRun(args []string) bool {
	return len(args) > 0 && args[0] == "run" && strings.Contains(strings.Join(args, " "), "--clock virtual")
}

func TestDocSamples(t *testing.T) {
	skipUnderRace(t)
	// netjam runs as a child in the repository's root, as a reader would
	// run it, so the test need not change its own directory and may run
	// beside the others (the default run takes some 40 s, mostly waiting).
	parallelUnlessUpdating(t)
	root := checkDocSamples(t, func(args []string) bool { return !virtualRun(args) })
	// CI runs the README's test command: the line after this comment in
	// .ci/run must be a line of the README.
	ci, err := os.ReadFile(filepath.Join(root, ".ci/run"))
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(ci), "# The README's test command:\n")
	cmd, _, _ := strings.Cut(after, "\n")
	readme, _ := os.ReadFile(filepath.Join(root, "README.md"))
	if !ok || cmd == "" || !strings.Contains("\n"+string(readme)+"\n", "\n"+cmd+"\n") {
		t.Errorf("the README does not give .ci/run's test command %q", cmd)
	}
	if _, err := os.Stat(filepath.Join(root, "docs/throughput.png")); err != nil {
		t.Errorf("the README's picture: %v (NETJAM_UPDATE_DOCS=1 draws it)", err)
	}
}

// TestVirtualDocSamples checks the samples that are runs on the virtual
// clock, apart from the others because they take longest.
func TestVirtualDocSamples(t *testing.T) {
	skipUnderRace(t)
	parallelUnlessUpdating(t)
	checkDocSamples(t, virtualRun)
}

// skipUnderRace skips the docs' samples under the race detector: they
// quote what netjam prints as a reader builds it, and CI's pass without
// the race detector (go test -run 'Alloc|Virtual|DocSamples') checks
// them. Under it, gVisor's TCP runs several times slower: a quoted run's
// TCP flow once stalled for 29.7 s there (a stall of gVisor's sender,
// which netjam reports), and a run on the virtual clock went slower than
// real time (delay-matrix's 21 s took 115 to 160 s, the package more than
// its 10 minutes).
func skipUnderRace(t *testing.T) {
	if raceEnabled {
		t.Skip("the docs' samples are checked without the race detector (go test -run DocSamples)")
	}
}

// parallelUnlessUpdating runs t beside the package's other tests, except
// when the docs are regenerated: the two tests of the docs' samples may
// then rewrite the same file, and take turns.
func parallelUnlessUpdating(t *testing.T) {
	if os.Getenv("NETJAM_UPDATE_DOCS") != "1" {
		t.Parallel()
	}
}

// checkDocSamples checks (or, with NETJAM_UPDATE_DOCS=1, regenerates) the
// docs' quotes whose commands pick takes, and returns the repository's
// root.
func checkDocSamples(t *testing.T, pick func(args []string) bool) string {
	update := os.Getenv("NETJAM_UPDATE_DOCS") == "1"
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range docFiles {
		doc := filepath.Join(root, doc)
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(b), "\n")
		changed := false
		for i := 0; i < len(lines); i++ {
			sm, fm := sampleMarker.FindStringSubmatch(lines[i]), fileMarker.FindStringSubmatch(lines[i])
			if sm == nil && fm == nil {
				continue
			}
			// The fenced block right under the marker.
			if i+1 >= len(lines) || !strings.HasPrefix(lines[i+1], "```") {
				t.Fatalf("%s:%d: the marker is not followed by a fenced block", doc, i+1)
			}
			end := i + 2
			for end < len(lines) && lines[end] != "```" {
				end++
			}
			if end == len(lines) {
				t.Fatalf("%s:%d: the block does not end", doc, i+2)
			}
			quoted := strings.Join(lines[i+2:end], "\n")
			var args []string // none for a quoted file
			if sm != nil {
				args = strings.Fields(sm[3])
			}
			if !pick(args) {
				continue
			}
			var got, mode string
			if fm != nil {
				f, err := os.ReadFile(filepath.Join(root, fm[1]))
				if err != nil {
					t.Fatalf("%s:%d: %v", doc, i+1, err)
				}
				got, mode = strings.TrimSuffix(string(f), "\n"), "exact"
			} else {
				got, mode = sampleOutput(t, root, sm[2], args, update), sm[1]
			}
			switch {
			case update && got != quoted:
				lines = append(lines[:i+2], append(strings.Split(got, "\n"), lines[end:]...)...)
				changed = true
			case virtualRun(args) && mode != "exact":
				// A run on the virtual clock is the same from one seed
				// each time, to the byte: its quote is checked whole.
				t.Errorf("%s:%d: %s is a run on the virtual clock: mark its quote exact", doc, i+1, lines[i])
			case !update && mode == "exact" && got != quoted:
				t.Errorf("%s:%d: the quote of %s differs from what netjam gives now (NETJAM_UPDATE_DOCS=1 regenerates it):\n--- quoted\n%s\n--- now\n%s", doc, i+1, lines[i], quoted, got)
			case !update && mode == "shape":
				if err := sameShape(quoted, got); err != nil {
					t.Errorf("%s:%d: the quote of %s no longer has the output's shape: %v (NETJAM_UPDATE_DOCS=1 regenerates it):\n--- quoted\n%s\n--- now\n%s", doc, i+1, lines[i], err, quoted, got)
				}
			}
		}
		if changed {
			if err := os.WriteFile(doc, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("updated %s", doc)
		}
	}
	return root
}

// sampleOutput runs netjam with args and returns what it wrote on stream,
// without its last newline. A run writes into a folder of the test's,
// named in the output as netjam names a run's folder by default
// (outFolder); with update, the default run's
// throughput plot becomes docs/throughput.png.
func sampleOutput(t *testing.T, root, stream string, args []string, update bool) string {
	t.Helper()
	var out string
	if len(args) > 0 && args[0] == "run" {
		out = filepath.Join(t.TempDir(), "out")
		args = append([]string{"run", "--out", out}, args[1:]...)
	}
	cmd := netjamProcess(t, args...)
	cmd.Dir = root
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Run() // a sample may well show a failure
	got := stdout.String()
	if stream == "stderr" {
		got = stderr.String()
	}
	if out != "" && strings.Contains(got, out) {
		var sum struct{ Scenario string }
		b, err := os.ReadFile(filepath.Join(out, "summary.json"))
		if err == nil {
			err = json.Unmarshal(b, &sum)
		}
		if err != nil || sum.Scenario == "" {
			t.Fatalf("netjam %s: summary.json: %v\n%s", strings.Join(args, " "), err, stderr.String())
		}
		got = strings.ReplaceAll(got, out, outFolder(sum.Scenario))
	}
	if out != "" {
		if update && len(args) == 3 { // the default run, as the README has it
			png, err := os.ReadFile(filepath.Join(out, "throughput.png"))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(root, "docs/throughput.png"), png, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return strings.TrimSuffix(got, "\n")
}

// sameShape reports how quoted and got differ in shape: the same number
// of lines; a line without numbers (a table's header, "results in ...")
// word for word; a line with numbers (a table's row) by its first two
// words, which name it (variant and flow, variant and link). The rest of a
// row is the run's figures, and its words vary with them ("flushed 1", an
// unfinished flow), as the headers say.
func sameShape(quoted, got string) error {
	ql, gl := strings.Split(quoted, "\n"), strings.Split(got, "\n")
	if len(ql) != len(gl) {
		return fmt.Errorf("%d lines quoted, %d now", len(ql), len(gl))
	}
	for i := range ql {
		qw, gw := strings.Fields(ql[i]), strings.Fields(gl[i])
		row := false
		for _, w := range qw {
			row = row || numberWord.MatchString(w)
		}
		if row {
			qw, gw = qw[:min(2, len(qw))], gw[:min(2, len(gw))]
		}
		if strings.Join(qw, " ") != strings.Join(gw, " ") {
			return fmt.Errorf("line %d: %q quoted, %q now", i+1, strings.Join(qw, " "), strings.Join(gw, " "))
		}
	}
	return nil
}

func TestSameShape(t *testing.T) {
	a := "  variant  flow  Mbit/s  drops\n  loss-5  udp  0.38  0\nresults in " + outPlaceholder
	for _, tc := range []struct {
		b  string
		ok bool
	}{
		{"variant flow Mbit/s drops\nloss-5 udp 12.5 loss 3, flushed 1\nresults in " + outPlaceholder, true},
		{"variant flow Mbit/s drops share\nloss-5 udp 12.5 0\nresults in " + outPlaceholder, false},
		{"variant flow Mbit/s drops\nloss-5 tcp 12.5 0\nresults in " + outPlaceholder, false},
		{"variant flow Mbit/s drops\nloss-5 udp 0.38 0", false},
		{"variant flow Mbit/s drops\nloss-5 udp 0.38 0\nresults in elsewhere", false},
	} {
		if err := sameShape(a, tc.b); (err == nil) != tc.ok {
			t.Errorf("sameShape(%q, %q) = %v, want ok %v", a, tc.b, err, tc.ok)
		}
	}
}

// TestGoVersionAgrees: the README's "Try it" asks for the Go go.mod's go
// line asks for (Go 1.26.0 to 1.26.2 with GOTOOLCHAIN=local refused to
// build a go.mod of go 1.26.3 that the README said Go 1.26 would).
func TestGoVersionAgrees(t *testing.T) {
	root := filepath.Join("..", "..")
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	mf, err := modfile.ParseLax("go.mod", b, nil)
	if err != nil || mf.Go == nil {
		t.Fatalf("go.mod: %v", err)
	}
	readme, _ := os.ReadFile(filepath.Join(root, "README.md"))
	if want := "(Go " + mf.Go.Version + " or newer, as go.mod's `go` line says)"; !strings.Contains(string(readme), want) {
		t.Errorf("README.md does not say %q", want)
	}
}

// TestTimelineExampleIsTheConfig: docs/timeline.md's first example is
// configs/link-changes.yaml's timeline, entry for entry (the file once
// lacked the example's reset).
func TestTimelineExampleIsTheConfig(t *testing.T) {
	doc, err := os.ReadFile("../../docs/timeline.md")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile("../../configs/link-changes.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, block, _ := strings.Cut(string(doc), "```yaml\n")
	block, _, _ = strings.Cut(block, "```")
	var entries []string
	for _, line := range strings.Split(block, "\n") {
		if strings.HasPrefix(line, "  - {") {
			entry, _, _ := strings.Cut(line, "#")
			entries = append(entries, strings.TrimSpace(entry))
		}
	}
	if len(entries) < 5 {
		t.Fatalf("docs/timeline.md's example has %d entries:\n%s", len(entries), block)
	}
	for _, e := range entries {
		if !strings.Contains(string(cfg), "\n  "+e+"\n") {
			t.Errorf("configs/link-changes.yaml lacks the example's %s", e)
		}
	}
}
