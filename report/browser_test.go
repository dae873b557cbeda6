package report

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/png"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestBrowserRendersReport opens report.html in headless Chromium and
// checks what a person would see: the page loads with no console error,
// no exception and no request but to the file itself and its data: URIs;
// every plot image is decoded at 1200 x 800; and a screenshot of the page
// has coloured lines in the area of every image.
//
// It drives Chromium through the DevTools protocol over a pipe
// (--remote-debugging-pipe: JSON messages ending in a NUL byte on file
// descriptors 3 and 4), which needs no library and no port.
//
// Without Chromium the test is skipped, unless NETJAM_REQUIRE_BROWSER=1
// (CI), where it fails. NETJAM_CHROMIUM names the binary; by default the
// first of chromium, chromium-browser, google-chrome found in PATH. The
// screenshots are written to NETJAM_SCREENSHOT_DIR when it is set.
func TestBrowserRendersReport(t *testing.T) {
	bin := findChromium()
	if bin == "" {
		msg := "no Chromium found (set NETJAM_CHROMIUM, or install the chromium package) to check report.html in a browser"
		if os.Getenv("NETJAM_REQUIRE_BROWSER") == "1" {
			t.Fatal(msg + "; NETJAM_REQUIRE_BROWSER=1 requires it")
		}
		t.Skip(msg)
	}
	dir, _ := drawnFolder(t)
	page := "file://" + filepath.Join(dir, ReportFile)

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	b, err := startBrowser(ctx, t, bin)
	if err != nil {
		t.Fatal(err)
	}
	defer b.close()

	target, err := b.call(ctx, "", "Target.createTarget", map[string]any{"url": "about:blank"})
	if err != nil {
		t.Fatal(err)
	}
	var tgt struct{ TargetID string }
	json.Unmarshal(target, &tgt)
	att, err := b.call(ctx, "", "Target.attachToTarget", map[string]any{"targetId": tgt.TargetID, "flatten": true})
	if err != nil {
		t.Fatal(err)
	}
	var sess struct{ SessionID string }
	json.Unmarshal(att, &sess)
	s := sess.SessionID
	for _, m := range []string{"Runtime.enable", "Log.enable", "Page.enable", "Network.enable"} {
		if _, err := b.call(ctx, s, m, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.call(ctx, s, "Emulation.setDeviceMetricsOverride", map[string]any{
		"width": 1280, "height": 1000, "deviceScaleFactor": 1, "mobile": false}); err != nil {
		t.Fatal(err)
	}
	loaded := b.waitFor(s, "Page.loadEventFired")
	if _, err := b.call(ctx, s, "Page.navigate", map[string]any{"url": page}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-loaded:
	case <-ctx.Done():
		t.Fatal("the page did not load")
	}

	// Where the images are, and whether the browser decoded them.
	res, err := b.call(ctx, s, "Runtime.evaluate", map[string]any{"returnByValue": true, "expression": `({
		height: Math.ceil(document.documentElement.scrollHeight),
		images: [...document.images].map(i => { const r = i.getBoundingClientRect(); return {
			alt: i.alt, complete: i.complete, w: i.naturalWidth, h: i.naturalHeight,
			x: Math.round(r.left + scrollX), y: Math.round(r.top + scrollY), cw: Math.round(r.width), ch: Math.round(r.height)}; }),
		tables: document.querySelectorAll("table").length,
	})`})
	if err != nil {
		t.Fatal(err)
	}
	var ev struct {
		Result struct {
			Value struct {
				Height int
				Tables int
				Images []struct {
					Alt        string
					Complete   bool
					W, H, X, Y int
					CW, CH     int
				}
			}
		}
		ExceptionDetails json.RawMessage
	}
	if err := json.Unmarshal(res, &ev); err != nil || ev.ExceptionDetails != nil {
		t.Fatalf("evaluate: %v %s", err, ev.ExceptionDetails)
	}
	v := ev.Result.Value
	if len(v.Images) != len(allFigures) {
		t.Fatalf("%d images in the page, want %d", len(v.Images), len(allFigures))
	}
	if v.Tables < 3 {
		t.Errorf("%d tables in the page", v.Tables)
	}

	shot, err := b.call(ctx, s, "Page.captureScreenshot", map[string]any{"format": "png", "captureBeyondViewport": true,
		"clip": map[string]any{"x": 0, "y": 0, "width": 1280, "height": v.Height, "scale": 1}})
	if err != nil {
		t.Fatal(err)
	}
	var sc struct{ Data string }
	json.Unmarshal(shot, &sc)
	raw, err := base64.StdEncoding.DecodeString(sc.Data)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if out := os.Getenv("NETJAM_SCREENSHOT_DIR"); out != "" {
		os.MkdirAll(out, 0o755)
		path := filepath.Join(out, "report-page.png")
		if err := os.WriteFile(path, raw, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s", path)
	}
	for _, im := range v.Images {
		if !im.Complete || im.W != 1200 || im.H != 800 {
			t.Errorf("image %q: complete %v, decoded %dx%d, want 1200x800", im.Alt, im.Complete, im.W, im.H)
			continue
		}
		r := image.Rect(im.X, im.Y, im.X+im.CW, im.Y+im.CH).Intersect(img.Bounds())
		// A plot has long coloured lines: at least a few thousand
		// coloured pixels, far more than a broken-image icon.
		if n := colouredPixels(img, r); r.Dx() < 600 || n < 2000 {
			t.Errorf("image %q at %v: %d coloured pixels on screen, want the plot drawn", im.Alt, r, n)
		}
	}

	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range b.errors {
		t.Errorf("browser: %s", e)
	}
	for _, u := range b.requests {
		if !strings.HasPrefix(u, "file://") && !strings.HasPrefix(u, "data:") {
			t.Errorf("the page requested %s: not self-contained", u)
		}
	}
}

func findChromium() string {
	if p := os.Getenv("NETJAM_CHROMIUM"); p != "" {
		return p
	}
	for _, n := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	return ""
}

// browser is a headless Chromium driven over --remote-debugging-pipe.
// One goroutine reads its messages until the pipe closes; close waits for
// it and for the process.
type browser struct {
	cmd *exec.Cmd
	in  io.WriteCloser // Chromium's fd 3
	out *os.File       // Chromium's fd 4
	log *bytes.Buffer  // Chromium's stderr, for failures
	t   *testing.T

	readDone chan struct{}
	wmu      sync.Mutex // serializes writes to in

	mu       sync.Mutex // guards everything below
	nextID   int
	pending  map[int]chan reply
	waiters  map[string][]chan struct{} // session+"\x00"+method
	errors   []string                   // console errors, exceptions, error log entries
	requests []string                   // URLs the page requested
}

type reply struct {
	result json.RawMessage
	err    error
}

func startBrowser(ctx context.Context, t *testing.T, bin string) (*browser, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, bin,
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--hide-scrollbars", "--remote-debugging-pipe",
		"--user-data-dir="+t.TempDir(), "about:blank")
	cmd.ExtraFiles = []*os.File{inR, outW} // fd 3: commands in, fd 4: messages out
	b := &browser{cmd: cmd, in: inW, out: outR, log: new(bytes.Buffer), t: t,
		readDone: make(chan struct{}), pending: map[int]chan reply{}, waiters: map[string][]chan struct{}{}}
	cmd.Stderr = b.log
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	inR.Close()
	outW.Close()
	go b.read()
	return b, nil
}

// read dispatches the browser's messages: replies to their callers,
// events to the waiters and the error log.
func (b *browser) read() {
	defer close(b.readDone)
	r := bufio.NewReader(b.out)
	for {
		msg, err := r.ReadBytes(0)
		if err != nil {
			b.mu.Lock()
			for id, ch := range b.pending {
				ch <- reply{err: errors.New("browser closed the pipe")}
				delete(b.pending, id)
			}
			b.mu.Unlock()
			return
		}
		var m struct {
			ID        int
			Method    string
			SessionID string
			Params    json.RawMessage
			Result    json.RawMessage
			Error     *struct{ Message string }
		}
		if json.Unmarshal(msg[:len(msg)-1], &m) != nil {
			continue
		}
		b.mu.Lock()
		if m.ID != 0 {
			if ch := b.pending[m.ID]; ch != nil {
				delete(b.pending, m.ID)
				rp := reply{result: m.Result}
				if m.Error != nil {
					rp.err = errors.New(m.Error.Message)
				}
				ch <- rp
			}
		} else {
			b.event(m.SessionID, m.Method, m.Params)
		}
		b.mu.Unlock()
	}
}

// event records what the test checks and wakes the waiters. b.mu is held.
func (b *browser) event(session, method string, params json.RawMessage) {
	switch method {
	case "Runtime.consoleAPICalled":
		var p struct {
			Type string
			Args []struct{ Value any }
		}
		json.Unmarshal(params, &p)
		if p.Type == "error" || p.Type == "assert" {
			b.errors = append(b.errors, fmt.Sprintf("console.%s %v", p.Type, p.Args))
		}
	case "Runtime.exceptionThrown":
		b.errors = append(b.errors, "exception: "+string(params))
	case "Log.entryAdded":
		var p struct {
			Entry struct{ Level, Text, URL string }
		}
		json.Unmarshal(params, &p)
		if p.Entry.Level == "error" {
			b.errors = append(b.errors, fmt.Sprintf("log: %s %s", p.Entry.Text, p.Entry.URL))
		}
	case "Network.requestWillBeSent":
		var p struct{ Request struct{ URL string } }
		json.Unmarshal(params, &p)
		b.requests = append(b.requests, p.Request.URL)
	case "Network.loadingFailed":
		b.errors = append(b.errors, "loading failed: "+string(params))
	}
	key := session + "\x00" + method
	for _, ch := range b.waiters[key] {
		close(ch)
	}
	delete(b.waiters, key)
}

// waitFor returns a channel closed at the next event method of session.
func (b *browser) waitFor(session, method string) <-chan struct{} {
	ch := make(chan struct{})
	b.mu.Lock()
	defer b.mu.Unlock()
	key := session + "\x00" + method
	b.waiters[key] = append(b.waiters[key], ch)
	return ch
}

// call sends a command (to session, or to the browser when "") and
// returns its result.
func (b *browser) call(ctx context.Context, session, method string, params any) (json.RawMessage, error) {
	b.mu.Lock()
	b.nextID++
	id := b.nextID
	ch := make(chan reply, 1)
	b.pending[id] = ch
	b.mu.Unlock()
	msg := map[string]any{"id": id, "method": method}
	if params != nil {
		msg["params"] = params
	}
	if session != "" {
		msg["sessionId"] = session
	}
	data, err := json.Marshal(msg)
	if err != nil {
		return nil, err
	}
	b.wmu.Lock()
	_, err = b.in.Write(append(data, 0))
	b.wmu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("%s: %w\n%s", method, err, b.log)
	}
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, fmt.Errorf("%s: %w", method, r.err)
		}
		return r.result, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("%s: %w", method, ctx.Err())
	}
}

// close asks the browser to quit, then waits for it (killing it after 10
// s) and for the reader.
func (b *browser) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b.call(ctx, "", "Browser.close", nil) //nolint:errcheck // it may exit before it answers
	b.in.Close()
	done := make(chan struct{})
	go func() {
		b.cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		b.cmd.Process.Kill()
		<-done
	}
	b.out.Close()
	<-b.readDone
}
