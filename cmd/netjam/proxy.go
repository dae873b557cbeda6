package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/netjam/netjam/proxy"
	"github.com/netjam/netjam/scenario"
)

func proxyCommand() *cli.Command {
	return &cli.Command{
		Name:      "proxy",
		Usage:     "serve toxiproxy's HTTP API, with toxics that act on packets (no root)",
		ArgsUsage: "[SCENARIO.yaml]",
		Description: `Serves toxiproxy's API (toxiproxy-cli, its client libraries and curl work
unchanged) until interrupted. Each proxy listens on its address and carries
every connection to its upstream across an emulated path, so that latency,
bandwidth and netjam's own toxics (loss, queue, reorder, duplicate,
corrupt, delay, rate, trace, a rate trace's content, and wifi, an 802.11
cell the client is a station of) act on the TCP segments. The scenario's
link and Wi-Fi cell, when one is given, are every path's starting point;
toxics change them. With --ui, a dashboard at /ui/ of the API's address
lists the proxies and their toxics, live (it only reads; the API stays
closed to browsers). See docs/proxy.md.

Examples:
   netjam proxy
   netjam proxy --config configs/proxy.json
   netjam proxy configs/proxy/mobile.yaml --listen 127.0.0.1:8475
   netjam proxy --ui    # the dashboard at http://127.0.0.1:8474/ui/
   toxiproxy-cli create -l 127.0.0.1:26379 -u 127.0.0.1:6379 redis
   toxiproxy-cli toxic add -t latency -a latency=100 redis
   curl -s -X POST 127.0.0.1:8474/proxies/redis/toxics -d '{"type":"loss","attributes":{"p":"5%"}}'`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "listen", Value: "127.0.0.1:8474", Usage: "serve the API at `HOST:PORT`; an address other than loopback needs --token"},
			&cli.StringFlag{Name: "token", Usage: "a `FILE` holding the token every API request must carry (Authorization: Bearer); toxiproxy's clients send none, so use them on loopback"},
			&cli.BoolFlag{Name: "ui", Usage: "serve the dashboard at /ui/ of the API's address: a page that lists the proxies (connections, bytes, drops) and their toxics, live; with --token it asks for the token"},
			&cli.StringFlag{Name: "config", Usage: "create the proxies of toxiproxy's JSON config `FILE` (a list of {name, listen, upstream, enabled}) at start"},
			&cli.StringSliceFlag{Name: "set", Usage: "override a key of the scenario: KEY=VALUE (repeatable)"},
			seedFlag(),
			&cli.IntFlag{Name: "max-proxies", Value: proxy.DefaultMaxProxies, Usage: "the most proxies the server holds"},
			&cli.IntFlag{Name: "max-conns", Value: proxy.DefaultMaxConns, Usage: "the most connections (UDP: sessions) a proxy carries at once; past it a connection is reset, counted"},
		},
		OnUsageError: usageError,
		Action:       proxyAction,
	}
}

func proxyAction(c *cli.Context) error {
	if c.NArg() > 1 {
		return cli.Exit(fmt.Sprintf("proxy takes at most one scenario file, got %d arguments", c.NArg()), exitBadUsage)
	}
	log, err := newLogger(c.String("log-level"), c.String("log-format"), c.App.ErrWriter, nil)
	if err != nil {
		return cli.Exit(err, exitBadUsage)
	}
	defer log.Sync()
	o := proxy.Options{Version: versionString(), Sets: c.StringSlice("set"), Log: log.Named("proxy"),
		MaxProxies: c.Int("max-proxies"), MaxConns: c.Int("max-conns"), UI: c.Bool("ui")}
	if o.MaxProxies < 1 || o.MaxConns < 1 {
		return cli.Exit("--max-proxies and --max-conns: at least 1", exitBadUsage)
	}
	if s := c.String("seed"); s != "" {
		o.Sets = append(o.Sets, "seed="+s)
	}
	if f := c.Args().First(); f != "" {
		if o.Scenario, err = scenario.ReadFile(f); err != nil {
			return cli.Exit(err, exitBadUsage)
		}
		o.ScenarioName = f
	} else if len(c.StringSlice("set")) > 0 {
		o.Scenario, o.ScenarioName = []byte("name: proxy\n"), "proxy"
	}
	srv, err := proxy.Start(o, c.String("listen"), c.String("token"), c.String("config"))
	if err != nil {
		return cli.Exit(err, exitBadUsage)
	}
	fmt.Fprintf(c.App.Writer, "netjam proxy: toxiproxy API on http://%s (seed %d); Ctrl-C stops\n", srv.Addr, srv.Seed())
	if o.UI {
		fmt.Fprintf(c.App.Writer, "netjam proxy: dashboard at http://%s/ui/\n", srv.Addr)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	if err := srv.Stop(); err != nil {
		log.Warn("API shutdown: " + err.Error())
	}
	return nil
}
