package scenario

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.yaml.in/yaml/v3"
)

// Options are what the command line adds on top of the file.
type Options struct {
	// Sets are "--set KEY=VALUE" arguments: KEY is a dotted key path,
	// VALUE a YAML fragment. They apply after the file and after a
	// variant's own set, in order.
	Sets     []string
	Seed     *uint64        // --seed, overrides `seed`
	Duration *time.Duration // --duration, overrides `duration`
	// CongestionControls returns the congestion controls the machine's
	// kernel offers, to check the cc of kernel flows against. A Plan
	// calls it at most once (its sweep points included), and only for a
	// kernel flow that names a cc. nil reads
	// /proc/sys/net/ipv4/tcp_available_congestion_control.
	CongestionControls func() ([]string, error)
	// Variants, when not empty, keeps only the variants it names
	// (--variant): the others are not resolved, so what would be wrong
	// with them alone (a tun section under clock: virtual) is not an
	// error. Naming a variant the file does not have is.
	Variants []string

	// setsNameNoFiles refuses a trace file named by Sets (With: a change
	// from the control API, whose client must not make netjam read and
	// quote files it may not read itself), but those of knownTraces.
	setsNameNoFiles bool
	// knownTraces are the trace files the scenario With changes was read
	// with (Scenario.traceFiles): read already, they are not read again,
	// and Sets may name them (netjam proxy sets a path's rate back to the
	// scenario's trace when a toxic is removed).
	knownTraces map[string][]time.Duration
	// sweep, when set, is the file's sweep, decoded already (Plan.At: a
	// point's plan). Decoding it again for every point made checking a
	// sweep take time in the square of its size.
	sweep *Sweep
	// root, when set, is the file's tree, parsed already (Plan.At), which
	// Parse may change.
	root *yaml.Node
}

// Plan is a parsed scenario file: one Scenario per run.
type Plan struct {
	Name string // the scenario name
	Path string // the file, as named to Load or Parse
	// Runs holds one Scenario per variant, in file order; when the file has
	// no variants, exactly one, whose Variant is "".
	Runs []*Scenario
	// Warnings are overrides that are valid but change nothing a run
	// uses: a --set of a shared link key (link.loss) that a direction's
	// own key (link.uplink.loss) shadows. Say them before a run starts.
	Warnings []string
	// Sweep is the file's parameter grid (its sweep key), or nil; Runs
	// are the scenario as written, At resolves a point of the grid.
	Sweep *Sweep

	data []byte  // the file, for At
	opts Options // the options Parse had, for At
	// body is the file's tree without its sweep, parsed once for At.
	body *pointBody
}

// pointBody is the tree At copies for each point of a sweep: parsing the
// file (its whole grid included) again for every point made checking a
// sweep take time in the square of its size.
type pointBody struct {
	once sync.Once
	root *yaml.Node // nil when the file does not parse
}

// Load reads the file at path (ReadFile) and calls Parse. An error
// reading the file is returned as it is.
func Load(path string, o Options) (*Plan, error) {
	data, err := ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, data, o)
}

// MaxFileSize bounds a scenario file. A file at the node limit (65536
// nodes) written plainly is some 400 KB, but the YAML parser builds every
// node before the limit can be counted: an 8.6 MB timeline of 200000
// entries took 10 s and 344 MB to be refused, and a file of 1 MiB of
// one-character list items, the densest, takes 3.4 s and 141 MB. So the
// bytes are bounded first.
const MaxFileSize = 1 << 20

// ReadFile reads the scenario file at path, refusing one of more than
// MaxFileSize bytes with an Errors value before reading it (or, for a
// pipe or a device, after reading MaxFileSize+1 bytes of it). Another
// error reading the file is returned as it is.
func ReadFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tooBig := Errors{{File: path, Msg: fmt.Sprintf("more than %d bytes (1 MiB): a scenario file is at most that big", MaxFileSize)}}
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() && st.Size() > MaxFileSize {
		return nil, tooBig
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFileSize {
		return nil, tooBig
	}
	return data, nil
}

// Parse decodes data (named path in messages), applies overrides, validates
// the base scenario and every variant, and returns one Scenario per run.
// Overrides apply in this order: the file, the variant's set, o.Sets, then
// o.Seed and o.Duration. All errors of the file are returned at once, as an
// Errors value; an error of the base scenario is reported once, not again
// for every variant.
func Parse(path string, data []byte, o Options) (*Plan, error) {
	if o.CongestionControls == nil {
		o.CongestionControls = kernelCongestionControls
	}
	o.CongestionControls = sync.OnceValues(o.CongestionControls)
	root := o.root
	if root == nil {
		var errs Errors
		if root, errs = parseRoot(path, data); errs != nil {
			return nil, errs
		}
	}
	o.root = nil // the plan's At parses its own
	fileDec := newDecoder(path, nil)
	var variants []variant
	if n := lookup(root, "variants"); n != nil && !isNull(n) {
		variants = fileDec.variants(n)
	}
	if len(o.Variants) > 0 && len(fileDec.errs) == 0 {
		var err error
		if variants, err = pickVariants(path, variants, o.Variants); err != nil {
			return nil, err
		}
	}
	sweep := o.sweep
	if n := lookup(root, "sweep"); n != nil && !isNull(n) && sweep == nil {
		sweep = fileDec.sweep(n, max(1, len(variants)))
	}
	sets, errs := parseSets(o.Sets)
	errs = append(fileDec.errs, errs...)

	root = runBody(root)
	base, baseErrs := resolve(path, root, nil, sets, o)
	errs = append(errs, baseErrs...)
	plan := &Plan{Name: base.Name, Path: path, Sweep: sweep, data: data, opts: o, body: &pointBody{}}
	if len(variants) == 0 {
		plan.Runs = []*Scenario{base}
		plan.warn(base)
	}
	errs = append(errs, plan.addVariants(root, variants, sets, base, baseErrs)...)
	if len(errs) > 0 {
		errs.sort()
		return nil, errs
	}
	return plan, nil
}

// pickVariants keeps the variants named, in file order.
func pickVariants(path string, variants []variant, names []string) ([]variant, error) {
	if len(variants) == 0 {
		return nil, fmt.Errorf("--variant: %s has no variants", path)
	}
	var all []string
	for _, v := range variants {
		all = append(all, v.name)
	}
	for _, n := range names {
		if !slices.Contains(all, n) {
			return nil, fmt.Errorf("--variant: %s has no variant %q (it has: %s)", path, n, strings.Join(all, ", "))
		}
	}
	var out []variant
	for _, v := range variants {
		if slices.Contains(names, v.name) {
			out = append(out, v)
		}
	}
	return out, nil
}

// parseRoot parses data, the file path, into its top mapping: an empty
// file is a scenario of defaults, a link that does nothing.
func parseRoot(path string, data []byte) (*yaml.Node, Errors) {
	root, line, msg := parseYAML(data)
	if msg != "" {
		e := &Error{File: path, Line: line, Msg: msg}
		if l, col, hint := yamlHint(data, line, msg); hint != "" {
			e.Msg += " (" + hint + ")"
			if l > 0 {
				e.Line, e.Column = l, col
			}
		}
		return nil, Errors{e}
	}
	if isNull(root) {
		return &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}, nil
	}
	if root.Kind != yaml.MappingNode {
		return nil, Errors{{File: path, Line: root.Line,
			Msg: "expected a mapping of scenario keys (name, duration, link, ...), got " + describe(root)}}
	}
	return root, nil
}

// runBody returns the part of the file root each run decodes: without its
// variants (copies of the variants in every run would make their cost
// grow as its square) and without its sweep (a run is one point of it). A
// file with two such keys keeps them for the decoder to report.
func runBody(root *yaml.Node) *yaml.Node {
	return withoutKey(withoutKey(root, "variants"), "sweep")
}

// withoutKey returns root without key, in a shallow copy, when root has
// it once; root itself otherwise (a duplicate is the decoder's to
// report).
func withoutKey(root *yaml.Node, key string) *yaml.Node {
	if i := keyIndex(root, key); i >= 0 && keyIndex(&yaml.Node{Content: root.Content[i+2:]}, key) < 0 {
		body := *root
		body.Content = append(slices.Clip(root.Content[:i]), root.Content[i+2:]...)
		return &body
	}
	return root
}

// warn adds the warnings of run s that p does not have yet.
func (p *Plan) warn(s *Scenario) {
	for _, w := range s.shadowed {
		if !slices.Contains(p.Warnings, w) {
			p.Warnings = append(p.Warnings, w)
		}
	}
}

// addVariants resolves a run of root, the file's body, for each of its
// variants, after the base run (base, with baseErrs) and before the
// --set overrides sets, and returns the errors of the variants that the
// base does not have.
func (p *Plan) addVariants(root *yaml.Node, variants []variant, sets []override, base *Scenario, baseErrs Errors) Errors {
	var errs Errors
	total := size(base.tree)
	inBase := map[string]bool{}
	for _, e := range baseErrs {
		inBase[e.Error()] = true
	}
	for i, v := range variants {
		s, verrs := resolve(p.Path, root, &v, sets, p.opts)
		// Every run is kept until all are checked: bound them together.
		if total += size(s.tree); total > maxRunNodes {
			errs = append(errs, &Error{File: p.Path, Line: v.at.Line, Path: "variants." + v.name,
				Msg: fmt.Sprintf("the runs expand to %d YAML nodes once this variant is added, over the limit of %d for all runs together (variant %d of %d); use fewer variants, a smaller file or fewer aliases",
					total, maxRunNodes, i+1, len(variants))})
			break
		}
		for _, e := range verrs {
			if inBase[e.Error()] {
				continue
			}
			// Wrong only with this variant, though not set by it (reorder
			// in the file, delay 0 in the variant): say so.
			switch {
			case e.Origin == "":
				e.Origin = variantPrefix + v.name
			case e.commandLine():
				e.Msg += " (with variant " + v.name + ")"
			}
			errs = append(errs, e)
		}
		p.Runs = append(p.Runs, s)
		p.warn(s)
	}
	return errs
}

// parseSets parses "--set KEY=VALUE" arguments.
func parseSets(args []string) ([]override, Errors) {
	var sets []override
	var errs Errors
	for _, a := range args {
		key, val, ok := strings.Cut(a, "=")
		key = strings.TrimSpace(key)
		if !ok || key == "" {
			errs = append(errs, &Error{Origin: originSet, Msg: fmt.Sprintf("%s is not KEY=VALUE", quote(a))})
			continue
		}
		if msg := checkOverrideKey(key); msg != "" {
			errs = append(errs, &Error{Origin: originSet, Path: key, Msg: msg})
			continue
		}
		n, _, msg := parseYAML([]byte(val))
		if msg != "" {
			errs = append(errs, &Error{Origin: originSet, Path: key, Msg: msg})
			continue
		}
		if i := replaced(sets, key); i >= 0 {
			errs = append(errs, &Error{Origin: originSet, Path: key, Msg: fmt.Sprintf("replaces --set %s, given before it, which would be lost: give %s first, or set %s inside it",
				sets[i].key, key, strings.TrimPrefix(sets[i].key, key+"."))})
			continue
		}
		sets = append(sets, override{key: key, value: n})
	}
	return sets, errs
}

// resolve builds and decodes the tree of one run: a copy of the file tree
// with v's set (v may be nil), the --set overrides and the flags applied,
// in that order. Every node an override brings is recorded with its origin,
// so its errors name the variant or the command line.
func resolve(file string, root *yaml.Node, v *variant, sets []override, o Options) (*Scenario, Errors) {
	origins := map[*yaml.Node]string{}
	d := newDecoder(file, origins)
	d.congestionControls = o.CongestionControls
	d.setsNameNoFiles = o.setsNameNoFiles
	d.known = o.knownTraces
	for file, times := range o.knownTraces {
		d.traces[file] = times
	}
	tree := clone(root, nil)
	if v != nil {
		origin := variantPrefix + v.name
		for _, ov := range v.sets {
			mark := func(n *yaml.Node) {
				origins[n] = origin
				if n.Line == 0 {
					// Keys the override creates are on the line of its key.
					n.Line, n.Column = ov.at.Line, ov.at.Column
				}
			}
			if err := setPath(tree, ov.key, clone(ov.value, mark), mark); err != nil {
				origins[ov.at] = origin
				d.errorf(ov.at, ov.key, "%v", err)
			}
		}
	}
	fromCommandLine := func(origin string) func(*yaml.Node) {
		return func(n *yaml.Node) { origins[n] = origin }
	}
	for _, ov := range sets {
		mark := fromCommandLine(originSet)
		if err := setPath(tree, ov.key, clone(ov.value, mark), mark); err != nil {
			d.add(&Error{Origin: originSet, Path: ov.key, Msg: err.Error()})
		}
	}
	// Neither can fail: the tree is a mapping and the key a plain one.
	if o.Seed != nil {
		mark := fromCommandLine(originSeed)
		n := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.FormatUint(*o.Seed, 10)}
		mark(n)
		_ = setPath(tree, "seed", n, mark)
	}
	if o.Duration != nil {
		mark := fromCommandLine(originDuration)
		n := stringNode(o.Duration.String())
		mark(n)
		_ = setPath(tree, "duration", n, mark)
	}

	s := d.scenario(tree, defaultName(file))
	removeKey(tree, "variants")
	s.file = file
	if v != nil {
		s.Variant = v.name
	}
	s.shadowed, s.noEffect = shadowedSets(tree, sets, origins, v)
	s.traceFiles = map[string][]time.Duration{}
	for file, times := range d.traces {
		if filepath.IsAbs(file) { // not an inline trace's name
			s.traceFiles[file] = times
		}
	}
	return s, d.errs
}

// shadowedSets returns a warning for each --set of a shared link key
// (link.loss, link.delay.jitter, links.eu.loss) that a direction's own key shadows in
// tree: a direction key replaces the shared one as a whole (see
// decoder.direction), so such a --set changes nothing for that direction.
// Each warning names the key that wins, where it comes from, and the key to
// set instead; noEffect holds those of the sets both directions shadow,
// which change nothing at all. v is the variant tree was resolved with,
// or nil.
func shadowedSets(tree *yaml.Node, sets []override, origins map[*yaml.Node]string, v *variant) (warnings, noEffect []string) {
	for _, ov := range sets {
		at, rest, ok := linkKey(ov.key)
		if !ok {
			continue
		}
		link := nodeAt(tree, at)
		if link == nil || link.Kind != yaml.MappingNode {
			continue
		}
		key, _, _ := strings.Cut(rest, ".")
		if !slices.Contains(directionKeys, key) {
			continue
		}
		var dirs, winners, instead []string
		for _, dir := range []string{"uplink", "downlink"} {
			m := lookup(link, dir)
			if m == nil || m.Kind != yaml.MappingNode {
				continue
			}
			n := lookup(m, key)
			if n == nil {
				continue
			}
			from := "the file"
			if o := origins[n]; o != "" {
				from = o
			} else if v != nil && origins[m] != "" {
				from = origins[m]
			}
			dirs = append(dirs, dir)
			winners = append(winners, fmt.Sprintf("%s.%s.%s (from %s)", at, dir, key, from))
			instead = append(instead, at+"."+dir+"."+rest)
		}
		if len(winners) == 0 {
			continue
		}
		verb := "replaces"
		if len(winners) > 1 {
			verb = "replace"
		}
		w := fmt.Sprintf("--set %s changes nothing for the %s: %s %s the shared %s.%s as a whole; set %s instead",
			ov.key, strings.Join(dirs, " and the "), strings.Join(winners, " and "), verb, at, key, strings.Join(instead, " and "))
		warnings = append(warnings, w)
		if len(dirs) == 2 {
			noEffect = append(noEffect, w)
		}
	}
	return warnings, noEffect
}

// defaultName is the scenario name taken from the file name: its base name
// without extension.
func defaultName(file string) string {
	if file == "" {
		return ""
	}
	base := filepath.Base(file)
	return strings.TrimSuffix(base, filepath.Ext(base))
}

// YAML returns the resolved scenario as a runnable YAML file of its own:
// every override applied, `variants` removed, `name` written out, `seed`
// set to s.Seed (so a run writes the seed it actually used; left out while
// SeedSet is false), comments and null values dropped, and a leading
// comment naming the source file (or NewLink) and variant. Parsing the
// result gives a Scenario equal to s except for Variant, which is "".
func (s *Scenario) YAML() ([]byte, error) {
	if s.tree == nil {
		return nil, errors.New("scenario: YAML needs a Scenario returned by Parse, Load or NewLink")
	}
	// The file's comments are dropped: after overrides they may describe
	// values that are no longer there.
	root := clone(s.tree, func(n *yaml.Node) { n.HeadComment, n.LineComment, n.FootComment = "", "", "" })
	dropNulls(root)
	// The name is written out as the file name of the copy will differ.
	if i := keyIndex(root, "name"); i >= 0 {
		root.Content[i+1] = stringNode(s.Name)
	} else {
		root.Content = append([]*yaml.Node{stringNode("name"), stringNode(s.Name)}, root.Content...)
	}
	seed := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.FormatUint(s.Seed, 10)}
	switch i := keyIndex(root, "seed"); {
	case !s.SeedSet:
		removeKey(root, "seed")
	case i >= 0:
		root.Content[i+1] = seed
	default:
		at := max(keyIndex(root, "name"), keyIndex(root, "description")) + 2
		root.Content = append(root.Content[:at], append([]*yaml.Node{stringNode("seed"), seed}, root.Content[at:]...)...)
	}

	from := s.file
	if strings.ContainsAny(from, "\r\n") {
		from = strconv.Quote(from)
	}
	head := "netjam scenario resolved from " + from
	if s.file == "" {
		head = "netjam scenario made of Go values (NewLink)"
	}
	if s.Variant != "" {
		head += ", variant " + s.Variant
	}
	head += ":\nevery override is applied"
	if s.SeedSet {
		head += " and seed is the one the run used"
	}
	doc := &yaml.Node{Kind: yaml.DocumentNode, HeadComment: head + ".", Content: []*yaml.Node{root}}

	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("scenario: encoding %s: %w", s.Name, err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("scenario: encoding %s: %w", s.Name, err)
	}
	return buf.Bytes(), nil
}

// dropNulls removes the keys with a null value from every mapping in n:
// they mean the same as no key, and read as if they meant something else.
// A set (a timeline entry's, a variant's) keeps its nulls: there a null
// means "back to the key not set", which no key does not.
func dropNulls(n *yaml.Node) {
	if n.Kind == yaml.MappingNode {
		out := n.Content[:0]
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == "set" {
				out = append(out, n.Content[i], n.Content[i+1])
				continue
			}
			if !isNull(n.Content[i+1]) {
				out = append(out, n.Content[i], n.Content[i+1])
				dropNulls(n.Content[i+1])
			}
		}
		n.Content = out
		return
	}
	for _, c := range n.Content {
		dropNulls(c)
	}
}
