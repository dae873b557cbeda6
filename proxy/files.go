package proxy

import (
	"fmt"
	"io"
	"os"
	"strings"
)

// The files netjam proxy reads at start, each bounded: a path could name
// a device that never ends (/dev/zero).

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
