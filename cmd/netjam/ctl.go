package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
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

// startControl serves the control API of a run into out; the context it
// returns is ctx, ended by the API's stop too.
func startControl(c *cli.Context, ctx context.Context, out string) (*control.Server, context.Context, error) {
	ctx, stop := context.WithCancel(ctx)
	srv, _, err := serveControl(c, controlAddr(c, out), stop)
	if err != nil {
		stop()
		return nil, nil, err
	}
	return srv, ctx, nil
}

// serveControl serves the control API at addr with --control-token's
// token; stop is what the API's stop does. It returns the unix socket's
// path, if addr is one.
func serveControl(c *cli.Context, addr string, stop func()) (*control.Server, string, error) {
	token := ""
	if f := c.String("control-token"); f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, "", cli.Exit(fmt.Sprintf("--control-token: %v", err), exitBadUsage)
		}
		if token = strings.TrimSpace(string(b)); token == "" {
			return nil, "", cli.Exit(fmt.Sprintf("--control-token: %s is empty", f), exitBadUsage)
		}
	}
	ln, socket, err := control.Listen(addr, token != "")
	if err != nil {
		return nil, "", cli.Exit(err, exitBadUsage)
	}
	return control.Serve(ln, socket, token, stop), socket, nil
}

func ctlCommand() *cli.Command {
	return &cli.Command{
		Name:      "ctl",
		Usage:     "look at and change a running netjam (one started with --control)",
		ArgsUsage: "status | get | set KEY=VALUE... | stop",
		Description: `Talks to the control API of a netjam run or shell started with --control,
at --control or $NETJAM_CONTROL (netjam shell --control sets it for its
command): unix:PATH or HOST:PORT.

   status              the run now: elapsed time, each flow's progress, each link
   get                 each direction's settings in force and counters
   set KEY=VALUE...    change the path now (the link's keys, as --set takes them);
                       connections survive it; recorded in events.jsonl
   stop                end the run as Ctrl-C would

Examples:
   netjam run my.yaml --control unix:/tmp/nj.sock &
   netjam ctl --control unix:/tmp/nj.sock set link.uplink.loss=100%   # an outage
   netjam ctl --control unix:/tmp/nj.sock set link.uplink.loss=0%
   netjam ctl --control unix:/tmp/nj.sock status
   sudo netjam shell --control unix -- sh -c 'netjam ctl set link.loss=100%; ./my-test'`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "control", Usage: "the run's control endpoint: `unix:PATH` or HOST:PORT (default $NETJAM_CONTROL)"},
			&cli.StringFlag{Name: "control-token", Usage: "a `FILE` holding the endpoint's token"},
		},
		OnUsageError: usageError,
		Action:       doCtl,
	}
}

func doCtl(c *cli.Context) error {
	addr := c.String("control")
	if addr == "" {
		addr = os.Getenv(controlEnv)
	}
	if addr == "" {
		return cli.Exit("ctl: no control endpoint: give --control unix:PATH (or HOST:PORT), or set "+controlEnv, exitBadUsage)
	}
	if c.NArg() == 0 {
		return cli.Exit("ctl: what to do? status, get, set KEY=VALUE... or stop", exitBadUsage)
	}
	var method, path string
	var body []byte
	switch verb := c.Args().First(); verb {
	case "status":
		method, path = http.MethodGet, "/v1/status"
	case "get":
		method, path = http.MethodGet, "/v1/links"
	case "stop":
		method, path = http.MethodPost, "/v1/stop"
	case "set":
		req := control.SetRequest{Set: map[string]string{}}
		for _, kv := range c.Args().Tail() {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || strings.TrimSpace(k) == "" {
				return cli.Exit(fmt.Sprintf("ctl set: %q is not KEY=VALUE", kv), exitBadUsage)
			}
			req.Set[strings.TrimSpace(k)] = v
		}
		if len(req.Set) == 0 {
			return cli.Exit("ctl set: nothing to set (KEY=VALUE...)", exitBadUsage)
		}
		method, path = http.MethodPatch, "/v1/links"
		body, _ = json.Marshal(req)
	default:
		return cli.Exit(fmt.Sprintf("ctl: %q is not something ctl does (status, get, set, stop)", verb), exitBadUsage)
	}
	token := ""
	if f := c.String("control-token"); f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			return cli.Exit(fmt.Sprintf("--control-token: %v", err), exitBadUsage)
		}
		token = strings.TrimSpace(string(b))
	}
	out, code, err := call(addr, token, method, path, body)
	if err != nil {
		return cli.Exit(fmt.Sprintf("ctl: %s: %v", addr, err), exitFailed)
	}
	if code != http.StatusOK {
		var e struct{ Error string }
		json.Unmarshal(out, &e)
		return cli.Exit(fmt.Sprintf("ctl %s: %s", c.Args().First(), e.Error), exitFailed)
	}
	var pretty bytes.Buffer
	if json.Indent(&pretty, out, "", "  ") == nil {
		out = pretty.Bytes()
	}
	c.App.Writer.Write(out)
	return nil
}

// call makes one request to the control endpoint at addr.
func call(addr, token, method, path string, body []byte) ([]byte, int, error) {
	tr := &http.Transport{}
	host := addr
	if sock, ok := strings.CutPrefix(addr, "unix:"); ok {
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}
		host = "netjam"
	}
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
