package scenario

import (
	"container/heap"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/netjam/netjam/impair"
)

// The timeline changes the link while a run runs:
//
//	timeline:
//	  - {at: 10s, set: {link.uplink.rate: 2Mbps}}                        # a step
//	  - {at: 20s, for: 3s, set: {link.loss: 100%}}                       # reverts after 3 s
//	  - {at: 30s, ramp: 5s, set: {link.delay: 200ms}}                    # linear, 10 ms steps
//	  - {every: 10s, from: 40s, for: 500ms, set: {link.downlink.loss: 30%}}  # repeats
//
// It is compiled at load time into the changes in time order, each with
// both directions' settings in force from then on, every one of them
// decoded and validated as a file's link is: a mistake in the timeline is
// an error of the file (file:line:key), not of the run at 20 s. The
// emulator hands the changes to its directions (impair.Runner.SetAt),
// which apply each at its exact time.

// Limits of the timeline.
const (
	// MaxTimelineChanges bounds the changes a timeline compiles to: one
	// per step, two per `for`, one per ramp step (ramps are the bulk: 10
	// s of ramp is 1000 steps): what a direction holds pending.
	MaxTimelineChanges = impair.MaxScheduled
	// RampStep is the longest step of a ramp.
	RampStep = 10 * time.Millisecond
)

// tlEvent is one assignment of the timeline, in time order.
type tlEvent struct {
	at    time.Duration
	seq   int // order among events at the same time: the order they were made
	key   string
	value *yaml.Node // nil: back to the key not set
	// ramp marks the start of a ramp: its steps are made when it starts,
	// from the value then in force.
	ramp time.Duration
	// revert is the end of the `for` window this event starts: its value
	// is the one in force before the start, known when the start applies.
	revert *tlEvent
	at0    *yaml.Node // the key's node in the file, for errors
	entry  string     // the entry's path, timeline[i]
	// reset, instead of a key, names the TCP flow whose connection the
	// event ends.
	reset string
	// partition, instead of a key, is the partition from then on (no
	// groups: healed).
	partition *Partition
}

type tlHeap []*tlEvent

func (h tlHeap) Len() int { return len(h) }
func (h tlHeap) Less(i, j int) bool {
	return h[i].at < h[j].at || h[i].at == h[j].at && h[i].seq < h[j].seq
}
func (h tlHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *tlHeap) Push(x any)   { *h = append(*h, x.(*tlEvent)) }
func (h *tlHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// window is the time a timeline entry holds a key, for the overlap check.
type window struct {
	from, to time.Duration // [from, to); a step is [at, at]
	entry    string
	node     *yaml.Node
	span     bool // a `for` or a ramp: it holds the key for a while
}

// timeline decodes and compiles the timeline n against the link in root.
func (d *decoder) timeline(n *yaml.Node, root *yaml.Node, dur time.Duration, mtu int, mtuOK bool, base []Link, fls []Flow, nodes []Node) []TimelinePoint {
	if n.Kind != yaml.SequenceNode {
		d.errorf(n, "timeline", "expected a list of changes like {at: 10s, set: {link.loss: 5%%}}, got %s", describe(n))
		return nil
	}
	before := d.count
	b := &tlBuild{windows: map[string][]window{}}
	for i, item := range n.Content {
		path := fmt.Sprintf("timeline[%d]", i)
		f, ok := d.fields(item, path, "a mapping with at (or every), set, and for or ramp", timelineKeys)
		if !ok {
			continue
		}
		e, ok := d.timelineEntry(item, f, path)
		if rn := f["reset"]; rn != nil {
			if !d.timelineReset(b, e, ok, f, path, dur, fls) {
				return nil
			}
			continue
		}
		if f["partition"] != nil || f["heal"] != nil {
			if !d.timelinePartition(b, e, ok, f, path, dur, nodes) {
				return nil
			}
			continue
		}
		sn := f["set"]
		if sn == nil {
			d.errorf(item, path, "missing key set")
			continue
		}
		sets := d.timelineSet(sn, join(path, "set"), e.rampOK, root)
		if !ok || len(sets) == 0 {
			continue
		}
		if !d.schedule(b, e, sets, path, dur, f["every"]) {
			return nil
		}
	}
	d.overlaps(b.windows)
	if d.count != before {
		return nil
	}
	return d.compile(b.h, root, mtu, mtuOK, base, nodes)
}

// timelineReset decodes and schedules the reset entry at path, whose keys
// are f and times e (valid when ok): reset: {flow: NAME} of a TCP flow, at
// a time or every so often, with no set, for or ramp. It reports false
// when the timeline has too many events.
func (d *decoder) timelineReset(b *tlBuild, e tlEntry, ok bool, f map[string]*yaml.Node, path string, dur time.Duration, fls []Flow) bool {
	rn := f["reset"]
	for _, k := range []string{"set", "for", "ramp"} {
		if f[k] != nil {
			d.errorf(f[k], join(path, k), "a reset entry ends connections; it has no %s (give the change an entry of its own)", k)
			ok = false
		}
	}
	before := d.count
	rf, fieldsOK := d.fields(rn, join(path, "reset"), "a mapping like {flow: bulk}", resetKeys)
	if !fieldsOK || d.count != before {
		return true
	}
	fn := rf["flow"]
	if fn == nil {
		d.errorf(rn, join(path, "reset"), "missing key flow (the name of a tcp flow)")
		return true
	}
	name, nameOK := d.text(fn, join(path, "reset.flow"))
	if !nameOK {
		return true
	}
	i := slices.IndexFunc(fls, func(fl Flow) bool { return fl.Name == name })
	switch {
	case i < 0:
		d.errorf(fn, join(path, "reset.flow"), "%s names no flow of the scenario", quote(name))
		return true
	case fls[i].Type != "tcp":
		d.errorf(fn, join(path, "reset.flow"), "%s is a %s flow; only tcp connections can be reset", quote(name), fls[i].Type)
		return true
	case !ok:
		return true
	}
	return d.scheduleReset(b, e, name, fn, path, dur, f["every"])
}

// starts are the times entry e (at path) applies: e.at, or every e.every
// from e.from until dur (every is its node); false, the error made, when
// there are too many.
func (d *decoder) starts(e tlEntry, path string, dur time.Duration, every *yaml.Node) ([]time.Duration, bool) {
	if !e.everyOK {
		return []time.Duration{e.at}, true
	}
	var starts []time.Duration
	for t := e.from; t < dur; t += e.every {
		if len(starts) >= MaxTimelineChanges {
			d.tooManyChanges(every, path)
			return nil, false
		}
		starts = append(starts, t)
	}
	return starts, true
}

// scheduleReset adds the reset events of the entry at path: one at e.at,
// or one every e.every from e.from until dur.
func (d *decoder) scheduleReset(b *tlBuild, e tlEntry, name string, at0 *yaml.Node, path string, dur time.Duration, every *yaml.Node) bool {
	starts, ok := d.starts(e, path, dur, every)
	if !ok {
		return false
	}
	for _, t := range starts {
		if !b.push(&tlEvent{at: t, reset: name, at0: at0, entry: path}) {
			d.tooManyChanges(every, path)
			return false
		}
	}
	return true
}

// tlEntry is the times of a timeline entry: at, or every (from) with
// their for or ramp; each ...OK when given and valid.
type tlEntry struct {
	at, every, from, forD, ramp time.Duration
	everyOK, forOK, rampOK      bool
}

// timelineEntry decodes the times of entry item, whose keys are f, and
// reports whether they are valid together.
func (d *decoder) timelineEntry(item *yaml.Node, f map[string]*yaml.Node, path string) (tlEntry, bool) {
	get := func(key string, positive bool) (time.Duration, bool) {
		if x := f[key]; x != nil {
			return d.duration(x, join(path, key), positive, maxDuration)
		}
		return 0, false
	}
	var e tlEntry
	var atOK bool
	e.at, atOK = get("at", false)
	e.every, e.everyOK = get("every", true)
	e.from, _ = get("from", false)
	e.forD, e.forOK = get("for", true)
	e.ramp, e.rampOK = get("ramp", true)
	switch {
	case f["at"] != nil && f["every"] != nil:
		d.errorf(f["every"], join(path, "every"), "an entry is at a time or repeats every, not both")
	case f["at"] == nil && f["every"] == nil:
		d.errorf(item, path, "missing key at (or every)")
	case f["from"] != nil && f["every"] == nil:
		d.errorf(f["from"], join(path, "from"), "applies to repeating entries (every) only")
	case f["ramp"] != nil && f["for"] != nil:
		d.errorf(f["ramp"], join(path, "ramp"), "an entry ramps or holds for a while, not both")
	case f["ramp"] != nil && f["every"] != nil:
		d.errorf(f["ramp"], join(path, "ramp"), "a repeating entry cannot ramp")
	case e.everyOK && e.forOK && e.forD >= e.every:
		d.errorf(f["for"], join(path, "for"), "%s is not shorter than every (%s): the windows would overlap", f["for"].Value, f["every"].Value)
	default:
		valid := func(key string, ok bool) bool { return f[key] == nil || ok }
		return e, valid("at", atOK) && valid("every", e.everyOK) && valid("for", e.forOK) && valid("ramp", e.rampOK)
	}
	return e, false
}

// tlBuild collects the timeline's events in time order, and the windows
// in which entries hold each key.
type tlBuild struct {
	h       tlHeap
	seq     int
	windows map[string][]window
}

// push adds e, and reports false when the timeline has too many events.
func (b *tlBuild) push(e *tlEvent) bool {
	if len(b.h) >= 2*MaxTimelineChanges {
		return false
	}
	e.seq = b.seq
	b.seq++
	heap.Push(&b.h, e)
	return true
}

// schedule adds the events of entry e, at path, to b: each of its sets at
// each of its starts (one, or one every e.every until dur; every is its
// node), with a revert after its for. It reports false, the error made,
// when there are too many.
func (d *decoder) schedule(b *tlBuild, e tlEntry, sets []override, path string, dur time.Duration, every *yaml.Node) bool {
	starts, ok := d.starts(e, path, dur, every)
	if !ok {
		return false
	}
	for _, t := range starts {
		for _, o := range sets {
			w := window{from: t, to: t, entry: path, node: o.at}
			ev := &tlEvent{at: t, key: o.key, value: o.value, at0: o.at, entry: path}
			switch {
			case e.forOK:
				w.to, w.span = t+e.forD, true
				ev.revert = &tlEvent{at: t + e.forD, key: o.key, at0: o.at, entry: path}
				if !b.push(ev.revert) {
					d.tooManyChanges(o.at, path)
					return false
				}
			case e.rampOK:
				w.to, w.span = t+e.ramp, true
				ev.ramp = e.ramp
			}
			b.windows[o.key] = append(b.windows[o.key], w)
			if !b.push(ev) {
				d.tooManyChanges(o.at, path)
				return false
			}
		}
	}
	return true
}

// tooManyChanges reports a timeline of more than MaxTimelineChanges.
func (d *decoder) tooManyChanges(n *yaml.Node, path string) {
	d.errorf(n, path, "the timeline makes more than %d changes; make repeats rarer or ramps shorter", MaxTimelineChanges)
}

// overlaps refuses two entries holding related keys at once: a `for` or
// ramp window with anything else on its key (or a key inside it, or the
// key it is inside of), and two steps at the same instant.
func (d *decoder) overlaps(windows map[string][]window) {
	keys := make([]string, 0, len(windows))
	for k := range windows {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	related := func(a, b string) bool {
		return a == b || strings.HasPrefix(b, a+".") || strings.HasPrefix(a, b+".")
	}
	for i, a := range keys {
		for _, b := range keys[i:] {
			if !related(a, b) {
				continue
			}
			ws := slices.Clone(windows[a])
			if b != a {
				ws = append(ws, windows[b]...)
			}
			sort.SliceStable(ws, func(i, j int) bool { return ws[i].from < ws[j].from })
			// The window reaching furthest so far: each later one must
			// start after it ends (or at its end, for a span).
			var far window
			for j, w := range ws {
				if j > 0 && (w.from < far.to || w.from == far.from) && w.entry != far.entry {
					what := "a for or ramp window of"
					if !far.span && !w.span {
						what = "a change of"
					}
					d.errorf(w.node, w.entry+".set."+b, "overlaps %s %s at %s (%s, line %d)", what, a, formatDuration(far.from), far.entry, far.node.Line)
					break
				}
				if j == 0 || w.to > far.to {
					far = w
				}
			}
		}
	}
}

// timelineSet decodes an entry's set: link keys that may change while the
// run runs, of the links of root (its link, or its links list).
func (d *decoder) timelineSet(n *yaml.Node, path string, ramp bool, root *yaml.Node) []override {
	if n.Kind != yaml.MappingNode || len(n.Content) == 0 {
		d.errorf(n, path, "expected a mapping of link keys to values like {link.loss: 5%%}, got %s", describe(n))
		return nil
	}
	return d.dottedSet(n, path, func(k, v *yaml.Node, p string) bool {
		if msg := liveKeyProblem(k.Value); msg != "" {
			d.errorf(k, p, "%s", msg)
			return false
		}
		if msg := linkKeyProblem(k.Value, root); msg != "" {
			d.errorf(k, p, "%s", msg)
			return false
		}
		if !ramp {
			return true
		}
		if _, ok := rampKind(k.Value); !ok {
			d.errorf(k, p, "cannot ramp: ramps change a rate, a delay, a jitter or a loss (link.rate, link.delay, link.delay.jitter, link.loss, each also per direction; links.NAME.rate, ... likewise)")
			return false
		}
		if v.Kind != yaml.ScalarNode {
			d.errorf(v, p, "a ramp's target is a value, got %s", describe(v))
			return false
		}
		return true
	})
}

// linkKey splits a link's key into the link's part (link, links.NAME)
// and the rest (uplink.rate, loss); false when key is not a link's.
func linkKey(key string) (link, rest string, ok bool) {
	if rest, ok := strings.CutPrefix(key, "link."); ok {
		return "link", rest, true
	}
	if after, ok := strings.CutPrefix(key, "links."); ok {
		if name, rest, ok := strings.Cut(after, "."); ok && name != "" {
			return "links." + name, rest, true
		}
	}
	return "", "", false
}

// linkKeyProblem says why key, a link's key, does not address a link of
// root (its link, or its links list), or "".
func linkKeyProblem(key string, root *yaml.Node) string {
	link, _, _ := linkKey(key)
	ls := lookup(root, "links")
	hasList := ls != nil && !isNull(ls)
	switch name, isList := strings.CutPrefix(link, "links."); {
	case !isList && hasList:
		return "this scenario has a links list: address a link by its name (links.NAME." + strings.TrimPrefix(key, "link.") + ")"
	case isList && !hasList:
		return "this scenario has no links list: its one link's keys are link.KEY (link." + strings.TrimPrefix(key, link+".") + ")"
	case isList && ls.Kind == yaml.SequenceNode:
		if j, names := namedItem(ls, name); j < 0 {
			return fmt.Sprintf("%s names no link (the links: %s)", quote(name), strings.Join(names, ", "))
		}
	}
	return ""
}

// LiveKeyProblem says why key (--set's form) cannot change while a run
// runs, or "": the check of a timeline entry's keys, for changes made
// live (emulator.Live), so that what a run recorded replays.
func LiveKeyProblem(key string) string { return liveKeyProblem(key) }

// liveKeyProblem says why key cannot change while a run runs, or "".
func liveKeyProblem(key string) string {
	link, after, ok := linkKey(key)
	if !ok {
		return "only the links' keys (link.loss, link.uplink.rate, links.NAME.delay, ...) change while the run runs"
	}
	rest := strings.Split(after, ".")
	if rest[0] == "uplink" || rest[0] == "downlink" {
		rest = rest[1:]
		if len(rest) == 0 {
			return "set the direction's keys one by one (" + key + ".delay, " + key + ".rate, ...)"
		}
	}
	switch rest[0] {
	case "name":
		return "a link's name cannot change while the run runs"
	case "mtu":
		if link != "link" { // the links list's items have an mtu; link has none
			return "a link's MTU cannot change while the run runs"
		}
	case "slot":
		return "slots cannot change while the run runs"
	case "inflight_limit":
		return "the in-flight limit cannot change while the run runs"
	case "queue":
		// The whole queue may be set (`queue: 50`, the limit's
		// shorthand); fixedProblem refuses what else it changes.
		if len(rest) > 1 && rest[1] != "limit" && rest[1] != "bytes" {
			return "the queue's " + rest[1] + " cannot change while the run runs (its limit and bytes can)"
		}
	case "delay":
		if len(rest) > 1 && rest[1] == "allow_reorder" {
			return "allow_reorder cannot change while the run runs"
		}
	}
	return ""
}

// fixedProblem names what next changes of was that a running direction
// cannot change (impair.Chain.Set), or "": the check behind
// liveKeyProblem's, on the settings a change makes whatever its keys.
func fixedProblem(was, next impair.Config) string {
	wq, nq := was.Queue, next.Queue
	wq.LimitPackets, wq.LimitBytes = nq.LimitPackets, nq.LimitBytes
	switch {
	case wq != nq:
		return "queue settings other than its limits (limit, bytes)"
	case was.Slot != next.Slot:
		return "slots"
	case was.InflightLimit != next.InflightLimit:
		return "in-flight limit"
	case was.Delay.AllowReorder != next.Delay.AllowReorder:
		return "allow_reorder"
	}
	return ""
}

// rampKind returns what a rampable key holds: "rate", "duration" or
// "ratio".
func rampKind(key string) (string, bool) {
	_, rest, _ := linkKey(key)
	rest = strings.TrimPrefix(strings.TrimPrefix(rest, "uplink."), "downlink.")
	switch rest {
	case "rate", "rate.bitrate":
		return "rate", true
	case "delay", "delay.time", "delay.jitter":
		return "duration", true
	case "loss", "loss.p":
		return "ratio", true
	}
	return "", false
}

// compile runs the timeline's events in time order over a copy of the
// links, decoding every link's directions after each instant's changes.
func (d *decoder) compile(h tlHeap, root *yaml.Node, mtu int, mtuOK bool, state []Link, nodes []Node) []TimelinePoint {
	c := newTLCompiler(d, root, mtu, mtuOK)
	c.nodes = nodes
	first := state // the file's links
	var points []TimelinePoint
	for h.Len() > 0 {
		at := h[0].at
		changes, resets, partition, last, ok := c.apply(&h, at, state)
		if !ok {
			return nil
		}
		if len(changes) == 0 && len(resets) == 0 && partition == nil {
			continue
		}
		next := state
		if len(changes) > 0 {
			if next, ok = c.decodeLinks(at, last); !ok {
				return nil
			}
			if !d.fixedLinks(first, next, last, at) {
				return nil
			}
		}
		points = append(points, TimelinePoint{At: at, Changes: changes, Uplink: next[0].Uplink, Downlink: next[0].Downlink,
			Links: next, Resets: resets, Partition: partition})
		state = next
		if len(points) > MaxTimelineChanges {
			d.tooManyChanges(last.at0, last.entry)
			return nil
		}
	}
	return points
}

// fixedLinks reports false, the error made after event last at time at,
// when next changes what a running direction of first cannot change.
func (d *decoder) fixedLinks(first, next []Link, last *tlEvent, at time.Duration) bool {
	for i, l := range next {
		for _, dw := range []struct {
			name      string
			was, next impair.Config
		}{{"uplink", first[i].Uplink, l.Uplink}, {"downlink", first[i].Downlink, l.Downlink}} {
			if why := fixedProblem(dw.was, dw.next); why != "" {
				name := "the " + dw.name
				if len(next) > 1 || l.Name != DefaultLink {
					name = "link " + l.Name + "'s " + dw.name
				}
				d.errorf(last.at0, last.entry, "%s's %s cannot change while the run runs (at %s)", name, why, formatDuration(at))
				return false
			}
		}
	}
	return true
}

// tlCompiler holds the keys the timeline has set so far over the file's
// link, while compile runs its events.
type tlCompiler struct {
	d      *decoder
	base   *yaml.Node            // a tree of the file's link (or links) alone
	cur    map[string]*yaml.Node // keys the timeline set, and their values (nil: not set)
	keyAt  map[string]*yaml.Node // each key's node in the timeline, for errors
	order  []string              // keys in the order first set, as they apply
	budget int                   // ramp steps left to make
	mtu    int
	mtuOK  bool
	nodes  []Node // the scenario's, whom links may join (between)
}

func newTLCompiler(d *decoder, root *yaml.Node, mtu int, mtuOK bool) *tlCompiler {
	base := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	for _, k := range []string{"link", "links"} {
		if ln := lookup(root, k); ln != nil {
			base.Content = append(base.Content, stringNode(k), ln)
		}
	}
	return &tlCompiler{d: d, base: base, cur: map[string]*yaml.Node{}, keyAt: map[string]*yaml.Node{},
		budget: MaxTimelineChanges, mtu: mtu, mtuOK: mtuOK}
}

// apply runs the events at time at, state being the link in force, and
// returns the changes they make, the flows they reset, the partition
// from then on (nil: unchanged; of two at one time, the later entry's)
// and the last change; false when it made an error.
func (c *tlCompiler) apply(h *tlHeap, at time.Duration, state []Link) ([]KeyChange, []string, *Partition, *tlEvent, bool) {
	var changes []KeyChange
	var resets []string
	var partition *Partition
	var last *tlEvent
	for h.Len() > 0 && (*h)[0].at == at {
		e := heap.Pop(h).(*tlEvent)
		if e.reset != "" {
			if !slices.Contains(resets, e.reset) {
				resets = append(resets, e.reset)
			}
			continue
		}
		if e.partition != nil {
			partition = e.partition
			continue
		}
		last = e
		if e.ramp > 0 {
			if !c.startRamp(h, e, state, at) {
				return nil, nil, nil, nil, false
			}
			continue
		}
		changes = append(changes, c.set(e))
	}
	return changes, resets, partition, last, true
}

// startRamp makes the steps of the ramp e starts at time at, from state.
// There is no change at its start: the first step is a step later.
func (c *tlCompiler) startRamp(h *tlHeap, e *tlEvent, state []Link, at time.Duration) bool {
	// Bounded before they are made: a ramp of 24h would be millions of
	// steps.
	if c.budget -= int((e.ramp + RampStep - 1) / RampStep); c.budget < 0 {
		c.d.tooManyChanges(e.at0, e.entry)
		return false
	}
	steps := c.d.ramp(e, state, at)
	if steps == nil {
		return false
	}
	n := time.Duration(len(steps))
	for i, s := range steps {
		heap.Push(h, &tlEvent{at: at + e.ramp*time.Duration(i+1)/n, seq: e.seq, key: e.key, value: s, at0: e.at0, entry: e.entry})
	}
	return true
}

// set applies the assignment e and returns the change it makes.
func (c *tlCompiler) set(e *tlEvent) KeyChange {
	old, raw := c.valueOf(e.key), c.rawOf(e.key)
	if e.revert != nil {
		// The window's end goes back to the value before it.
		e.revert.value = raw
		if raw == nil {
			e.revert.value = nullNode
		}
	}
	v := e.value
	if v == nullNode {
		v = nil
	}
	c.d.resolveTraces(e.key, v) // the record names the file decoded
	if _, ok := c.cur[e.key]; !ok {
		c.order = append(c.order, e.key)
	}
	c.cur[e.key], c.keyAt[e.key] = v, e.at0
	if v == nil {
		// Back to not set: say what applies then.
		v = c.valueOf(e.key)
	}
	return KeyChange{Key: e.key, Old: textOf(old), New: textOf(v)}
}

// rawOf is the key's own value: the timeline's or the file's; nil when
// not set.
func (c *tlCompiler) rawOf(key string) *yaml.Node {
	if v, ok := c.cur[key]; ok {
		return v
	}
	return nodeAt(c.base, key)
}

// valueOf is the value of key in force, for the record: its own, or for
// a direction's key not set, the shared one it falls back to.
func (c *tlCompiler) valueOf(key string) *yaml.Node {
	if v, ok := c.cur[key]; ok && v != nil {
		return v
	} else if !ok {
		if v := nodeAt(c.base, key); v != nil {
			return v
		}
	}
	link, rest, _ := linkKey(key)
	for _, dir := range []string{"uplink.", "downlink."} {
		if rest, ok := strings.CutPrefix(rest, dir); ok {
			return c.valueOf(link + "." + rest)
		}
	}
	return nil
}

// decodeLinks decodes every link of the file with the keys set so far,
// after e at time at; false when that made an error.
func (c *tlCompiler) decodeLinks(at time.Duration, e *tlEvent) ([]Link, bool) {
	d := c.d
	tree := clone(c.base, nil)
	if lookup(tree, "link") == nil && lookup(tree, "links") == nil {
		tree.Content = append(tree.Content, stringNode("link"), &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"})
	}
	for _, k := range c.order {
		v := c.cur[k]
		if v == nil {
			v = &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null"}
		}
		kn := c.keyAt[k]
		mark := func(n *yaml.Node) { n.Line, n.Column = kn.Line, kn.Column }
		if err := setPath(tree, k, v, mark); err != nil {
			d.errorf(e.at0, e.entry+".set."+k, "%v (at %s)", err, formatDuration(at))
			return nil, false
		}
	}
	sub := newDecoder(d.file, d.origins)
	sub.traces = d.traces
	var links []Link
	if n := lookup(tree, "links"); n != nil && !isNull(n) {
		links = sub.links(n, c.mtu, c.mtuOK, map[string]int{}, c.nodes)
	} else {
		var link *yaml.Node
		if n := lookup(tree, "link"); n != nil && !isNull(n) {
			link = n
		}
		u, w := sub.linkOf(link, c.mtu, c.mtuOK)
		links = []Link{{Name: DefaultLink, Uplink: u, Downlink: w}}
	}
	for _, err := range sub.errs {
		err.Msg += fmt.Sprintf(" (in the link the timeline makes at %s, %s)", formatDuration(at), e.entry)
		d.count++
		d.add(err)
	}
	return links, len(sub.errs) == 0
}

// nullNode is a revert's value for a key that was not set.
var nullNode = &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null"}

// textOf writes a value for events: "" for the key not set.
func textOf(n *yaml.Node) string {
	if n == nil || isNull(n) {
		return ""
	}
	s, err := valueText(n)
	if err != nil {
		return n.Value
	}
	return s
}

// nodeAt returns the value at a dotted key path of mappings (and named
// items of lists: links.eu.delay), or nil.
func nodeAt(root *yaml.Node, key string) *yaml.Node {
	n := root
	for _, seg := range strings.Split(key, ".") {
		switch {
		case n == nil:
			return nil
		case n.Kind == yaml.SequenceNode:
			j, _ := namedItem(n, seg)
			if j < 0 {
				return nil
			}
			n = n.Content[j]
		case n.Kind == yaml.MappingNode:
			n = lookup(n, seg)
		default:
			return nil
		}
	}
	if n != nil && isNull(n) {
		return nil
	}
	return n
}

// ramp returns the values of a ramp's steps, at most RampStep apart, the
// last one its target: linear from the value in force when it starts.
func (d *decoder) ramp(e *tlEvent, state []Link, at time.Duration) []*yaml.Node {
	kind, _ := rampKind(e.key)
	from, ok := d.rampFrom(e, kind, state, at)
	if !ok {
		return nil
	}
	to, ok := d.rampTo(e, kind)
	if !ok {
		return nil
	}
	n := int((e.ramp + RampStep - 1) / RampStep)
	out := make([]*yaml.Node, n)
	for i := range n {
		x := from + (to-from)*float64(i+1)/float64(n)
		var s string
		switch kind {
		case "rate":
			s = FormatRate(uint64(math.Round(x)))
		case "duration":
			s = time.Duration(math.Round(x)).String()
		default:
			s = strconv.FormatFloat(x*100, 'g', 10, 64) + "%"
		}
		if i == n-1 {
			s = e.value.Value
		}
		out[i] = &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s, Line: e.value.Line, Column: e.value.Column}
	}
	return out
}

// rampFrom returns the value in force, when ramp e of kind starts at time
// at, in the direction(s) its key sets: the same in both for a shared key.
func (d *decoder) rampFrom(e *tlEvent, kind string, state []Link, at time.Duration) (float64, bool) {
	p := e.entry + ".set." + e.key
	link, rest, _ := linkKey(e.key)
	l := state[0]
	if name, ok := strings.CutPrefix(link, "links."); ok {
		l = state[slices.IndexFunc(state, func(l Link) bool { return l.Name == name })] // checked by linkKeyProblem
	}
	var dirs []impair.Config
	switch {
	case strings.HasPrefix(rest, "uplink."):
		dirs = []impair.Config{l.Uplink}
	case strings.HasPrefix(rest, "downlink."):
		dirs = []impair.Config{l.Downlink}
	default:
		dirs = []impair.Config{l.Uplink, l.Downlink}
	}
	field := func(dir impair.Config) float64 {
		switch {
		case kind == "rate":
			return float64(dir.Rate.Bitrate)
		case strings.HasSuffix(e.key, "jitter"):
			return float64(dir.Delay.Jitter)
		case kind == "duration":
			return float64(dir.Delay.Time)
		default:
			return dir.Loss.P
		}
	}
	from := field(dirs[0])
	switch {
	case len(dirs) == 2 && field(dirs[1]) != from:
		d.errorf(e.at0, p, "the directions have different values when the ramp starts (%s); ramp %s.uplink.%s and %s.downlink.%s", formatDuration(at), link, rest, link, rest)
	case kind == "rate" && dirs[0].Rate.Trace != nil:
		d.errorf(e.at0, p, "the rate is a trace when the ramp starts (%s): a ramp goes from a bitrate", formatDuration(at))
	case kind == "rate" && from == 0:
		d.errorf(e.at0, p, "the rate is unlimited when the ramp starts (%s): set a rate to ramp from first", formatDuration(at))
	case kind == "ratio" && dirs[0].Loss.Model != impair.LossRandom && dirs[0].Loss.Model != impair.LossNone:
		d.errorf(e.at0, p, "ramps a random loss, but the loss model is %s when the ramp starts", dirs[0].Loss.Model)
	default:
		return from, true
	}
	return 0, false
}

// rampTo decodes the target of ramp e of kind.
func (d *decoder) rampTo(e *tlEvent, kind string) (float64, bool) {
	p := e.entry + ".set." + e.key
	sub := newDecoder(d.file, d.origins)
	sub.traces = d.traces
	var to float64
	switch kind {
	case "rate":
		v, _ := sub.bitrate(e.value, p)
		if v == 0 && len(sub.errs) == 0 {
			sub.errorf(e.value, p, "a ramp's target rate must be a rate, not unlimited")
		}
		to = float64(v)
	case "duration":
		v, _ := sub.duration(e.value, p, false, maxDelay)
		to = float64(v)
	default:
		to, _ = sub.ratio(e.value, p)
	}
	for _, err := range sub.errs {
		d.count++
		d.add(err)
	}
	return to, len(sub.errs) == 0
}
