// Package browsertest starts a headless Chromium for the dashboards'
// tests (control's and proxy's). It is imported by _test.go files only,
// so that chromedp never enters the netjam binary: the layering test
// checks that cmd/netjam does not depend on it.
package browsertest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// RequireEnv is the variable that turns a missing Chromium into a
// failure (CI sets it to 1).
const RequireEnv = "NETJAM_REQUIRE_BROWSER"

// Chromium returns the Chromium to drive: $NETJAM_CHROMIUM, else the
// first of chromium, chromium-browser, google-chrome in PATH. Without one
// the test is skipped, unless NETJAM_REQUIRE_BROWSER=1.
func Chromium(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("NETJAM_CHROMIUM"); p != "" {
		return p
	}
	for _, n := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	msg := "no Chromium found (set NETJAM_CHROMIUM, or install the chromium package) to test the dashboard in a browser"
	if os.Getenv(RequireEnv) == "1" {
		t.Fatal(msg + "; " + RequireEnv + "=1 requires it")
	}
	t.Skip(msg)
	return ""
}

// Start starts a headless Chromium of its own for the test and returns
// its context; the test's end closes it (chromedp kills the process it
// started, and only that one). Every console error or warning, uncaught
// exception, JavaScript dialog (alert), and request to anywhere but base
// (a URL without a trailing slash) is recorded: problems returns them so
// far.
func Start(t testing.TB, base string) (ctx context.Context, problems func() []string) {
	t.Helper()
	bin := Chromium(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.WindowSize(1400, 1000),
		chromedp.UserDataDir(t.TempDir()))
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // Chromium refuses to run as root with its sandbox
	}
	tctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	actx, cancelAlloc := chromedp.NewExecAllocator(tctx, opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	var mu sync.Mutex
	var found []string
	add := func(format string, a ...any) {
		mu.Lock()
		found = append(found, fmt.Sprintf(format, a...))
		mu.Unlock()
	}
	messages := chromedp.Console(bctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for m, err := range messages {
			if err != nil {
				return
			}
			// A 4xx answer is logged by the network: the tests ask
			// for some on purpose (bad input, a missing token).
			if (m.IsException() || m.Type == "error" || m.Type == "warning") && m.Source != "network" {
				add("console %s", m)
			}
		}
	}()
	err := chromedp.Listen(bctx, func(ev any) {
		switch ev := ev.(type) {
		case *network.EventRequestWillBeSent:
			if u := ev.Request.URL; !strings.HasPrefix(u, base+"/") && !strings.HasPrefix(u, "data:") {
				add("a request leaving %s: %s", base, u)
			}
		case *page.EventJavascriptDialogOpening:
			add("a dialog opened: %q", ev.Message)
		}
	})
	t.Cleanup(func() {
		cancelBrowser()
		cancelAlloc()
		cancel()
		wg.Wait()
	})
	if err != nil {
		t.Fatal(err)
	}
	return bctx, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), found...)
	}
}

// The steps the dashboards' tests repeat, as chromedp actions (Until,
// Enter) and a reading for their failures' messages (Text).

// Until is a step that waits, up to timeout, for the JavaScript
// expression expr to be true on the page.
func Until(expr string, timeout time.Duration) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(timeout)))
		return err
	})
}

// Enter is a step that empties the input sel (a CSS selector), types
// text into it and presses Enter, as a person gives a value and applies
// it. (chromedp's SetValue refuses to set "".)
func Enter(sel, text string) chromedp.Action[chromedp.Void] {
	empty := chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector(`+jsString(sel)+`).value = ""`))
		return err
	})
	return chromedp.Steps(empty, chromedp.SendKeys(chromedp.CSS(sel), text+"\r"))
}

// Text is the text the first element that matches sel (a CSS selector)
// shows, "" when there is none: for a failure's message, so it does not
// wait for the element.
func Text(ctx context.Context, sel string) string {
	s, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`(document.querySelector(`+jsString(sel)+`) || {}).innerText || ""`))
	return s
}

// jsString is s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// Served checks that url, asked as a browser asks for a dashboard's
// file and without a token, answers as the browser needs to use it:
// 200, Content-Type typ (with nosniff, a script of any other type is not
// run), a Content-Security-Policy that runs the page's own scripts
// (script-src 'self'), and a body holding has.
func Served(t testing.TB, url, typ, has string) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("User-Agent", "Mozilla/5.0 (X11; Linux x86_64)")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	h := resp.Header
	if resp.StatusCode != 200 || h.Get("Content-Type") != typ || h.Get("X-Content-Type-Options") != "nosniff" ||
		!strings.Contains(h.Get("Content-Security-Policy"), "script-src 'self'") || !strings.Contains(string(b), has) {
		t.Errorf("GET %s without the token: %d, Content-Type %q, X-Content-Type-Options %q, CSP %q, %d bytes; want 200, %s, nosniff, script-src 'self', holding %.80q",
			url, resp.StatusCode, h.Get("Content-Type"), h.Get("X-Content-Type-Options"), h.Get("Content-Security-Policy"), len(b), typ, has)
	}
}
