package main

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"github.com/netjam/netjam/confine"
	"github.com/netjam/netjam/emulator"
	"github.com/netjam/netjam/scenario"
)

// A rootless run: `netjam run` of a scenario in TUN mode, by a user
// without CAP_NET_ADMIN, runs again as root of a user and network
// namespace of its own, where it may make the device. Kernel flows run
// there too, against the peer; nothing reaches the host's own network,
// so a scenario whose TUN relays to real servers (forward, transparent)
// or names a namespace needs real privileges instead.

// rootlessRunEnv marks netjam run started again in its namespaces.
const rootlessRunEnv = "NETJAM_ROOTLESS_RUN"

// needsRootless reports whether plan needs a TUN device this process may
// not make, and can do without the host's network.
func needsRootless(plan *scenario.Plan) bool {
	if hasNetAdmin() {
		return false
	}
	tun := false
	for _, s := range plan.Runs {
		if s.TUN == nil {
			continue
		}
		tun = true
		if len(s.TUN.Relay.Forwards) > 0 || s.TUN.Relay.Transparent || s.TUN.Device.Netns != "" {
			return false // needs the host's network: the privilege error says what to do
		}
	}
	return tun
}

// hasNetAdmin reports whether this process has CAP_NET_ADMIN in effect.
func hasNetAdmin() bool {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return os.Geteuid() == 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && caps&(1<<unix.CAP_NET_ADMIN) != 0
		}
	}
	return false
}

// rerunRootless runs this netjam command again in a new user and network
// namespace, passing SIGINT, SIGTERM and SIGHUP on, and returns its
// outcome. ok is false when the system does not allow that (no user
// namespaces): the caller goes on without.
func rerunRootless(c *cli.Context) (err error, ok bool) {
	args, _ := c.App.Metadata["args"].([]string)
	exe, err := os.Executable()
	if err != nil || len(args) == 0 {
		return nil, false
	}
	cmd := exec.Command(exe, args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, c.App.Writer, c.App.ErrWriter
	cmd.Env = append(os.Environ(), rootlessRunEnv+"=1")
	cmd.SysProcAttr = emulator.RootlessProcAttr()
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGINT)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(c.App.ErrWriter, "netjam: user namespaces are not available (%v): the runs in TUN mode need root or CAP_NET_ADMIN\n", err)
		return nil, false
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	for {
		select {
		case err := <-waited:
			if code := confine.ExitStatus(cmd, err); code != 0 {
				return cli.Exit("", code), true
			}
			return nil, true
		case sig := <-sigs:
			cmd.Process.Signal(sig)
		}
	}
}
