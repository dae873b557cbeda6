package hostcfg

import (
	"net/netip"
	"testing"
	"time"
)

// TestRelayConfigValidate: every invalid field is reported, each on its
// own line, and a valid configuration passes.
func TestRelayConfigValidate(t *testing.T) {
	to := netip.MustParseAddrPort("127.0.0.1:5201")
	cfg := RelayConfig{
		Forwards: []Forward{
			{Proto: "sctp", Listen: 0, To: netip.AddrPort{}},
			{Proto: "tcp", Listen: 5201, To: netip.MustParseAddrPort("0.0.0.0:1")},
			{Proto: "tcp", Listen: 5201, To: netip.MustParseAddrPort("127.0.0.1:0")},
			{Proto: "udp", Listen: 5201, To: to},
			{Proto: "udp", Listen: 7, To: to},
		},
		Transparent: true,
		Allow:       []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), {}},
		Services:    true,
		UDPIdle:     -time.Second,
		DialTimeout: -1,
	}
	want := `forwards[0].proto: "sctp" is not tcp or udp
forwards[0].listen: must not be 0
forwards[0].to: must be an address and a port
forwards[1].to: 0.0.0.0:1 is not a unicast address
forwards[2].to: 127.0.0.1:0 has port 0
forwards[2]: tcp port 5201 is forwarded already by forwards[1]
forwards[4].listen: port 7 is a service's (echo 7, discard 9) while services are on
allow[0]: 0.0.0.0/0 allows every destination, and netjam is never an open relay: list the networks to reach
allow[1]: invalid Prefix is not a valid prefix
udp_idle: -1s is negative
dial_timeout: -1ns is negative`
	if err := cfg.Validate(); err == nil || err.Error() != want {
		t.Errorf("Validate:\n%v\nwant:\n%s", err, want)
	}
	for _, c := range []struct {
		cfg  RelayConfig
		want string
	}{
		{RelayConfig{Transparent: true}, "allow: transparent mode needs at least one prefix (netjam is never an open relay)"},
		{RelayConfig{Allow: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}, "allow: only transparent mode uses it"},
	} {
		if err := c.cfg.Validate(); err == nil || err.Error() != c.want {
			t.Errorf("Validate(%+v) = %v, want %s", c.cfg, err, c.want)
		}
	}
	if err := (&RelayConfig{Forwards: []Forward{{Proto: "tcp", Listen: 1, To: to}}, Transparent: true,
		Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}).Validate(); err != nil {
		t.Errorf("a valid config: %v", err)
	}
}
