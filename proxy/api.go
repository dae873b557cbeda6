package proxy

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/net/netutil"
)

// Guard is how the API's listener is guarded.
type Guard struct {
	// Token, when not empty, must come with every request
	// ("Authorization: Bearer TOKEN"). Without one, the API answers
	// loopback names only (Host), so that a web page cannot reach it by
	// DNS rebinding. toxiproxy's clients send no token: a loopback API
	// needs none, one others reach must have one (ListenAPI).
	Token string
}

// ListenAPI opens the API's listener at addr (HOST:PORT): an address
// other than loopback needs a token, since whoever reaches the API can
// make proxies to anywhere the machine reaches.
func ListenAPI(addr string, hasToken bool) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("--listen %s: expected HOST:PORT (%v)", addr, err)
	}
	if !loopbackHost(host) && !hasToken {
		return nil, fmt.Errorf("--listen %s: not a loopback address; anyone who reaches it could proxy to anywhere this machine reaches: give --token FILE (toxiproxy's own clients send no token; use them on loopback)", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--listen %s: %w", addr, err)
	}
	return ln, nil
}

func loopbackHost(host string) bool {
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback() || host == "localhost"
}

// maxAPIConns bounds the API's connections at once; more wait in the
// kernel's backlog.
const maxAPIConns = 128

// Serve serves the API on ln until Close of the returned server (its
// Shutdown or Close); it returns at once.
func (s *Server) Serve(ln net.Listener, g Guard) *http.Server {
	hs := &http.Server{
		Handler:           s.Handler(g),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       15 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          nil,
	}
	go hs.Serve(netutil.LimitListener(ln, maxAPIConns))
	return hs
}

// Handler returns the API: toxiproxy's paths, methods, bodies and status
// codes, and GET /proxies/{proxy}/events, netjam's.
func (s *Server) Handler(g Guard) http.Handler {
	mux := http.NewServeMux()
	h := func(pattern string, f func(w http.ResponseWriter, r *http.Request) error) {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			if err := f(w, r); err != nil {
				writeError(w, err)
			}
		})
	}
	h("POST /reset", func(w http.ResponseWriter, r *http.Request) error {
		if err := s.Reset(); err != nil {
			return err
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	})
	h("GET /proxies", func(w http.ResponseWriter, r *http.Request) error {
		m := map[string]proxyJSON{}
		for _, p := range s.sorted() {
			m[p.name] = p.json()
		}
		return writeJSON(w, http.StatusOK, m)
	})
	h("POST /proxies", func(w http.ResponseWriter, r *http.Request) error {
		body, err := readBody(w, r)
		if err != nil {
			return err
		}
		var in proxyInput
		if err := decodeStrict(body, &in); err != nil {
			return errorf(400, "bad request body: %v", err)
		}
		if err := checkProxy(&in, ""); err != nil {
			return err
		}
		s.mu.Lock()
		p, err := s.createLocked(&in)
		s.mu.Unlock()
		if err != nil {
			return err
		}
		return writeJSON(w, http.StatusCreated, p.json())
	})
	h("POST /populate", func(w http.ResponseWriter, r *http.Request) error {
		body, err := readBody(w, r)
		if err != nil {
			return err
		}
		ps, err := s.Populate(body)
		out := struct {
			Error   string      `json:"error,omitempty"`
			Status  int         `json:"status,omitempty"`
			Proxies []proxyJSON `json:"proxies"`
		}{Proxies: []proxyJSON{}}
		for _, p := range ps {
			out.Proxies = append(out.Proxies, p.json())
		}
		code := http.StatusCreated
		if err != nil {
			ae := asAPIError(err)
			out.Error, out.Status, code = ae.msg, ae.status, ae.status
		}
		return writeJSON(w, code, out)
	})
	withProxy := func(f func(w http.ResponseWriter, r *http.Request, p *Proxy) error) func(w http.ResponseWriter, r *http.Request) error {
		return func(w http.ResponseWriter, r *http.Request) error {
			p, err := s.get(r.PathValue("proxy"))
			if err != nil {
				return err
			}
			return f(w, r, p)
		}
	}
	h("GET /proxies/{proxy}", withProxy(func(w http.ResponseWriter, r *http.Request, p *Proxy) error {
		return writeJSON(w, http.StatusOK, p.json())
	}))
	update := func(w http.ResponseWriter, r *http.Request) error {
		body, err := readBody(w, r)
		if err != nil {
			return err
		}
		p, err := s.update(r.PathValue("proxy"), body)
		if err != nil {
			return err
		}
		return writeJSON(w, http.StatusOK, p.json())
	}
	h("POST /proxies/{proxy}", update)
	h("PATCH /proxies/{proxy}", update)
	h("DELETE /proxies/{proxy}", func(w http.ResponseWriter, r *http.Request) error {
		if err := s.remove(r.PathValue("proxy")); err != nil {
			return err
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	})
	h("GET /proxies/{proxy}/toxics", withProxy(func(w http.ResponseWriter, r *http.Request, p *Proxy) error {
		p.mu.Lock()
		ts := p.toxicsLocked()
		p.mu.Unlock()
		return writeJSON(w, http.StatusOK, ts)
	}))
	h("POST /proxies/{proxy}/toxics", withProxy(func(w http.ResponseWriter, r *http.Request, p *Proxy) error {
		body, err := readBody(w, r)
		if err != nil {
			return err
		}
		t, err := p.addToxic(body)
		if err != nil {
			return err
		}
		return writeJSON(w, http.StatusOK, t) // toxiproxy answers 200, not 201
	}))
	h("GET /proxies/{proxy}/toxics/{toxic}", withProxy(func(w http.ResponseWriter, r *http.Request, p *Proxy) error {
		t, err := p.toxic(r.PathValue("toxic"))
		if err != nil {
			return err
		}
		return writeJSON(w, http.StatusOK, t)
	}))
	updateToxic := withProxy(func(w http.ResponseWriter, r *http.Request, p *Proxy) error {
		body, err := readBody(w, r)
		if err != nil {
			return err
		}
		t, err := p.updateToxic(r.PathValue("toxic"), body)
		if err != nil {
			return err
		}
		return writeJSON(w, http.StatusOK, t)
	})
	h("POST /proxies/{proxy}/toxics/{toxic}", updateToxic)
	h("PATCH /proxies/{proxy}/toxics/{toxic}", updateToxic)
	h("DELETE /proxies/{proxy}/toxics/{toxic}", withProxy(func(w http.ResponseWriter, r *http.Request, p *Proxy) error {
		if err := p.removeToxic(r.PathValue("toxic")); err != nil {
			return err
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	}))
	h("GET /proxies/{proxy}/events", withProxy(func(w http.ResponseWriter, r *http.Request, p *Proxy) error {
		return writeJSON(w, http.StatusOK, p.Events())
	}))
	h("GET /version", func(w http.ResponseWriter, r *http.Request) error {
		w.Header().Set("Content-Type", "application/json;charset=utf-8")
		b, _ := json.Marshal(map[string]string{"version": s.opts.Version})
		w.Write(append(b, '\n'))
		return nil
	})
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), newCollector(s))
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, errorf(404, "%s %s: the API has no such path", r.Method, r.URL.Path))
	})
	gd := &guarded{g: g, next: mux}
	if s.opts.UI {
		gd.ui = s.uiHandler()
	}
	return gd
}

// guarded refuses what a browser's page could send (toxiproxy refuses
// every browser; netjam also checks Origin and, without a token, Host
// against DNS rebinding), and requests without the token when there is
// one.
type guarded struct {
	g    Guard
	next http.Handler
	// ui, when not nil, is the dashboard (Options.UI): its paths are
	// open to the browser's page of the same origin (serveUI).
	ui http.Handler
}

func (gd *guarded) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	if gd.ui != nil && isUIPath(r.URL.Path) {
		gd.serveUI(w, r)
		return
	}
	if strings.HasPrefix(r.UserAgent(), "Mozilla/") {
		writeError(w, errorf(403, "User agent not allowed: the API takes no requests from browsers"))
		return
	}
	if o := r.Header.Get("Origin"); o != "" {
		writeError(w, errorf(403, "a request from %s: the API takes no requests from web pages", o))
		return
	}
	if err := gd.checkHost(r); err != nil {
		writeError(w, err)
		return
	}
	if gd.g.Token != "" && subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), []byte("Bearer "+gd.g.Token)) != 1 {
		writeError(w, errorf(401, "missing or wrong token (Authorization: Bearer TOKEN)"))
		return
	}
	gd.next.ServeHTTP(w, r)
}

// checkHost refuses, on an API without a token, a request whose Host
// is not a loopback name: an address a browser resolved by DNS
// rebinding.
func (gd *guarded) checkHost(r *http.Request) error {
	if gd.g.Token != "" {
		return nil
	}
	host, _, err := net.SplitHostPort(r.Host)
	if err != nil {
		host = r.Host
	}
	if !loopbackHost(host) {
		return errorf(403, "host %q: an API without a token answers to a loopback name or address only", r.Host)
	}
	return nil
}

func asAPIError(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	return &apiError{http.StatusInternalServerError, err.Error()}
}

// writeError writes err as toxiproxy does: {"error": "...", "status": N}.
func writeError(w http.ResponseWriter, err error) {
	ae := asAPIError(err)
	if ae.status >= 400 {
		w.Header().Set("Connection", "close")
	}
	writeJSON(w, ae.status, map[string]any{"error": ae.msg, "status": ae.status})
}

func writeJSON(w http.ResponseWriter, code int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(b) // a client gone is no error of the request's
	return nil
}
