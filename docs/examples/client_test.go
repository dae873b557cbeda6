package client_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/netjam/netjam"
	"github.com/netjam/netjam/netjamtest"
)

func TestGetUnderLoss(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello") }))
	defer srv.Close()
	p := netjamtest.New(t, netjam.Link{Delay: 50 * time.Millisecond, Loss: 0.02, Rate: 10e6})
	client := &http.Client{Transport: &http.Transport{DialContext: p.DialContext}}
	resp, err := client.Get(srv.URL) // 50 ms each way, 2% loss, 10 Mbit/s
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}
