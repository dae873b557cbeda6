package control

import (
	"net/http"
	"strings"
	"testing"
)

// TestParseCall: netjam ctl's verbs make their calls, a verb's flag is
// read before or after it, and what ctl would misread is refused, said
// as ctl says it.
func TestParseCall(t *testing.T) {
	s := func(v string) *string { return &v }
	for _, c := range []struct {
		verb       string
		args       []string
		f          CallFlags
		path, body string
	}{
		{"status", nil, CallFlags{}, "GET /v1/status", ""},
		{"get", []string{"eu.uplink"}, CallFlags{}, "GET /v1/links/eu.uplink", ""},
		{"set", []string{"link.loss=1%"}, CallFlags{For: s("5s")}, "PATCH /v1/links", `{"set":{"link.loss":"1%"},"for":"5s"}`},
		{"set", []string{"--for", "5s", "link.loss=1%"}, CallFlags{}, "PATCH /v1/links", `{"set":{"link.loss":"1%"},"for":"5s"}`},
		{"schedule", []string{"--at=20s", "link.delay=200ms"}, CallFlags{}, "POST /v1/timeline", `{"at":"20s","set":{"link.delay":"200ms"}}`},
		{"reset", nil, CallFlags{Flow: s("bulk")}, "POST /v1/flows/bulk/reset", ""},
		{"reset", nil, CallFlags{}, "POST /v1/reset", ""},
		{"partition", []string{"a", "--one-way", "b, c"}, CallFlags{}, "POST /v1/partition", `{"groups":[["a"],["b","c"]],"one_way":true}`},
	} {
		call, _, err := ParseCall(c.verb, c.args, c.f)
		if err != nil || call.Method+" "+call.Path != c.path || string(call.Body) != c.body {
			t.Errorf("%s %v: %s %s %s, %v; want %s %s", c.verb, c.args, call.Method, call.Path, call.Body, err, c.path, c.body)
		}
	}
	for _, c := range []struct {
		verb string
		args []string
		f    CallFlags
		want string
	}{
		{"status", []string{"extra"}, CallFlags{}, "ctl status takes no arguments, got extra"},
		{"get", []string{"a", "b"}, CallFlags{}, "ctl get: at most one link"},
		{"get", nil, CallFlags{At: s("5s")}, "ctl get: --at is for schedule"},
		{"reset", nil, CallFlags{Flow: s("")}, "ctl reset: --flow NAME names the TCP flow"},
		{"schedule", []string{"--at", "link.loss=1%"}, CallFlags{}, "ctl schedule: --at needs a TIME (from the run's start, such as 5s), got link.loss=1%"},
		{"schedule", []string{"link.loss=1%"}, CallFlags{}, "ctl schedule: when? give --at TIME"},
		{"set", []string{"--for="}, CallFlags{}, "ctl set: --for needs a DURATION (such as 5s)"},
		{"set", []string{"loss"}, CallFlags{}, `ctl set: "loss" is not KEY=VALUE`},
		{"set", nil, CallFlags{}, "ctl set: nothing to set (KEY=VALUE...)"},
		{"partition", []string{"a", ","}, CallFlags{}, `ctl partition: "," is not a group`},
		{"partition", []string{"a"}, CallFlags{}, "ctl partition: at least two groups"},
		{"sett", nil, CallFlags{}, `ctl: "sett" is not something ctl does (` + VerbsUsage + ")"},
		{"", nil, CallFlags{}, "ctl: what to do? " + VerbsUsage},
		{"", nil, CallFlags{For: s("set")}, "ctl set: --for needs a value"},
		{"get", nil, CallFlags{Output: "yaml"}, "ctl: -o yaml: not an output format (text or json)"},
	} {
		if _, _, err := ParseCall(c.verb, c.args, c.f); err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s %v %+v: %v, want %q", c.verb, c.args, c.f, err, c.want)
		}
	}
	for _, f := range []CallFlags{{JSON: true}, {Output: "json"}} {
		if _, asJSON, err := ParseCall("status", nil, f); !asJSON || err != nil {
			t.Errorf("%+v: JSON %v, %v", f, asJSON, err)
		}
	}
	if TokenHint(http.StatusOK, "") != "" || !strings.Contains(TokenHint(http.StatusUnauthorized, ""), TokenEnv) {
		t.Error("a token's hint: only after 401, naming " + TokenEnv)
	}
}
