//go:build !linux

package hostnet

import (
	"context"
	"errors"
	"net/netip"
	"testing"
)

// TestNotLinux checks that every entry point of hostnet that needs Linux
// returns a *NotLinuxError here, and nothing else.
func TestNotLinux(t *testing.T) {
	cfg := TUNConfig{Addrs: []netip.Prefix{netip.MustParsePrefix("10.99.0.1/24")}}
	_, openErr := OpenTUN(cfg)
	_, nsErr := NewNetns()
	_, openNsErr := OpenNetns("/var/run/netns/x")
	_, _, rootlessErr := StartRootless(cfg, []string{"true"}, nil)
	_, ccErr := KernelCongestionControls()
	_, dialErr := DialKernelTCP(context.Background(), netip.MustParseAddrPort("127.0.0.1:9"), KernelTCPOptions{})
	_, listenErr := ListenKernelTCP(netip.MustParseAddrPort("127.0.0.1:0"), KernelTCPOptions{})
	_, udpErr := ListenKernelUDP(netip.MustParseAddrPort("127.0.0.1:0"))
	for name, err := range map[string]error{
		"OpenTUN": openErr, "NewNetns": nsErr, "OpenNetns": openNsErr, "StartRootless": rootlessErr,
		"KernelCongestionControls": ccErr, "DialKernelTCP": dialErr, "ListenKernelTCP": listenErr,
		"ListenKernelUDP": udpErr, "LoopbackUp": LoopbackUp(),
	} {
		var nl *NotLinuxError
		if !errors.As(err, &nl) {
			t.Errorf("%s: %v, want a *NotLinuxError", name, err)
		}
	}
	if err := (*Netns)(nil).Do(func() error { return nil }); err != nil {
		t.Errorf("a nil Netns (the caller's own network) ran f with %v", err)
	}
}
