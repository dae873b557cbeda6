package control

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Limits of the event stream.
const (
	// clientBuffer is how many events a client of GET /v1/events may
	// have waiting: at the default sample interval (100 ms) about 25 s
	// of samples. A client that falls further behind is dropped (it
	// reconnects and starts again from the history) rather than holding
	// the run back or growing without bound.
	clientBuffer = 256
	// historyLen is how many recent events a new client gets first: a
	// client that asks for those after one it has (?after=N,
	// Last-Event-ID) gets those it missed while it fetched the run from
	// its start (GET /v1/series) or reconnected; one that does not (curl,
	// netjam ctl events), the last 30 s at the default interval.
	historyLen = 300
	// maxClients bounds the clients of the stream at once.
	maxClients = 64
	// defaultKeepAlive is how often an idle stream gets a comment, so
	// that a proxy or a client's timeout does not take it for dead.
	defaultKeepAlive = 15 * time.Second
	// defaultWriteTimeout bounds each write to a client of the stream.
	defaultWriteTimeout = 10 * time.Second
)

// event is one Server-Sent Event, encoded once for every client, with
// its number (seq): its SSE id.
type event struct {
	seq uint64
	b   []byte
}

// hub hands the run's events to the clients of GET /v1/events. publish
// never blocks: each client has a bounded buffer, and a client whose
// buffer is full is dropped and counted (dropped), never waited for.
// Each event has a number, one more than the last one's: a client that
// has the run up to one (GET /v1/series and /v1/timeline, log) continues
// after it (GET /v1/events?after=N, or the Last-Event-ID of a client
// reconnecting), none missed or twice.
type hub struct {
	mu      sync.Mutex // guards clients, history and seq
	clients map[*client]struct{}
	history []event // the last historyLen events, oldest first
	seq     uint64  // the last event's number
	// log is the run from its start, fed each event under mu, so that
	// it holds exactly the events up to its seq.
	log *runLog
	// dropped counts the clients dropped for falling behind; refused,
	// those refused because maxClients were connected.
	dropped, refused atomic.Uint64
	published        atomic.Uint64
	// keepAlive and writeTimeout are defaultKeepAlive and
	// defaultWriteTimeout but in tests.
	keepAlive, writeTimeout time.Duration
}

// client is one connection of GET /v1/events.
type client struct {
	ch   chan event
	gone chan struct{} // closed when the hub drops the client
}

func newHub() *hub {
	return &hub{clients: map[*client]struct{}{}, log: newRunLog(), keepAlive: defaultKeepAlive, writeTimeout: defaultWriteTimeout}
}

// publish sends v as an event of type typ to every client.
func (h *hub) publish(typ string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		return // only our own types come here; they marshal
	}
	h.published.Add(1)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seq++
	e := event{h.seq, fmt.Appendf(nil, "id: %d\nevent: %s\ndata: %s\n\n", h.seq, typ, b)}
	h.log.observe(h.seq, typ, v)
	if len(h.history) == historyLen {
		copy(h.history, h.history[1:])
		h.history = h.history[:historyLen-1]
	}
	h.history = append(h.history, e)
	for c := range h.clients {
		select {
		case c.ch <- e:
		default:
			delete(h.clients, c)
			close(c.gone)
			h.dropped.Add(1)
		}
	}
}

// subscribe adds a client, and returns it with the history it must send
// first: the events after event after (0: all it holds); nil when
// maxClients are connected. An after the hub never numbered (another
// process's, on the same port before) gets all it holds: the client
// sees the numbers start again.
func (h *hub) subscribe(after uint64) (*client, []event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.clients) >= maxClients {
		h.refused.Add(1)
		return nil, nil
	}
	c := &client{ch: make(chan event, clientBuffer), gone: make(chan struct{})}
	h.clients[c] = struct{}{}
	if after > h.seq {
		after = 0
	}
	i := sort.Search(len(h.history), func(i int) bool { return h.history[i].seq > after })
	return c, append([]event(nil), h.history[i:]...)
}

// lastEventID is the event a client of GET /v1/events has the run up to: the
// Last-Event-ID its EventSource sends when it reconnects, else ?after=N
// (a page that fetched GET /v1/series and /v1/timeline up to N); 0: none.
func lastEventID(r *http.Request) (uint64, error) {
	v := r.Header.Get("Last-Event-ID")
	if v == "" {
		v = r.URL.Query().Get("after")
	}
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("after %q: not an event's number (the seq of GET /v1/series or /v1/timeline)", v)
	}
	return n, nil
}

func (h *hub) unsubscribe(c *client) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.clients[c]; ok {
		delete(h.clients, c)
		close(c.gone)
	}
}

// serve streams the events to one client until it goes, the hub drops
// it, or done closes.
func (h *hub) serve(w http.ResponseWriter, r *http.Request, done <-chan struct{}) {
	fl, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, fmt.Errorf("the connection cannot stream"))
		return
	}
	from, err := lastEventID(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	c, history := h.subscribe(from)
	if c == nil {
		writeError(w, http.StatusServiceUnavailable, fmt.Errorf("more than %d clients of the event stream", maxClients))
		return
	}
	defer h.unsubscribe(c)
	rc := http.NewResponseController(w)
	// The stream outlives the server's read timeout, which bounds reading
	// a request; a client that stops reading the stream is bounded by
	// the write deadlines, the history's first.
	rc.SetReadDeadline(time.Time{})
	rc.SetWriteDeadline(time.Now().Add(h.writeTimeout))
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	// A client dropped for falling behind reconnects after this long.
	fmt.Fprint(w, "retry: 1000\n\n")
	for _, e := range history {
		if _, err := w.Write(e.b); err != nil {
			return
		}
	}
	if rc.Flush() != nil {
		return
	}
	tick := time.NewTicker(h.keepAlive)
	defer tick.Stop()
	for {
		select {
		case e := <-c.ch:
			// A client that does not read is dropped by publish; its
			// writes give up then too.
			rc.SetWriteDeadline(time.Now().Add(h.writeTimeout))
			if _, err := w.Write(e.b); err != nil {
				return
			}
			// Write what is waiting with it, then flush once.
			for n := len(c.ch); n > 0; n-- {
				if _, err := w.Write((<-c.ch).b); err != nil {
					return
				}
			}
			fl.Flush()
		case <-tick.C:
			// Each write has a deadline of its own: the last event's
			// may have passed while the stream was quiet (the results
			// being written after the run's end, or the report served
			// after it), and a write past it breaks the connection.
			rc.SetWriteDeadline(time.Now().Add(h.writeTimeout))
			if _, err := io.WriteString(w, ": keep-alive\n\n"); err != nil {
				return
			}
			if rc.Flush() != nil {
				return
			}
		case <-c.gone:
			return
		case <-r.Context().Done():
			return
		case <-done:
			// The endpoint closes: what the client has not got yet
			// (the results written, say) goes first.
			rc.SetWriteDeadline(time.Now().Add(time.Second))
			for n := len(c.ch); n > 0; n-- {
				if _, err := w.Write((<-c.ch).b); err != nil {
					return
				}
			}
			fl.Flush()
			return
		}
	}
}
