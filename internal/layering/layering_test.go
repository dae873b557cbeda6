package layering

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/netjam/netjam/"

// gvisor is where netjam's patched copy of gVisor lives, inside the module.
const gvisor = module + "third_party/gvisor/"

// pkg is what go list says of a package.
type pkg struct {
	ImportPath string
	Imports    []string // direct imports
	Deps       []string // every package it depends on, transitively
	Error      *listError
	DepsErrors []*listError
}

// listError is an error go list found, as an import cycle.
type listError struct {
	ImportStack []string
	Err         string
}

func (e *listError) String() string {
	if len(e.ImportStack) == 0 {
		return e.Err
	}
	return e.Err + ": " + strings.Join(e.ImportStack, " -> ")
}

// The rules, each a package of the module and what it must not import.
var (
	// noGVisor must not depend on gVisor, even through another package:
	// they are tested without it, and the hot path's packages must not
	// pull in a network stack.
	noGVisor = []string{"impair", "wifi", "topology", "hostnet", "netif"}
	// notDirectly must not import these packages themselves, for the
	// reason given: the command line reaches devices and hosts through
	// the emulator's API; a sweep is given how to run one run (it depends
	// on gVisor through scenario only, until scenario no longer does).
	notDirectly = map[string]banned{
		"cmd/netjam": {[]string{"stack", "hostnet"}, "it goes through the emulator"},
		"sweep":      {[]string{"emulator", "stack", "hostnet"}, "the command line gives it how to run a run"},
	}
	// testOnly are imported by tests only: no package of the module's
	// binary may depend on them (a browser driver in netjam).
	testOnly = []string{module + "internal/browsertest", "github.com/chromedp/"}
	binary   = "cmd/netjam"
)

// banned is what a package must not import, and why.
type banned struct {
	pkgs []string
	why  string
}

// TestImportRules fails when a package of the module breaks an import
// rule, or when go list finds an import cycle (or any other error).
func TestImportRules(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list the packages with:", err)
	}
	cmd := exec.Command(goCmd, "list", "-e", "-json=ImportPath,Imports,Deps,Error,DepsErrors", module+"...")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	pkgs, err := decode(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range append(slices.Clone(noGVisor), "cmd/netjam", "sweep") {
		if !slices.ContainsFunc(pkgs, func(p pkg) bool { return p.ImportPath == module+name }) {
			t.Errorf("go list does not list %s%s, which a rule names", module, name)
		}
	}
	for _, v := range violations(pkgs) {
		t.Error(v)
	}
}

// TestViolations checks the checker on packages that break each rule.
func TestViolations(t *testing.T) {
	pkgs := []pkg{
		{ImportPath: module + "impair", Deps: []string{"time", gvisor + "_pkg/buffer"}},
		{ImportPath: module + "topology", Deps: []string{module + "stack", gvisor + "_pkg/tcpip"}},
		{ImportPath: module + "wifi", Deps: []string{module + "impair", "time"}},
		{ImportPath: module + "cmd/netjam", Imports: []string{module + "emulator", module + "hostnet"}, Deps: []string{module + "stack", "github.com/chromedp/chromedp"}},
		{ImportPath: module + "sweep", Imports: []string{module + "scenario", module + "emulator"}},
		{ImportPath: module + "a", Error: &listError{[]string{"a", "b", "a"}, "import cycle not allowed"}},
		{ImportPath: module + "b", DepsErrors: []*listError{{nil, "import cycle not allowed"}}},
	}
	want := []string{
		module + "impair depends on " + gvisor + "_pkg/buffer (no gVisor in impair)",
		module + "topology depends on " + gvisor + "_pkg/tcpip (no gVisor in topology)",
		module + "cmd/netjam imports " + module + "hostnet (it goes through the emulator)",
		module + "cmd/netjam depends on github.com/chromedp/chromedp (tests only)",
		module + "sweep imports " + module + "emulator (the command line gives it how to run a run)",
		module + "a: import cycle not allowed: a -> b -> a",
		module + "b: import cycle not allowed",
	}
	if got := violations(pkgs); !slices.Equal(got, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// decode reads go list -json's stream of packages.
func decode(b []byte) ([]pkg, error) {
	var pkgs []pkg
	dec := json.NewDecoder(strings.NewReader(string(b)))
	for {
		var p pkg
		err := dec.Decode(&p)
		if errors.Is(err, io.EOF) {
			return pkgs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("go list's output: %w", err)
		}
		pkgs = append(pkgs, p)
	}
}

// violations returns every broken rule of pkgs, in their order. An import
// cycle shows as an error of a package on it.
func violations(pkgs []pkg) []string {
	var out []string
	for _, p := range pkgs {
		name := strings.TrimPrefix(p.ImportPath, module)
		if slices.Contains(noGVisor, name) {
			for _, d := range p.Deps {
				if strings.HasPrefix(d, gvisor) {
					out = append(out, fmt.Sprintf("%s depends on %s (no gVisor in %s)", p.ImportPath, d, name))
					break
				}
			}
		}
		rule := notDirectly[name]
		for _, b := range rule.pkgs {
			if slices.Contains(p.Imports, module+b) {
				out = append(out, fmt.Sprintf("%s imports %s%s (%s)", p.ImportPath, module, b, rule.why))
			}
		}
		if name == binary {
			for _, d := range p.Deps {
				if slices.ContainsFunc(testOnly, func(prefix string) bool { return strings.HasPrefix(d, prefix) }) {
					out = append(out, fmt.Sprintf("%s depends on %s (tests only)", p.ImportPath, d))
				}
			}
		}
		if p.Error != nil {
			out = append(out, p.ImportPath+": "+p.Error.String())
		}
		for _, e := range p.DepsErrors {
			out = append(out, p.ImportPath+": "+e.String())
		}
	}
	return out
}
