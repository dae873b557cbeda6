package control

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/netjam/netjam/outdir"
)

// What a run's command line asks to be served (--control, --ui,
// --metrics), guarded as --control-token and the TLS flags say, started
// in one go and said where on the terminal. Every error of Start is the
// user's to fix (bad usage), but a *TokenFileError.

// guardOf is how an endpoint is guarded by the token of the file tokenFile
// (--control-token; "" for none) and the TLS certificate of the files
// cert and key (--control-tls-cert, --control-tls-key; loadTLS).
func guardOf(tokenFile, cert, key string) (Endpoint, error) {
	var ep Endpoint
	if tokenFile != "" {
		token, err := ReadToken(tokenFile)
		if err != nil {
			return ep, fmt.Errorf("--control-token: %w", err)
		}
		if token == "" {
			return ep, fmt.Errorf("--control-token: %s is empty", tokenFile)
		}
		ep.Token = token
	}
	tlsCfg, err := loadTLS(cert, key)
	ep.TLS = tlsCfg
	return ep, err
}

// Options are what Start serves.
type Options struct {
	// API is the control API's address (unix:PATH or HOST:PORT); ""
	// serves none, unless UI.
	API string
	// UI serves the dashboard on the API's address, a TCP one, or, when
	// API is "", on 127.0.0.1 at a free port.
	UI bool
	// Metrics is the metrics' address (HOST:PORT); "" serves none.
	Metrics string
	// TokenFile, TLSCert and TLSKey guard every endpoint (guardOf); a TCP
	// API given no token gets one made anew (Served.Made), which the
	// metrics do not take.
	TokenFile, TLSCert, TLSKey string
	// Owner, when not nil, gets the API's unix socket and the token's
	// file: under sudo, the user who ran it.
	Owner *Owner
	// Stop is what the API's stop does.
	Stop func()
	// Say is where Start says where the endpoints are, and warns of a
	// token served in clear.
	Say io.Writer
	// Quiet says nothing of the API unless its token was made, and then
	// with the dashboard's URL: a shell's command finds the endpoint in
	// its environment.
	Quiet bool
	// Dir, when not nil, is the run's output folder, where a token made
	// goes (TokenFile).
	Dir *outdir.Dir
}

// TokenFileError is Start's error when the token it made could not be
// written into the output folder.
type TokenFileError struct{ Err error }

func (e *TokenFileError) Error() string { return fmt.Sprintf("the control token: %v", e.Err) }

func (e *TokenFileError) Unwrap() error { return e.Err }

// Start serves what o asks for. srv serves the API, the metrics or both
// (nil when neither is asked for); api is the API's endpoint (nil for
// none); end removes the token's file (Close the server first).
func Start(o Options) (srv *Server, api *Served, end func(), err error) {
	end = func() {}
	defer func() {
		if err != nil {
			if srv != nil {
				srv.Close()
			}
			end()
			srv, api = nil, nil
		}
	}()
	if o.API != "" || o.UI {
		if api, end, err = o.startAPI(); err != nil {
			return srv, nil, end, err
		}
		srv = api.Server
	}
	if o.Metrics != "" {
		ep, err := guardOf(o.TokenFile, o.TLSCert, o.TLSKey)
		if err != nil {
			return srv, nil, end, err
		}
		ln, err := ListenMetrics(o.Metrics, ep.Token != "")
		if err != nil {
			return srv, nil, end, err
		}
		if srv == nil {
			srv = New(o.Stop)
		}
		srv.ServeMetrics(ln, ep)
		scheme := "http"
		if ep.TLS != nil {
			scheme = "https"
		}
		o.warnPlain("--metrics", ln.Addr().String(), ep)
		fmt.Fprintf(o.Say, "netjam: metrics at %s://%s/metrics\n", scheme, ln.Addr())
	}
	return srv, api, end, nil
}

// startAPI serves the API and says where, with the token it made
// written into the output folder; end removes it.
func (o Options) startAPI() (api *Served, end func(), err error) {
	end = func() {}
	addr := o.API
	if o.UI {
		if addr == "" {
			addr = "127.0.0.1:0" // a free port
		} else if strings.HasPrefix(addr, "unix:") {
			return nil, end, errors.New("--ui: a browser reaches a TCP address only: give --control 127.0.0.1:PORT, or no --control")
		}
	}
	ep, err := guardOf(o.TokenFile, o.TLSCert, o.TLSKey)
	if err != nil {
		return nil, end, err
	}
	api, err = openAPI(addr, ep, o.Owner, o.Stop)
	if err != nil {
		return nil, end, err
	}
	if !strings.HasPrefix(addr, "unix:") {
		o.warnPlain("--control", api.Addr(), api.Endpoint)
	}
	if o.Quiet && !api.Made {
		return api, end, nil
	}
	where := ""
	if api.Made && o.Dir != nil {
		if err := o.Dir.WritePrivate(TokenFile, []byte(api.Token+"\n")); err != nil {
			api.Close()
			return nil, end, &TokenFileError{err}
		}
		end = func() { o.Dir.Remove(TokenFile) }
		where = " (its token in " + o.Dir.Join(TokenFile) + ")"
	}
	fmt.Fprintf(o.Say, "netjam: control API at %s%s\n", api.Where(), where)
	if o.UI || o.Quiet {
		fmt.Fprintf(o.Say, "netjam: dashboard at %s\n", api.Dashboard())
	}
	return api, end, nil
}

// warnPlain warns that flag's endpoint at addr, which others reach, is
// served over plain HTTP (plainWarning).
func (o Options) warnPlain(flag, addr string, ep Endpoint) {
	if w := plainWarning(flag, addr, ep); w != "" {
		fmt.Fprintln(o.Say, w)
	}
}
