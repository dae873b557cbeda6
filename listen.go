package netjam

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/netjam/netjam/hostcfg"
	"github.com/netjam/netjam/stack"
)

// Listen opens a TCP server on the path's near side (network tcp, tcp4 or
// tcp6; address ":0" or ":PORT"), reached from the real network through
// the path: the listener's Addr is a real loopback address, and a
// connection made to it crosses the path's downlink to the server and its
// answers the uplink, as a client's far away would. Accept returns
// connections whose RemoteAddr is the real client's.
func (p *Path) Listen(network, address string) (net.Listener, error) {
	v6 := false
	switch network {
	case "tcp", "tcp4":
	case "tcp6":
		v6 = true
	default:
		return nil, &net.OpError{Op: "listen", Net: network, Err: net.UnknownNetworkError(network)}
	}
	port, err := listenPort(network, address)
	if err != nil {
		return nil, err
	}
	inner, err := p.b.Client().ListenTCP(port, hostcfg.TCPOptions{})
	if err != nil {
		return nil, err
	}
	loop := "127.0.0.1:0"
	if v6 {
		loop = "[::1]:0"
	}
	outer, err := net.Listen(network, loop)
	if err != nil {
		inner.Close()
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &listener{p: p, inner: inner, outer: outer, ctx: ctx, cancel: cancel, clients: map[netip.AddrPort]net.Addr{}, changed: make(chan struct{}),
		target: netip.AddrPortFrom(p.b.ClientAddr(v6), inner.Addr().(*net.TCPAddr).AddrPort().Port())}
	if !p.keep(l) {
		return nil, &net.OpError{Op: "listen", Net: network, Err: ErrClosed}
	}
	p.wg.Add(1)
	go l.relay()
	return l, nil
}

// listener is a server on the near side with a real front door.
type listener struct {
	p      *Path
	inner  *stack.TCPListener // on the near side
	outer  net.Listener       // on the host's loopback
	target netip.AddrPort     // inner's address, as the far side reaches it
	ctx    context.Context    // done on Close
	cancel context.CancelFunc

	mu      sync.Mutex
	clients map[netip.AddrPort]net.Addr // far-side address of a relayed connection -> the real client
	changed chan struct{}               // closed when clients gains an entry
	once    sync.Once
}

// Accept returns the next connection from the real network.
func (l *listener) Accept() (net.Conn, error) {
	c, err := l.inner.Accept(l.ctx)
	if err != nil {
		if l.ctx.Err() != nil {
			err = net.ErrClosed
		}
		return nil, &net.OpError{Op: "accept", Net: "tcp", Addr: l.Addr(), Err: err}
	}
	w, err := l.p.track(c, c.Info, l.client(c.RemoteAddr()))
	if err != nil {
		c.Close()
		return nil, err
	}
	return w, nil
}

// client returns the real client of the connection the far side made
// from far. The far side learns its own address when its dial returns,
// which may be just after the near side accepted: wait for it a little.
func (l *listener) client(far net.Addr) net.Addr {
	key := far.(*net.TCPAddr).AddrPort()
	timeout := time.NewTimer(time.Second)
	defer timeout.Stop()
	for {
		l.mu.Lock()
		real, ok := l.clients[key]
		changed := l.changed
		l.mu.Unlock()
		if ok {
			return real
		}
		select {
		case <-changed:
		case <-timeout.C:
			return far
		case <-l.ctx.Done():
			return far
		}
	}
}

// Addr returns the real address clients connect to.
func (l *listener) Addr() net.Addr { return l.outer.Addr() }

// Close stops accepting; connections already accepted stay open until
// the path closes.
func (l *listener) Close() error {
	l.once.Do(func() {
		l.cancel()
		l.outer.Close()
		l.inner.Close()
		l.p.forget(l)
	})
	return nil
}

// relay accepts real connections and carries each across the path to
// the near side's server, until Close.
func (l *listener) relay() {
	defer l.p.wg.Done()
	for {
		rc, err := l.outer.Accept()
		if err != nil {
			return
		}
		l.p.wg.Add(1)
		go func() {
			defer l.p.wg.Done()
			l.carry(rc)
		}()
	}
}

// carry connects from the far side to the server and copies both ways
// between it and the real connection rc until both are done.
func (l *listener) carry(rc net.Conn) {
	defer rc.Close()
	fc, err := l.p.b.Server().DialTCP(l.p.ctx, l.target, hostcfg.TCPOptions{})
	if err != nil {
		return
	}
	defer fc.Close()
	local := fc.LocalAddr().(*net.TCPAddr).AddrPort()
	l.mu.Lock()
	l.clients[local] = rc.RemoteAddr()
	close(l.changed)
	l.changed = make(chan struct{})
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		delete(l.clients, local)
		l.mu.Unlock()
	}()
	// The path's Close ends the copies; the listener's leaves them be.
	stop := context.AfterFunc(l.p.ctx, func() { rc.Close(); fc.Close() })
	defer stop()
	pipe(fc, rc.(*net.TCPConn))
}

// halfCloser is a connection whose sending side shuts down on its own.
type halfCloser interface {
	net.Conn
	CloseWrite() error
}

// pipe copies a to b and b to a until both directions end, passing each
// end of stream on as a half close.
func pipe(a, b halfCloser) {
	var wg sync.WaitGroup
	half := func(dst, src halfCloser) {
		defer wg.Done()
		if _, err := io.Copy(dst, src); err != nil && !errors.Is(err, net.ErrClosed) {
			dst.Close()
			src.Close()
			return
		}
		dst.CloseWrite()
	}
	wg.Add(2)
	go half(a, b)
	go half(b, a)
	wg.Wait()
}
