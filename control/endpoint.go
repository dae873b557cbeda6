package control

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
)

// What the command line guards and opens an endpoint with: the token
// and the TLS certificate of its flags, read and checked here, and the
// API served at an address with a token made when it needs one.

// TokenFile is where in the output folder a run writes the token it made
// for a TCP control endpoint given no --control-token (mode 0600), for
// netjam ctl --control-token; it is removed when the run ends.
const TokenFile = "control.token"

// maxTokenFile bounds a token file: a token is some tens of bytes, and
// the file could be a device that never ends (/dev/zero).
const maxTokenFile = 4096

// ReadToken reads the token of the file path, with the spaces around it
// trimmed, refusing a file of more than maxTokenFile bytes. A file
// holding nothing gives "".
func ReadToken(path string) (string, error) {
	file, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer file.Close()
	b, err := io.ReadAll(io.LimitReader(file, maxTokenFile+1))
	if err != nil {
		return "", err
	}
	if len(b) > maxTokenFile {
		return "", fmt.Errorf("%s is more than %d bytes: a token file holds one token", path, maxTokenFile)
	}
	return strings.TrimSpace(string(b)), nil
}

// loadTLS is the TLS configuration of --control-tls-cert and
// --control-tls-key, the files cert and key (PEM); nil without them.
func loadTLS(cert, key string) (*tls.Config, error) {
	switch {
	case cert == "" && key == "":
		return nil, nil
	case cert == "" || key == "":
		return nil, errors.New("--control-tls-cert and --control-tls-key: give both, the certificate and its key")
	}
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		return nil, fmt.Errorf("--control-tls-cert %s, --control-tls-key %s: %v", cert, key, err)
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}, nil
}

// Served is an endpoint Start serves, with how it is guarded.
type Served struct {
	*Server
	Endpoint
	// Made tells that the token was made by Start, not given: the
	// command line then says it (in the dashboard's URL, and in
	// TokenFile of the output folder).
	Made bool
}

// openAPI serves the API at addr (unix:PATH or HOST:PORT, as Listen takes
// it) guarded as ep says: a unix socket by its mode (0600) and owner
// (when not nil: under sudo the invoking user), not TLS; a TCP address
// given no token with a token made anew. stop is what the API's stop
// does.
func openAPI(addr string, ep Endpoint, owner *Owner, stop func()) (*Served, error) {
	made := false
	if strings.HasPrefix(addr, "unix:") {
		ep.TLS = nil
	} else if ep.Token == "" {
		ep.Token, made = NewToken(), true
	}
	ln, err := Listen(addr, ListenOptions{HasToken: ep.Token != "", Owner: owner})
	if err != nil {
		return nil, err
	}
	return &Served{Server: Serve(ln, ep, stop), Endpoint: ep, Made: made}, nil
}

// Where is where the endpoint is, as netjam ctl --control takes it:
// unix:PATH, HOST:PORT, or https://HOST:PORT over TLS.
func (s *Served) Where() string {
	if u := s.URL(); strings.HasPrefix(u, "https://") {
		return u
	}
	return s.Addr()
}

// Dashboard is the dashboard's URL; with the token Start made for it, as
// Jupyter prints its own: the page takes it from there (a cookie).
func (s *Served) Dashboard() string {
	if s.Made {
		return s.URL() + "/?token=" + url.QueryEscape(s.Token)
	}
	return s.URL() + "/"
}

// plainWarning is the warning that flag's endpoint at addr, which others
// reach, is served over plain HTTP with ep's token, which then crosses
// the network in clear; "" when it is not.
func plainWarning(flag, addr string, ep Endpoint) string {
	if ep.TLS != nil || ep.Token == "" || Loopback(addr) {
		return ""
	}
	return fmt.Sprintf("netjam: warning: %s %s serves plain HTTP: its token crosses the network in clear (give --control-tls-cert and --control-tls-key)", flag, addr)
}
