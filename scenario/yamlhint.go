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
	lines := yamlLines(strings.Split(string(data), "\n"))
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
	switch {
	case strings.Contains(msg, "cannot start any token"):
		return lines.reservedStart(line, last)
	case strings.Contains(msg, "mapping values are not allowed"):
		return lines.colon(line)
	case strings.Contains(msg, "unexpected end of stream"):
		return lines.openQuote()
	case strings.Contains(msg, "expected ',' or '}'"):
		return lines.openBracket(line, "{", "}")
	case strings.Contains(msg, "expected ',' or ']'"):
		return lines.openBracket(line, "[", "]")
	case strings.Contains(msg, "did not find expected key"), strings.Contains(msg, "expected '-' indicator"):
		return lines.misaligned(line)
	}
	return 0, 0, ""
}

// yamlLines are the lines of a YAML file, for yamlHint's searches: each
// returns the line and column of the likely mistake and a hint, or 0, 0
// and "" when it finds none.
type yamlLines []string

// at returns line i, counting from 1; "" outside the file.
func (ls yamlLines) at(i int) string {
	if i < 1 || i > len(ls) {
		return ""
	}
	return ls[i-1]
}

// reservedStart finds a plain value starting with @ or ` on the lines
// line..last.
func (ls yamlLines) reservedStart(line, last int) (int, int, string) {
	for i := max(line, 1); i <= last; i++ {
		_, v, ok := strings.Cut(ls.at(i), ": ")
		if !ok {
			_, v, ok = strings.Cut(ls.at(i), "- ")
		}
		v = strings.TrimLeft(v, " ")
		if ok && v != "" && strings.ContainsRune("@`", rune(v[0])) {
			return i, len(ls.at(i)) - len(v) + 1, "a plain value cannot start with " + v[:1] + ": quote it"
		}
	}
	return 0, 0, ""
}

// colon explains a ": " where no mapping value may be, at line: a second
// one on the line, a key above without its colon, or an indentation.
func (ls yamlLines) colon(line int) (int, int, string) {
	l := ls.at(line)
	if k := strings.Index(l, ": "); k >= 0 {
		if k2 := strings.Index(l[k+2:], ": "); k2 >= 0 && !strings.ContainsAny(l[:k+2+k2], `"'{[`) {
			return line, k + 2 + k2 + 1, `a second ": " on one line: quote a value that holds one, or give the inner key its own line`
		}
	}
	prev := line - 1
	for prev > 0 && strings.TrimSpace(ls.at(prev)) == "" {
		prev--
	}
	if p := strings.TrimSpace(ls.at(prev)); p != "" && !strings.HasPrefix(p, "#") && !strings.Contains(p, ":") {
		return prev, len(ls.at(prev)) - len(strings.TrimLeft(ls.at(prev), " ")) + 1, `no ":" after the key on this line`
	}
	if indentOf(l) > indentOf(ls.at(prev)) {
		return line, indentOf(l) + 1, "indented more than the line above, whose key already has a value"
	}
	return 0, 0, ""
}

// openQuote finds the first line with a quote that is not closed.
func (ls yamlLines) openQuote() (int, int, string) {
	for i := 1; i <= len(ls); i++ {
		for _, q := range []string{`"`, "'"} {
			if strings.Count(ls.at(i), q)%2 == 1 {
				return i, strings.Index(ls.at(i), q) + 1, "a quote that is not closed"
			}
		}
	}
	return 0, 0, ""
}

// openBracket finds, from line on, a line opening more of open than it
// closes.
func (ls yamlLines) openBracket(line int, open, close string) (int, int, string) {
	for i := max(line, 1); i <= len(ls); i++ {
		if strings.Count(ls.at(i), open) > strings.Count(ls.at(i), close) {
			return i, strings.LastIndex(ls.at(i), open) + 1, "a " + open + " that is not closed on its line"
		}
	}
	return 0, 0, ""
}

// misaligned finds, from line on, a line that moves back left to a column
// where no line above starts.
func (ls yamlLines) misaligned(line int) (int, int, string) {
	seen, deepest := map[int]bool{}, -1
	for i := 1; i <= len(ls); i++ {
		l := ls.at(i)
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

// indentOf is the number of spaces that start line.
func indentOf(line string) int {
	return len(line) - len(strings.TrimLeft(line, " "))
}
