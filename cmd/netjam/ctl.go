package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/netjam/netjam/control"
)

// controlEnv names the control endpoint for netjam ctl.
const controlEnv = "NETJAM_CONTROL"

// controlAddr is --control's address, the default socket for "unix".
func controlAddr(c *cli.Context, out string) string {
	addr := c.String("control")
	if addr == "unix" || addr == "unix:" || addr == "" {
		addr = control.DefaultSocket(out)
	}
	return addr
}

// startControl serves what --control, --ui and --metrics ask for, for a
// run into out (nil when none); the context it returns is ctx, ended by
// the API's stop too, and by the function returned. It says where on c's
// ErrWriter.
func startControl(c *cli.Context, ctx context.Context, out string) (*control.Server, context.Context, context.CancelFunc, error) {
	ctx, stop := context.WithCancel(ctx)
	var srv *control.Server
	if c.IsSet("control") || c.Bool("ui") {
		addr := controlAddr(c, out)
		if c.Bool("ui") {
			if !c.IsSet("control") {
				addr = "127.0.0.1:0" // a free port
			} else if strings.HasPrefix(addr, "unix:") {
				stop()
				return nil, nil, nil, cli.Exit("--ui: a browser reaches a TCP address only: give --control 127.0.0.1:PORT, or no --control", exitBadUsage)
			}
		}
		var err error
		if srv, _, err = serveControl(c, addr, stop); err != nil {
			stop()
			return nil, nil, nil, err
		}
		fmt.Fprintf(c.App.ErrWriter, "netjam: control API at %s\n", srv.Addr())
		if c.Bool("ui") {
			fmt.Fprintf(c.App.ErrWriter, "netjam: dashboard at http://%s/\n", srv.Addr())
		}
	}
	if addr := c.String("metrics"); addr != "" {
		token, err := controlToken(c)
		var ln net.Listener
		if err == nil {
			ln, err = control.ListenMetrics(addr, token != "")
		}
		if err != nil {
			stop()
			if srv != nil {
				srv.Close()
			}
			return nil, nil, nil, cli.Exit(err, exitBadUsage)
		}
		if srv == nil {
			srv = control.New(token, stop)
		}
		srv.ServeMetrics(ln)
		fmt.Fprintf(c.App.ErrWriter, "netjam: metrics at http://%s/metrics\n", ln.Addr())
	}
	return srv, ctx, stop, nil
}

// endpointFlags are run's flags of the control API, the dashboard and the
// metrics.
func endpointFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "control", Usage: "serve the control API while the run runs (netjam ctl, HTTP): `unix:PATH`, HOST:PORT, or unix for control.sock in the output folder"},
		&cli.StringFlag{Name: "control-token", Usage: "a `FILE` holding the token every control request and metrics scrape must carry (Authorization: Bearer); required for a non-loopback --control or --metrics"},
		&cli.BoolFlag{Name: "ui", Usage: "serve the dashboard (a page to watch the run and change its path) on the control endpoint, 127.0.0.1 on a free port unless --control says where, print its URL, and serve the report there after the run until Ctrl-C"},
		&cli.StringFlag{Name: "metrics", Usage: "serve the run's Prometheus metrics at `HOST:PORT`/metrics (also on the control endpoint's /metrics); a non-loopback address needs --control-token"},
	}
}

// finishControl tells the endpoint's clients that the results are
// written; with --ui it serves them until interrupted (ctx) or told to
// quit (the page's stop, POST /v1/stop).
func finishControl(c *cli.Context, ctx context.Context, srv *control.Server, out string) {
	srv.Finished(out)
	if !c.Bool("ui") || ctx.Err() != nil {
		return
	}
	fmt.Fprintf(c.App.ErrWriter, "netjam: the report is at http://%s/results/report.html (Ctrl-C to quit)\n", srv.Addr())
	select {
	case <-ctx.Done():
	case <-srv.Quit():
	}
}

// serveControl serves the control API at addr with --control-token's
// token; stop is what the API's stop does. It returns the unix socket's
// path, if addr is one.
func serveControl(c *cli.Context, addr string, stop func()) (*control.Server, string, error) {
	token, err := controlToken(c)
	if err != nil {
		return nil, "", err
	}
	ln, socket, err := control.Listen(addr, token != "")
	if err != nil {
		return nil, "", cli.Exit(err, exitBadUsage)
	}
	return control.Serve(ln, socket, token, stop), socket, nil
}

// maxTokenFile bounds a --control-token file: a token is some tens of
// bytes, and the file could be a device that never ends (/dev/zero).
const maxTokenFile = 4096

// readToken reads the token of the --control-token file f, with the
// spaces around it trimmed, refusing a file of more than maxTokenFile
// bytes.
func readToken(f string) (string, error) {
	file, err := os.Open(f)
	if err != nil {
		return "", cli.Exit(fmt.Sprintf("--control-token: %v", err), exitBadUsage)
	}
	defer file.Close()
	b, err := io.ReadAll(io.LimitReader(file, maxTokenFile+1))
	if err != nil {
		return "", cli.Exit(fmt.Sprintf("--control-token: %v", err), exitBadUsage)
	}
	if len(b) > maxTokenFile {
		return "", cli.Exit(fmt.Sprintf("--control-token: %s is more than %d bytes: a token file holds one token", f, maxTokenFile), exitBadUsage)
	}
	return strings.TrimSpace(string(b)), nil
}

// controlToken is the token of --control-token's file, "" without one.
func controlToken(c *cli.Context) (string, error) {
	f := c.String("control-token")
	if f == "" {
		return "", nil
	}
	token, err := readToken(f)
	if err != nil {
		return "", err
	}
	if token == "" {
		return "", cli.Exit(fmt.Sprintf("--control-token: %s is empty", f), exitBadUsage)
	}
	return token, nil
}

func ctlCommand() *cli.Command {
	return &cli.Command{
		Name:      "ctl",
		Usage:     "look at and change a running netjam (one started with --control)",
		ArgsUsage: "status | get [LINK] | set KEY=VALUE... | schedule --at TIME KEY=VALUE... | reset [--flow NAME] | events | stop",
		Description: `Talks to the control API of a netjam run or shell started with --control,
at --control or $NETJAM_CONTROL (netjam shell --control sets it for its
command): unix:PATH or HOST:PORT.

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
   events                 the run's events as they happen, one a line: its type, then
                          its JSON (a sample each interval, each change, the end)
   stop                   end the run as Ctrl-C would

Examples:
   netjam run my.yaml --control unix:/tmp/nj.sock &
   netjam ctl --control unix:/tmp/nj.sock set link.uplink.loss=100%   # an outage
   netjam ctl --control unix:/tmp/nj.sock set link.uplink.loss=0%
   netjam ctl --control unix:/tmp/nj.sock set --for 5s link.loss=100%   # a 5 s outage
   netjam ctl --control unix:/tmp/nj.sock schedule --at 20s link.delay=200ms
   netjam ctl --control unix:/tmp/nj.sock reset
   netjam ctl --control unix:/tmp/nj.sock reset --flow bulk   # its connection ends with a RST both ways
   netjam ctl --control unix:/tmp/nj.sock status
   sudo netjam shell --control unix -- sh -c 'netjam ctl set link.loss=100%; ./my-test'`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "control", Usage: "the run's control endpoint: `unix:PATH` or HOST:PORT (default $NETJAM_CONTROL)"},
			&cli.StringFlag{Name: "control-token", Usage: "a `FILE` holding the endpoint's token"},
			&cli.StringFlag{Name: "at", Usage: "schedule: the `TIME` of the run (from its start) the change applies at, such as 5s"},
			&cli.StringFlag{Name: "flow", Usage: "reset: the `NAME` of the TCP flow whose connection ends with a RST both ways (instead of the keys going back)"},
			&cli.StringFlag{Name: "for", Usage: "set: put the keys back to their values before after this `DURATION` (an outage: set --for 5s link.loss=100%)"},
		},
		OnUsageError: usageError,
		Action:       doCtl,
	}
}

// ctlVerbNames are ctl's verbs; ctlVerbs, each with its arguments.
var ctlVerbNames = []string{"status", "get", "set", "schedule", "reset", "events", "stop"}

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
	method, path, body, err := ctlRequest(c, verb)
	if err != nil {
		return err
	}
	token := ""
	if f := c.String("control-token"); f != "" {
		if token, err = readToken(f); err != nil {
			return err
		}
	}
	if verb == "events" {
		return streamEvents(c, addr, token)
	}
	out, code, err := call(addr, token, method, path, body)
	if err != nil {
		return cli.Exit(fmt.Sprintf("ctl: %s: %v", addr, err), exitFailed)
	}
	if code != http.StatusOK {
		return cli.Exit(fmt.Sprintf("ctl %s: %s", verb, apiError(out)), exitFailed)
	}
	var pretty bytes.Buffer
	if json.Indent(&pretty, out, "", "  ") == nil {
		out = pretty.Bytes()
	}
	c.App.Writer.Write(out)
	return nil
}

// ctlRequest is the request of ctl's verb.
func ctlRequest(c *cli.Context, verb string) (method, path string, body []byte, err error) {
	if c.IsSet("at") && verb != "schedule" {
		return "", "", nil, cli.Exit(fmt.Sprintf("ctl %s: --at is for schedule", verb), exitBadUsage)
	}
	if c.IsSet("flow") && verb != "reset" {
		return "", "", nil, cli.Exit(fmt.Sprintf("ctl %s: --flow is for reset", verb), exitBadUsage)
	}
	if c.IsSet("for") && verb != "set" {
		return "", "", nil, cli.Exit(fmt.Sprintf("ctl %s: --for is for set", verb), exitBadUsage)
	}
	switch verb {
	case "status", "stop", "reset", "events":
		if c.NArg() > 1 {
			return "", "", nil, cli.Exit(fmt.Sprintf("ctl %s takes no arguments, got %s", verb, strings.Join(c.Args().Tail(), " ")), exitBadUsage)
		}
	}
	switch verb {
	case "status":
		return http.MethodGet, "/v1/status", nil, nil
	case "get":
		switch c.NArg() {
		case 1:
			return http.MethodGet, "/v1/links", nil, nil
		case 2:
			return http.MethodGet, "/v1/links/" + url.PathEscape(c.Args().Get(1)), nil, nil
		}
		return "", "", nil, cli.Exit("ctl get: at most one link: get [uplink|downlink|NAME|NAME.uplink|NAME.downlink]", exitBadUsage)
	case "stop":
		return http.MethodPost, "/v1/stop", nil, nil
	case "reset":
		// reset --flow NAME: that flow's connection; reset: the keys.
		if !c.IsSet("flow") {
			return http.MethodPost, "/v1/reset", nil, nil
		}
		if c.String("flow") == "" {
			return "", "", nil, cli.Exit("ctl reset: --flow NAME names the TCP flow whose connection to end", exitBadUsage)
		}
		return http.MethodPost, "/v1/flows/" + url.PathEscape(c.String("flow")) + "/reset", nil, nil
	case "events":
		return http.MethodGet, "/v1/events", nil, nil
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
			return "", "", nil, cli.Exit(fmt.Sprintf("ctl %s: %s needs a %s", verb, name, what), exitBadUsage)
		case given && strings.Contains(*flag, "="):
			return "", "", nil, cli.Exit(fmt.Sprintf("ctl %s: %s needs a %s, got %s (%s 5s KEY=VALUE...)", verb, name, what, *flag, name), exitBadUsage)
		}
		set, err := keyValues(verb, args)
		if err != nil {
			return "", "", nil, err
		}
		if verb == "set" {
			body, _ = json.Marshal(control.SetRequest{Set: set, For: dur})
			return http.MethodPatch, "/v1/links", body, nil
		}
		if at == "" {
			return "", "", nil, cli.Exit("ctl schedule: when? give --at TIME (from the run's start, such as 5s)", exitBadUsage)
		}
		body, _ = json.Marshal(control.ScheduleRequest{At: at, Set: set})
		return http.MethodPost, "/v1/timeline", body, nil
	}
	return "", "", nil, cli.Exit(fmt.Sprintf("ctl: %q is not something ctl does (%s)", verb, ctlVerbs), exitBadUsage)
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

// apiError is the message of an error body of the API.
func apiError(body []byte) string {
	var e struct{ Error string }
	if json.Unmarshal(body, &e) != nil || e.Error == "" {
		return strings.TrimSpace(string(body))
	}
	return e.Error
}

// streamEvents prints the event stream, an event a line (its type, then
// its data), until the endpoint closes it (netjam ended) or ctl is
// interrupted.
func streamEvents(c *cli.Context, addr, token string) error {
	tr, host := transport(addr)
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(c.Context, http.MethodGet, "http://"+host+"/v1/events", nil)
	if err != nil {
		return cli.Exit(fmt.Sprintf("ctl events: %v", err), exitFailed)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return cli.Exit(fmt.Sprintf("ctl: %s: %v", addr, err), exitFailed)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		return cli.Exit("ctl events: "+apiError(b), exitFailed)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	typ := ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			typ = line[len("event: "):]
		case strings.HasPrefix(line, "data: "):
			fmt.Fprintf(c.App.Writer, "%s %s\n", typ, line[len("data: "):])
		}
	}
	return nil
}

// transport is the HTTP transport to the control endpoint at addr, and
// the host of its URLs.
func transport(addr string) (*http.Transport, string) {
	tr := &http.Transport{}
	if sock, ok := strings.CutPrefix(addr, "unix:"); ok {
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}
		return tr, "netjam"
	}
	return tr, addr
}

// call makes one request to the control endpoint at addr.
func call(addr, token, method, path string, body []byte) ([]byte, int, error) {
	tr, host := transport(addr)
	defer tr.CloseIdleConnections()
	req, err := http.NewRequest(method, "http://"+host+path, bytes.NewReader(body))
	if err != nil {
		return nil, 0, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := (&http.Client{Transport: tr, Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	return b, resp.StatusCode, err
}
