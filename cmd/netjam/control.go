package main

import (
	"context"
	"errors"
	"fmt"
	"os"

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
	owner, err := sudoOwner()
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, stop := context.WithCancel(ctx)
	o := endpointOptions(c, stop, owner, out)
	if c.IsSet("control") {
		o.API = controlAddr(c, out.Path())
	}
	o.UI, o.Metrics = c.Bool("ui"), c.String("metrics")
	srv, _, end, err := control.Start(o)
	if err != nil {
		stop()
		return nil, nil, nil, controlError(err)
	}
	return srv, ctx, func() {
		stop()
		end()
	}, nil
}

// endpointOptions are the control endpoint's options of the flags that
// guard it, for a run whose API's stop is stop, writing into dir (nil for
// none), owned by owner (nil: netjam's user).
func endpointOptions(c *cli.Context, stop func(), owner *control.Owner, dir *outdir.Dir) control.Options {
	return control.Options{TokenFile: c.String("control-token"), TLSCert: c.String("control-tls-cert"), TLSKey: c.String("control-tls-key"),
		Owner: owner, Stop: stop, Say: c.App.ErrWriter, Dir: dir}
}

// controlError is the exit of control.Start's error: the token it could
// not write is a failure, anything else bad usage.
func controlError(err error) error {
	var te *control.TokenFileError
	if errors.As(err, &te) {
		return cli.Exit(err, exitFailed)
	}
	return cli.Exit(err, exitBadUsage)
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

// readToken reads the token of the --control-token file f
// (control.ReadToken).
func readToken(f string) (string, error) {
	token, err := control.ReadToken(f)
	if err != nil {
		return "", cli.Exit("--control-token: "+err.Error(), exitBadUsage)
	}
	return token, nil
}
