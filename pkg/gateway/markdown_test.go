package gateway

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// The web UI's markdown renderer (ui/markdown.js) in Chromium: what each
// construct becomes (CommonMark's reading, with a line break kept as
// <br>), and that model text never becomes markup of its own — HTML stays
// text, a link is made for an absolute http(s) URL only, an image is a
// link and never loaded — and that inputs built to be slow are not.
func TestMarkdownRenderer(t *testing.T) {
	bin := ""
	for _, n := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(n); err == nil {
			bin = p
			break
		}
	}
	if bin == "" {
		t.Skip("no chromium binary on PATH (apt-get install chromium; .ci/run installs it)")
	}
	srv := httptest.NewServer(uiHandler())
	t.Cleanup(srv.Close)
	const link = ` target="_blank" rel="noopener noreferrer nofollow"`
	cases := []struct{ in, want string }{
		{"The version is **0.32a0**.", `<p>The version is <strong>0.32a0</strong>.</p>`},
		{"*a* _b_ ***c*** ~~d~~ snake_case_name 2 * 3 * 4", `<p><em>a</em> <em>b</em> <strong><em>c</em></strong> <del>d</del> snake_case_name 2 * 3 * 4</p>`},
		{"a **b *c* d** e", `<p>a <strong>b <em>c</em> d</strong> e</p>`},
		{"**not closed and \\*escaped\\*", `<p>**not closed and *escaped*</p>`},
		{"one\ntwo\n\nthree", `<p>one<br>two</p><p>three</p>`},
		{"# H1\n### H3 *x*\n#tag", `<h1>H1</h1><h3>H3 <em>x</em></h3><p>#tag</p>`},
		{"`a <b>` and ``x ` y``", `<p><code>a &lt;b&gt;</code> and <code>x ` + "`" + ` y</code></p>`},
		{"```html\n<b>x</b>\n```\nafter", `<pre data-lang="html"><code class="lang-html">&lt;b&gt;x&lt;/b&gt;</code></pre><p>after</p>`},
		{"```\nstill streaming <i>", `<pre><code>still streaming &lt;i&gt;</code></pre>`},
		{"    indented\n    code", `<pre><code>indented` + "\n" + `code</code></pre>`},
		{"- a\n- b\n  - c\n\n1. x\n2. y", `<ul><li><p>a</p></li><li><p>b</p><ul><li><p>c</p></li></ul></li></ul><ol><li><p>x</p></li><li><p>y</p></li></ol>`},
		{"text\n- item", `<p>text</p><ul><li><p>item</p></li></ul>`},
		{"> quoted **x**\n\n---", `<blockquote><p>quoted <strong>x</strong></p></blockquote><hr>`},
		{"[docs](https://example.com/a_(b)?q=1&r=\"2\")", `<p><a href="https://example.com/a_(b)?q=1&amp;r=%222%22"` + link + `>docs</a></p>`},
		{"<https://go.dev> and https://pkg.go.dev/net/http.", `<p><a href="https://go.dev/"` + link + `>https://go.dev</a> and <a href="https://pkg.go.dev/net/http"` + link + `>https://pkg.go.dev/net/http</a>.</p>`},
		{"![chart](https://example.com/c.png)", `<p><a href="https://example.com/c.png"` + link + `>chart</a></p>`},
		// What a model may send to get markup or script onto the page.
		{`<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>`, `<p>&lt;img src=x onerror="window.__pwned=1"&gt;&lt;script&gt;window.__pwned=2&lt;/script&gt;</p>`},
		{"[a](javascript:window.__pwned=3) [b](JaVaScRiPt:alert(1)) [c](data:text/html,<script>alert(1)</script>) [d](//evil.example/x) [e](/api/sessions)",
			`<p>[a](javascript:window.__pwned=3) [b](JaVaScRiPt:alert(1)) [c](data:text/html,&lt;script&gt;alert(1)&lt;/script&gt;) [d](//evil.example/x) [e](/api/sessions)</p>`},
		// Not a link (no title follows the destination); its URL is one,
		// as GFM's extended autolinks read it, up to the quote.
		{`[x](https://example.com/" onclick="window.__pwned=4)`, `<p>[x](<a href="https://example.com/"` + link + `>https://example.com/</a>" onclick="window.__pwned=4)</p>`},
		{"<a href=\"https://example.com\">x</a> &lt;", `<p>&lt;a href="<a href="https://example.com/"` + link + `>https://example.com</a>"&gt;x&lt;/a&gt; &amp;lt;</p>`},
	}
	in := make([]string, len(cases))
	for i, c := range cases {
		in[i] = c.in
	}
	arg, _ := json.Marshal(in)
	js := `(() => {
		const render = (s) => { const d = document.createElement('div'); d.append(renderMarkdown(s)); return d; };
		const out = ` + string(arg) + `.map((s) => render(s).innerHTML);
		// Slow inputs: long runs of unclosed delimiters and brackets.
		const t0 = performance.now();
		for (const s of ['*'.repeat(20000) + 'a', '_a'.repeat(10000), '['.repeat(20000), '` + "`" + `'.repeat(5000) + 'x', '**a '.repeat(5000)]) render(s);
		return JSON.stringify({out, ms: performance.now() - t0, pwned: typeof window.__pwned});
	})()`

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.Flag("disable-dev-shm-usage", true))
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	defer acancel()
	bctx, bcancel := chromedp.NewContext(actx, chromedp.WithErrorf(t.Logf))
	defer bcancel()
	if err := chromedp.Do(bctx, chromedp.Navigate(srv.URL+"/")); err != nil {
		t.Fatal(err)
	}
	res, err := chromedp.Run(bctx, chromedp.Evaluate[string](js))
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Out   []string
		MS    float64
		Pwned string
	}
	if err := json.Unmarshal([]byte(res), &got); err != nil {
		t.Fatal(err)
	}
	for i, c := range cases {
		if got.Out[i] != c.want {
			t.Errorf("%q\n got  %s\n want %s", c.in, got.Out[i], c.want)
		}
	}
	if got.Pwned != "undefined" {
		t.Errorf("a rendered answer ran script: window.__pwned is %s", got.Pwned)
	}
	// Linear inputs render in milliseconds; a quadratic scan of them
	// takes seconds.
	if got.MS > 1500 {
		t.Errorf("the slow inputs took %.0f ms", got.MS)
	}
	if strings.Contains(strings.Join(got.Out, ""), "<img") {
		t.Error("an <img> was made")
	}
}
