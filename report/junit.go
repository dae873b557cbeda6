package report

import (
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/netjam/netjam/outdir"
	"github.com/netjam/netjam/summary"
)

// JUnit writes the results of the run folder d as JUnit XML to w, the format
// CI systems (GitLab, GitHub Actions' test reporters, Jenkins) read: one
// test suite per run (variant), holding a test case "run" (an error when
// the run failed, skipped when it could not start) and one test case per
// expectation (a failure when it did not hold, an error when it could not
// be checked).
func JUnit(w io.Writer, d *outdir.Dir) error {
	b, err := d.ReadFileMax(SummaryFile, maxSummarySize)
	if err != nil {
		return missing(d.Path(), SummaryFile, err)
	}
	var sum summary.Summary
	if err := json.Unmarshal(b, &sum); err != nil {
		return fmt.Errorf("%s: %w", d.Join(SummaryFile), err)
	}
	return xmlOut(w, junitOf(sum))
}

// WriteJUnit writes JUnit(d) into the file at path, opened as
// outdir.CreateFile opens it (with owner's rights, when given).
func WriteJUnit(path string, owner *outdir.Owner, d *outdir.Dir) error {
	f, err := outdir.CreateFile(path, owner)
	if err != nil {
		return err
	}
	return errors.Join(JUnit(f, d), f.Close())
}

// The JUnit XML elements, as the common schema (Ant's, which Jenkins,
// GitLab and the test reporters read) has them.
type (
	junitSuites struct {
		XMLName  xml.Name     `xml:"testsuites"`
		Name     string       `xml:"name,attr"`
		Tests    int          `xml:"tests,attr"`
		Failures int          `xml:"failures,attr"`
		Errors   int          `xml:"errors,attr"`
		Skipped  int          `xml:"skipped,attr"`
		Time     string       `xml:"time,attr"`
		Suites   []junitSuite `xml:"testsuite"`
	}
	junitSuite struct {
		Name       string          `xml:"name,attr"`
		Tests      int             `xml:"tests,attr"`
		Failures   int             `xml:"failures,attr"`
		Errors     int             `xml:"errors,attr"`
		Skipped    int             `xml:"skipped,attr"`
		Time       string          `xml:"time,attr"`
		Properties []junitProperty `xml:"properties>property"`
		Cases      []junitCase     `xml:"testcase"`
	}
	junitProperty struct {
		Name  string `xml:"name,attr"`
		Value string `xml:"value,attr"`
	}
	junitCase struct {
		Name      string        `xml:"name,attr"`
		Classname string        `xml:"classname,attr"`
		Time      string        `xml:"time,attr"`
		Failure   *junitProblem `xml:"failure"`
		Error     *junitProblem `xml:"error"`
		Skipped   *junitProblem `xml:"skipped"`
	}
	junitProblem struct {
		Message string `xml:"message,attr"`
		Type    string `xml:"type,attr,omitempty"`
		Text    string `xml:",chardata"`
	}
)

// junitOf turns a summary into JUnit's suites.
func junitOf(sum summary.Summary) junitSuites {
	out := junitSuites{Name: "netjam " + sum.Scenario}
	total := 0.0
	for _, r := range sum.Runs {
		name := sum.Scenario
		if r.Variant != "" {
			name += "/" + r.Variant
		}
		class := "netjam." + strings.ReplaceAll(name, "/", ".")
		secs := strconv.FormatFloat(r.DurationS, 'f', 3, 64)
		total += r.DurationS
		s := junitSuite{Name: name, Time: secs, Properties: []junitProperty{
			{"seed", strconv.FormatUint(r.Seed, 10)}, {"netjam_version", sum.Version}}}
		run := junitCase{Name: "run", Classname: class, Time: secs}
		switch {
		case r.Skipped != "":
			run.Skipped = &junitProblem{Message: r.Skipped, Text: r.Skipped}
			s.Skipped++
		case r.Error != "":
			run.Error = &junitProblem{Message: r.Error, Type: "run", Text: r.Error}
			s.Errors++
		}
		s.Cases = append(s.Cases, run)
		for _, e := range r.Expectations {
			c := junitCase{Name: e.Expect, Classname: class, Time: "0"}
			switch {
			case e.Error != "":
				c.Error = &junitProblem{Message: e.Error, Type: "expectation", Text: e.Error}
				s.Errors++
			case !e.Pass:
				got := e.GotText
				if got == "" && e.Got != nil {
					got = strconv.FormatFloat(*e.Got, 'g', -1, 64)
				}
				c.Failure = &junitProblem{Message: "got " + got, Type: "expectation",
					Text: fmt.Sprintf("expected %s\n%s is %s", e.Expect, e.Figure, got)}
				s.Failures++
			}
			s.Cases = append(s.Cases, c)
		}
		s.Tests = len(s.Cases)
		out.Tests += s.Tests
		out.Failures += s.Failures
		out.Errors += s.Errors
		out.Skipped += s.Skipped
		out.Suites = append(out.Suites, s)
	}
	out.Time = strconv.FormatFloat(total, 'f', 3, 64)
	return out
}

// xmlOut writes v as an indented XML document.
func xmlOut(w io.Writer, v any) error {
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}
