package proxy

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStart: netjam proxy starts with its config's proxies and its
// token, serves the API until Stop, and says which file or flag it could
// not take.
func TestStart(t *testing.T) {
	dir := t.TempDir()
	token, config, empty := filepath.Join(dir, "token"), filepath.Join(dir, "config.json"), filepath.Join(dir, "empty")
	os.WriteFile(token, []byte("s3cret\n"), 0o600)
	os.WriteFile(config, []byte(`[{"name": "a", "listen": "127.0.0.1:0", "upstream": "127.0.0.1:9"}]`), 0o600)
	os.WriteFile(empty, nil, 0o600)
	s, err := Start(Options{}, "127.0.0.1:0", token, config)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, "http://"+s.Addr.String()+"/proxies/a", nil)
	req.Header.Set("Authorization", "Bearer s3cret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("the config's proxy: %v %v", resp, err)
	}
	if resp != nil {
		resp.Body.Close()
	}
	if err := s.Stop(); err != nil {
		t.Error(err)
	}
	for _, c := range []struct{ token, config, want string }{
		{empty, "", "--token: " + empty + " is empty"},
		{"", filepath.Join(dir, "none.json"), "--config: open " + filepath.Join(dir, "none.json")},
		{"", empty, "--config " + empty + ": "},
	} {
		if _, err := Start(Options{}, "127.0.0.1:0", c.token, c.config); err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("token %q, config %q: %v, want %q", c.token, c.config, err, c.want)
		}
	}
}
