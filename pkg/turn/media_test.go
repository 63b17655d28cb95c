package turn_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm/llmtest"
	"github.com/llmworker/llmworker/pkg/media"
	"github.com/llmworker/llmworker/pkg/natstest"
	"github.com/llmworker/llmworker/pkg/tool"
	"github.com/llmworker/llmworker/pkg/toolexec"
	"github.com/llmworker/llmworker/pkg/turn"
)

// fakePDF is n bytes that a PDF reader's signature check accepts.
func fakePDF(n int) []byte {
	b := bytes.Repeat([]byte("0123456789abcdef"), n/16+1)[:n]
	copy(b, "%PDF-1.7\n")
	copy(b[n-6:], "%%EOF\n")
	return b
}

// largestMessage subscribes to every subject of the server's account and
// returns the size of the largest message seen so far (data and headers).
func largestMessage(t *testing.T, e *env) func() int64 {
	t.Helper()
	var max atomic.Int64
	spy := e.connect()
	if _, err := spy.Subscribe(">", func(m *nats.Msg) {
		n := int64(len(m.Data) + len(m.Subject))
		for k, vs := range m.Header {
			for _, v := range vs {
				n += int64(len(k) + len(v) + 4)
			}
		}
		for {
			cur := max.Load()
			if n <= cur || max.CompareAndSwap(cur, n) {
				break
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	if err := spy.Flush(); err != nil {
		t.Fatal(err)
	}
	return max.Load
}

// filesOf returns the file and image parts of the user messages of req.
func filesOf(req events.CompletionRequest) []events.Part {
	var out []events.Part
	for _, m := range req.Messages {
		for _, p := range m.Content {
			if p.IsMedia() {
				out = append(out, p)
			}
		}
	}
	return out
}

// A 20 MiB PDF, uploaded first and sent as a ref, reaches the model in
// two turns of a session while no message on the bus is larger than
// NATS's default 1 MiB payload.
func TestLargeAttachmentTravelsAsARef(t *testing.T) {
	e := newEnv(t)
	p := llmtest.NewScripted(llmtest.TextStep("It is a report."), llmtest.TextStep("Still a report."))
	e.scripted(p)
	e.startTurn(turn.Config{}) // provisions LLMW_MEDIA
	largest := largestMessage(t, e)

	pdf := fakePDF(20 << 20)
	ctx := natstest.Context(t)
	st, err := media.Open(ctx, e.js)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := st.Put(ctx, pdf, "application/pdf")
	if err != nil {
		t.Fatal(err)
	}
	session := newID("media-s")
	for i, q := range []string{"Summarise the attached report.", "What was its title?"} {
		id := newID("media")
		w := e.watch(id)
		msg := events.UserText(q)
		if i == 0 {
			msg.Content = append(msg.Content, events.Part{Type: events.PartFile, MediaType: "application/pdf", Filename: "report.pdf", Ref: ref, Size: int64(len(pdf))})
		}
		e.submit(events.TurnRequest{TurnID: id, SessionID: session, Model: "test:m", Messages: []events.Message{msg}})
		w.completed()
	}

	reqs := p.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model calls, want 2", len(reqs))
	}
	for i, r := range reqs {
		files := filesOf(r)
		if len(files) != 1 {
			t.Fatalf("call %d carries %d media parts, want the one PDF", i+1, len(files))
		}
		got, err := files[0].Bytes()
		if err != nil || files[0].Ref != "" || !bytes.Equal(got, pdf) || files[0].Filename != "report.pdf" {
			t.Fatalf("call %d: the PDF did not reach the model as its bytes (ref %q, %d bytes, err %v)", i+1, files[0].Ref, len(got), err)
		}
	}
	n := largest()
	t.Logf("largest message on the bus: %d bytes", n)
	if n > 1<<20 {
		t.Fatalf("largest message on the bus: %d bytes, want at most 1 MiB", n)
	}
}

// A PNG uploaded and sent by ref as a PDF fails the turn as inline data
// of the wrong type is refused: invalid_request naming the part's ref,
// and the model is not called.
func TestRefOfAnotherMediaTypeFailsTheTurn(t *testing.T) {
	e := newEnv(t)
	p := llmtest.NewScripted(llmtest.TextStep("It is a report."))
	e.scripted(p)
	e.startTurn(turn.Config{}) // provisions LLMW_MEDIA

	png := append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte{7}, 1000)...)
	ctx := natstest.Context(t)
	st, err := media.Open(ctx, e.js)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := st.Put(ctx, png, "image/png")
	if err != nil {
		t.Fatal(err)
	}
	id := newID("media-type")
	w := e.watch(id)
	msg := events.UserText("Summarise the attached report.")
	msg.Content = append(msg.Content, events.Part{Type: events.PartFile, MediaType: "application/pdf", Filename: "report.pdf", Ref: ref, Size: int64(len(png))})
	e.submit(events.TurnRequest{TurnID: id, Model: "test:m", Messages: []events.Message{msg}})
	end := w.waitEnd()
	got := decode[events.TurnEnded](t, end)
	if end.Type != events.TypeTurnFailed || got.Code != turn.CodeInvalidRequest {
		t.Fatalf("end %s %s, want turn.failed invalid_request", end.Type, end.Data)
	}
	for _, want := range []string{"messages[0].content[1].ref", "holds image/png, not application/pdf"} {
		if !strings.Contains(got.Reason, want) {
			t.Errorf("reason %q does not say %q", got.Reason, want)
		}
	}
	if n := len(p.Requests()); n != 0 {
		t.Fatalf("the model was called %d times", n)
	}
}

// An image sent inline above events.InlineMediaLimit is moved to the
// media store when the turn starts: the model calls the turn sends (and
// its checkpoints) carry its ref, ingest gives the model its bytes, and a
// small image stays inline.
func TestInlineImageAboveTheLimitIsStoredOnce(t *testing.T) {
	e := newEnv(t)
	p := llmtest.NewScripted(llmtest.TextStep("A red square."))
	e.scripted(p)
	e.startTurn(turn.Config{})
	calls := make(chan []byte, 4)
	spy := e.connect()
	if _, err := spy.Subscribe(e.subj.LLMComplete(), func(m *nats.Msg) { calls <- m.Data }); err != nil {
		t.Fatal(err)
	}
	if err := spy.Flush(); err != nil {
		t.Fatal(err)
	}

	png := append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte{7}, events.InlineMediaLimit+1)...)
	small := append([]byte("\x89PNG\r\n\x1a\n"), 1, 2, 3)
	id := newID("inline")
	w := e.watch(id)
	msg := events.UserText("What is on these?")
	msg.Content = append(msg.Content, events.ImagePart("image/png", png), events.ImagePart("image/png", small))
	e.submit(events.TurnRequest{TurnID: id, Model: "test:m", Messages: []events.Message{msg}})
	w.completed()

	files := filesOf(p.Requests()[0])
	if len(files) != 2 {
		t.Fatalf("%d image parts reached the model, want 2", len(files))
	}
	for i, want := range [][]byte{png, small} {
		if got, _ := files[i].Bytes(); !bytes.Equal(got, want) {
			t.Fatalf("image %d: %d bytes reached the model, want %d", i, len(got), len(want))
		}
	}
	// The ref, computed here from the bytes (sha256 as FIPS 180-4 defines
	// it, not media.Ref).
	sum := sha256.Sum256(png)
	wantRef := "sha256:" + hex.EncodeToString(sum[:])
	body := <-calls
	var req events.CompletionRequest
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatal(err)
	}
	sent := filesOf(req)
	if len(sent) != 2 || sent[0].Ref != wantRef || sent[0].Data != "" || sent[0].Size != int64(len(png)) || sent[1].Data == "" {
		t.Fatalf("the model call on the bus (%d bytes) does not carry the large image as ref %s and the small one inline: %+v", len(body), wantRef, sent)
	}
	if len(body) > 16<<10 {
		t.Fatalf("the model call on the bus is %d bytes", len(body))
	}
}

// A screenshot above events.InlineMediaLimit that a tool on toolexec
// returns is stored in LLMW_MEDIA by the host: llmw.tool.result and the
// transcript carry its ref, the next model call its bytes.
func TestLargeImageOfARemoteToolTravelsAsARef(t *testing.T) {
	e := newEnv(t)
	model := llmtest.NewScripted(
		llmtest.ToolStep(llmtest.ToolCallSpec{ID: "c1", Name: "screenshot", Input: `{}`}),
		llmtest.TextStep("A login form."),
	)
	e.scripted(model)
	shot := append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte{9}, 600<<10)...)
	e.startToolexec(toolexec.Config{}, tool.Must("screenshot", "Takes a screenshot.", func(context.Context, noArgs) (tool.Content, error) {
		return tool.Content{events.TextPart("the screen:"), events.ImagePart("image/png", shot)}, nil
	}))
	e.startTurn(turn.Config{})
	id := newID("shot")
	w := e.watch(id)
	e.submit(events.TurnRequest{TurnID: id, Model: "test:m", Messages: []events.Message{events.UserText("What is on my screen?")}, Tools: []string{"screenshot"}})
	done := w.completed()

	sum := sha256.Sum256(shot)
	wantRef := "sha256:" + hex.EncodeToString(sum[:])
	evs := w.events()
	i := find(evs, events.TypeToolResult)
	if i < 0 {
		t.Fatalf("no llmw.tool.result:%s", describe(evs))
	}
	if parts := decode[events.ToolCallResult](t, evs[i]).Parts; len(parts) != 2 || parts[1].Ref != wantRef || parts[1].Data != "" {
		t.Fatalf("llmw.tool.result's image is not the ref %s: %+v", wantRef, parts)
	}
	if _, results := toolUses(done.Messages); len(results["c1"].Parts) != 2 || results["c1"].Parts[1].Ref != wantRef {
		t.Fatalf("the transcript's tool_result does not keep the ref: %+v", results["c1"])
	}
	reqs := model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model calls, want 2", len(reqs))
	}
	got, _ := lastToolResult(t, reqs[1]).Parts[1].Bytes()
	if !bytes.Equal(got, shot) {
		t.Fatalf("the second model call got %d bytes of the screenshot, want %d", len(got), len(shot))
	}
}
