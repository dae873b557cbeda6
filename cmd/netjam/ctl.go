package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/netjam/netjam/control"
)

func ctlCommand() *cli.Command {
	return &cli.Command{
		Name:      "ctl",
		Usage:     "look at and change a running netjam (one started with --control)",
		ArgsUsage: "status | get [LINK] | set KEY=VALUE... | schedule --at TIME KEY=VALUE... | reset [--flow NAME] | partition [--one-way] GROUP GROUP... | heal | events | stop",
		Description: `Talks to the control API of a netjam run or shell started with --control,
at --control or $NETJAM_CONTROL (netjam shell --control sets it for its
command): unix:PATH, HOST:PORT, or https://HOST:PORT for an endpoint
served over TLS (its certificate checked against the system's roots, or
$SSL_CERT_FILE's). A TCP endpoint takes a token: --control-token FILE (a
run given none makes one, in control.token of its output folder), or
$NETJAM_CONTROL_TOKEN, the token itself (netjam shell sets it for its
command).

   status                 the run now: elapsed time, each flow's progress, each link,
                          the changes pending
   get [LINK]             each direction's settings in force and counters (or
                          one's: uplink or downlink; with a links list, a link
                          such as eu, or one of its directions: eu.uplink)
   set [--for DURATION] KEY=VALUE...
                          change the path now (the link's keys, as --set takes them);
                          connections survive it; recorded in events.jsonl and in the
                          resolved scenario's timeline; with --for, the keys go back
                          to their values before after DURATION
   schedule --at TIME KEY=VALUE...
                          the same change at TIME of the run (from its start), ahead
   reset                  every key changed back to the scenario's value
   reset --flow NAME      end TCP flow NAME's connection with a RST both ways, as a
                          timeline's reset entry does (recorded the same way)
   partition [--one-way] GROUP GROUP...
                          partition the run's nodes now, as a timeline's partition
                          entry does: each GROUP is names joined by commas (a,b),
                          the nodes' and client; nothing crosses between groups (with
                          --one-way, two groups: nothing goes from the first to the
                          second); recorded as a timeline entry
   heal                   end the partition in force
   events                 the run's events as they happen, one a line: its type, then
                          its JSON (a sample each interval, each change, the end)
   stop                   end the run as Ctrl-C would

What it prints is for a person: set and reset a line per setting changed
in a direction (uplink rate 10Mbps → 2Mbps at 4.12 s), status and get a
table; -o json (or --json) prints the API's answer instead, for a
program. A bad key or value, or a link or flow the run has not, exits 2
(as run --set's); an endpoint not reached, or a run that ended, 1.

Examples:
   netjam run my.yaml --control unix:/tmp/nj.sock &
   netjam ctl --control unix:/tmp/nj.sock set link.uplink.loss=100%   # an outage
   netjam ctl --control unix:/tmp/nj.sock set link.uplink.loss=0%
   netjam ctl --control unix:/tmp/nj.sock set --for 5s link.loss=100%   # a 5 s outage
   netjam ctl --control unix:/tmp/nj.sock schedule --at 20s link.delay=200ms
   netjam ctl --control unix:/tmp/nj.sock reset
   netjam ctl --control unix:/tmp/nj.sock reset --flow bulk   # its connection ends with a RST both ways
   netjam ctl --control unix:/tmp/nj.sock partition a b,c     # a cut off from b and c
   netjam ctl --control unix:/tmp/nj.sock heal
   netjam ctl --control unix:/tmp/nj.sock status
   netjam ctl --control unix:/tmp/nj.sock get -o json
   netjam run my.yaml --control 127.0.0.1:8080 --out results/mine &
   netjam ctl --control 127.0.0.1:8080 --control-token results/mine/control.token status
   sudo netjam shell --control unix -- sh -c 'netjam ctl set link.loss=100%; ./my-test'`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "control", Usage: "the run's control endpoint: `unix:PATH`, HOST:PORT or https://HOST:PORT (default $NETJAM_CONTROL)"},
			&cli.StringFlag{Name: "control-token", Usage: "a `FILE` holding the endpoint's token, such as control.token in the run's output folder (default $NETJAM_CONTROL_TOKEN, the token itself)"},
			&cli.StringFlag{Name: "at", Usage: "schedule: the `TIME` of the run (from its start) the change applies at, such as 5s"},
			&cli.StringFlag{Name: "flow", Usage: "reset: the `NAME` of the TCP flow whose connection ends with a RST both ways (instead of the keys going back)"},
			&cli.StringFlag{Name: "for", Usage: "set: put the keys back to their values before after this `DURATION` (an outage: set --for 5s link.loss=100%)"},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "`FORMAT`: text (a line per change, a table for status and get) or json (the API's answer)"},
			&cli.BoolFlag{Name: "json", Usage: "print the API's answer, JSON (-o json)"},
		},
		OnUsageError: usageError,
		Action:       doCtl,
	}
}

// ctlVerbNames are ctl's verbs; ctlVerbs, each with its arguments.
var ctlVerbNames = []string{"status", "get", "set", "schedule", "reset", "partition", "heal", "events", "stop"}

// ctlVerbs are what netjam ctl does.
const ctlVerbs = "status, get [LINK], set [--for DURATION] KEY=VALUE..., schedule --at TIME KEY=VALUE..., reset [--flow NAME], events or stop"

func doCtl(c *cli.Context) error {
	addr := c.String("control")
	if addr == "" {
		addr = os.Getenv(controlEnv)
	}
	if addr == "" {
		return cli.Exit("ctl: no control endpoint: give --control unix:PATH (or HOST:PORT), or set "+controlEnv, exitBadUsage)
	}
	if c.NArg() == 0 {
		// A flag given last without its value took the verb for it
		// (flagsFirst moved the flag before the verb: set --for).
		for _, f := range []string{"at", "for", "flow"} {
			if v := c.String(f); slices.Contains(ctlVerbNames, v) {
				return cli.Exit(fmt.Sprintf("ctl %s: --%s needs a value", v, f), exitBadUsage)
			}
		}
		return cli.Exit("ctl: what to do? "+ctlVerbs, exitBadUsage)
	}
	verb := c.Args().First()
	asJSON, err := ctlOutputJSON(c.Bool("json"), c.String("output"))
	if err != nil {
		return cli.Exit("ctl: "+err.Error(), exitBadUsage)
	}
	call, err := ctlCall(c, verb)
	if err != nil {
		return err
	}
	token := os.Getenv(controlTokenEnv)
	if f := c.String("control-token"); f != "" {
		if token, err = readToken(f); err != nil {
			return err
		}
	}
	client := control.Client{Addr: addr, Token: token}
	if verb == "events" {
		return streamEvents(c, client)
	}
	code, out, err := client.Do(call)
	if err != nil {
		return cli.Exit(fmt.Sprintf("ctl: %s: %v", addr, err), exitFailed)
	}
	switch code {
	case http.StatusOK:
	case http.StatusBadRequest, http.StatusNotFound:
		// A bad key or value, a link or flow the run has not: bad usage,
		// as run --set's.
		return cli.Exit(fmt.Sprintf("ctl %s: %s", verb, control.ErrorMessage(out)), exitBadUsage)
	default:
		return cli.Exit(fmt.Sprintf("ctl %s: %s%s", verb, control.ErrorMessage(out), tokenHint(code, token)), exitFailed)
	}
	if !asJSON {
		return call.Print(c.App.Writer, out)
	}
	var pretty bytes.Buffer
	if json.Indent(&pretty, out, "", "  ") == nil {
		pretty.WriteByte('\n')
		out = pretty.Bytes()
	}
	c.App.Writer.Write(out)
	return nil
}

// ctlOutputJSON reports whether ctl prints the API's JSON (--json, -o
// json), checking -o's value.
func ctlOutputJSON(json bool, output string) (bool, error) {
	switch output {
	case "", "text":
		return json, nil
	case "json":
		return true, nil
	}
	return false, fmt.Errorf("-o %s: not an output format (text or json)", output)
}

// partitionCall is ctl partition's call: args are the groups, each names
// joined by commas, and --one-way anywhere (urfave/cli stops at the verb).
func partitionCall(args []string) (control.Call, error) {
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
			return control.Call{}, cli.Exit(fmt.Sprintf("ctl partition: %q is not a group (names joined by commas, like b,c)", a), exitBadUsage)
		}
		groups = append(groups, g)
	}
	if len(groups) < 2 {
		return control.Call{}, cli.Exit("ctl partition: at least two groups, like partition a b,c (names joined by commas)", exitBadUsage)
	}
	return control.PartitionCall(groups, oneWay), nil
}

// ctlCall is the call of the API that ctl's verb makes.
func ctlCall(c *cli.Context, verb string) (control.Call, error) {
	if c.IsSet("at") && verb != "schedule" {
		return control.Call{}, cli.Exit(fmt.Sprintf("ctl %s: --at is for schedule", verb), exitBadUsage)
	}
	if c.IsSet("flow") && verb != "reset" {
		return control.Call{}, cli.Exit(fmt.Sprintf("ctl %s: --flow is for reset", verb), exitBadUsage)
	}
	if c.IsSet("for") && verb != "set" {
		return control.Call{}, cli.Exit(fmt.Sprintf("ctl %s: --for is for set", verb), exitBadUsage)
	}
	switch verb {
	case "status", "stop", "reset", "events", "heal":
		if c.NArg() > 1 {
			return control.Call{}, cli.Exit(fmt.Sprintf("ctl %s takes no arguments, got %s", verb, strings.Join(c.Args().Tail(), " ")), exitBadUsage)
		}
	}
	switch verb {
	case "status":
		return control.StatusCall(), nil
	case "get":
		switch c.NArg() {
		case 1:
			return control.LinksCall(""), nil
		case 2:
			return control.LinksCall(c.Args().Get(1)), nil
		}
		return control.Call{}, cli.Exit("ctl get: at most one link: get [uplink|downlink|NAME|NAME.uplink|NAME.downlink]", exitBadUsage)
	case "stop":
		return control.StopCall(), nil
	case "reset":
		// reset --flow NAME: that flow's connection; reset: the keys.
		if !c.IsSet("flow") {
			return control.ResetCall(), nil
		}
		if c.String("flow") == "" {
			return control.Call{}, cli.Exit("ctl reset: --flow NAME names the TCP flow whose connection to end", exitBadUsage)
		}
		return control.ResetFlowCall(c.String("flow")), nil
	case "events":
		return control.EventsCall(), nil
	case "heal":
		return control.HealCall(), nil
	case "partition":
		return partitionCall(c.Args().Tail())
	case "set", "schedule":
		args, at, dur := c.Args().Tail(), c.String("at"), c.String("for")
		// urfave/cli stops at the verb: --at or --for after it is ours
		// to read.
		flag := map[string]*string{"schedule": &at, "set": &dur}[verb]
		name := map[string]string{"schedule": "--at", "set": "--for"}[verb]
		given := c.IsSet(strings.TrimPrefix(name, "--"))
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
			return control.Call{}, cli.Exit(fmt.Sprintf("ctl %s: %s needs a %s", verb, name, what), exitBadUsage)
		case given && strings.Contains(*flag, "="):
			return control.Call{}, cli.Exit(fmt.Sprintf("ctl %s: %s needs a %s, got %s (%s 5s KEY=VALUE...)", verb, name, what, *flag, name), exitBadUsage)
		}
		set, err := keyValues(verb, args)
		if err != nil {
			return control.Call{}, err
		}
		if verb == "set" {
			return control.SetCall(set, dur), nil
		}
		if at == "" {
			return control.Call{}, cli.Exit("ctl schedule: when? give --at TIME (from the run's start, such as 5s)", exitBadUsage)
		}
		return control.ScheduleCall(at, set), nil
	}
	return control.Call{}, cli.Exit(fmt.Sprintf("ctl: %q is not something ctl does (%s)", verb, ctlVerbs), exitBadUsage)
}

// keyValues reads set's and schedule's KEY=VALUE arguments.
func keyValues(verb string, args []string) (map[string]string, error) {
	set := map[string]string{}
	for _, kv := range args {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, cli.Exit(fmt.Sprintf("ctl %s: %q is not KEY=VALUE", verb, kv), exitBadUsage)
		}
		set[strings.TrimSpace(k)] = v
	}
	if len(set) == 0 {
		return nil, cli.Exit(fmt.Sprintf("ctl %s: nothing to set (KEY=VALUE...)", verb), exitBadUsage)
	}
	return set, nil
}

// streamEvents prints the event stream, an event a line (its type, then
// its data), until the endpoint closes it (netjam ended) or ctl is
// interrupted.
func streamEvents(c *cli.Context, client control.Client) error {
	err := client.Events(c.Context, func(typ, data string) {
		fmt.Fprintf(c.App.Writer, "%s %s\n", typ, data)
	})
	var se *control.StatusError
	switch {
	case errors.As(err, &se):
		return cli.Exit("ctl events: "+se.Message+tokenHint(se.Code, client.Token), exitFailed)
	case err != nil:
		return cli.Exit(fmt.Sprintf("ctl: %s: %v", client.Addr, err), exitFailed)
	}
	return nil
}

// tokenHint says where a token comes from, after a 401.
func tokenHint(code int, token string) string {
	if code != http.StatusUnauthorized {
		return ""
	}
	if token == "" {
		return " (give --control-token FILE: a run given no token writes it into control.token in its output folder; or set " + controlTokenEnv + ")"
	}
	return " (the token given is not this endpoint's: a run makes a new one each time)"
}
