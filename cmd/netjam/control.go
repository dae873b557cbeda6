package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/netjam/netjam/confine"
	"github.com/netjam/netjam/control"
	"github.com/netjam/netjam/emulator"
	"github.com/netjam/netjam/outdir"
)

// attach is emulator.Options.Live for srv: each run, once its flows
// started, becomes the one srv controls.
func attach(srv *control.Server) func(*emulator.Live) {
	return func(lv *emulator.Live) { srv.Attach(lv) }
}

// controlAddr is --control's address, the default socket for "unix".
func controlAddr(c *cli.Context, out string) string {
	addr := c.String("control")
	if addr == "unix" || addr == "unix:" || addr == "" {
		addr = control.DefaultSocket(out)
	}
	return addr
}

// startControl serves what --control, --ui and --metrics ask for, for a
// run into the folder out; the context it returns is ctx, ended by
// the API's stop too, and by the function returned, which also closes
// the endpoint. It says where on c's ErrWriter: for a TCP endpoint given
// no --control-token, with the token it made (in the dashboard's URL,
// and in out's control.token for netjam ctl).
func startControl(c *cli.Context, ctx context.Context, out *outdir.Dir) (*control.Server, context.Context, context.CancelFunc, error) {
	ctx, stop := context.WithCancel(ctx)
	var srv *control.Server
	remove := func() {}
	fail := func(err error) (*control.Server, context.Context, context.CancelFunc, error) {
		stop()
		if srv != nil {
			srv.Close()
		}
		remove()
		return nil, nil, nil, err
	}
	owner, err := sudoOwner()
	if err != nil {
		return fail(err)
	}
	if c.IsSet("control") || c.Bool("ui") {
		addr := controlAddr(c, out.Path())
		if c.Bool("ui") {
			if !c.IsSet("control") {
				addr = "127.0.0.1:0" // a free port
			} else if strings.HasPrefix(addr, "unix:") {
				return fail(cli.Exit("--ui: a browser reaches a TCP address only: give --control 127.0.0.1:PORT, or no --control", exitBadUsage))
			}
		}
		s, err := serveControl(c, addr, stop, owner)
		if err != nil {
			return fail(err)
		}
		srv = s.Server
		if remove, err = announce(c, s, out, c.Bool("ui")); err != nil {
			return fail(err)
		}
	}
	if addr := c.String("metrics"); addr != "" {
		ep, err := controlEndpoint(c)
		if err != nil {
			return fail(err)
		}
		ln, err := control.ListenMetrics(addr, ep.Token != "")
		if err != nil {
			return fail(cli.Exit(err, exitBadUsage))
		}
		if srv == nil {
			srv = control.New(stop)
		}
		srv.ServeMetrics(ln, ep)
		scheme := "http"
		if ep.TLS != nil {
			scheme = "https"
		}
		warnPlain(c, "--metrics", ln.Addr().String(), ep)
		fmt.Fprintf(c.App.ErrWriter, "netjam: metrics at %s://%s/metrics\n", scheme, ln.Addr())
	}
	return srv, ctx, func() {
		stop()
		remove()
	}, nil
}

// sudoOwner is who a run's control socket and token file are handed to:
// under sudo, the invoking user, who started the run and runs netjam ctl
// (nil otherwise).
func sudoOwner() (*control.Owner, error) {
	u, err := confine.InvokingUser(os.Getenv)
	if err != nil || u == nil {
		return nil, err
	}
	return &control.Owner{UID: int(u.UID), GID: int(u.GID)}, nil
}

// announce says on c's ErrWriter where the endpoint s is, and with
// dashboard the dashboard's URL. A token s made goes into dir's
// control.token (mode 0600, the owner's the folder was opened for; a
// link put there in its place is not followed), for netjam ctl
// --control-token, unless dir is nil; remove deletes it.
func announce(c *cli.Context, s *control.Served, dir *outdir.Dir, dashboard bool) (remove func(), err error) {
	remove, where := func() {}, ""
	if s.Made && dir != nil {
		if err := dir.WritePrivate(control.TokenFile, []byte(s.Token+"\n")); err != nil {
			return nil, cli.Exit(fmt.Sprintf("the control token: %v", err), exitFailed)
		}
		remove = func() { dir.Remove(control.TokenFile) }
		where = " (its token in " + dir.Join(control.TokenFile) + ")"
	}
	fmt.Fprintf(c.App.ErrWriter, "netjam: control API at %s%s\n", s.Where(), where)
	if dashboard {
		fmt.Fprintf(c.App.ErrWriter, "netjam: dashboard at %s\n", s.Dashboard())
	}
	return remove, nil
}

// endpointFlags are run's flags of the control API, the dashboard and the
// metrics.
func endpointFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "control", Usage: "serve the control API while the run runs (netjam ctl, HTTP): `unix:PATH`, HOST:PORT, or unix for control.sock in the output folder; a TCP address takes a token, made anew (in control.token of the output folder) without --control-token"},
		&cli.StringFlag{Name: "control-token", Usage: "a `FILE` holding the token every control request and metrics scrape must carry (Authorization: Bearer); required for a non-loopback --metrics"},
		&cli.BoolFlag{Name: "ui", Usage: "serve the dashboard (a page to watch the run and change its path) on the control endpoint, 127.0.0.1 on a free port unless --control says where, print its URL with the token, and serve the report there after the run until Ctrl-C"},
		&cli.StringFlag{Name: "metrics", Usage: "serve the run's Prometheus metrics at `HOST:PORT`/metrics (also on the control endpoint's /metrics); a non-loopback address needs --control-token"},
		&cli.StringFlag{Name: "control-tls-cert", Usage: "serve the TCP control endpoint and --metrics over HTTPS with this certificate `FILE` (PEM; with --control-tls-key): for an address others reach"},
		&cli.StringFlag{Name: "control-tls-key", Usage: "the private key `FILE` of --control-tls-cert (PEM)"},
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
	fmt.Fprintf(c.App.ErrWriter, "netjam: the report is at %s/results/report.html (Ctrl-C to quit)\n", srv.URL())
	select {
	case <-ctx.Done():
	case <-srv.Quit():
	}
}

// serveControl serves the control API at addr guarded by --control-token
// and the TLS flags (control.Open: a TCP address given no token gets one
// made anew); a unix socket goes to owner when not nil. stop is what the
// API's stop does.
func serveControl(c *cli.Context, addr string, stop func(), owner *control.Owner) (*control.Served, error) {
	ep, err := controlEndpoint(c)
	if err != nil {
		return nil, err
	}
	s, err := control.Open(addr, ep, owner, stop)
	if err != nil {
		return nil, cli.Exit(err, exitBadUsage)
	}
	if !strings.HasPrefix(addr, "unix:") {
		warnPlain(c, "--control", s.Addr(), s.Endpoint)
	}
	return s, nil
}

// warnPlain warns that an endpoint others reach is served over plain
// HTTP: its token crosses the network in clear.
func warnPlain(c *cli.Context, flag, addr string, ep control.Endpoint) {
	if w := control.PlainWarning(flag, addr, ep); w != "" {
		fmt.Fprintln(c.App.ErrWriter, w)
	}
}

// controlEndpoint is how --control-token's token and the TLS flags'
// certificate guard an endpoint.
func controlEndpoint(c *cli.Context) (control.Endpoint, error) {
	var ep control.Endpoint
	if f := c.String("control-token"); f != "" {
		token, err := readToken(f)
		if err != nil {
			return ep, err
		}
		if token == "" {
			return ep, cli.Exit(fmt.Sprintf("--control-token: %s is empty", f), exitBadUsage)
		}
		ep.Token = token
	}
	tlsCfg, err := control.LoadTLS(c.String("control-tls-cert"), c.String("control-tls-key"))
	if err != nil {
		return ep, cli.Exit(err, exitBadUsage)
	}
	ep.TLS = tlsCfg
	return ep, nil
}

// readToken reads the token of the --control-token file f
// (control.ReadToken).
func readToken(f string) (string, error) {
	token, err := control.ReadToken(f)
	if err != nil {
		return "", cli.Exit("--control-token: "+err.Error(), exitBadUsage)
	}
	return token, nil
}
