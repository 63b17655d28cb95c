package gateway_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/llmworker/llmworker/internal/replay"
	"github.com/llmworker/llmworker/pkg/gateway"
)

// answerJS is the assistant's text as the page shows it.
const answerJS = `Array.from(document.querySelectorAll('.msg.assistant .part-text')).map(e => e.textContent).join('')`

// chromium finds a Chromium or Chrome binary ("" when none).
func chromium() string {
	for _, n := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	return ""
}

// The web UI in a real browser: run the replay demo turn, see the
// thinking, the tool call and its approval buttons render, approve the
// paused call, reload the page while the answer streams, and see the
// turn go on after the reload with its text once, not twice. A screenshot
// of the finished turn is kept as an artifact.
func TestBrowserUI(t *testing.T) {
	bin := chromium()
	if bin == "" {
		t.Skip("no chromium binary on PATH (apt-get install chromium; .ci/run installs it)")
	}
	sc, _ := replay.Lookup("anthropic")
	// Paced so that the answer streams for a second or so: long enough to
	// reload in the middle of it.
	st := startStack(t, stackOpts{approve: "fixed_version", pace: 150 * time.Millisecond})
	_, srv := startGateway(t, st, gateway.Config{Model: sc.ModelString(), Prompt: sc.Prompt})
	var answer string
	for _, b := range readRecorded(t, sc.Steps[len(sc.Steps)-1]).blocks {
		answer += b.text
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.WindowSize(1100, 900),
		chromedp.Flag("disable-dev-shm-usage", true),
	)
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	defer acancel()
	bctx, bcancel := chromedp.NewContext(actx, chromedp.WithErrorf(t.Logf))
	defer bcancel()

	// wait waits, in the page, for a JavaScript condition: the page
	// evaluates it every 25 ms (the conditions read state, such as
	// window.llmw.streaming, that changes without a DOM mutation).
	wait := func(what, js string) {
		t.Helper()
		if _, err := chromedp.Run(bctx, chromedp.Poll[bool](js, chromedp.WithPollingInterval(25*time.Millisecond), chromedp.WithPollingTimeout(30*time.Second))); err != nil {
			html, _ := chromedp.Run(bctx, chromedp.OuterHTML(chromedp.CSS("#messages")))
			t.Fatalf("%s: %v; messages:\n%s", what, err, html)
		}
	}
	if err := chromedp.Do(bctx,
		chromedp.Navigate(srv.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS(`body[data-ready="1"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#demo`)),
		chromedp.Click(chromedp.CSS(`#demo`)),
		chromedp.Click(chromedp.CSS(`#send`)),
	); err != nil {
		t.Fatal(err)
	}
	// The thinking streams, the tool call renders with its input, and
	// the hook's pause shows the approval buttons.
	wait("the paused tool call", `!!document.querySelector('.tool[data-state="approval-requested"] button.approve')`)
	reasoning, err := chromedp.Run(bctx, chromedp.TextContent(chromedp.CSS(`details.reasoning div`)))
	if err != nil {
		t.Fatal(err)
	}
	tool, err := chromedp.Run(bctx, chromedp.TextContent(chromedp.CSS(`.tool .head`)))
	if err != nil {
		t.Fatal(err)
	}
	if reasoning == "" || !strings.Contains(tool, sc.Tools[0]) {
		t.Fatalf("reasoning %q, tool %q", reasoning, tool)
	}
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS(`.tool button.approve`))); err != nil {
		t.Fatal(err)
	}
	// The approved call's result, then the answer begins: reload.
	wait("the answer streaming", `(() => { const e = document.querySelectorAll('.part-text'); return e.length > 0 && e[e.length-1].textContent.length > 0 && window.llmw.streaming; })()`)
	before, err := chromedp.Run(bctx, chromedp.Evaluate[string](answerJS))
	if err != nil {
		t.Fatal(err)
	}
	if before == answer {
		t.Fatal("the answer was complete before the reload: pace the replay slower")
	}
	if err := chromedp.Do(bctx, chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`body[data-ready="1"]`))); err != nil {
		t.Fatal(err)
	}
	wait("the turn finished after the reload", `!!document.querySelector('.msg.assistant .ended') && !window.llmw.streaming`)
	got, err := chromedp.Run(bctx, chromedp.Evaluate[string](answerJS))
	if err != nil {
		t.Fatal(err)
	}
	states, err := chromedp.Run(bctx, chromedp.Evaluate[string](`Array.from(document.querySelectorAll('.tool')).map(e => e.dataset.state).join(',')`))
	if err != nil {
		t.Fatal(err)
	}
	if got != answer {
		t.Fatalf("answer after the reload %q, recorded %q (text %d bytes before the reload)", got, answer, len(before))
	}
	if states != "output-available" {
		t.Fatalf("tool parts after the reload: %q, want one output-available", states)
	}

	png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		// Then a new chat, stopped at its approval: Stop cancels the
		// paused turn and the page says so.
		if err := chromedp.Do(bctx,
			chromedp.Click(chromedp.CSS(`#new-chat`)),
			chromedp.Click(chromedp.CSS(`#demo`)),
			chromedp.Click(chromedp.CSS(`#send`)),
		); err != nil {
			t.Fatal(err)
		}
		wait("the second turn paused", `!!document.querySelector('.tool[data-state="approval-requested"]') && !document.querySelector('#stop').disabled`)
		if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS(`#stop`))); err != nil {
			t.Fatal(err)
		}
		wait("the stopped turn", `(() => { const s = Array.from(document.querySelectorAll('#sessions li')).find(li => li.classList.contains('current')); const m = Array.from(document.querySelectorAll('.msg.assistant')).pop(); const e = m && m.querySelector('.ended.error'); return !!s && s.textContent.includes('aborted') && !!e && e.textContent.includes('cancel') && !m.querySelector('button.approve'); })()`)
	}()
	dir := os.Getenv("LLMW_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "llmworker-artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "gateway-ui-finished-turn.png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot of the finished turn: %s", path)
}
