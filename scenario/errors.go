package scenario

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Origins of values that did not come from the scenario file itself.
const (
	originSet      = "--set"
	originSeed     = "--seed"
	originDuration = "--duration"
	variantPrefix  = "variant "
)

// Error is one problem in a scenario: where it is and what is wrong. Its
// text is "FILE:LINE: PATH: MSG" (FILE:LINE:COLUMN for a YAML syntax
// error whose likely cause was found) for a value in the file,
// "FILE:LINE: variant NAME: PATH: MSG" for a value a variant sets, and
// "--set PATH: MSG" for a value given on the command line.
type Error struct {
	File string // the scenario file as named to Load or Parse; "" for command-line values
	Line int    // 1-based line in File; 0 when the problem is not on one line
	// Column is the 1-based column on Line, for YAML syntax errors whose
	// likely cause was found; 0 otherwise.
	Column int
	// Origin is where the value came from: "" (the file), "--set",
	// "--duration" or "variant NAME" (the variant's set, or a file value
	// that is only wrong in combination with the variant).
	Origin string
	Path   string // dotted key path such as link.uplink.rate; "" when not about one key
	Msg    string
}

// Error formats e as described on the type.
func (e *Error) Error() string {
	var b strings.Builder
	switch {
	case e.Origin == originSet:
		b.WriteString(originSet)
		if e.Path != "" {
			b.WriteString(" " + e.Path)
		}
		b.WriteString(": ")
	case e.commandLine():
		// --duration and --seed name their one key themselves.
		b.WriteString(e.Origin + ": ")
	default:
		if e.File != "" {
			b.WriteString(e.File)
			if e.Line > 0 {
				b.WriteString(":" + strconv.Itoa(e.Line))
				if e.Column > 0 {
					b.WriteString(":" + strconv.Itoa(e.Column))
				}
			}
			b.WriteString(": ")
		}
		if e.Origin != "" {
			b.WriteString(e.Origin + ": ")
		}
		if e.Path != "" {
			b.WriteString(e.Path + ": ")
		}
	}
	b.WriteString(e.Msg)
	return b.String()
}

// commandLine reports whether e is about a value from the command line
// rather than from the file.
func (e *Error) commandLine() bool {
	return strings.HasPrefix(e.Origin, "--")
}

// Errors are all the problems found in a scenario, sorted: first those in
// the file by line, then those from the command line in argument order.
// Parse and Load return an Errors value (never an empty one) as their error.
type Errors []*Error

// Error returns one error per line.
func (es Errors) Error() string {
	n := min(len(es), maxErrorLines)
	lines := make([]string, n, n+1)
	for i, e := range es[:n] {
		lines[i] = e.Error()
	}
	if len(es) > n {
		lines = append(lines, fmt.Sprintf("... and %d more", len(es)-n))
	}
	return strings.Join(lines, "\n")
}

// maxErrorLines bounds the problems an Errors' text lists: past some
// dozens, the first ones are what to fix (a file of thousands of bad keys
// made a message of megabytes).
const maxErrorLines = 50

// Unwrap gives errors.Is and errors.As access to each Error.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// sort orders es as documented on Errors. The sort is stable so that errors
// on one line keep the order they were found in: the base scenario's first,
// then each variant's in file order.
func (es Errors) sort() {
	slices.SortStableFunc(es, func(a, b *Error) int {
		if c := cmpBool(a.commandLine(), b.commandLine()); c != 0 {
			return c
		}
		if a.commandLine() {
			return 0
		}
		return cmp.Compare(a.Line, b.Line)
	})
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// unknownKey is the message for key, which is not one of known, the keys
// of the mapping at path: where the key exists deeper in the scenario (loss
// at the top level is link.loss; link.jitter is link.delay.jitter), that
// place; else a suggestion when one known key is close; else the whole
// list.
func unknownKey(path, key string, known []string) string {
	if p := elsewhere(path, key); p != "" {
		return fmt.Sprintf("unknown key at this level; did you mean %s?", p)
	}
	if s := suggest(key, known); s != "" {
		return fmt.Sprintf("unknown key; did you mean %q?", s)
	}
	return "unknown key (expected one of: " + strings.Join(sorted(known), ", ") + ")"
}

// keyPlaces lists the mappings of a scenario that "did you mean" looks in,
// by their path ("[]" for any item of a list) with their keys, in the
// schema's order.
func keyPlaces() [][2]any {
	var places, dirs [][2]any
	for _, s := range schema {
		switch {
		case !s.hint:
		case slices.Contains(directionSections, s.path):
			dirs = append(dirs, [2]any{s.path, keysOf(s.path)})
		default:
			places = append(places, [2]any{s.path, keysOf(s.path)})
		}
	}
	for _, dir := range directionPlaces {
		for _, d := range dirs {
			places = append(places, [2]any{dir + "." + d[0].(string), d[1]})
		}
	}
	return places
}

// listIndex matches the index of a list item in a path.
var listIndex = regexp.MustCompile(`\[[0-9]+\]`)

// elsewhere returns the shallowest place below path (the mapping where key
// was found and is unknown) where key is a key, written as a path from the
// top; "" when there is none.
func elsewhere(path, key string) string {
	general := listIndex.ReplaceAllString(path, "[]")
	best := ""
	for _, pl := range keyPlaces() {
		at, keys := pl[0].(string), pl[1].([]string)
		below := general == "" || strings.HasPrefix(at, general+".")
		if !below || !slices.Contains(keys, key) {
			continue
		}
		full := path + strings.TrimPrefix(at, general)
		full = strings.TrimPrefix(full+"."+key, ".")
		if best == "" || strings.Count(full, ".") < strings.Count(best, ".") {
			best = full
		}
	}
	return best
}

// Suggest returns the option closest to word, as the scenario's own "did
// you mean" picks it (suggest), or "" when none is close: for the command
// line's commands, flags and values.
func Suggest(word string, options []string) string { return suggest(word, options) }

// suggest returns the option closest to word by edit distance, if it is at
// most 2 edits away and fewer edits than word has characters (so that "x"
// is not "corrected" to "p"). Ties go to an option word is short of
// letters of (a letter left out, the commonest slip: sed is seed rather
// than set), then to the option listed first.
func suggest(word string, options []string) string {
	best, bestDist, bestShort := "", 3, false
	lower := strings.ToLower(word)
	for _, o := range options {
		d := editDistance(lower, o)
		if d >= len([]rune(word)) {
			continue
		}
		short := subsequence(lower, o)
		if d < bestDist || d == bestDist && short && !bestShort {
			best, bestDist, bestShort = o, d, short
		}
	}
	return best
}

// subsequence reports whether a's runes are in b in order, b having
// others between them.
func subsequence(a, b string) bool {
	rb := []rune(b)
	i := 0
	for _, r := range a {
		for i < len(rb) && rb[i] != r {
			i++
		}
		if i == len(rb) {
			return false
		}
		i++
	}
	return true
}

// editDistance is the Levenshtein distance between a and b, in runes.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	if len(ra) > 64 || len(rb) > 64 {
		// No key is this long; don't spend quadratic time finding that out.
		return 64
	}
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}
