package control

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
)

// netjam ctl's words: its verbs and their arguments made into a Call, as
// the command line reads them (urfave/cli stops at the verb, so a verb's
// own flag after it is read here), and its hints. Every error of
// ParseCall is bad usage: netjam ctl exits 2 with it.

// Where netjam ctl finds its endpoint and token when not told:
// netjam shell --control sets both for its command.
const (
	EndpointEnv = "NETJAM_CONTROL"
	TokenEnv    = "NETJAM_CONTROL_TOKEN"
)

// Verbs are netjam ctl's verbs.
var Verbs = []string{"status", "get", "set", "schedule", "reset", "partition", "heal", "events", "stop"}

// VerbsUsage are what netjam ctl does, each verb with its arguments.
const VerbsUsage = "status, get [LINK], set [--for DURATION] KEY=VALUE..., schedule --at TIME KEY=VALUE..., reset [--flow NAME], events or stop"

// CallFlags are netjam ctl's flags: those of one verb (--at of
// schedule, --flow of reset, --for of set), each nil when not given, and
// how it prints the answer (--json, -o).
type CallFlags struct {
	At, Flow, For *string
	JSON          bool
	Output        string
}

// ParseCall is the call of the API that netjam ctl's verb ("" for none
// given) makes with the arguments after it, args, and its flags f; asJSON
// tells that ctl prints the API's JSON (--json, -o json).
func ParseCall(verb string, args []string, f CallFlags) (call Call, asJSON bool, err error) {
	if verb == "" {
		return Call{}, false, noVerb(f)
	}
	switch f.Output {
	case "", "text":
		asJSON = f.JSON
	case "json":
		asJSON = true
	default:
		return Call{}, false, fmt.Errorf("ctl: -o %s: not an output format (text or json)", f.Output)
	}
	call, err = parseCall(verb, args, f)
	return call, asJSON, err
}

// noVerb is the error of netjam ctl given no verb. A flag given last
// without its value took the verb for it (cliargs.FlagsFirst moved the
// flag before the verb: set --for).
func noVerb(f CallFlags) error {
	for _, fl := range []struct {
		name  string
		value *string
	}{{"at", f.At}, {"for", f.For}, {"flow", f.Flow}} {
		if fl.value != nil && slices.Contains(Verbs, *fl.value) {
			return fmt.Errorf("ctl %s: --%s needs a value", *fl.value, fl.name)
		}
	}
	return errors.New("ctl: what to do? " + VerbsUsage)
}

// parseCall is ParseCall of a verb given.
func parseCall(verb string, args []string, f CallFlags) (Call, error) {
	if err := flagsOf(verb, f); err != nil {
		return Call{}, err
	}
	switch verb {
	case "status", "stop", "reset", "events", "heal":
		if len(args) > 0 {
			return Call{}, fmt.Errorf("ctl %s takes no arguments, got %s", verb, strings.Join(args, " "))
		}
	}
	switch verb {
	case "status":
		return StatusCall(), nil
	case "get":
		switch len(args) {
		case 0:
			return LinksCall(""), nil
		case 1:
			return LinksCall(args[0]), nil
		}
		return Call{}, errors.New("ctl get: at most one link: get [uplink|downlink|NAME|NAME.uplink|NAME.downlink]")
	case "stop":
		return StopCall(), nil
	case "reset":
		// reset --flow NAME: that flow's connection; reset: the keys.
		if f.Flow == nil {
			return ResetCall(), nil
		}
		if *f.Flow == "" {
			return Call{}, errors.New("ctl reset: --flow NAME names the TCP flow whose connection to end")
		}
		return ResetFlowCall(*f.Flow), nil
	case "events":
		return EventsCall(), nil
	case "heal":
		return HealCall(), nil
	case "partition":
		return partitionCall(args)
	case "set", "schedule":
		return changeCall(verb, args, f)
	}
	return Call{}, fmt.Errorf("ctl: %q is not something ctl does (%s)", verb, VerbsUsage)
}

// flagsOf refuses a flag given with a verb it is not for.
func flagsOf(verb string, f CallFlags) error {
	for _, fl := range []struct {
		given      *string
		name, verb string
	}{{f.At, "at", "schedule"}, {f.Flow, "flow", "reset"}, {f.For, "for", "set"}} {
		if fl.given != nil && verb != fl.verb {
			return fmt.Errorf("ctl %s: --%s is for %s", verb, fl.name, fl.verb)
		}
	}
	return nil
}

// changeCall is the call of set and schedule: their KEY=VALUE arguments,
// and --for or --at, given before the verb (f) or after it (args).
func changeCall(verb string, args []string, f CallFlags) (Call, error) {
	at, dur := "", ""
	if f.At != nil {
		at = *f.At
	}
	if f.For != nil {
		dur = *f.For
	}
	flag := map[string]*string{"schedule": &at, "set": &dur}[verb]
	name := map[string]string{"schedule": "--at", "set": "--for"}[verb]
	given := map[string]bool{"schedule": f.At != nil, "set": f.For != nil}[verb]
	switch {
	case len(args) > 0 && args[0] == name:
		*flag, args, given = "", args[1:], true
		if len(args) > 0 {
			*flag, args = args[0], args[1:]
		}
	case len(args) > 0 && strings.HasPrefix(args[0], name+"="):
		*flag, args, given = strings.TrimPrefix(args[0], name+"="), args[1:], true
	}
	what := map[string]string{"schedule": "TIME (from the run's start, such as 5s)", "set": "DURATION (such as 5s)"}[verb]
	switch {
	case given && *flag == "":
		return Call{}, fmt.Errorf("ctl %s: %s needs a %s", verb, name, what)
	case given && strings.Contains(*flag, "="):
		return Call{}, fmt.Errorf("ctl %s: %s needs a %s, got %s (%s 5s KEY=VALUE...)", verb, name, what, *flag, name)
	}
	set, err := keyValues(verb, args)
	if err != nil {
		return Call{}, err
	}
	if verb == "set" {
		return SetCall(set, dur), nil
	}
	if at == "" {
		return Call{}, errors.New("ctl schedule: when? give --at TIME (from the run's start, such as 5s)")
	}
	return ScheduleCall(at, set), nil
}

// partitionCall is ctl partition's call: args are the groups, each names
// joined by commas, and --one-way anywhere (urfave/cli stops at the verb).
func partitionCall(args []string) (Call, error) {
	oneWay := false
	var groups [][]string
	for _, a := range args {
		if a == "--one-way" {
			oneWay = true
			continue
		}
		var g []string
		for _, name := range strings.Split(a, ",") {
			if name = strings.TrimSpace(name); name != "" {
				g = append(g, name)
			}
		}
		if len(g) == 0 {
			return Call{}, fmt.Errorf("ctl partition: %q is not a group (names joined by commas, like b,c)", a)
		}
		groups = append(groups, g)
	}
	if len(groups) < 2 {
		return Call{}, errors.New("ctl partition: at least two groups, like partition a b,c (names joined by commas)")
	}
	return PartitionCall(groups, oneWay), nil
}

// keyValues reads set's and schedule's KEY=VALUE arguments.
func keyValues(verb string, args []string) (map[string]string, error) {
	set := map[string]string{}
	for _, kv := range args {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, fmt.Errorf("ctl %s: %q is not KEY=VALUE", verb, kv)
		}
		set[strings.TrimSpace(k)] = v
	}
	if len(set) == 0 {
		return nil, fmt.Errorf("ctl %s: nothing to set (KEY=VALUE...)", verb)
	}
	return set, nil
}

// CallError is a call that failed, as netjam ctl says it: Usage when
// the run refused what was asked (a bad key or value, a link or flow the
// run has not: bad usage, as run --set's), else the endpoint not reached
// or a run that ended.
type CallError struct {
	Msg   string
	Usage bool
}

func (e *CallError) Error() string { return e.Msg }

// Run makes call and prints its answer on w: for a person (Call.Print),
// or, asJSON, the API's JSON, indented. The event stream (EventsCall)
// is printed an event a line, its type then its data, until the
// endpoint closes it (netjam ended) or ctx ends. Its errors are
// *CallError but one of writing on w.
func (c Client) Run(ctx context.Context, call Call, w io.Writer, asJSON bool) error {
	if call.verb == "events" {
		err := c.Events(ctx, func(typ, data string) { fmt.Fprintf(w, "%s %s\n", typ, data) })
		var se *StatusError
		switch {
		case errors.As(err, &se):
			return &CallError{Msg: "ctl events: " + se.Message + TokenHint(se.Code, c.Token)}
		case err != nil:
			return &CallError{Msg: fmt.Sprintf("ctl: %s: %v", c.Addr, err)}
		}
		return nil
	}
	code, out, err := c.Do(call)
	if err != nil {
		return &CallError{Msg: fmt.Sprintf("ctl: %s: %v", c.Addr, err)}
	}
	switch code {
	case http.StatusOK:
	case http.StatusBadRequest, http.StatusNotFound:
		return &CallError{Msg: fmt.Sprintf("ctl %s: %s", call.verb, ErrorMessage(out)), Usage: true}
	default:
		return &CallError{Msg: fmt.Sprintf("ctl %s: %s%s", call.verb, ErrorMessage(out), TokenHint(code, c.Token))}
	}
	if !asJSON {
		return call.Print(w, out)
	}
	var pretty bytes.Buffer
	if json.Indent(&pretty, out, "", "  ") == nil {
		pretty.WriteByte('\n')
		out = pretty.Bytes()
	}
	w.Write(out)
	return nil
}

// TokenHint says where a token comes from, after an answer with status
// code to a call that carried token ("" for none): nothing unless the
// answer is 401.
func TokenHint(code int, token string) string {
	if code != http.StatusUnauthorized {
		return ""
	}
	if token == "" {
		return " (give --control-token FILE: a run given no token writes it into control.token in its output folder; or set " + TokenEnv + ")"
	}
	return " (the token given is not this endpoint's: a run makes a new one each time)"
}
