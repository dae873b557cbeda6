package scenario

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/netjam/netjam/impair"
)

// Decoding of the direction keys, valid under link, link.uplink and
// link.downlink. Most keys take a short scalar form for the common case and
// a mapping for the rest, following netem's parameters.

// enum is an enumeration of package impair (a distribution, a loss model,
// a queue discipline), whose String is the word a scenario writes: the
// words are impair's, listed once.
type enum interface {
	~uint8
	String() string
}

// words lists the words of the values from..to of an enumeration.
func words[T enum](from, to T) []string {
	var out []string
	for v := from; v <= to; v++ {
		out = append(out, v.String())
	}
	return out
}

// wordValue returns the value from..to whose word is w; w is one of
// words(from, to).
func wordValue[T enum](w string, from, to T) T {
	for v := from; v < to; v++ {
		if v.String() == w {
			return v
		}
	}
	return to
}

// oneOfEnum decodes a word of the values from..to of an enumeration.
func oneOfEnum[T enum](d *decoder, n *yaml.Node, path, what string, from, to T) (T, bool) {
	w, ok := d.oneOf(n, path, what, words(from, to))
	if !ok {
		return from, false
	}
	return wordValue(w, from, to), true
}

// orMapping is the "expected" text of a key with a scalar and a mapping form.
func orMapping(scalar string, keys []string) string {
	return scalar + " or a mapping of " + strings.Join(keys, ", ")
}

// direction decodes one direction ("uplink" or "downlink"): each key from
// the direction's own mapping when it has the key, else from the keys
// shared under link. A direction's key replaces the shared one as a whole,
// so `delay: 10ms` in uplink drops a jitter set in link.delay; merging
// inside keys would make a variant's `link.delay.jitter` hard to predict.
//
// The result's lacksDelay is set when the direction reorders without a
// delay to reorder against. netem reorders by sending some packets at once
// while the others wait out the delay, so this is an error, which the
// caller reports once for a shared reorder that both directions lack.
func (d *decoder) direction(at, name string, shared, own map[string]*yaml.Node, mtu int, mtuOK bool) directionResult {
	dir := directionDefaults()
	// decode runs dec on key if present and reports whether the value was
	// valid (or absent, so its default is).
	decode := func(key string, dec func(n *yaml.Node, path string)) bool {
		n, p, _ := directionKey(at, name, shared, own, key)
		if n == nil {
			return true
		}
		before := d.count
		dec(n, p)
		return d.count == before
	}

	delayOK := decode("delay", func(n *yaml.Node, p string) { dir.Delay = d.delay(n, p) })
	decode("loss", func(n *yaml.Node, p string) { dir.Loss = d.loss(n, p) })
	decode("duplicate", func(n *yaml.Node, p string) { dir.Duplicate = d.chance(n, p) })
	decode("corrupt", func(n *yaml.Node, p string) { dir.Corrupt = d.chance(n, p) })
	reorderOK := decode("reorder", func(n *yaml.Node, p string) { dir.Reorder = d.reorder(n, p) })
	decode("rate", func(n *yaml.Node, p string) { dir.Rate = d.rate(n, p) })
	decode("slot", func(n *yaml.Node, p string) { dir.Slot = d.slot(n, p) })
	decode("queue", func(n *yaml.Node, p string) { dir.Queue = d.queue(n, p, mtu, mtuOK) })
	decode("inflight_limit", func(n *yaml.Node, p string) {
		if v, ok := d.integer(n, p, 1, maxPackets); ok {
			dir.InflightLimit = int(v)
		}
	})
	return directionResult{
		Config:     dir,
		lacksDelay: delayOK && reorderOK && lacksDelay(dir),
	}
}

// lacksDelay reports whether c reorders without a delay to reorder
// against (reorderNeedsDelay).
func lacksDelay(c impair.Config) bool { return c.Reorder.P > 0 && c.Delay.Time == 0 }

// directionResult is a decoded direction and what is wrong between its keys
// for the caller to report.
type directionResult struct {
	impair.Config
	lacksDelay bool
}

// directionKey returns the node of key for direction name of the link
// at (link, links.NAME), its path, and whether it is the link's shared
// key.
func directionKey(at, name string, shared, own map[string]*yaml.Node, key string) (*yaml.Node, string, bool) {
	if n := own[key]; n != nil {
		return n, at + "." + name + "." + key, false
	}
	if n := shared[key]; n != nil {
		return n, at + "." + key, true
	}
	return nil, "", false
}

// linkOf decodes the link mapping n (nil: no link) into both directions.
func (d *decoder) linkOf(n *yaml.Node, mtu int, mtuOK bool) (uplink, downlink impair.Config) {
	var shared, up, down map[string]*yaml.Node
	if n != nil {
		shared, _ = d.fields(n, "link", "a mapping of link keys", linkKeys)
		if n := shared["uplink"]; n != nil {
			up, _ = d.fields(n, "link.uplink", "a mapping of direction keys", directionKeys)
		}
		if n := shared["downlink"]; n != nil {
			down, _ = d.fields(n, "link.downlink", "a mapping of direction keys", directionKeys)
		}
	}
	return d.link("link", shared, up, down, mtu, mtuOK)
}

// link decodes both directions and reports a reorder without delay: once
// when the reorder is shared and both directions lack a delay, else for
// each direction that does, naming it when its reorder is the shared one.
func (d *decoder) link(at string, shared, up, down map[string]*yaml.Node, mtu int, mtuOK bool) (uplink, downlink impair.Config) {
	u := d.direction(at, "uplink", shared, up, mtu, mtuOK)
	w := d.direction(at, "downlink", shared, down, mtu, mtuOK)
	_, _, uShared := directionKey(at, "uplink", shared, up, "reorder")
	_, _, wShared := directionKey(at, "downlink", shared, down, "reorder")
	if u.lacksDelay && w.lacksDelay && uShared && wShared {
		d.errorf(shared["reorder"], at+".reorder", "%s", reorderNeedsDelay)
	} else {
		if u.lacksDelay {
			d.reorderWithoutDelay(at, "uplink", shared, up)
		}
		if w.lacksDelay {
			d.reorderWithoutDelay(at, "downlink", shared, down)
		}
	}
	return u.Config, w.Config
}

const reorderNeedsDelay = "reorder needs a delay in this direction to reorder against"

// reorderWithoutDelay reports that direction name reorders without delay.
func (d *decoder) reorderWithoutDelay(at, name string, shared, own map[string]*yaml.Node) {
	n, p, isShared := directionKey(at, name, shared, own, "reorder")
	msg := reorderNeedsDelay
	if isShared {
		msg += " (the " + name + " has none)"
	}
	d.errorf(n, p, "%s", msg)
}

// delay decodes `delay`: a duration, or the mapping form.
func (d *decoder) delay(n *yaml.Node, path string) impair.DelayConfig {
	var v impair.DelayConfig
	if n.Kind == yaml.ScalarNode {
		v.Time, _ = d.duration(n, path, false, maxDelay)
		return v
	}
	f, ok := d.fields(n, path, orMapping("a duration like 50ms", delayKeys), delayKeys)
	if !ok {
		return v
	}
	if x := f["time"]; x != nil {
		v.Time, _ = d.duration(x, join(path, "time"), false, maxDelay)
	}
	jitterOK := true
	if x := f["jitter"]; x != nil {
		v.Jitter, jitterOK = d.duration(x, join(path, "jitter"), false, maxDelay)
	}
	if x := f["distribution"]; x != nil {
		p := join(path, "distribution")
		if dist, ok := oneOfEnum(d, x, p, "distribution", impair.Uniform, impair.ParetoNormal); ok {
			v.Distribution = dist
			if msg := shapesNothing(dist, v.Jitter); jitterOK && msg != "" {
				d.errorf(x, p, "%s", msg)
			}
		}
	}
	if x := f["correlation"]; x != nil {
		v.Correlation, _ = d.correlation(x, join(path, "correlation"))
	}
	if x := f["allow_reorder"]; x != nil {
		v.AllowReorder, _ = d.boolean(x, join(path, "allow_reorder"))
	}
	return v
}

// shapesNothing says why distribution dist is refused with jitter, or
// "". Like tc, netjam refuses a distribution that would shape nothing:
// the mistake is usually a jitter forgotten or set elsewhere.
func shapesNothing(dist impair.Distribution, jitter time.Duration) string {
	if dist != impair.Uniform && jitter == 0 {
		return "distribution " + dist.String() + " needs a jitter to shape"
	}
	return ""
}

// loss decodes `loss`: a ratio (random loss), or the mapping form, whose
// keys depend on the model.
func (d *decoder) loss(n *yaml.Node, path string) impair.LossConfig {
	if n.Kind == yaml.ScalarNode {
		p, _ := d.ratio(n, path)
		return impair.LossConfig{Model: impair.LossRandom, P: p}
	}
	f, ok := d.fields(n, path, orMapping("a ratio like 5%", lossKeys), lossKeys)
	if !ok {
		return impair.LossConfig{}
	}
	v := impair.LossConfig{Model: impair.LossRandom}
	if x := f["model"]; x != nil {
		if v.Model, ok = oneOfEnum(d, x, join(path, "model"), "loss model", impair.LossRandom, impair.LossState); !ok {
			// The other keys cannot be checked against an unknown model.
			return impair.LossConfig{}
		}
	}
	for _, k := range lossKeys[1:] {
		if x := f[k]; x != nil && !slices.Contains(lossKeyModels[k], v.Model.String()) {
			d.errorf(x, join(path, k), "%s", notOfModel(k, v.Model))
			delete(f, k)
		}
	}
	// ratio decodes key into dst and reports whether it is given.
	ratio := func(key string, dst *float64) bool {
		x := f[key]
		if x == nil {
			return false
		}
		*dst, _ = d.ratio(x, join(path, key))
		return true
	}
	switch v.Model {
	case impair.LossRandom:
		if !ratio("p", &v.P) {
			d.errorf(n, path, "missing key p (the loss probability)")
		}
		if x := f["correlation"]; x != nil {
			v.Correlation, _ = d.correlation(x, join(path, "correlation"))
		}
	case impair.LossGE:
		if !ratio("p", &v.P) {
			d.errorf(n, path, "missing key p (the probability of going from the good to the bad state)")
		}
		geDefaults(&v, ratio("r", &v.R), ratio("1-h", &v.OneMinusH))
		ratio("1-k", &v.OneMinusK)
	case impair.LossState:
		d.stateLoss(n, path, &v, ratio)
	}
	return v
}

// notOfModel is the message of loss key k given with a model it does not
// apply to.
func notOfModel(k string, m impair.LossModel) string {
	return fmt.Sprintf("applies to %s only (the model is %s)", modelList(lossKeyModels[k]), m)
}

// stateLoss decodes the keys of a loss of the state model; ratio decodes
// one of them into its field and reports whether it is given.
func (d *decoder) stateLoss(n *yaml.Node, path string, v *impair.LossConfig, ratio func(string, *float64) bool) {
	before := d.count
	if !ratio("p13", &v.P13) {
		d.errorf(n, path, "missing key p13 (the probability of going from no loss to a burst)")
	}
	p31 := ratio("p31", &v.P31)
	ratio("p32", &v.P32)
	p23 := ratio("p23", &v.P23)
	ratio("p14", &v.P14)
	stateDefaults(v, p31, p23)
	// The probabilities of leaving a state must not add up to more than
	// 1. No slack is needed for decimal rounding: two ratios whose
	// decimals add up to 100% are each within half a unit in the last
	// place of their value, so their float sum rounds to exactly 1 (70% +
	// 30% == 1), and impair checks the same sums.
	if d.count == before {
		for _, msg := range stateSums(*v) {
			d.errorf(n, path, "%s", msg)
		}
	}
}

// stateSums says where the probabilities of leaving a state of loss v,
// of the state model, add up to more than 1.
func stateSums(v impair.LossConfig) []string {
	var out []string
	if v.P13+v.P14 > 1 {
		out = append(out, fmt.Sprintf("p13 + p14 is more than 100%% (%s + %s)", formatPercent(v.P13), formatPercent(v.P14)))
	}
	if v.P31+v.P32 > 1 {
		out = append(out, fmt.Sprintf("p31 + p32 is more than 100%% (%s + %s)", formatPercent(v.P31), formatPercent(v.P32)))
	}
	return out
}

// modelList writes "model gemodel" or "models random and gemodel".
func modelList(models []string) string {
	if len(models) == 1 {
		return "model " + models[0]
	}
	return "models " + andList(models)
}

// andList writes "a", "a and b", "a, b and c".
func andList(words []string) string {
	if len(words) == 1 {
		return words[0]
	}
	return strings.Join(words[:len(words)-1], ", ") + " and " + words[len(words)-1]
}

// chance decodes `duplicate` and `corrupt`: a ratio or {p, correlation}.
func (d *decoder) chance(n *yaml.Node, path string) impair.Chance {
	var v impair.Chance
	if n.Kind == yaml.ScalarNode {
		v.P, _ = d.ratio(n, path)
		return v
	}
	f, ok := d.fields(n, path, orMapping("a ratio like 5%", chanceKeys), chanceKeys)
	if !ok {
		return v
	}
	v.P, v.Correlation = d.probability(n, f, path)
	return v
}

// probability decodes the p (required) and correlation keys shared by the
// mappings of chances: duplicate, corrupt, reorder.
func (d *decoder) probability(n *yaml.Node, f map[string]*yaml.Node, path string) (p, corr float64) {
	if x := f["p"]; x != nil {
		p, _ = d.ratio(x, join(path, "p"))
	} else {
		d.errorf(n, path, "missing key p (the probability)")
	}
	if x := f["correlation"]; x != nil {
		corr, _ = d.correlation(x, join(path, "correlation"))
	}
	return p, corr
}

// reorder decodes `reorder`: a ratio or {p, correlation, gap}.
func (d *decoder) reorder(n *yaml.Node, path string) impair.ReorderConfig {
	v := directionDefaults().Reorder
	if n.Kind == yaml.ScalarNode {
		v.P, _ = d.ratio(n, path)
		return v
	}
	f, ok := d.fields(n, path, orMapping("a ratio like 5%", reorderKeys), reorderKeys)
	if !ok {
		return v
	}
	v.P, v.Correlation = d.probability(n, f, path)
	if x := f["gap"]; x != nil {
		if g, ok := d.integer(x, join(path, "gap"), 1, maxPackets); ok {
			v.Gap = int(g)
		}
	}
	return v
}

// rate decodes `rate`: a rate or {bitrate or trace or trace_data (and
// trace_bytes), packet_overhead, cell_size, cell_overhead}.
func (d *decoder) rate(n *yaml.Node, path string) impair.RateConfig {
	var v impair.RateConfig
	if n.Kind == yaml.ScalarNode {
		v.Bitrate, _ = d.bitrate(n, path)
		return v
	}
	f, ok := d.fields(n, path, orMapping("a rate like 10Mbps", rateKeys), rateKeys)
	if !ok {
		return v
	}
	switch b, t, td := f["bitrate"], f["trace"], f["trace_data"]; {
	case b != nil && t != nil:
		d.errorf(t, join(path, "trace"), "a link's rate is a bitrate or a trace, not both")
	case b != nil && td != nil:
		d.errorf(td, join(path, "trace_data"), "a link's rate is a bitrate or a trace, not both")
	case t != nil && td != nil:
		d.errorf(td, join(path, "trace_data"), "a trace is a file (trace) or its content (trace_data), not both")
	case b != nil:
		v.Bitrate, _ = d.bitrate(b, join(path, "bitrate"))
	case t != nil:
		v.Trace = d.trace(t, join(path, "trace"))
	case td != nil:
		v.Trace = d.traceData(td, join(path, "trace_data"))
	default:
		d.errorf(n, path, "missing key bitrate (or trace)")
	}
	if x := f["trace_bytes"]; x != nil {
		b, _ := d.integer(x, join(path, "trace_bytes"), 1, 65535)
		switch {
		case f["trace"] == nil && f["trace_data"] == nil:
			d.errorf(x, join(path, "trace_bytes"), "needs a trace (it is what each of its delivery opportunities carries)")
		case v.Trace != nil:
			v.Trace.Bytes = int(b)
		}
	}
	// Overheads are bytes added to (or, for a negative packet overhead,
	// taken from) each packet's size when computing its time on the wire.
	if x := f["packet_overhead"]; x != nil {
		o, _ := d.integer(x, join(path, "packet_overhead"), -1500, 1500)
		v.PacketOverhead = int(o)
	}
	if x := f["cell_size"]; x != nil {
		c, _ := d.integer(x, join(path, "cell_size"), 0, 65535)
		v.CellSize = int(c)
	}
	if x := f["cell_overhead"]; x != nil {
		c, ok := d.integer(x, join(path, "cell_overhead"), 0, 1500)
		v.CellOverhead = int(c)
		if ok && c > 0 && v.CellSize == 0 && f["cell_size"] == nil {
			d.errorf(x, join(path, "cell_overhead"), "%s", overheadNeedsCells)
		}
	}
	return v
}

const overheadNeedsCells = "needs a cell_size (cells are what the overhead is added to)"

// trace reads the trace file n names: a path relative to the scenario
// file's folder (or, given on the command line, to the working folder).
// The trace's File is the path it was read from.
func (d *decoder) trace(n *yaml.Node, path string) *impair.Trace {
	name, ok := d.text(n, path)
	if !ok {
		return nil
	}
	if name == "" {
		d.errorf(n, path, "empty: expected the path of a trace file (mahimahi's format: one delivery time in ms per line)")
		return nil
	}
	if d.setsNameNoFiles && d.origins[n] == originSet {
		// A file the scenario was read with is read already.
		if file := d.tracePath(n); d.known[file] != nil {
			return &impair.Trace{Times: d.known[file], File: file}
		}
		d.errorf(n, path, "a change made while the run runs names no trace file (netjam would read it for whoever asks); put the trace in the scenario's timeline, or its content in trace_data")
		return nil
	}
	file := d.tracePath(n)
	if times, ok := d.traces[file]; ok {
		// Read before: a timeline decodes the link once per change.
		return &impair.Trace{Times: times, File: file}
	}
	f, err := os.Open(file)
	if err != nil {
		d.errorf(n, path, "cannot read the trace: %v", err)
		return nil
	}
	defer f.Close()
	// A device or a pipe (/dev/stdin) could block the parse for good.
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		d.errorf(n, path, "%s is not a regular file", file)
		return nil
	}
	t, err := impair.ParseTrace(f)
	if err != nil {
		d.errorf(n, path, "%s: %v", file, err)
		return nil
	}
	t.File = file
	d.traces[file] = t.Times
	return t
}

// traceData decodes a trace given inline, its content in a trace file's
// format (impair.ParseTrace): the form for whoever may not name files
// netjam would read (netjam proxy's trace toxic, a change through the
// control API). Its File names it by its content's hash ("inline:" and 16
// hex digits), so that a later change of the link that keeps the trace
// keeps replaying it (impair.Trace.Same) rather than starting it again.
func (d *decoder) traceData(n *yaml.Node, path string) *impair.Trace {
	text, ok := d.text(n, path)
	if !ok {
		return nil
	}
	if strings.TrimSpace(text) == "" {
		d.errorf(n, path, "empty: expected a trace's content (mahimahi's format: one delivery time in ms per line)")
		return nil
	}
	sum := sha256.Sum256([]byte(text))
	id := "inline:" + hex.EncodeToString(sum[:8])
	if times, ok := d.traces[id]; ok {
		// Decoded before: a timeline decodes the link once per change.
		return &impair.Trace{Times: times, File: id}
	}
	t, err := impair.ParseTrace(strings.NewReader(text))
	if err != nil {
		d.errorf(n, path, "%v", err)
		return nil
	}
	t.File = id
	d.traces[id] = t.Times
	return t
}

// tracePath resolves the trace file n names, relative to the scenario
// file's folder (to the working folder for a command line's), and
// writes it back to n, so that the resolved scenario (Scenario.YAML),
// written elsewhere, and the timeline's record of the change name the
// file wherever they are read.
func (d *decoder) tracePath(n *yaml.Node) string {
	file := n.Value
	if !filepath.IsAbs(file) && d.origins[n] == "" && d.file != "" {
		file = filepath.Join(filepath.Dir(d.file), file)
	}
	if abs, err := filepath.Abs(file); err == nil {
		file, n.Value = abs, abs
	}
	return file
}

// resolveTraces resolves (tracePath) the trace files named in v, the
// value of a timeline's key: key itself ends in "trace", or v holds a
// "trace" key at any depth.
func (d *decoder) resolveTraces(key string, v *yaml.Node) {
	if v == nil {
		return
	}
	if v.Kind == yaml.ScalarNode {
		if (key == "trace" || strings.HasSuffix(key, ".trace")) && v.Value != "" && v.Tag != "!!null" {
			d.tracePath(v)
		}
		return
	}
	if v.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(v.Content); i += 2 {
			d.resolveTraces(v.Content[i].Value, v.Content[i+1])
		}
	}
}

// slot decodes `slot`: a duration (min = max) or {min, max, packets, bytes}.
func (d *decoder) slot(n *yaml.Node, path string) impair.SlotConfig {
	var v impair.SlotConfig
	if n.Kind == yaml.ScalarNode {
		v.Min, _ = d.duration(n, path, false, maxDelay)
		v.Max = v.Min
		return v
	}
	f, ok := d.fields(n, path, orMapping("a duration like 10ms", slotKeys), slotKeys)
	if !ok {
		return v
	}
	before := d.count
	if x := f["min"]; x != nil {
		v.Min, _ = d.duration(x, join(path, "min"), false, maxDelay)
	}
	// As in netem, one time given means fixed slots: max defaults to min.
	v.Max = v.Min
	if x := f["max"]; x != nil {
		v.Max, _ = d.duration(x, join(path, "max"), false, maxDelay)
	}
	if x := f["packets"]; x != nil {
		p, _ := d.integer(x, join(path, "packets"), 0, maxPackets)
		v.Packets = int(p)
	}
	if x := f["bytes"]; x != nil {
		v.Bytes, _ = d.size(x, join(path, "bytes"), 0, maxBytes)
	}
	if d.count == before {
		switch {
		case v.Max < v.Min:
			d.errorf(f["max"], join(path, "max"), "%s", maxBelowMin(f["max"].Value, v.Min))
		case v.Max == 0 && (v.Packets > 0 || v.Bytes > 0):
			d.errorf(n, path, "%s", slotsNeeded)
		}
	}
	return v
}

// maxBelowMin is the message of a slot's max, written text, below its
// min.
func maxBelowMin(text string, min time.Duration) string {
	return text + " is less than min " + formatDuration(min)
}

const slotsNeeded = "packets and bytes need slots: set min or max"

// queue decodes `queue`: a packet limit (integer), a byte limit (size), or
// the mapping form.
func (d *decoder) queue(n *yaml.Node, path string, mtu int, mtuOK bool) impair.QueueConfig {
	var v impair.QueueConfig
	// The node and path of the byte limit, for the check against the MTU.
	var bytesNode *yaml.Node
	bytesPath := path
	switch {
	case n.Kind == yaml.ScalarNode && n.ShortTag() == "!!int":
		l, _ := d.integer(n, path, 1, maxPackets)
		v.LimitPackets = int(l)
		return v
	case n.Kind == yaml.ScalarNode:
		// A string without a unit would be a byte count by the size rules
		// but a packet count by the integer rule; make the writer choose.
		if num, unit, ok := splitNumber(n.Value); ok && unit == "" {
			d.errorf(n, path, "%s is ambiguous: write %s for packets or %sB for bytes", quote(n.Value), num, num)
			return v
		}
		v.LimitBytes, _ = d.size(n, path, 1, maxBytes)
		bytesNode = n
	default:
		f, ok := d.fields(n, path, orMapping("a packet count like 1000, a size like 1.5MB", queueKeys), queueKeys)
		if !ok {
			return v
		}
		v = d.queueFields(f, path, mtu)
		bytesNode, bytesPath = f["bytes"], join(path, "bytes")
	}
	if mtuOK && v.LimitBytes > 0 && v.LimitBytes < int64(mtu) {
		d.errorf(bytesNode, bytesPath, "%s", belowMTU(bytesNode.Value, mtu))
	}
	return v
}

// belowMTU is the message of a queue's byte limit, written text, below
// the MTU.
func belowMTU(text string, mtu int) string {
	return fmt.Sprintf("%s is less than the MTU (%d bytes), so a full-size packet could never be queued", text, mtu)
}

// notOfDiscipline is the message of queue key k given with a discipline
// it does not apply to.
func notOfDiscipline(k string, disc impair.Discipline) string {
	return fmt.Sprintf("applies to %s only (the discipline is %s)", andList(queueKeyDisciplines[k]), disc)
}

// queueFields decodes the mapping form of `queue`, with defaults for the
// discipline; keys of other disciplines are errors, as they would be
// silently ignored otherwise.
func (d *decoder) queueFields(f map[string]*yaml.Node, path string, mtu int) impair.QueueConfig {
	disc := impair.DropTail
	if x := f["discipline"]; x != nil {
		var ok bool
		if disc, ok = oneOfEnum(d, x, join(path, "discipline"), "queue discipline", impair.DropTail, impair.PIE); !ok {
			return impair.QueueConfig{}
		}
	}
	for _, k := range queueKeys {
		if x, ds := f[k], queueKeyDisciplines[k]; x != nil && ds != nil && !slices.Contains(ds, disc.String()) {
			d.errorf(x, join(path, k), "%s", notOfDiscipline(k, disc))
			delete(f, k)
		}
	}
	v := queueDefaults(disc, mtu)
	if f["limit"] != nil || f["bytes"] != nil {
		v.LimitPackets = 0 // the limits given are all there is
	}
	if x := f["limit"]; x != nil {
		l, _ := d.integer(x, join(path, "limit"), 1, maxPackets)
		v.LimitPackets = int(l)
	}
	if x := f["bytes"]; x != nil {
		v.LimitBytes, _ = d.size(x, join(path, "bytes"), 1, maxBytes)
	}
	if x := f["ecn"]; x != nil {
		v.ECN, _ = d.boolean(x, join(path, "ecn"))
	}
	// The keys of other disciplines are gone from f.
	dur := func(key string, positive bool, dst *time.Duration) {
		if x := f[key]; x != nil {
			*dst, _ = d.duration(x, join(path, key), positive, maxDelay)
		}
	}
	integer := func(key string, hi int64, dst *int) {
		if x := f[key]; x != nil {
			i, _ := d.integer(x, join(path, key), 1, hi)
			*dst = int(i)
		}
	}
	number := func(key string, dst *float64) {
		if x := f[key]; x != nil {
			*dst, _ = d.number(x, join(path, key), 0, 32)
		}
	}
	dur("target", true, &v.Target)
	dur("interval", true, &v.Interval)
	integer("flows", 65536, &v.Flows)
	integer("quantum", maxPackets, &v.Quantum)
	dur("tupdate", true, &v.TUpdate)
	dur("max_burst", false, &v.MaxBurst)
	number("alpha", &v.Alpha)
	number("beta", &v.Beta)
	return v
}
