package control

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestClient: a Client's calls reach a run's endpoint, on a unix socket
// or TCP, and Print words their answers as netjam ctl prints them; Events
// reads the stream until its context ends.
func TestClient(t *testing.T) {
	tr := startRun(t, fmt.Sprintf(udpRun, "30s", "30s"))
	c := Client{Addr: "unix:" + filepath.Join(tr.dir, "c.sock")}
	printed := func(call Call) string {
		t.Helper()
		code, body, err := c.Do(call)
		if err != nil || code != 200 {
			t.Fatalf("%s %s: %d %v %s", call.Method, call.Path, code, err, body)
		}
		var b bytes.Buffer
		if err := call.Print(&b, body); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	for _, x := range []struct {
		call Call
		want string // a regular expression
	}{
		{SetCall(map[string]string{"link.uplink.loss": "100%"}, "20s"), `^uplink loss 0% → 100% at [0-9.]+ s until [0-9.]+ s\n$`},
		{SetCall(map[string]string{"link.uplink.loss": "100%"}, ""), `^nothing changed at [0-9.]+ s: the values were in force already\n$`},
		{ScheduleCall("25s", map[string]string{"link.downlink.delay": "9ms"}), `^PENDING AT +SET\n[0-9.]+ s +link.uplink.loss=null\n25 s +link.downlink.delay=9ms\n$`},
		{LinksCall("downlink"), `^LINK +SETTINGS +PACKETS IN +OUT +DROPS +DELAY P50\ndownlink +rate 20Mbps, .*delay 5ms +[0-9]+ +[0-9]+ +0 +`},
		{StatusCall(), `^live: [0-9.]+ s of 30 s\n\nFLOW +TYPE +RECEIVED .*\nprobe +udp `},
		{ResetCall(), `(?m)^uplink loss 100% → 0% at [0-9.]+ s$`},
	} {
		if got := printed(x.call); !regexp.MustCompile(x.want).MatchString(got) {
			t.Errorf("%s %s printed\n%s\nwant %s", x.call.Method, x.call.Path, got, x.want)
		}
	}
	if code, body, err := c.Do(LinksCall("sideways")); err != nil || code != 404 || !strings.Contains(ErrorMessage(body), "sideways") {
		t.Errorf("a link the run has not: %d %v %q", code, err, ErrorMessage(body))
	}
	// Run: what netjam ctl prints, and how its failures are told apart.
	var ce *CallError
	if err := c.Run(context.Background(), LinksCall("sideways"), &bytes.Buffer{}, false); !errors.As(err, &ce) || !ce.Usage || !strings.HasPrefix(ce.Msg, "ctl get: ") {
		t.Errorf("Run of a link the run has not: %v, want a usage error", err)
	}
	var asJSON bytes.Buffer
	if err := c.Run(context.Background(), LinksCall("downlink"), &asJSON, true); err != nil || !strings.HasPrefix(asJSON.String(), "{\n  ") {
		t.Errorf("Run -o json: %v, %q", err, asJSON.String())
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var types []string
	err := c.Events(ctx, func(typ, data string) {
		types = append(types, typ)
		if !strings.HasPrefix(data, "{") {
			t.Errorf("event %s: data %q, want JSON", typ, data)
		}
		if typ == "sample" {
			cancel()
		}
	})
	if err != nil || len(types) == 0 || types[len(types)-1] != "sample" {
		t.Errorf("Events: %v, events %v, want them up to a sample", err, types)
	}
	if printed(StopCall()) == "" {
		t.Error("stop printed nothing")
	}
}

// TestClientToken: the token goes with every call and the event stream;
// a wrong one is the API's 401, and the stream's a *StatusError.
func TestClientToken(t *testing.T) {
	ln, err := Listen("127.0.0.1:0", ListenOptions{HasToken: true})
	if err != nil {
		t.Fatal(err)
	}
	s := Serve(ln, Endpoint{Token: "s3cret"}, func() {})
	defer s.Close()
	good, bad := Client{Addr: ln.Addr().String(), Token: "s3cret"}, Client{Addr: "http://" + ln.Addr().String() + "/"}
	if code, body, err := good.Do(StatusCall()); err != nil || code != 409 {
		t.Errorf("with the token: %d %v %s, want 409 (no run)", code, err, body)
	}
	if code, _, err := bad.Do(StatusCall()); err != nil || code != 401 {
		t.Errorf("without the token: %d %v, want 401", code, err)
	}
	var se *StatusError
	if err := bad.Events(context.Background(), func(string, string) {}); !errors.As(err, &se) || se.Code != 401 || se.Message == "" {
		t.Errorf("events without the token: %v, want a 401", err)
	}
	if _, _, err := (Client{Addr: "unix:" + filepath.Join(t.TempDir(), "none.sock")}).Do(StatusCall()); err == nil {
		t.Error("a socket that is not there: no error")
	}
	// Run says a wrong token's 401, or an endpoint not reached, as
	// failures of the run's, not of usage, with the token's hint.
	var ce *CallError
	for _, call := range []Call{StatusCall(), EventsCall()} {
		if err := bad.Run(context.Background(), call, &bytes.Buffer{}, false); !errors.As(err, &ce) || ce.Usage || !strings.Contains(ce.Msg, "give --control-token FILE") {
			t.Errorf("Run of %s without the token: %v", call.Path, err)
		}
	}
	if err := (Client{Addr: "unix:/nonexistent/c.sock"}).Run(context.Background(), StatusCall(), &bytes.Buffer{}, false); !errors.As(err, &ce) || ce.Usage || !strings.HasPrefix(ce.Msg, "ctl: unix:/nonexistent/c.sock: ") {
		t.Errorf("Run at an endpoint not there: %v", err)
	}
}

// TestPrintOtherShapes: a set --for that outlasts the run says so; an
// answer Print cannot read is printed as it came.
func TestPrintOtherShapes(t *testing.T) {
	outage := `{"time_s": 4.123, "changed": [{"link": "uplink", "setting": "loss", "old": "0%", "new": "100%"}], "links": []}`
	for _, c := range []struct {
		call Call
		body string
		want string
	}{
		{SetCall(map[string]string{"link.loss": "100%"}, "1h"), outage, "uplink loss 0% → 100% at 4.12 s until the run's end\n"},
		{SetCall(map[string]string{"link.loss": "100%"}, ""), outage, "uplink loss 0% → 100% at 4.12 s\n"},
		{StopCall(), `{"status": "stopping"}`, "stopping\n"},
		{StopCall(), `[1, 2]`, `[1, 2]`},
		{SetCall(map[string]string{"link.loss": "1%"}, ""), `{"other": true}`, `{"other": true}`},
		{LinksCall(""), `"links"`, `"links"`},
		{PartitionCall([][]string{{"a"}, {"b"}}, false), `{"time_s": 1.5, "old": "healed", "new": "[a] | [b]"}`, "partition healed → [a] | [b] at 1.50 s\n"},
		{HealCall(), `{"time_s": 3, "old": "[a] -> [b]", "new": "healed"}`, "partition [a] -> [b] → healed at 3.00 s\n"},
	} {
		var b bytes.Buffer
		if err := c.call.Print(&b, []byte(c.body)); err != nil || b.String() != c.want {
			t.Errorf("%s %s of %s: %q %v, want %q", c.call.Method, c.call.Path, c.body, b.String(), err, c.want)
		}
	}
}
