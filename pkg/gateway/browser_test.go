package gateway_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/llmworker/llmworker/internal/replay"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/gateway"
	"github.com/llmworker/llmworker/pkg/llm/llmtest"
)

// answerJS is the text of the assistant's text parts as the page holds
// them (the markdown source, before rendering).
const answerJS = `window.llmw.messages.filter(m => m.role === 'assistant').flatMap(m => m.parts).filter(p => p.type === 'text').map(p => p.text).join('')`

// usersJS is the user's messages as the page shows them.
const usersJS = `Array.from(document.querySelectorAll('.msg.user .part-text')).map(e => e.textContent)`

// markup is a scripted answer in markdown with HTML in it: the page
// renders the markdown and shows the HTML as text.
var markup = []string{
	"## Markdown and HTML\n\nThe version is **0.",
	"32a0**, and `go test` runs *everything*.\n\n",
	`<img src=x onerror="window.__pwned=1"> and <script>window.__pwned=2</script> are text here.` + "\n\n",
	"- a [link](https://example.com/docs)\n- a [bad link](javascript:window.__pwned=3)\n\n",
	"```go\nfmt.Println(\"<b>hi</b>\")\n```\n",
}

// chromium finds a Chromium or Chrome binary ("" when none).
func chromium() string {
	for _, n := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	return ""
}

// needChromium is the Chromium binary for a browser test, which it skips
// where none is installed.
func needChromium(t *testing.T) string {
	t.Helper()
	bin := chromium()
	if bin == "" {
		t.Skip("no chromium binary on PATH (apt-get install chromium; .ci/run installs it)")
	}
	return bin
}

// openBrowser starts a headless bin for t, closed when t ends, and
// returns its tab's context with wait and eval on it. wait waits, in the
// page, for a JavaScript condition, evaluated every 25 ms (the conditions
// read state, such as window.llmw.streaming, that changes without a DOM
// mutation), and fails t with the messages the page shows; eval returns
// a JavaScript expression's string value.
func openBrowser(t *testing.T, bin string) (context.Context, func(what, js string), func(js string) string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.WindowSize(1100, 900),
		chromedp.Flag("disable-dev-shm-usage", true),
	)
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	bctx, bcancel := chromedp.NewContext(actx, chromedp.WithErrorf(t.Logf))
	t.Cleanup(func() {
		bcancel()
		acancel()
		cancel()
	})
	wait := func(what, js string) {
		t.Helper()
		if _, err := chromedp.Run(bctx, chromedp.Poll[bool](js, chromedp.WithPollingInterval(25*time.Millisecond), chromedp.WithPollingTimeout(30*time.Second))); err != nil {
			html, _ := chromedp.Run(bctx, chromedp.OuterHTML(chromedp.CSS("#messages")))
			t.Fatalf("%s: %v; messages:\n%s", what, err, html)
		}
	}
	eval := func(js string) string {
		t.Helper()
		v, err := chromedp.Run(bctx, chromedp.Evaluate[string](js))
		if err != nil {
			t.Fatalf("%s: %v", js, err)
		}
		return v
	}
	return bctx, wait, eval
}

// The web UI in a real browser: the empty chat's hint; run the replay
// demo turn, see the thinking, the tool call and its approval buttons
// render, approve the paused call, reload the page while the answer
// streams, and see the turn go on after the reload with its text once,
// not twice, its markdown rendered, and the user's question above it.
// Then a scripted answer with markdown and HTML: the markdown is
// rendered, the HTML shows as text and creates no element, before and
// after a reload, which shows both of the user's messages. Screenshots of
// the finished turn and of the markdown answer are kept as artifacts.
func TestBrowserUI(t *testing.T) {
	bin := needChromium(t)
	sc, _ := replay.Lookup("anthropic")
	// Paced so that the answer streams for a second or so: long enough to
	// reload in the middle of it.
	script := llmtest.NewScripted(llmtest.TextStep(markup...).WithDelay(100 * time.Millisecond))
	st := startStack(t, stackOpts{approve: "fixed_version", pace: 150 * time.Millisecond, script: script})
	_, srv := startGateway(t, st, gateway.Config{Model: sc.ModelString(), Models: []string{sc.ModelString(), "script:markup"}, Prompt: sc.Prompt})
	var answer string
	for _, b := range readRecorded(t, sc.Steps[len(sc.Steps)-1]).blocks {
		answer += b.text
	}

	bctx, wait, eval := openBrowser(t, bin)
	if err := chromedp.Do(bctx,
		chromedp.Navigate(srv.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS(`body[data-ready="1"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#demo`)),
	); err != nil {
		t.Fatal(err)
	}
	// The empty chat says what to do, and what the demo prompt is.
	if hint := eval(`(document.querySelector('#messages .hint') || {}).textContent || ''`); !strings.Contains(hint, "Demo prompt") || !strings.Contains(hint, sc.Prompt) || !strings.Contains(hint, "replay") {
		t.Fatalf("empty chat's hint %q", hint)
	}
	dir := os.Getenv("LLMW_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "llmworker-artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	shot := func(name, what string) {
		t.Helper()
		png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot of %s: %s", what, path)
	}
	shot("gateway-ui-empty-chat.png", "the empty chat")
	if err := chromedp.Do(bctx,
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
	// The recorded answer's **0.32a0** is bold, and the question is shown
	// above the answer though this page never sent it.
	if strong := eval(`Array.from(document.querySelectorAll('.msg.assistant .md strong')).map(e => e.textContent).join('|')`); strong != "0.32a0" {
		t.Fatalf("bold text %q, want 0.32a0 (recorded as **0.32a0**)", strong)
	}
	if order := eval(`Array.from(document.querySelectorAll('#messages .msg')).map(e => e.className).join(',')`); order != "msg user,msg assistant" {
		t.Fatalf("messages after the reload: %s, want the user's then the assistant's", order)
	}
	if users, err := chromedp.Run(bctx, chromedp.Evaluate[[]string](usersJS)); err != nil || len(users) != 1 || users[0] != sc.Prompt {
		t.Fatalf("user's messages after the reload %q (%v), want [%q]", users, err, sc.Prompt)
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
	shot("gateway-ui-finished-turn.png", "the finished turn")

	// A second question, to the scripted model, whose answer is markdown
	// with HTML in it. The question has markup too.
	question := "Show me <b>markup</b> & <i>more</i>"
	// While it streams, the answer's markdown is rendered as it grows,
	// and the first answer's rendered text is left as it is (the same
	// node: a selection in it stays).
	eval(`(() => {
		document.querySelector('.msg.assistant .md').dataset.kept = '1';
		window.__streamed = [];
		new MutationObserver(() => {
			const md = document.querySelectorAll('.msg.assistant')[1]?.querySelector('.md');
			if (window.llmw.streaming && md) window.__streamed.push(Array.from(md.children).map(e => e.tagName).join(','));
		}).observe(document.getElementById('messages'), {childList: true, subtree: true, characterData: true});
		return '';
	})()`)
	if err := chromedp.Do(bctx,
		chromedp.SetValue(chromedp.CSS(`#model`), "script:markup"),
		chromedp.SetValue(chromedp.CSS(`#prompt`), question),
		chromedp.Click(chromedp.CSS(`#send`)),
	); err != nil {
		t.Fatal(err)
	}
	wait("the scripted answer", `document.querySelectorAll('.msg.assistant').length === 2 && !!document.querySelector('.msg.assistant:last-child .ended') && !window.llmw.streaming`)
	checkMarkup := func(when string) {
		t.Helper()
		probe := eval(`JSON.stringify({
			pwned: typeof window.__pwned,
			elements: document.querySelectorAll('#messages img, #messages script, #messages b, #messages i').length,
			text: document.querySelector('.msg.assistant:last-child .md').textContent,
			h2: Array.from(document.querySelectorAll('.msg.assistant:last-child .md h2')).map(e => e.textContent),
			strong: Array.from(document.querySelectorAll('.msg.assistant:last-child .md strong')).map(e => e.textContent),
			em: Array.from(document.querySelectorAll('.msg.assistant:last-child .md em')).map(e => e.textContent),
			code: Array.from(document.querySelectorAll('.msg.assistant:last-child .md p code')).map(e => e.textContent),
			pre: Array.from(document.querySelectorAll('.msg.assistant:last-child .md pre code')).map(e => e.textContent),
			items: Array.from(document.querySelectorAll('.msg.assistant:last-child .md ul > li')).map(e => e.textContent),
			links: Array.from(document.querySelectorAll('#messages a')).map(a => a.getAttribute('href')),
			users: Array.from(document.querySelectorAll('.msg.user .part-text')).map(e => e.textContent),
		})`)
		var got struct {
			Pwned                                          string
			Elements                                       int
			Text                                           string
			H2, Strong, Em, Code, Pre, Items, Links, Users []string
		}
		if err := json.Unmarshal([]byte(probe), &got); err != nil {
			t.Fatal(err)
		}
		switch {
		case got.Pwned != "undefined" || got.Elements != 0:
			t.Fatalf("%s: HTML of the answer or the question became elements (window.__pwned %s, %d img/script/b/i elements): %s", when, got.Pwned, got.Elements, probe)
		case !strings.Contains(got.Text, `<img src=x onerror="window.__pwned=1"> and <script>window.__pwned=2</script> are text here.`):
			t.Fatalf("%s: the answer's HTML is not shown as text: %q", when, got.Text)
		case !slices.Equal(got.H2, []string{"Markdown and HTML"}) || !slices.Equal(got.Strong, []string{"0.32a0"}) || !slices.Equal(got.Em, []string{"everything"}) || !slices.Equal(got.Code, []string{"go test"}):
			t.Fatalf("%s: markdown not rendered: %s", when, probe)
		case !slices.Equal(got.Pre, []string{`fmt.Println("<b>hi</b>")`}):
			t.Fatalf("%s: code block %q", when, got.Pre)
		case !slices.Equal(got.Items, []string{"a link", "a [bad link](javascript:window.__pwned=3)"}) || !slices.Equal(got.Links, []string{"https://example.com/docs"}):
			t.Fatalf("%s: list items %q, links %q: want the https link only", when, got.Items, got.Links)
		case !slices.Equal(got.Users, []string{sc.Prompt, question}):
			t.Fatalf("%s: the user's messages %q, want %q", when, got.Users, []string{sc.Prompt, question})
		}
	}
	checkMarkup("streamed")
	if kept := eval(`document.querySelector('.msg.assistant .md').dataset.kept || ''`); kept != "1" {
		t.Fatal("the first answer's text was drawn anew while the second streamed")
	}
	if streamed := eval(`JSON.stringify(window.__streamed)`); !strings.Contains(streamed, `"H2,P"`) || !strings.Contains(streamed, `"H2,P,P,UL,PRE"`) {
		t.Fatalf("the streaming answer's rendered blocks, render by render: %s; want the heading and paragraph before the end", streamed)
	}
	if err := chromedp.Do(bctx, chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`body[data-ready="1"]`))); err != nil {
		t.Fatal(err)
	}
	wait("the chat after the reload", `document.querySelectorAll('.msg.assistant .ended').length === 2`)
	checkMarkup("after a reload")
	shot("gateway-ui-markdown.png", "the markdown answer")

	// An image and a PDF attached through the file input, in a new chat:
	// the completion request reaching the model carries the image's bytes,
	// and the user's message shows the image and the PDF's name, before
	// and after a reload.
	img, pdf := testPNG(t), bigPDF(2000)
	imgPath, pdfPath := filepath.Join(t.TempDir(), "gradient.png"), filepath.Join(t.TempDir(), "notes.pdf")
	if err := os.WriteFile(imgPath, img, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pdfPath, pdf, 0o644); err != nil {
		t.Fatal(err)
	}
	script.Add(llmtest.TextStep("A gradient from blue to pink."))
	calls := len(script.Requests())
	if err := chromedp.Do(bctx,
		chromedp.Click(chromedp.CSS(`#new-chat`)),
		chromedp.SetValue(chromedp.CSS(`#model`), "script:markup"),
		chromedp.SetUploadFiles(chromedp.CSS(`#file`), []string{imgPath, pdfPath}),
	); err != nil {
		t.Fatal(err)
	}
	wait("the attachment in the composer", `Array.from(document.querySelectorAll('#attachments .chip')).map(e => e.textContent).join('|') === 'gradient.png×|PDFnotes.pdf×'`)
	shot("gateway-ui-attach-composer.png", "the composer with two attachments")
	if err := chromedp.Do(bctx,
		chromedp.SetValue(chromedp.CSS(`#prompt`), "What is on this picture?"),
		chromedp.Click(chromedp.CSS(`#send`)),
	); err != nil {
		t.Fatal(err)
	}
	wait("the answer to the picture", `!!document.querySelector('.msg.assistant .ended') && !window.llmw.streaming`)
	reqs := script.Requests()
	if len(reqs) != calls+1 {
		t.Fatalf("%d model calls, want %d", len(reqs), calls+1)
	}
	msgs := reqs[calls].Messages
	var sent, sentPDF []byte
	for _, p := range msgs[len(msgs)-1].Content {
		switch {
		case p.Type == events.PartImage && p.MediaType == "image/png":
			sent, _ = p.Bytes()
		case p.Type == events.PartFile && p.MediaType == "application/pdf" && p.Filename == "notes.pdf":
			sentPDF, _ = p.Bytes()
		}
	}
	if !bytes.Equal(sent, img) || !bytes.Equal(sentPDF, pdf) {
		t.Fatalf("the model's last message: image bytes %d, want the file's %d; PDF bytes %d, want %d", len(sent), len(img), len(sentPDF), len(pdf))
	}
	if got := msgs[len(msgs)-1].Text(); got != "What is on this picture?" {
		t.Fatalf("the model's last message's text %q", got)
	}
	thumb := `(() => { const i = document.querySelector('.msg.user img.thumb'); return i && i.complete ? i.naturalWidth + 'x' + i.naturalHeight : ''; })()`
	chip := `Array.from(document.querySelectorAll('.msg.user .file-chip')).map(e => e.querySelector('.kind').textContent + ' ' + e.querySelector('.name').textContent).join('|') === 'PDF notes.pdf'`
	wait("the image and the PDF in the user's message", thumb+` === '96x64' && `+chip)
	if chips := eval(`document.getElementById('attachments').children.length + ''`); chips != "0" {
		t.Fatalf("the composer keeps %s attachments after sending", chips)
	}
	shot("gateway-ui-attachment.png", "the user's message with its image")
	if err := chromedp.Do(bctx, chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`body[data-ready="1"]`))); err != nil {
		t.Fatal(err)
	}
	wait("the image after a reload", thumb+` === '96x64' && `+chip+` && document.querySelector('.msg.user .part-text').textContent === 'What is on this picture?'`)
	// The PDF's chip opens the PDF's bytes, as a PDF, in a new tab.
	eval(`(() => {
		const create = URL.createObjectURL;
		URL.createObjectURL = (b) => { window.__blob = b; return create(b); };
		window.open = (u) => { window.__blob.arrayBuffer().then((a) => { window.__opened = JSON.stringify({blob: u.startsWith('blob:'), type: window.__blob.type, size: a.byteLength, head: String.fromCharCode(...new Uint8Array(a).slice(0, 8))}); }); };
		return '';
	})()`)
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS(`.msg.user .file-chip`))); err != nil {
		t.Fatal(err)
	}
	wait("the PDF opened", `!!window.__opened`)
	want := fmt.Sprintf(`{"blob":true,"type":"application/pdf","size":%d,"head":%q}`, len(pdf), pdf[:8])
	if got := eval(`window.__opened`); got != want {
		t.Fatalf("the PDF's chip opened %s, want %s", got, want)
	}

	// A pasted image is attached; a dropped text file is refused with a
	// message; × removes an attachment.
	eval(`(() => {
		const file = (name, type, b64) => new File([Uint8Array.from(atob(b64), (c) => c.charCodeAt(0))], name, {type});
		const paste = new DataTransfer();
		paste.items.add(file('image.png', 'image/png', '` + base64.StdEncoding.EncodeToString(img) + `'));
		document.getElementById('prompt').dispatchEvent(new ClipboardEvent('paste', {clipboardData: paste, bubbles: true, cancelable: true}));
		const drop = new DataTransfer();
		drop.items.add(file('notes.txt', 'text/plain', 'aGVsbG8='));
		document.getElementById('composer').dispatchEvent(new DragEvent('drop', {dataTransfer: drop, bubbles: true, cancelable: true}));
		return '';
	})()`)
	wait("the pasted image and the refused text file", `Array.from(document.querySelectorAll('#attachments .chip')).map(e => e.textContent).join('|') === 'image.png×' && document.getElementById('error').textContent.includes('notes.txt: text/plain cannot be attached')`)
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS(`#attachments .chip button.remove`))); err != nil {
		t.Fatal(err)
	}
	wait("the attachment removed", `document.querySelectorAll('#attachments .chip').length === 0 && window.llmw.attachments.length === 0`)
}
