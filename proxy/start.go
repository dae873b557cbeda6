package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"go.uber.org/zap"
)

// netjam proxy started as its flags say (Start), and the files it reads
// then, each bounded: a path could name a device that never ends
// (/dev/zero).

// Served is a server serving its API (Start).
type Served struct {
	*Server
	// Addr is where the API is.
	Addr net.Addr
	http *http.Server
}

// Start makes the server of o with the proxies of toxiproxy's JSON
// config file config ("" for none), and serves its API at listen,
// guarded by the token of the file token ("" for none). Every error is
// the user's to fix: a scenario, a file or an address netjam proxy
// cannot take.
func Start(o Options, listen, token, config string) (*Served, error) {
	srv, err := New(o)
	if err != nil {
		return nil, err
	}
	s, err := start(srv, listen, token, config)
	if err != nil {
		srv.Close()
	}
	return s, err
}

// start is Start once the server is made.
func start(srv *Server, listen, token, config string) (*Served, error) {
	var g Guard
	if token != "" {
		var err error
		if g.Token, err = ReadTokenFile(token); err != nil {
			return nil, fmt.Errorf("--token: %w", err)
		}
	}
	if config != "" {
		b, err := ReadConfigFile(config)
		if err != nil {
			return nil, fmt.Errorf("--config: %w", err)
		}
		ps, err := srv.Populate(b)
		if err != nil {
			return nil, fmt.Errorf("--config %s: %w", config, err)
		}
		srv.log.Info("proxies created from the config", zap.Int("proxies", len(ps)))
	}
	ln, err := ListenAPI(listen, g.Token != "")
	if err != nil {
		return nil, err
	}
	return &Served{Server: srv, Addr: ln.Addr(), http: srv.Serve(ln, g)}, nil
}

// Stop shuts the API down, letting requests in progress end for up to
// 5 s, and closes the server; its error is one of the shutdown, for the
// log.
func (s *Served) Stop() error {
	defer s.Close()
	shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.http.Shutdown(shut)
	s.http.Close()
	if errors.Is(err, context.DeadlineExceeded) {
		return nil
	}
	return err
}

// maxConfigFile bounds a --config file, as the API bounds a body.
const maxConfigFile = 1 << 20

// maxTokenFile bounds a --token file: a token is some tens of bytes.
const maxTokenFile = 4096

// ReadConfigFile reads the file path, toxiproxy's JSON config (for
// Server.Populate), refusing one of more than 1 MiB.
func ReadConfigFile(path string) ([]byte, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	b, err := io.ReadAll(io.LimitReader(file, maxConfigFile+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxConfigFile {
		return nil, fmt.Errorf("%s is more than %d bytes", path, maxConfigFile)
	}
	return b, nil
}

// ReadTokenFile reads the token of the file path (for Guard.Token), with
// the spaces around it trimmed, refusing a file of more than 4096 bytes
// or one that holds none.
func ReadTokenFile(path string) (string, error) {
	b, err := ReadConfigFile(path)
	if err != nil {
		return "", err
	}
	if len(b) > maxTokenFile {
		return "", fmt.Errorf("%s is more than %d bytes: a token file holds one token", path, maxTokenFile)
	}
	t := strings.TrimSpace(string(b))
	if t == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	return t, nil
}
