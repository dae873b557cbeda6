package main

import (
	"errors"
	"os"

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

func doCtl(c *cli.Context) error {
	addr := c.String("control")
	if addr == "" {
		addr = os.Getenv(control.EndpointEnv)
	}
	if addr == "" {
		return cli.Exit("ctl: no control endpoint: give --control unix:PATH (or HOST:PORT), or set "+control.EndpointEnv, exitBadUsage)
	}
	call, asJSON, err := control.ParseCall(c.Args().First(), c.Args().Tail(), ctlFlags(c))
	if err != nil {
		return cli.Exit(err, exitBadUsage)
	}
	token := os.Getenv(control.TokenEnv)
	if f := c.String("control-token"); f != "" {
		if token, err = readToken(f); err != nil {
			return err
		}
	}
	err = control.Client{Addr: addr, Token: token}.Run(c.Context, call, c.App.Writer, asJSON)
	var ce *control.CallError
	switch {
	case errors.As(err, &ce) && ce.Usage:
		return cli.Exit(err, exitBadUsage)
	case errors.As(err, &ce):
		return cli.Exit(err, exitFailed)
	}
	return err
}

// ctlFlags are ctl's flags, as ParseCall takes them.
func ctlFlags(c *cli.Context) control.CallFlags {
	f := control.CallFlags{JSON: c.Bool("json"), Output: c.String("output")}
	for name, p := range map[string]**string{"at": &f.At, "flow": &f.Flow, "for": &f.For} {
		if c.IsSet(name) {
			v := c.String(name)
			*p = &v
		}
	}
	return f
}
