package control

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Client is a client of the control API at an endpoint: what netjam ctl
// speaks to a run. It holds no connection: each call dials anew.
type Client struct {
	// Addr is the endpoint: unix:PATH, HOST:PORT, or http://HOST:PORT or
	// https://HOST:PORT (its certificate checked against the system's
	// roots).
	Addr string
	// Token is the endpoint's token, "" for none.
	Token string
}

// Call is one request of the API: its method, path and JSON body (nil
// for none). Print reads its answer.
type Call struct {
	Method, Path string
	Body         []byte

	verb  string // netjam ctl's word for it, for Print
	until bool   // set --for: the answer's changes last until a time
}

// StatusCall asks for the run now (GET /v1/status).
func StatusCall() Call { return Call{Method: http.MethodGet, Path: "/v1/status", verb: "status"} }

// LinksCall asks for each direction's settings and counters (GET
// /v1/links), or one link's or direction's, name ("" for all).
func LinksCall(name string) Call {
	path := "/v1/links"
	if name != "" {
		path += "/" + url.PathEscape(name)
	}
	return Call{Method: http.MethodGet, Path: path, verb: "get"}
}

// SetCall changes the link's keys now (PATCH /v1/links), for the duration
// dur when not "": the keys then go back.
func SetCall(set map[string]string, dur string) Call {
	body, _ := json.Marshal(SetRequest{Set: set, For: dur})
	return Call{Method: http.MethodPatch, Path: "/v1/links", Body: body, verb: "set", until: dur != ""}
}

// ScheduleCall makes the same change at time at of the run (POST
// /v1/timeline).
func ScheduleCall(at string, set map[string]string) Call {
	body, _ := json.Marshal(ScheduleRequest{At: at, Set: set})
	return Call{Method: http.MethodPost, Path: "/v1/timeline", Body: body, verb: "schedule"}
}

// ResetCall changes every key back to the scenario's value (POST
// /v1/reset).
func ResetCall() Call { return Call{Method: http.MethodPost, Path: "/v1/reset", verb: "reset"} }

// ResetFlowCall ends TCP flow's connection with a RST both ways (POST
// /v1/flows/FLOW/reset).
func ResetFlowCall(flow string) Call {
	return Call{Method: http.MethodPost, Path: "/v1/flows/" + url.PathEscape(flow) + "/reset", verb: "reset"}
}

// PartitionCall partitions the run's nodes into groups now, one way from
// the first group to the second when oneWay (POST /v1/partition).
func PartitionCall(groups [][]string, oneWay bool) Call {
	body, _ := json.Marshal(PartitionRequest{Groups: groups, OneWay: oneWay})
	return Call{Method: http.MethodPost, Path: "/v1/partition", Body: body, verb: "partition"}
}

// HealCall ends the partition in force (POST /v1/heal).
func HealCall() Call { return Call{Method: http.MethodPost, Path: "/v1/heal", verb: "heal"} }

// StopCall ends the run as Ctrl-C would (POST /v1/stop).
func StopCall() Call { return Call{Method: http.MethodPost, Path: "/v1/stop", verb: "stop"} }

// EventsCall is the event stream (GET /v1/events): Client.Events reads it.
func EventsCall() Call { return Call{Method: http.MethodGet, Path: "/v1/events", verb: "events"} }

// Bounds of what a Client reads: a call's answer whole, and one line of
// the event stream.
const (
	maxAnswer    = 16 << 20
	maxEventLine = 1 << 20
	maxErrorBody = 1 << 16
	callTimeout  = 30 * time.Second
)

// Do makes call, and returns the answer's status and body (at most 16 MiB
// of it). An error is one of reaching the endpoint: an answer that is an
// error of the API (ErrorMessage) is a status other than 200.
func (c Client) Do(call Call) (code int, body []byte, err error) {
	tr, base := c.transport()
	defer tr.CloseIdleConnections()
	req, err := http.NewRequest(call.Method, base+call.Path, bytes.NewReader(call.Body))
	if err != nil {
		return 0, nil, err
	}
	c.authorize(req)
	resp, err := (&http.Client{Transport: tr, Timeout: callTimeout}).Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	return resp.StatusCode, b, err
}

// StatusError is the API's answer of another status than 200 to the
// event stream.
type StatusError struct {
	Code    int
	Message string // ErrorMessage of the body
}

func (e *StatusError) Error() string { return e.Message }

// Events reads the event stream, and gives each event to each, its type
// and its data (JSON), until the endpoint closes the stream (the run
// ended) or ctx ends. An answer of the API other than 200 is a
// *StatusError.
func (c Client) Events(ctx context.Context, each func(typ, data string)) error {
	tr, base := c.transport()
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+EventsCall().Path, nil)
	if err != nil {
		return err
	}
	c.authorize(req)
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		return &StatusError{Code: resp.StatusCode, Message: ErrorMessage(b)}
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, maxEventLine)
	typ := ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			typ = line[len("event: "):]
		case strings.HasPrefix(line, "data: "):
			each(typ, line[len("data: "):])
		}
	}
	return nil
}

// authorize gives req the client's token.
func (c Client) authorize(req *http.Request) {
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
}

// transport is the HTTP transport to the endpoint, and the start of its
// URLs (http://HOST:PORT, https://HOST:PORT).
func (c Client) transport() (*http.Transport, string) {
	tr := &http.Transport{}
	if sock, ok := strings.CutPrefix(c.Addr, "unix:"); ok {
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}
		return tr, "http://netjam"
	}
	if strings.HasPrefix(c.Addr, "https://") || strings.HasPrefix(c.Addr, "http://") {
		return tr, strings.TrimSuffix(c.Addr, "/")
	}
	return tr, "http://" + c.Addr
}

// ErrorMessage is the message of an error answer of the API, {"error":
// "..."}; the body itself when it is not one.
func ErrorMessage(body []byte) string {
	var e struct{ Error string }
	if json.Unmarshal(body, &e) != nil || e.Error == "" {
		return strings.TrimSpace(string(body))
	}
	return e.Error
}
