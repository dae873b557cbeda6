package control

import (
	"container/list"
	"context"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// An endpoint's connections are of two kinds, bounded apart, so that
// clients without the token can never take what a client with it needs
// (before, 128 idle connections that had each made one request without
// the token filled the endpoint for 30 s):
//
//   - a connection that has not shown the token yet is pending. It counts
//     toward no limit of the others, and gets one request: a request
//     without the token (the dashboard's files: the page asks for the
//     token) is answered and its connection closed. A pending connection
//     lasts as long as its request takes to arrive, 5 s at most
//     (ReadHeaderTimeout); past maxPendingPerClient pending connections
//     of one client address, or maxPending in all, those pending for
//     pendingGrace already are closed, oldest first, so that clients that
//     open connections and send nothing hold a bounded number of them,
//     while a burst of clients that send their requests at once (100
//     PATCHes in parallel) loses none;
//   - a request with the token (or on an endpoint without one: a unix
//     socket, a loopback --metrics) makes its connection count among the
//     endpoint's maxConns; when they are all taken, the one idle longest
//     is closed for it, and with none idle the request gets 429 with
//     Retry-After, as the Kubernetes API server answers past its
//     requests in flight.
//
// Every answer of 400 or more closes its connection.

// Limits of an endpoint's connections; variables, smaller in tests.
var (
	// maxConns bounds the connections that showed the token: the
	// event stream's clients (maxClients) and as many requests again.
	maxConns = 2 * maxClients
	// maxPending and maxPendingPerClient are the pending connections,
	// in all and of one client address, past which those pending for
	// pendingGrace are closed.
	maxPending          = 128
	maxPendingPerClient = 16
	pendingGrace        = time.Second
)

// gate is an endpoint's listener: it keeps count of the connections it
// accepted, of each kind, and closes the ones the limits above leave out.
type gate struct {
	net.Listener

	mu       sync.Mutex // guards what follows, and each conn's fields but client and at
	admitted map[*conn]struct{}
	// pending holds the pending connections, oldest first, and
	// perClient each client address's.
	pending   *list.List
	perClient map[string]*list.List

	// evicted counts the connections closed to make room for others;
	// refused, the requests answered 429.
	evicted, refused atomic.Uint64
}

// conn is a connection of a gate.
type conn struct {
	net.Conn
	g      *gate
	client string    // the client's address, without its port
	at     time.Time // when it was accepted

	// Guarded by g.mu: its places in the gate's pending lists (nil
	// when it is not pending), whether it is admitted, whether it is
	// idle between requests and since when.
	inPending, inClient *list.Element
	admitted, idle      bool
	idleSince           time.Time
}

func newGate(ln net.Listener) *gate {
	return &gate{Listener: ln, admitted: map[*conn]struct{}{}, pending: list.New(), perClient: map[string]*list.List{}}
}

// clientOf is the part of a connection's remote address that names its
// client: the IP address (every port of it one client); for a unix
// socket, whose peers have no address, all the same.
func clientOf(a net.Addr) string {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	return ""
}

// Accept accepts a connection as pending, and closes the oldest pending
// ones of its client, and of all, past the limits.
func (g *gate) Accept() (net.Conn, error) {
	nc, err := g.Listener.Accept()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	c := &conn{Conn: nc, g: g, client: clientOf(nc.RemoteAddr()), at: now}
	var out []*conn
	g.mu.Lock()
	mine := g.perClient[c.client]
	if mine == nil {
		mine = list.New()
		g.perClient[c.client] = mine
	}
	c.inPending, c.inClient = g.pending.PushBack(c), mine.PushBack(c)
	// The oldest come first: past the first one pending for less than
	// pendingGrace, none is.
	for mine.Len() > maxPendingPerClient {
		o := mine.Front().Value.(*conn)
		if now.Sub(o.at) < pendingGrace {
			break
		}
		g.forget(o)
		out = append(out, o)
	}
	for g.pending.Len() > maxPending {
		o := g.pending.Front().Value.(*conn)
		if now.Sub(o.at) < pendingGrace {
			break
		}
		g.forget(o)
		out = append(out, o)
	}
	g.mu.Unlock()
	for _, o := range out {
		g.evicted.Add(1)
		o.Conn.Close()
	}
	return c, nil
}

// forget stops counting c, whichever its kind (once). g.mu is held.
func (g *gate) forget(c *conn) {
	if c.admitted {
		delete(g.admitted, c)
		return
	}
	if c.inPending == nil {
		return
	}
	g.pending.Remove(c.inPending)
	mine := g.perClient[c.client]
	mine.Remove(c.inClient)
	if mine.Len() == 0 {
		delete(g.perClient, c.client)
	}
	c.inPending, c.inClient = nil, nil
}

// Close closes the connection and stops counting it.
func (c *conn) Close() error {
	c.g.mu.Lock()
	c.g.forget(c)
	c.g.mu.Unlock()
	return c.Conn.Close()
}

// admit makes c count among the connections that showed the token, and
// reports whether it could: at maxConns, the one idle longest is closed
// for it; with none idle, c stays pending (its request gets 429).
func (g *gate) admit(c *conn) bool {
	g.mu.Lock()
	if c.admitted || c.inPending == nil {
		// Already admitted; or closed meanwhile, and its request
		// may finish as it can.
		g.mu.Unlock()
		return true
	}
	var out *conn
	if len(g.admitted) >= maxConns {
		for o := range g.admitted {
			if o.idle && (out == nil || o.idleSince.Before(out.idleSince)) {
				out = o
			}
		}
		if out == nil {
			g.mu.Unlock()
			g.refused.Add(1)
			return false
		}
		g.forget(out)
	}
	g.forget(c)
	c.admitted = true
	g.admitted[c] = struct{}{}
	g.mu.Unlock()
	if out != nil {
		g.evicted.Add(1)
		out.Conn.Close()
	}
	return true
}

// connState follows whether each connection is idle between requests
// (http.Server.ConnState): only an idle one is closed for another.
func (g *gate) connState(nc net.Conn, st http.ConnState) {
	c := unwrapConn(nc)
	if c == nil {
		return
	}
	g.mu.Lock()
	c.idle = st == http.StateIdle
	if c.idle {
		c.idleSince = time.Now()
	}
	g.mu.Unlock()
}

// unwrapConn is the gate's conn under nc (a TLS connection's underneath);
// nil for another.
func unwrapConn(nc net.Conn) *conn {
	for {
		switch x := nc.(type) {
		case *conn:
			return x
		case interface{ NetConn() net.Conn }:
			nc = x.NetConn()
		default:
			return nil
		}
	}
}

// connKey is the context key of a request's connection.
type connKey struct{}

// connContext gives each request its connection (http.Server.ConnContext).
func connContext(ctx context.Context, nc net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, unwrapConn(nc))
}

// connOf is r's connection; nil when r did not come through a gate (a
// test's recorder).
func connOf(r *http.Request) *conn {
	c, _ := r.Context().Value(connKey{}).(*conn)
	return c
}
