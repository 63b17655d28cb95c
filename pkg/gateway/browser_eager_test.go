package gateway_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/gateway"
	"github.com/llmworker/llmworker/pkg/llm/llmtest"
)

// A tool that starts early runs while the model's answer still streams,
// and the web UI shows it so: a scripted model calls the demo tool
// get_capital (read-only, so it starts once its input is complete) at
// 0.3 s and then writes text for three more seconds; the tool takes 1.5
// s. The page shows the call running while the answer's text streams,
// before that text is complete; at the end the call has its output and
// runs no more.
func TestBrowserToolRunsWhileTextStreams(t *testing.T) {
	bin := needChromium(t)
	chunks := make([]string, 30)
	for i := range chunks {
		chunks[i] = "word" + strings.Repeat(".", i%3) + " "
	}
	text := llmtest.TextBlockEvents(1, chunks...)
	stop := text[len(text)-1].(events.BlockStop)
	stop.StopReason = events.StopToolUse
	text[len(text)-1] = stop
	script := llmtest.NewScripted(
		llmtest.TimedStep(
			llmtest.Timed(300*time.Millisecond, llmtest.ToolUseBlockEvents(0, llmtest.ToolCallSpec{ID: "call_cap", Name: "get_capital", Input: `{"country":"France"}`})),
			llmtest.Timed(3300*time.Millisecond, text),
		),
		llmtest.TextStep("Paris."),
	)
	st := startStack(t, stackOpts{script: script, toolDelay: 1500 * time.Millisecond})
	_, srv := startGateway(t, st, gateway.Config{Model: "script:eager", Models: []string{"script:eager"}})
	answer := strings.Join(chunks, "") + "Paris."

	bctx, _, _ := openBrowser(t, bin)
	if err := chromedp.Do(bctx,
		chromedp.Navigate(srv.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS(`body[data-ready="1"]`)),
	); err != nil {
		t.Fatal(err)
	}
	// What the page shows the first time it draws the call running while
	// the answer's text streams: the call's state label, the text so far
	// and whether the page holds that text as still streaming.
	if _, err := chromedp.Run(bctx, chromedp.Evaluate[string](`(() => {
		new MutationObserver(() => {
			const run = document.querySelector('.msg.assistant .tool[data-running="1"]');
			const parts = window.llmw.messages.filter(m => m.role === 'assistant').flatMap(m => m.parts);
			const texts = parts.filter(p => p.type === 'text');
			const streaming = texts.length > 0 && texts[texts.length-1].state === 'streaming' && texts[texts.length-1].text !== '' && window.llmw.streaming;
			if (!run || !streaming || window.__running) return;
			window.__running = JSON.stringify({
				label: run.querySelector('.state').textContent,
				text: texts.map(p => p.text).join(''),
				streaming: streaming,
			});
		}).observe(document.getElementById('messages'), {childList: true, subtree: true, characterData: true});
		return '';
	})()`)); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(bctx,
		chromedp.SetValue(chromedp.CSS(`#prompt`), "What is the capital of France?"),
		chromedp.Click(chromedp.CSS(`#send`)),
	); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(bctx, chromedp.Poll[bool](`!!document.querySelector('.msg.assistant .ended') && !window.llmw.streaming`,
		chromedp.WithPollingInterval(25*time.Millisecond), chromedp.WithPollingTimeout(30*time.Second))); err != nil {
		html, _ := chromedp.Run(bctx, chromedp.OuterHTML(chromedp.CSS("#messages")))
		t.Fatalf("the turn did not end: %v; messages:\n%s", err, html)
	}
	seen, err := chromedp.Run(bctx, chromedp.Evaluate[string](`window.__running || ''`))
	if err != nil {
		t.Fatal(err)
	}
	if seen == "" {
		msgs, _ := chromedp.Run(bctx, chromedp.Evaluate[string](`JSON.stringify(window.llmw.messages)`))
		t.Fatalf("the page never showed the call running while the answer streamed; messages: %s", msgs)
	}
	var first struct {
		Label     string
		Text      string
		Streaming bool
	}
	if err := json.Unmarshal([]byte(seen), &first); err != nil {
		t.Fatal(err)
	}
	if first.Label != "running" || !first.Streaming || len(first.Text) >= len(strings.Join(chunks, "")) {
		t.Fatalf("the call was first shown running with %s; want it labelled running while the answer streams, before its %d bytes of text", seen, len(strings.Join(chunks, "")))
	}
	final, err := chromedp.Run(bctx, chromedp.Evaluate[string](`JSON.stringify({
		text: window.llmw.messages.filter(m => m.role === 'assistant').flatMap(m => m.parts).filter(p => p.type === 'text').map(p => p.text).join(''),
		tools: Array.from(document.querySelectorAll('.msg.assistant .tool')).map(e => e.dataset.state + (e.dataset.running ? '+running' : '')),
	})`))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"text":` + mustJSONString(answer) + `,"tools":["output-available"]}`
	if final != want {
		t.Fatalf("the ended turn: %s, want %s", final, want)
	}
}

func mustJSONString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
