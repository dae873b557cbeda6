package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/netjam/netjam/confine"
	"github.com/netjam/netjam/control"
	"github.com/netjam/netjam/emulator"
	"github.com/netjam/netjam/outdir"
)

// tokenFile is where in the output folder a run writes the token it made
// for a TCP control endpoint given no --control-token (mode 0600), for
// netjam ctl --control-token; it is removed when the run ends.
const tokenFile = "control.token"

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
	var ends []func()
	fail := func(err error) (*control.Server, context.Context, context.CancelFunc, error) {
		stop()
		if srv != nil {
			srv.Close()
		}
		for _, end := range ends {
			end()
		}
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
		ep, err := serveControl(c, addr, stop, owner)
		if err != nil {
			return fail(err)
		}
		srv = ep.srv
		where := ""
		if ep.made {
			path, remove, err := writeTokenFile(out, ep.token)
			if err != nil {
				return fail(err)
			}
			ends = append(ends, remove)
			where = " (its token in " + path + ")"
		}
		fmt.Fprintf(c.App.ErrWriter, "netjam: control API at %s%s\n", ep.addr(), where)
		if c.Bool("ui") {
			fmt.Fprintf(c.App.ErrWriter, "netjam: dashboard at %s\n", ep.dashboard())
		}
	}
	if addr := c.String("metrics"); addr != "" {
		token, err := controlToken(c)
		var tlsCfg *tls.Config
		if err == nil {
			tlsCfg, err = controlTLS(c)
		}
		if err != nil {
			return fail(err)
		}
		ln, err := control.ListenMetrics(addr, token != "")
		if err != nil {
			return fail(cli.Exit(err, exitBadUsage))
		}
		if srv == nil {
			srv = control.New(stop)
		}
		srv.ServeMetrics(ln, control.Endpoint{Token: token, TLS: tlsCfg})
		scheme := "http"
		if tlsCfg != nil {
			scheme = "https"
		}
		warnPlain(c, "--metrics", ln.Addr().String(), tlsCfg, token)
		fmt.Fprintf(c.App.ErrWriter, "netjam: metrics at %s://%s/metrics\n", scheme, ln.Addr())
	}
	return srv, ctx, func() {
		stop()
		for _, end := range ends {
			end()
		}
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

// writeTokenFile writes token into out's control.token, mode 0600 (and
// the owner's the folder was opened for), for netjam ctl --control-token;
// it returns its path and what removes it. The file is made anew inside
// the opened folder: a link put there in its place is not followed.
func writeTokenFile(out *outdir.Dir, token string) (string, func(), error) {
	if err := out.WritePrivate(tokenFile, []byte(token+"\n")); err != nil {
		return "", nil, cli.Exit(fmt.Sprintf("the control token: %v", err), exitFailed)
	}
	return out.Join(tokenFile), func() { out.Remove(tokenFile) }, nil
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

// endpoint is a control endpoint being served, and its token.
type endpoint struct {
	srv   *control.Server
	token string
	made  bool // the token was made by netjam, not given
}

// addr is where the endpoint is, as netjam ctl --control takes it:
// unix:PATH, HOST:PORT, or https://HOST:PORT over TLS.
func (e endpoint) addr() string {
	if u := e.srv.URL(); strings.HasPrefix(u, "https://") {
		return u
	}
	return e.srv.Addr()
}

// dashboard is the dashboard's URL; with the token netjam made for it,
// as Jupyter prints its own: the page takes it from there (a cookie).
func (e endpoint) dashboard() string {
	if e.made {
		return e.srv.URL() + "/?token=" + url.QueryEscape(e.token)
	}
	return e.srv.URL() + "/"
}

// serveControl serves the control API at addr with --control-token's
// token, or, on a TCP address given none, a token made anew (made
// reports it); a unix socket goes to owner when not nil. stop is what
// the API's stop does.
func serveControl(c *cli.Context, addr string, stop func(), owner *control.Owner) (endpoint, error) {
	token, err := controlToken(c)
	if err != nil {
		return endpoint{}, err
	}
	tlsCfg, err := controlTLS(c)
	if err != nil {
		return endpoint{}, err
	}
	made := false
	if strings.HasPrefix(addr, "unix:") {
		// A unix socket is guarded by its mode (0600) and owner.
		tlsCfg = nil
	} else if token == "" {
		token, made = control.NewToken(), true
	}
	ln, err := control.Listen(addr, control.ListenOptions{HasToken: token != "", Owner: owner})
	if err != nil {
		return endpoint{}, cli.Exit(err, exitBadUsage)
	}
	if !strings.HasPrefix(addr, "unix:") {
		warnPlain(c, "--control", ln.Addr().String(), tlsCfg, token)
	}
	return endpoint{srv: control.Serve(ln, control.Endpoint{Token: token, TLS: tlsCfg}, stop), token: token, made: made}, nil
}

// warnPlain warns that an endpoint others reach is served over plain
// HTTP: its token crosses the network in clear.
func warnPlain(c *cli.Context, flag, addr string, tlsCfg *tls.Config, token string) {
	if tlsCfg == nil && token != "" && !control.Loopback(addr) {
		fmt.Fprintf(c.App.ErrWriter, "netjam: warning: %s %s serves plain HTTP: its token crosses the network in clear (give --control-tls-cert and --control-tls-key)\n", flag, addr)
	}
}

// controlTLS is the TLS configuration of --control-tls-cert and
// --control-tls-key; nil without them.
func controlTLS(c *cli.Context) (*tls.Config, error) {
	cert, key := c.String("control-tls-cert"), c.String("control-tls-key")
	switch {
	case cert == "" && key == "":
		return nil, nil
	case cert == "" || key == "":
		return nil, cli.Exit("--control-tls-cert and --control-tls-key: give both, the certificate and its key", exitBadUsage)
	}
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		return nil, cli.Exit(fmt.Sprintf("--control-tls-cert %s, --control-tls-key %s: %v", cert, key, err), exitBadUsage)
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}, nil
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
