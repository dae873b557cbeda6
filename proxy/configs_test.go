package proxy_test

import (
	"os"
	"strings"
	"testing"

	"github.com/netjam/netjam/proxy"
)

// TestShippedConfigs: the example scenario starts a server, and the
// example toxiproxy config populates it (on ports of the test's own).
func TestShippedConfigs(t *testing.T) {
	y, err := os.ReadFile("../configs/proxy/mobile.yaml")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := proxy.New(proxy.Options{Scenario: y, ScenarioName: "mobile.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	j, err := os.ReadFile("../configs/proxy.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, port := range []string{"26379", "25432", "25353"} {
		j = []byte(strings.ReplaceAll(string(j), "127.0.0.1:"+port, "127.0.0.1:0"))
	}
	ps, err := srv.Populate(j)
	if err != nil || len(ps) != 3 {
		t.Fatalf("populate: %d proxies, %v", len(ps), err)
	}
}
