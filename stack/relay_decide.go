package stack

import (
	"context"
	"net"
	"net/netip"

	"github.com/netjam/netjam/hostcfg"
)

// The relay's decision for each new connection or session: relay it
// (to a Forward's target, or transparently to its own destination), serve
// it (echo, discard), or refuse it; and the dial of a relayed target.
// relay_special.go lists the destinations refused whatever Allow says.

// action is what the relay does with a new connection or session.
type action int

const (
	actRefuse    action = iota // not the peer, not allowed
	actNoService               // the peer, a port with nothing behind it
	actRelay                   // to a target
	actEcho
	actDiscard
)

// decide picks the action for a new connection or session to dst, the
// target when it is relayed, and the reason when it is refused. Special
// destinations (see special) are refused before Allow is looked at.
func (r *Relay) decide(proto string, dst netip.AddrPort) (action, netip.AddrPort, refusal) {
	if r.peer[dst.Addr()] {
		// A forward bound to this address, else one for every address.
		if to, ok := r.forwards[hostcfg.ForwardKey(proto, dst.Addr(), dst.Port())]; ok {
			return actRelay, to, 0
		}
		if to, ok := r.forwards[hostcfg.ForwardKey(proto, netip.Addr{}, dst.Port())]; ok {
			return actRelay, to, 0
		}
		if r.cfg.Services {
			switch dst.Port() {
			case echoPort:
				return actEcho, netip.AddrPort{}, 0
			case discardPort:
				return actDiscard, netip.AddrPort{}, 0
			}
		}
		return actNoService, netip.AddrPort{}, 0
	}
	if why := r.special(dst.Addr()); why != refusedNotAllowed {
		return actRefuse, netip.AddrPort{}, why
	}
	if r.cfg.Transparent {
		for _, p := range r.cfg.Allow {
			if p.Contains(dst.Addr()) {
				return actRelay, dst, 0
			}
		}
	}
	return actRefuse, netip.AddrPort{}, refusedNotAllowed
}

// dial connects to target with the configured Dial, bounded by
// DialTimeout and by Close.
func (r *Relay) dial(network string, target netip.AddrPort) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(r.ctx, r.cfg.DialTimeout)
	defer cancel()
	return r.cfg.Dial(ctx, network, target.String())
}
