package scenario

import (
	"strings"
)

// The YAML parser says what it found ("found character that cannot start
// any token"), often on the line after the mistake and never in which
// column. yamlHint looks at the text around that line for the mistakes
// people make by hand, and says which one it likely is, and where.

// yamlHint returns the line and column (1-based; 0 when unknown) of the
// likely cause of the parser's message msg, reported at line (0 when the
// parser gave none), and a few words saying what it is ("" when there is
// no likely cause).
func yamlHint(data []byte, line int, msg string) (hintLine, col int, hint string) {
	lines := strings.Split(string(data), "\n")
	// The parser's line is the one of its context, which is often the
	// line before the mistake: look one line further.
	last := line + 1
	if line <= 0 || last > len(lines) {
		last = len(lines)
	}
	// A tab in the indentation is the likeliest cause of every message
	// from the first tab-indented line on.
	for i := 0; i < last; i++ {
		indent := lines[i][:len(lines[i])-len(strings.TrimLeft(lines[i], " \t"))]
		if j := strings.IndexByte(indent, '\t'); j >= 0 && strings.TrimSpace(lines[i]) != "" {
			return i + 1, j + 1, "a tab in the indentation: YAML indents with spaces only"
		}
	}
	at := func(i int) string {
		if i < 1 || i > len(lines) {
			return ""
		}
		return lines[i-1]
	}
	switch {
	case strings.Contains(msg, "cannot start any token"):
		for i := max(line, 1); i <= last; i++ {
			_, v, ok := strings.Cut(at(i), ": ")
			if !ok {
				_, v, ok = strings.Cut(at(i), "- ")
			}
			v = strings.TrimLeft(v, " ")
			if ok && v != "" && strings.ContainsRune("@`", rune(v[0])) {
				return i, len(at(i)) - len(v) + 1, "a plain value cannot start with " + v[:1] + ": quote it"
			}
		}
	case strings.Contains(msg, "mapping values are not allowed"):
		l := at(line)
		if k := strings.Index(l, ": "); k >= 0 {
			if k2 := strings.Index(l[k+2:], ": "); k2 >= 0 && !strings.ContainsAny(l[:k+2+k2], `"'{[`) {
				return line, k + 2 + k2 + 1, `a second ": " on one line: quote a value that holds one, or give the inner key its own line`
			}
		}
		prev := line - 1
		for prev > 0 && strings.TrimSpace(at(prev)) == "" {
			prev--
		}
		if p := strings.TrimSpace(at(prev)); p != "" && !strings.HasPrefix(p, "#") && !strings.Contains(p, ":") {
			return prev, len(at(prev)) - len(strings.TrimLeft(at(prev), " ")) + 1, `no ":" after the key on this line`
		}
		if indentOf(l) > indentOf(at(prev)) {
			return line, indentOf(l) + 1, "indented more than the line above, whose key already has a value"
		}
	case strings.Contains(msg, "unexpected end of stream"):
		for i := 1; i <= len(lines); i++ {
			for _, q := range []string{`"`, "'"} {
				if strings.Count(at(i), q)%2 == 1 {
					return i, strings.Index(at(i), q) + 1, "a quote that is not closed"
				}
			}
		}
	case strings.Contains(msg, "expected ',' or '}'"), strings.Contains(msg, "expected ',' or ']'"):
		open, close := "{", "}"
		if strings.Contains(msg, "']'") {
			open, close = "[", "]"
		}
		for i := max(line, 1); i <= len(lines); i++ {
			if strings.Count(at(i), open) > strings.Count(at(i), close) {
				return i, strings.LastIndex(at(i), open) + 1, "a " + open + " that is not closed on its line"
			}
		}
	case strings.Contains(msg, "did not find expected key"), strings.Contains(msg, "expected '-' indicator"):
		// A line that moves back left to a column where no line above
		// starts is the misaligned one.
		seen, deepest := map[int]bool{}, -1
		for i := 1; i <= len(lines); i++ {
			l := at(i)
			if t := strings.TrimSpace(l); t == "" || strings.HasPrefix(t, "#") {
				continue
			}
			in := indentOf(l)
			if i >= line && !seen[in] && in < deepest {
				return i, in + 1, "this line lines up with no key above it: the keys of one mapping start in the same column"
			}
			seen[in], deepest = true, max(deepest, in)
		}
		return 0, 0, "the indentation does not line up: the keys of one mapping start in the same column"
	}
	return 0, 0, ""
}

// indentOf is the number of spaces that start line.
func indentOf(line string) int {
	return len(line) - len(strings.TrimLeft(line, " "))
}
