package netjam_test

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/doc"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const (
	netjamModule = "github.com/netjam/netjam"
	// gvisorPrefix is the import path of netjam's patched gVisor.
	gvisorPrefix = netjamModule + "/third_party/gvisor/"
)

// TestAPIShowsNoGVisor reads the exported API of packages netjam and
// netjamtest from the compiler's export data and follows every type it
// reaches: functions' and methods' signatures, exported struct fields,
// interfaces' methods, element types, and through netjam's own named types
// their exported fields and methods in turn. None may be gVisor's: a
// user's code then never names a gVisor type, and what is inside package
// stack can change without breaking it.
func TestAPIShowsNoGVisor(t *testing.T) {
	imp := exportImporter(t, ".", "./netjamtest")
	for _, path := range []string{netjamModule, netjamModule + "/netjamtest"} {
		pkg, err := imp.Import(path)
		if err != nil {
			t.Fatal(err)
		}
		w := newAPIWalker()
		for _, name := range pkg.Scope().Names() {
			if obj := pkg.Scope().Lookup(name); obj.Exported() {
				w.walk(pkg.Name()+"."+name, obj.Type())
			}
		}
		for _, b := range w.gvisor {
			t.Errorf("package %s shows a gVisor type: %s", pkg.Name(), b)
		}
		if w.named < 5 {
			t.Errorf("package %s: only %d named types followed; the walk missed the API", pkg.Name(), w.named)
		}
	}

	// The walk finds a gVisor type where there is one: a struct with a
	// field of gVisor's tcpip.Address.
	tcpip, err := imp.Import(gvisorPrefix + "_pkg/tcpip")
	if err != nil {
		t.Fatal(err)
	}
	addr := tcpip.Scope().Lookup("Address").Type()
	w := newAPIWalker()
	w.walk("T", types.NewStruct([]*types.Var{types.NewField(token.NoPos, nil, "Local", types.NewPointer(addr), false)}, nil))
	if len(w.gvisor) != 1 || !strings.Contains(w.gvisor[0], "T.Local") {
		t.Errorf("a field of type *tcpip.Address: the walk found %q", w.gvisor)
	}
}

// exportImporter returns an importer of the packages patterns name and
// their dependencies, from the export data go list -export writes.
func exportImporter(t *testing.T, patterns ...string) types.Importer {
	t.Helper()
	args := append([]string{"list", "-export", "-deps", "-f", "{{.ImportPath}}\t{{.Export}}"}, patterns...)
	cmd := exec.Command(goCommand(t), args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -export: %v\n%s", err, stderr.Bytes())
	}
	exports := map[string]string{}
	for line := range strings.Lines(string(out)) {
		path, file, _ := strings.Cut(strings.TrimSpace(line), "\t")
		exports[path] = file
	}
	return importer.ForCompiler(token.NewFileSet(), "gc", func(path string) (io.ReadCloser, error) {
		file := exports[path]
		if file == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(file)
	})
}

// apiWalker follows the types an API shows and notes each gVisor type
// with where it was reached.
type apiWalker struct {
	seen   map[*types.Named]bool
	named  int      // netjam's named types followed
	gvisor []string // "netjam.Stats.Relay: *tcpip.Address"
}

func newAPIWalker() *apiWalker { return &apiWalker{seen: map[*types.Named]bool{}} }

func (w *apiWalker) walk(where string, t types.Type) {
	switch t := t.(type) {
	case *types.Alias:
		if p := t.Obj().Pkg(); p != nil && strings.HasPrefix(p.Path(), gvisorPrefix) {
			w.gvisor = append(w.gvisor, where+": "+t.String())
			return
		}
		w.walk(where, types.Unalias(t))
	case *types.Named:
		obj := t.Obj()
		if obj.Pkg() == nil {
			return // error, comparable
		}
		path := obj.Pkg().Path()
		if strings.HasPrefix(path, gvisorPrefix) {
			w.gvisor = append(w.gvisor, where+": "+t.String())
			return
		}
		for i := range t.TypeArgs().Len() {
			w.walk(fmt.Sprintf("%s[%d]", where, i), t.TypeArgs().At(i))
		}
		// The standard library's and other modules' types hold no
		// gVisor type; netjam's own are followed, once each.
		if !strings.HasPrefix(path, netjamModule) || w.seen[t.Origin()] {
			return
		}
		w.seen[t.Origin()] = true
		w.named++
		name := obj.Pkg().Name() + "." + obj.Name()
		w.walk(name, t.Underlying())
		for i := range t.NumMethods() {
			if m := t.Method(i); m.Exported() {
				w.walk(name+"."+m.Name(), m.Type())
			}
		}
	case *types.Pointer:
		w.walk(where, t.Elem())
	case *types.Slice:
		w.walk(where, t.Elem())
	case *types.Array:
		w.walk(where, t.Elem())
	case *types.Chan:
		w.walk(where, t.Elem())
	case *types.Map:
		w.walk(where, t.Key())
		w.walk(where, t.Elem())
	case *types.Signature:
		for i := range t.Params().Len() {
			w.walk(where, t.Params().At(i).Type())
		}
		for i := range t.Results().Len() {
			w.walk(where, t.Results().At(i).Type())
		}
	case *types.Struct:
		for i := range t.NumFields() {
			if f := t.Field(i); f.Exported() {
				w.walk(where+"."+f.Name(), f.Type())
			}
		}
	case *types.Interface:
		for i := range t.NumMethods() {
			if m := t.Method(i); m.Exported() {
				w.walk(where+"."+m.Name(), m.Type())
			}
		}
	}
}

// TestAPIDocumented checks packages netjam and netjamtest: every exported
// name has a doc comment, and every exported function and method an
// Example that runs (one with an Output comment; go test runs it and
// compares what it printed).
func TestAPIDocumented(t *testing.T) {
	for _, dir := range []string{".", "netjamtest"} {
		fset := token.NewFileSet()
		matches, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		var files []*ast.File
		for _, m := range matches {
			f, err := parser.ParseFile(fset, m, nil, parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
		pkg, err := doc.NewFromFiles(fset, files, netjamModule+"/"+dir)
		if err != nil {
			t.Fatal(err)
		}
		if pkg.Doc == "" {
			t.Errorf("package %s has no doc comment", pkg.Name)
		}
		needExample := func(name, docText string, examples []*doc.Example) {
			if docText == "" {
				t.Errorf("%s.%s has no doc comment", pkg.Name, name)
			}
			for _, ex := range examples {
				if ex.Output != "" || ex.EmptyOutput {
					return
				}
			}
			t.Errorf("%s.%s has no Example that runs (one with an Output comment)", pkg.Name, name)
		}
		for _, f := range pkg.Funcs {
			needExample(f.Name, f.Doc, f.Examples)
		}
		for _, typ := range pkg.Types {
			if typ.Doc == "" {
				t.Errorf("%s.%s has no doc comment", pkg.Name, typ.Name)
			}
			for _, f := range typ.Funcs {
				needExample(f.Name, f.Doc, f.Examples)
			}
			for _, m := range typ.Methods {
				needExample(typ.Name+"."+m.Name, m.Doc, m.Examples)
			}
		}
		for _, v := range append(pkg.Vars, pkg.Consts...) {
			if v.Doc == "" {
				t.Errorf("%s.%s has no doc comment", pkg.Name, strings.Join(v.Names, ", "))
			}
		}
	}
}
