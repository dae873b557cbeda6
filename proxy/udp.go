package proxy

import (
	"context"
	"errors"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// A UDP proxy (netjam's extension, "protocol": "udp") carries each
// client's datagrams to the upstream across its path as datagrams: a
// session per client address, which starts with its first datagram and
// ends after udpIdle without one either way. Only the path's toxics apply
// (and timeout, which loses every datagram); the stream toxics are
// refused.

// udpIdle ends a session that carried nothing either way for so long,
// as a NAT forgets a mapping.
const udpIdle = 60 * time.Second

// udpSession is one client's datagrams through a UDP proxy: the near
// host's socket connected to the upstream across the path.
type udpSession struct {
	p      *Proxy
	g      *group
	client net.Addr
	nc     net.Conn
	last   atomic.Int64 // when it last carried a datagram, Unix nanoseconds
	once   sync.Once
}

func (s *udpSession) close() {
	s.once.Do(func() { s.nc.Close() })
}

// serveUDP reads the clients' datagrams until ctx is done, each into its
// session, then waits for the sessions' goroutines.
func (p *Proxy) serveUDP(ctx context.Context, pc net.PacketConn, done chan struct{}) {
	var wg sync.WaitGroup
	defer func() {
		wg.Wait()
		close(done)
	}()
	buf := make([]byte, 64<<10)
	for {
		n, addr, err := pc.ReadFrom(buf)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		p.counts.received[upstream].Add(uint64(n))
		s, fresh := p.session(ctx, addr)
		if s == nil {
			p.counts.datagramsDropped.Add(1)
			continue
		}
		if fresh {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p.answer(ctx, pc, s)
			}()
		}
		s.last.Store(time.Now().UnixNano())
		if _, err := s.nc.Write(buf[:n]); err != nil {
			p.counts.datagramsDropped.Add(1)
			continue
		}
		p.counts.sent[upstream].Add(uint64(n))
	}
}

// session returns the session of client addr, starting it (fresh) if
// there is none; nil past the bound on sessions or without a path.
func (p *Proxy) session(ctx context.Context, addr net.Addr) (s *udpSession, fresh bool) {
	key := addr.String()
	p.mu.Lock()
	defer p.mu.Unlock()
	if s := p.sessions[key]; s != nil {
		return s, false
	}
	p.counts.accepted.Add(1)
	if len(p.sessions) >= p.srv.opts.MaxConns {
		p.counts.refused.Add(1)
		return nil, false
	}
	g, err := p.groupForLocked()
	if err != nil {
		p.counts.pathFailed.Add(1)
		p.eventLocked("error", "no path for a session: "+err.Error())
		return nil, false
	}
	port := uint16(1)
	if ua, err := net.ResolveUDPAddr("udp", p.upstream); err == nil && ua.Port > 0 {
		port = uint16(ua.Port)
	}
	nc, err := g.b.Client().DialUDP(virtualUpstream(port))
	if err != nil {
		p.counts.upstreamFailed.Add(1)
		return nil, false
	}
	g.conns++
	s = &udpSession{p: p, g: g, client: addr, nc: nc}
	p.sessions[key] = s
	return s, true
}

// answer sends the upstream's datagrams back to the session's client
// until the session is idle for udpIdle or the proxy stops.
func (p *Proxy) answer(ctx context.Context, pc net.PacketConn, s *udpSession) {
	defer func() {
		s.close()
		p.mu.Lock()
		delete(p.sessions, s.client.String())
		drop := p.releaseLocked(s.g)
		p.mu.Unlock()
		if drop != nil {
			p.closeGroup(drop)
		}
	}()
	buf := make([]byte, 64<<10)
	for ctx.Err() == nil {
		idleEnd := time.Unix(0, s.last.Load()).Add(udpIdle)
		if time.Now().After(idleEnd) {
			return
		}
		s.nc.SetReadDeadline(idleEnd)
		n, err := s.nc.Read(buf)
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() || errors.Is(err, os.ErrDeadlineExceeded) {
				continue
			}
			return
		}
		p.counts.received[downstream].Add(uint64(n))
		s.last.Store(time.Now().UnixNano())
		if _, err := pc.WriteTo(buf[:n], s.client); err != nil {
			p.counts.datagramsDropped.Add(1)
			continue
		}
		p.counts.sent[downstream].Add(uint64(n))
	}
}
