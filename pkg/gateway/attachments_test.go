package gateway_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"strings"
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/gateway"
	"github.com/llmworker/llmworker/pkg/llm/llmtest"
)

// testPNG is a real 96×64 PNG (a browser draws it), with a pattern that
// makes its bytes this test's own.
func testPNG(t *testing.T) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 96, 64))
	for y := range 64 {
		for x := range 96 {
			img.Set(x, y, color.RGBA{uint8(x * 2), uint8(y * 4), 200, 255})
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// bigPDF is a PDF of n bytes: its signature, then filler.
func bigPDF(n int) []byte {
	b := []byte("%PDF-1.7\n")
	for i := 0; len(b) < n; i++ {
		b = append(b, byte('a'+i%26))
	}
	return b
}

func dataURL(mediaType string, b []byte) string {
	return "data:" + mediaType + ";base64," + base64.StdEncoding.EncodeToString(b)
}

// A useChat message with attachments: a small image (a data URL, sent
// inline) and a PDF above 256 KiB (stored in LLMW_MEDIA by the gateway,
// resolved by ingest). The model receives both with their bytes; the
// session's messages show them back, the PDF as a URL of the gateway's
// media endpoint that serves its bytes to the session's readers only.
// Bad file parts are refused with 400 naming the part.
func TestAttachments(t *testing.T) {
	script := llmtest.NewScripted(llmtest.TextStep("a chart and a report"))
	st := startStack(t, stackOpts{script: script})
	_, srv := startGateway(t, st, gateway.Config{
		Model:      "script:any",
		Authorizer: gateway.BearerTokens{"alice-token-123456": "alice-", "bob-token-12345678": "bob-"},
	})
	alice := &gateway.Client{URL: srv.URL, Token: "alice-token-123456"}
	bob := &gateway.Client{URL: srv.URL, Token: "bob-token-12345678"}

	pngBytes, pdf := testPNG(t), bigPDF(events.InlineMediaLimit+4096)
	sum := sha256.Sum256(pdf)
	pdfRef := "sha256:" + hex.EncodeToString(sum[:])
	msg := gateway.UIMessage{ID: "u1", Role: "user", Parts: []gateway.UIPart{
		{Type: "file", MediaType: "image/png", Filename: "chart.png", URL: dataURL("image/png", pngBytes)},
		{Type: "file", MediaType: "application/pdf", Filename: "report.pdf", URL: dataURL("application/pdf", pdf)},
		{Type: "text", Text: "What do these show?"},
	}}
	s, err := alice.Chat(ctxT(t), &gateway.ChatRequest{ID: "alice-att", Messages: []gateway.UIMessage{msg}})
	if err != nil {
		t.Fatal(err)
	}
	parts, done := readAll(t, s, nil)
	s.Close()
	if !done || parts[len(parts)-1].Type != "finish" || text(parts, "text-delta") != "a chart and a report" {
		t.Fatalf("stream %v", types(parts))
	}

	reqs := script.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d model calls, want 1", len(reqs))
	}
	last := reqs[0].Messages[len(reqs[0].Messages)-1]
	if last.Role != events.RoleUser || len(last.Content) != 3 {
		t.Fatalf("the model's last message: %+v", last)
	}
	got := func(p events.Part) []byte {
		b, err := base64.StdEncoding.DecodeString(p.Data)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if p := last.Content[0]; p.Type != events.PartImage || p.MediaType != "image/png" || !bytes.Equal(got(p), pngBytes) {
		t.Errorf("the model's image part: type %s %s, %d bytes of data, want the PNG's %d", p.Type, p.MediaType, len(got(p)), len(pngBytes))
	}
	if p := last.Content[1]; p.Type != events.PartFile || p.MediaType != "application/pdf" || p.Filename != "report.pdf" || p.Ref != "" || !bytes.Equal(got(p), pdf) {
		t.Errorf("the model's file part: type %s %s %q ref %q, %d bytes, want the PDF's %d", p.Type, p.MediaType, p.Filename, p.Ref, len(got(p)), len(pdf))
	}
	if p := last.Content[2]; p.Type != events.PartText || p.Text != "What do these show?" {
		t.Errorf("the model's text part: %+v", p)
	}

	// The session's history shows the attachments back.
	msgs, err := alice.Messages(ctxT(t), "alice-att")
	if err != nil || len(msgs) != 2 || len(msgs[0].Parts) != 3 {
		t.Fatalf("messages: %v %+v", err, msgs)
	}
	up := msgs[0].Parts
	if up[0].Type != "file" || up[0].MediaType != "image/png" || up[0].URL != dataURL("image/png", pngBytes) {
		t.Errorf("the image in the history: %s %s url %.60s…", up[0].Type, up[0].MediaType, up[0].URL)
	}
	wantURL := "/api/chat/alice-att/media/" + pdfRef
	if up[1].Type != "file" || up[1].MediaType != "application/pdf" || up[1].Filename != "report.pdf" || up[1].URL != wantURL {
		t.Errorf("the PDF in the history: %+v, want url %s", up[1], wantURL)
	}
	if up[2].Type != "text" || up[2].Text != "What do these show?" {
		t.Errorf("the text in the history: %+v", up[2])
	}

	get := func(path, token string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctxT(t), http.MethodGet, srv.URL+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp, []byte(readBody(t, resp))
	}
	resp, body := get(wantURL, alice.Token)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/pdf" || !bytes.Equal(body, pdf) {
		t.Errorf("GET %s: %d %s, %d bytes, want the PDF's %d", wantURL, resp.StatusCode, resp.Header.Get("Content-Type"), len(body), len(pdf))
	}
	if resp.Header.Get("X-Content-Type-Options") != "nosniff" || !strings.Contains(resp.Header.Get("Content-Disposition"), "report.pdf") {
		t.Errorf("GET %s: headers %v", wantURL, resp.Header)
	}
	for _, tc := range []struct {
		path, token string
		status      int
	}{
		{wantURL, "", 401},
		{wantURL, bob.Token, 403},
		// Alice's other session was never sent it.
		{"/api/chat/alice-other/media/" + pdfRef, alice.Token, 404},
		{"/api/chat/alice-att/media/sha256:abc", alice.Token, 400},
	} {
		if resp, body := get(tc.path, tc.token); resp.StatusCode != tc.status {
			t.Errorf("GET %s as %q: %d %s, want %d", tc.path, tc.token, resp.StatusCode, body, tc.status)
		}
	}

	// Bad file parts: 400 naming the part and what is wrong; no turn.
	file := func(p string) string {
		return `{"id":"alice-bad","messages":[{"role":"user","parts":[{"type":"text","text":"look"},` + p + `]}]}`
	}
	for _, tc := range []struct{ body, want string }{
		{file(`{"type":"file","mediaType":"image/png","url":"data:image/png;base64,***"}`), `messages[0].parts[1] (file): url: the data URL's data is not standard base64`},
		{file(`{"type":"file","mediaType":"image/png","url":"data:image/png,abc"}`), `not base64`},
		{file(`{"type":"file","mediaType":"image/bmp","filename":"a.bmp","url":"data:image/bmp;base64,Qk0="}`), `messages[0].parts[1] (file \"a.bmp\"): mediaType: \"image/bmp\" is not supported`},
		{file(`{"type":"file","mediaType":"application/zip","url":"data:application/zip;base64,UEsDBA=="}`), `mediaType: \"application/zip\" is not supported`},
		{file(`{"type":"file","mediaType":"image/png","url":"http://example.com/a.png"}`), `url: must be a data: URL or an absolute https URL, got scheme \"http\"`},
		{file(`{"type":"file","mediaType":"image/png","url":"file:///etc/passwd"}`), `got scheme \"file\"`},
		{file(`{"type":"file","mediaType":"image/png","url":"data:image/png;base64,` + base64.StdEncoding.EncodeToString([]byte("plain text")) + `"}`), `the data URL's bytes: holds text, not image/png`},
		{file(`{"type":"file","mediaType":"image/png"}`), `url: missing`},
		{`{"id":"alice-bad","messages":[{"role":"user","parts":[{"type":"text","text":" "}]}]}`, `no text and no file`},
	} {
		req, _ := http.NewRequestWithContext(ctxT(t), http.MethodPost, srv.URL+"/api/chat", strings.NewReader(tc.body))
		req.Header.Set("Authorization", "Bearer "+alice.Token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body := readBody(t, resp)
		if resp.StatusCode != 400 || !strings.Contains(body, `"code":"bad_request"`) || !strings.Contains(body, tc.want) {
			t.Errorf("%.90s: %d %s, want 400 with %s", tc.body, resp.StatusCode, body, tc.want)
		}
	}
	if len(script.Requests()) != 1 {
		t.Errorf("%d model calls after the refused requests, want still 1", len(script.Requests()))
	}
	if msgs, err := alice.Messages(ctxT(t), "alice-bad"); err != nil || len(msgs) != 0 {
		t.Errorf("the refused session has messages: %v %+v", err, msgs)
	}
}
