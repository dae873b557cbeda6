package scenario

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// The decoder walks a resolved tree and fills a Scenario. It is strict (an
// unknown or duplicate key, a wrong kind of node, a value out of range are
// all errors) and it never stops at the first problem, so a file is fixed in
// one round. Each value is checked where it is decoded, because that is
// where its node, with its line and origin, is at hand; relations between
// values (reorder needs a delay, slot max >= min) are checked once the
// values involved are decoded and their defaults filled, and only when those
// values were themselves valid, so one mistake gives one message.

// Limits of values. Most exist to catch typos (a delay of 50h was meant to
// be 50ms) and to keep the emulator's arithmetic far from overflow.
const (
	maxDelay    = time.Hour      // any delay, jitter, slot or queue time
	maxDuration = 24 * time.Hour // the run
	maxPackets  = 1 << 20        // packet counts: queue limit, in-flight limit, slot packets, reorder gap
	maxBytes    = 1 << 30        // byte counts: queue and slot byte limits
	maxName     = 64
	// The scenario's mtu: 576 is the least IPv4 host must take, 65535
	// the most an IP packet can be.
	minMTU = 576
	maxMTU = 65535
)

// validName is the form of scenario and variant names: they end up in file
// names and on command lines.
var validName = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

// nameProblem returns why name is not a valid scenario or variant name, or
// "" if it is valid.
func nameProblem(name string) string {
	switch {
	case len(name) > maxName:
		return fmt.Sprintf("at most %d characters", maxName)
	case !validName.MatchString(name) || name == "." || name == "..":
		return "use letters, digits, '.', '_' and '-'"
	}
	return ""
}

// itemNameProblem says why name cannot name an item of a list that dotted
// keys address (flows.NAME.cc, links.NAME.delay, wifi.stations.NAME.snr),
// or "": a name's problems, and a '.', which would split the key.
func itemNameProblem(name string) string {
	switch {
	case len(name) > maxName:
		return fmt.Sprintf("at most %d characters", maxName)
	case strings.Contains(name, "."):
		return "use letters, digits, '_' and '-': a '.' would split the dotted keys that name it"
	case !validItemName.MatchString(name):
		return "use letters, digits, '_' and '-'"
	}
	return ""
}

// validItemName is the form of an item's name (itemNameProblem).
var validItemName = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// decoder decodes one resolved tree, collecting errors.
type decoder struct {
	file    string
	origins map[*yaml.Node]string // origin of nodes that did not come from the file
	errs    Errors
	seen    map[string]bool // texts in errs: shared link keys are decoded once per direction
	// count is the number of problems found, repeats included. A caller
	// compares it before and after decoding a value to learn whether the
	// value was valid, which errs cannot tell once repeats are dropped.
	count int
	// congestionControls is Options.CongestionControls, for kernel flows.
	congestionControls func() ([]string, error)
	// traces holds the trace files read so far, by absolute path: the
	// timeline decodes the link in force after every change (up to
	// MaxTimelineChanges of them), and each trace is read and held once.
	// Its sub-decoders share it.
	traces map[string][]time.Duration
	// setsNameNoFiles is Options.setsNameNoFiles, known its
	// knownTraces.
	setsNameNoFiles bool
	known           map[string][]time.Duration
}

func newDecoder(file string, origins map[*yaml.Node]string) *decoder {
	return &decoder{file: file, origins: origins, seen: map[string]bool{}, congestionControls: kernelCongestionControls, traces: map[string][]time.Duration{}}
}

// errorf reports a problem with node n (nil: the file as a whole) at path.
func (d *decoder) errorf(n *yaml.Node, path, format string, args ...any) {
	d.count++
	e := &Error{File: d.file, Path: path, Msg: fmt.Sprintf(format, args...)}
	if n != nil {
		e.Line = n.Line
		e.Origin = d.origins[n]
		if e.commandLine() {
			// The file's line numbers mean nothing for a command-line value.
			e.File, e.Line = "", 0
		}
	}
	d.add(e)
}

// add appends e unless the same text is already there.
func (d *decoder) add(e *Error) {
	if s := e.Error(); !d.seen[s] {
		d.seen[s] = true
		d.errs = append(d.errs, e)
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// mapping checks the keys of mapping n against keys and returns the values
// by key. Unknown and duplicate keys are reported and left out, and so are
// null values, which mean "not set".
func (d *decoder) mapping(n *yaml.Node, path string, keys []string) map[string]*yaml.Node {
	out := map[string]*yaml.Node{}
	first := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			d.errorf(k, path, "expected a plain key, got %s", describe(k))
			continue
		}
		p := join(path, k.Value)
		switch prev, dup := first[k.Value]; {
		case k.ShortTag() == "!!merge":
			d.errorf(k, path, "merge keys (<<) are not supported; write the keys out")
		case !slices.Contains(keys, k.Value):
			d.errorf(k, p, "%s", unknownKey(path, k.Value, keys))
		case dup && (d.origins[prev] != "" || prev.Line == 0):
			d.errorf(k, p, "duplicate key")
		case dup:
			d.errorf(k, p, "duplicate key (first at line %d)", prev.Line)
		default:
			first[k.Value] = k
			if !isNull(v) {
				out[k.Value] = v
			}
		}
	}
	return out
}

// fields is mapping for a value that must be a mapping; want says what the
// value may be instead, for the message when it is not.
func (d *decoder) fields(n *yaml.Node, path, want string, keys []string) (map[string]*yaml.Node, bool) {
	if n.Kind != yaml.MappingNode {
		d.errorf(n, path, "expected %s, got %s", want, describe(n))
		return nil, false
	}
	return d.mapping(n, path, keys), true
}

// scalar reports whether n is a scalar, reporting an error if not; want
// says what was expected, such as "a duration like 50ms".
func (d *decoder) scalar(n *yaml.Node, path, want string) bool {
	if n.Kind == yaml.ScalarNode {
		return true
	}
	d.errorf(n, path, "expected %s, got %s", want, describe(n))
	return false
}

// The ranges of values, shared by the decoder, which quotes a value as
// the file writes it, and NewLink, which takes Go values: each returns
// the range as a message writes it ("0s to 1h") and whether v is in it.

// durationRange is [0, max], or (0, max] when positive.
func durationRange(v time.Duration, positive bool, max time.Duration) (string, bool) {
	if positive {
		return "more than 0s, up to " + formatDuration(max), v > 0 && v <= max
	}
	return "0s to " + formatDuration(max), v >= 0 && v <= max
}

// ratioRange is a probability's, [0, 1].
func ratioRange(v float64) (string, bool) { return "0% to 100%", v >= 0 && v <= 1 }

// correlationRange is a correlation's, [0, 1): at 100% the random
// stream would never change again.
func correlationRange(v float64) (string, bool) {
	return "0% up to but not including 100%", v >= 0 && v < 1
}

// integerRange is [lo, hi].
func integerRange(v, lo, hi int64) (string, bool) {
	return fmt.Sprintf("%d to %d", lo, hi), v >= lo && v <= hi
}

// sizeRange is [lo, hi] bytes.
func sizeRange(v, lo, hi int64) (string, bool) {
	return fmt.Sprintf("%dB to %dB", lo, hi), v >= lo && v <= hi
}

// numberRange is [lo, hi]; NaN is in no range.
func numberRange(v, lo, hi float64) (string, bool) {
	return fmt.Sprintf("%g to %g", lo, hi), v >= lo && v <= hi
}

// outOfRange is the message of value, written text, outside the range
// want.
func outOfRange(text, want string) string {
	return text + " is out of range (expected " + want + ")"
}

// duration decodes a duration in [0, max], or (0, max] when positive.
func (d *decoder) duration(n *yaml.Node, path string, positive bool, max time.Duration) (time.Duration, bool) {
	if !d.scalar(n, path, "a duration like 50ms") {
		return 0, false
	}
	v, err := parseDuration(n.Value)
	if err != nil {
		d.errorf(n, path, "%v", err)
		return 0, false
	}
	if want, ok := durationRange(v, positive, max); !ok {
		d.errorf(n, path, "%s", outOfRange(n.Value, want))
		return 0, false
	}
	return v, true
}

// ratio decodes a probability in [0, 1].
func (d *decoder) ratio(n *yaml.Node, path string) (float64, bool) {
	if !d.scalar(n, path, "a ratio like 5%") {
		return 0, false
	}
	v, err := ParseRatio(n.Value)
	if err != nil {
		d.errorf(n, path, "%v", err)
		return 0, false
	}
	if want, ok := ratioRange(v); !ok {
		d.errorf(n, path, "%s", outOfRange(n.Value, want))
		return 0, false
	}
	return v, true
}

// correlation decodes a correlation in [0, 1): at 100% the random stream
// would never change again.
func (d *decoder) correlation(n *yaml.Node, path string) (float64, bool) {
	if !d.scalar(n, path, "a ratio like 25%") {
		return 0, false
	}
	v, err := ParseRatio(n.Value)
	if err != nil {
		d.errorf(n, path, "%v", err)
		return 0, false
	}
	if want, ok := correlationRange(v); !ok {
		d.errorf(n, path, "%s", outOfRange(n.Value, want))
		return 0, false
	}
	return v, true
}

// integer decodes an integer in [lo, hi]. It must be a YAML integer: a
// quoted "1500" is a string, and accepting it here but not where a string
// means something else (a queue size) would be a trap.
func (d *decoder) integer(n *yaml.Node, path string, lo, hi int64) (int64, bool) {
	if !d.scalar(n, path, "an integer") {
		return 0, false
	}
	if n.ShortTag() != "!!int" {
		d.errorf(n, path, "expected an integer, got %s", describe(n))
		return 0, false
	}
	v, err := strconv.ParseInt(strings.ReplaceAll(n.Value, "_", ""), 0, 64)
	if want, ok := integerRange(v, lo, hi); err != nil || !ok {
		d.errorf(n, path, "%s", outOfRange(n.Value, want))
		return 0, false
	}
	return v, true
}

// seed decodes a uint64.
func (d *decoder) seed(n *yaml.Node, path string) (uint64, bool) {
	if !d.scalar(n, path, "an integer") {
		return 0, false
	}
	if n.ShortTag() != "!!int" {
		d.errorf(n, path, "expected an integer, got %s", describe(n))
		return 0, false
	}
	v, err := strconv.ParseUint(strings.ReplaceAll(n.Value, "_", ""), 0, 64)
	if err != nil {
		d.errorf(n, path, "%s is out of range (expected 0 to %d)", n.Value, uint64(math.MaxUint64))
		return 0, false
	}
	return v, true
}

// size decodes a size in bytes in [lo, hi].
func (d *decoder) size(n *yaml.Node, path string, lo, hi int64) (int64, bool) {
	if !d.scalar(n, path, "a size like 1.5MB") {
		return 0, false
	}
	v, err := ParseSize(n.Value)
	if err != nil {
		d.errorf(n, path, "%v", err)
		return 0, false
	}
	if want, ok := sizeRange(v, lo, hi); !ok {
		d.errorf(n, path, "%s", outOfRange(n.Value, want))
		return 0, false
	}
	return v, true
}

// bitrate decodes a rate; "unlimited" gives 0, a zero rate is an error (it
// would stop all traffic, and nobody means that).
func (d *decoder) bitrate(n *yaml.Node, path string) (uint64, bool) {
	if !d.scalar(n, path, "a rate like 10Mbps") {
		return 0, false
	}
	v, err := ParseRate(n.Value)
	if err != nil {
		d.errorf(n, path, "%v", err)
		return 0, false
	}
	if v == 0 && n.Value != "unlimited" {
		d.errorf(n, path, "%s is out of range (expected more than 0; write unlimited for no rate limit)", n.Value)
		return 0, false
	}
	return v, true
}

// boolean decodes true or false.
func (d *decoder) boolean(n *yaml.Node, path string) (bool, bool) {
	if !d.scalar(n, path, "true or false") {
		return false, false
	}
	if n.ShortTag() != "!!bool" {
		d.errorf(n, path, "expected true or false, got %s", describe(n))
		return false, false
	}
	return strings.EqualFold(n.Value, "true"), true
}

// number decodes a plain number in [lo, hi].
func (d *decoder) number(n *yaml.Node, path string, lo, hi float64) (float64, bool) {
	if !d.scalar(n, path, "a number") {
		return 0, false
	}
	if t := n.ShortTag(); t != "!!int" && t != "!!float" {
		d.errorf(n, path, "expected a number, got %s", describe(n))
		return 0, false
	}
	text := strings.ReplaceAll(n.Value, "_", "")
	v, err := strconv.ParseFloat(text, 64)
	if n.ShortTag() == "!!int" {
		// YAML integers may be hex or octal, which ParseFloat reads otherwise.
		var i int64
		i, err = strconv.ParseInt(text, 0, 64)
		v = float64(i)
	}
	if want, ok := numberRange(v, lo, hi); err != nil || !ok {
		d.errorf(n, path, "%s", outOfRange(n.Value, want))
		return 0, false
	}
	return v, true
}

// oneOf decodes a word from options; what names the kind of word in
// messages ("distribution").
func (d *decoder) oneOf(n *yaml.Node, path, what string, options []string) (string, bool) {
	if !d.scalar(n, path, "a "+what) {
		return "", false
	}
	if slices.Contains(options, n.Value) {
		return n.Value, true
	}
	if s := suggest(n.Value, options); s != "" {
		d.errorf(n, path, "%s is not a %s; did you mean %q?", quote(n.Value), what, s)
	} else {
		d.errorf(n, path, "%s", notOneOf(quote(n.Value), what, options))
	}
	return "", false
}

// notOneOf is the message of a value, written text, that is none of
// options; what names the kind of word ("distribution").
func notOneOf(text, what string, options []string) string {
	return fmt.Sprintf("%s is not a %s (expected one of: %s)", text, what, strings.Join(options, ", "))
}

// text decodes free text. Any scalar is taken as written, so that
// "name: 2024" needs no quotes.
func (d *decoder) text(n *yaml.Node, path string) (string, bool) {
	if !d.scalar(n, path, "text") {
		return "", false
	}
	return n.Value, true
}

// scenario decodes the resolved tree root. Its variants key is ignored:
// Parse decodes the variants once, from the file. defaultName is the
// scenario name when the tree has none.
func (d *decoder) scenario(root *yaml.Node, defaultName string) *Scenario {
	s := scenarioDefaults(defaultName)
	s.tree = root
	f, _ := d.fields(root, "", "a mapping of scenario keys", rootKeys)
	d.scenarioName(f["name"], s)
	mtuOK := d.topLevel(f, s)
	if n := f["wifi"]; n != nil {
		s.WiFi = d.wifi(n)
	}
	if n := f["tun"]; n != nil {
		s.TUN = d.tun(n, s.MTU, mtuOK, s.WiFi)
	}
	if n := f["nodes"]; n != nil {
		s.Nodes = d.nodes(n, s.TUN, f["tun"], s.MTU)
	}
	if n := f["flows"]; n != nil {
		s.Flows = d.flows(n, s.MTU, mtuOK, s.Duration, s.WiFi, s.TUN, len(s.Nodes) > 0)
	}
	if n := f["clock"]; n != nil {
		s.Clock = d.clock(n, s.TUN)
	}

	linkBefore := d.count
	d.topology(f, s, s.MTU, mtuOK)
	d.flowPaths(f["flows"], s.Flows, s.Paths)
	if d.count == linkBefore {
		d.virtualRates(f["clock"], s)
	}
	d.forwardPaths(f["tun"], s.TUN, s.Paths)
	d.nodeLinks(f["nodes"], s.Links)
	d.flowNodes(f["flows"], s.Flows, s.Nodes)
	if n := f["expect"]; n != nil {
		s.Expect = d.expect(n, s.Flows, s.Links)
	}
	if n := f["capture"]; n != nil {
		s.Capture = d.capture(n, s.Links)
	}
	if n := f["timeline"]; n != nil {
		if d.count == linkBefore {
			s.Timeline = d.timeline(n, root, s.Duration, s.MTU, mtuOK, s.Links, s.Flows, s.Nodes)
		}
	}
	return s
}

// The clocks a run may take its time from (the clock key).
const (
	ClockReal    = "real"
	ClockVirtual = "virtual"
)

// clock decodes the clock key, n; the virtual clock needs a lab.
func (d *decoder) clock(n *yaml.Node, t *TUN) string {
	v, ok := d.oneOf(n, "clock", "clock", []string{ClockReal, ClockVirtual})
	if !ok {
		return ClockReal
	}
	if v == ClockVirtual && t != nil {
		d.errorf(n, "clock", "virtual runs labs of netstack hosts only, and this run has a tun section: TUN mode and kernel flows run on the wall clock (use clock: real)")
	}
	return v
}

// virtualRates refuses, on the virtual clock (n), a TCP flow bounded by a
// duration (not a size) whose path has no rate: time moves only while the
// run waits, and a path whose only limits are delays (or none) lets TCP
// move any amount of data in no time, so the run's time would crawl or
// never advance (a flow with a size ends with its data). A Wi-Fi cell's
// medium is a rate of its own.
func (d *decoder) virtualRates(n *yaml.Node, s *Scenario) {
	if s.Clock != ClockVirtual || s.WiFi != nil {
		return
	}
	rated := map[string]bool{}
	var all []string
	for _, l := range s.Links {
		rated[l.Name] = l.Uplink.Rate.Bitrate > 0 || l.Uplink.Rate.Trace != nil || l.Downlink.Rate.Bitrate > 0 || l.Downlink.Rate.Trace != nil
		all = append(all, l.Name)
	}
	for _, f := range s.Flows {
		if f.Type != "tcp" || f.TCP.Size > 0 {
			continue
		}
		via := all
		if p := s.FlowPath(f); len(p.Via) > 0 {
			via = p.Via
		}
		if !slices.ContainsFunc(via, func(l string) bool { return rated[l] }) {
			d.errorf(n, "clock", "virtual: tcp flow %s sends for a duration across no rate (%s): on the virtual clock, a path whose only limits are delays moves any amount of data in no time, and the run's time would not advance; give a link it crosses a rate (link.rate: 100Mbps), give the flow a size, or use clock: real", f.Name, strings.Join(via, ", "))
			return
		}
	}
}

// scenarioName decodes the name, n; without one, s keeps the file's.
func (d *decoder) scenarioName(n *yaml.Node, s *Scenario) {
	switch {
	case n != nil:
		if v, ok := d.text(n, "name"); ok {
			if why := nameProblem(v); why != "" {
				d.errorf(n, "name", "%s is not a valid name (%s)", quote(v), why)
			}
			s.Name = v
		}
	case s.Name == "":
		d.errorf(nil, "name", "not set, and there is no file name to take it from; set name")
	default:
		if why := nameProblem(s.Name); why != "" {
			d.errorf(nil, "name", "not set, and the file name %s is not a valid name (%s); set name", quote(s.Name), why)
		}
	}
}

// topLevel decodes the top level's values other than the name: the
// description, seed, duration, mtu and sample interval. It reports whether
// the mtu is valid: relations with it are only checked against a valid one.
func (d *decoder) topLevel(f map[string]*yaml.Node, s *Scenario) (mtuOK bool) {
	if n := f["description"]; n != nil {
		s.Description, _ = d.text(n, "description")
	}
	if n := f["seed"]; n != nil {
		s.Seed, s.SeedSet = d.seed(n, "seed")
	}
	if n := f["duration"]; n != nil {
		if v, ok := d.duration(n, "duration", true, maxDuration); ok {
			s.Duration = v
		}
	}
	mtuOK = true
	if n := f["mtu"]; n != nil {
		var v int64
		if v, mtuOK = d.integer(n, "mtu", minMTU, maxMTU); mtuOK {
			s.MTU = int(v)
		}
	}
	if n := f["sample_interval"]; n != nil && d.scalar(n, "sample_interval", "a duration like 50ms") {
		v, err := parseDuration(n.Value)
		switch {
		case err != nil:
			d.errorf(n, "sample_interval", "%v", err)
		case v < time.Millisecond || v > time.Minute:
			d.errorf(n, "sample_interval", "%s is out of range (expected 1ms to 1m)", n.Value)
		default:
			s.SampleInterval = v
		}
	}
	return mtuOK
}

// variant is one entry of the variants list.
type variant struct {
	name string
	at   *yaml.Node // the name's node, for errors about the whole variant
	sets []override
}

// override is one key of a variant's set or one --set: a dotted key path
// and the value to put there.
type override struct {
	key   string
	at    *yaml.Node // the key in the file; nil for --set
	value *yaml.Node
}

// variants decodes the variants list of the file. Variants with an invalid
// or repeated name are reported and left out.
func (d *decoder) variants(n *yaml.Node) []variant {
	if n.Kind != yaml.SequenceNode {
		d.errorf(n, "variants", "expected a list of variants, got %s", describe(n))
		return nil
	}
	var out []variant
	first := map[string]*yaml.Node{}
	for i, item := range n.Content {
		path := fmt.Sprintf("variants[%d]", i)
		f, ok := d.fields(item, path, "a mapping with name and set", variantKeys)
		if !ok {
			continue
		}
		nn := f["name"]
		if nn == nil {
			d.errorf(item, path, "missing key name")
			continue
		}
		name, ok := d.text(nn, path+".name")
		if !ok {
			continue
		}
		if why := nameProblem(name); why != "" {
			d.errorf(nn, path+".name", "%s is not a valid name (%s)", quote(name), why)
			continue
		}
		path = "variants." + name
		if prev, dup := first[name]; dup {
			d.errorf(nn, path+".name", "duplicate variant name (first at line %d)", prev.Line)
			continue
		}
		first[name] = nn
		v := variant{name: name, at: nn}
		if sn := f["set"]; sn != nil {
			v.sets = d.variantSet(sn, path+".set")
		}
		out = append(out, v)
	}
	return out
}

// variantSet decodes the set mapping of a variant: dotted keys, each with
// the value to put there, in file order.
func (d *decoder) variantSet(n *yaml.Node, path string) []override {
	if n.Kind != yaml.MappingNode {
		d.errorf(n, path, "expected a mapping of dotted keys to values, got %s", describe(n))
		return nil
	}
	return d.dottedSet(n, path, func(k, _ *yaml.Node, p string) bool {
		msg := checkOverrideKey(k.Value)
		if head, _, _ := strings.Cut(k.Value, "."); head == "name" {
			// All runs of a plan share its name; --set name=... renames the plan.
			msg = "a variant cannot change the scenario name"
		}
		if msg != "" {
			d.errorf(k, p, "%s", msg)
			return false
		}
		return true
	})
}

// dottedSet decodes the mapping n of dotted keys to values (a variant's
// set, a timeline entry's) in file order: each key once, and each kept
// when keep, which reports its own errors (p is the key's path), says so.
func (d *decoder) dottedSet(n *yaml.Node, path string, keep func(k, v *yaml.Node, p string) bool) []override {
	var sets []override
	first := map[string]*yaml.Node{}
	for j := 0; j+1 < len(n.Content); j += 2 {
		k, val := n.Content[j], n.Content[j+1]
		if k.Kind != yaml.ScalarNode {
			d.errorf(k, path, "expected a dotted key, got %s", describe(k))
			continue
		}
		p := join(path, k.Value)
		if prev, dup := first[k.Value]; dup {
			d.errorf(k, p, "duplicate key (first at line %d)", prev.Line)
			continue
		}
		first[k.Value] = k
		if i := replaced(sets, k.Value); i >= 0 {
			d.errorf(k, p, "replaces %s, set before it (line %d), which would be lost: put %s first, or set %s inside it", sets[i].key, sets[i].at.Line, k.Value, strings.TrimPrefix(sets[i].key, k.Value+"."))
			continue
		}
		if keep(k, val, p) {
			sets = append(sets, override{key: k.Value, at: k, value: val})
		}
	}
	return sets
}

// replaced returns the index of the first of sets whose key is inside
// key, which a set of key would replace, and lose without a word; -1 if
// none.
func replaced(sets []override, key string) int {
	return slices.IndexFunc(sets, func(o override) bool { return strings.HasPrefix(o.key, key+".") })
}

// checkOverrideKey returns why key may not be overridden, or "". The
// variants cannot be: they are expanded before any override applies.
func checkOverrideKey(key string) string {
	if head, _, _ := strings.Cut(key, "."); head == "variants" {
		return "variants cannot be overridden"
	}
	return ""
}
