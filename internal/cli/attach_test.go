package cli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/ingest"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/llm/llmtest"
)

// startScripted runs a stack whose ingest answers the models
// "script:<any>" with script.
func startScripted(t *testing.T, script *llmtest.Scripted) *Stack {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := StartStack(ctx, StackConfig{Getenv: envOf(), Services: []string{SvcTurn}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := st.Stop(ctx); err != nil {
			t.Error(err)
		}
	})
	ing, err := ingest.New(st.NC, ingest.Config{
		Prefix: st.Prefix, Logger: slog.New(slog.DiscardHandler),
		Providers: map[string]ingest.Factory{"script": func(string) (llm.Provider, error) { return script, nil }},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := ing.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = ing.Stop(ctx)
	})
	return st
}

func writeFile(t *testing.T, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func pngOf(t *testing.T, w, h int) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, color.RGBA{uint8(x), uint8(y), 99, 255})
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// turn submit --attach sends a small image inline and uploads a PDF larger
// than the server's max payload (8 MiB here) to LLMW_MEDIA: the model gets
// both with their bytes, and --schema asks for JSON fitting the file's
// schema, named after it. --json asks for any JSON; chat --attach sends
// its files with the first message.
func TestAttachAndSchema(t *testing.T) {
	script := llmtest.NewScripted()
	script.SetFallback(llmtest.TextStep(`{"answer":"a chart"}`))
	st := startScripted(t, script)
	env := Env{Getenv: envOf("NATS_URL", st.URL)}
	dir := t.TempDir()
	shot := pngOf(t, 40, 30)
	pdf := append([]byte("%PDF-1.7\n"), bytes.Repeat([]byte("0123456789abcdef"), 9<<16)...) // 9 MiB
	schema := `{"type":"object","properties":{"answer":{"type":"string"}},"required":["answer"]}`
	shotPath, pdfPath := writeFile(t, dir, "screenshot.png", shot), writeFile(t, dir, "report.pdf", pdf)
	schemaPath := writeFile(t, dir, "answer.schema.json", []byte(schema))

	// The turn requests as published.
	subs, err := st.NC.SubscribeSync(events.NewSubjects(st.Prefix).TurnSubmit())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = subs.Unsubscribe() }()
	published := func() (events.TurnRequest, int) {
		t.Helper()
		m, err := subs.NextMsg(10 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		req, err := events.Decode[events.TurnRequest](m.Data)
		if err != nil {
			t.Fatal(err)
		}
		return req, len(m.Data)
	}

	r := runCLI(t, env, "turn", "submit", "--model", "script:any", "--tools", "none", "--prompt", "What is on this screenshot?",
		"--attach", shotPath, "--attach", pdfPath, "--schema", schemaPath, "--follow")
	if r.code != 0 || !strings.Contains(r.stdout, "✓ completed") {
		t.Fatalf("exit %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
	bytesOf := func(p events.Part) []byte {
		b, err := p.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	reqs := script.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d model calls, want 1", len(reqs))
	}
	c := reqs[0].Messages[len(reqs[0].Messages)-1].Content
	if len(c) != 3 {
		t.Fatalf("the user message has %d parts, want the image, the PDF and the text", len(c))
	}
	if c[0].Type != events.PartImage || c[0].MediaType != "image/png" || !bytes.Equal(bytesOf(c[0]), shot) {
		t.Errorf("image part: %s %s, %d bytes, want the PNG's %d", c[0].Type, c[0].MediaType, len(bytesOf(c[0])), len(shot))
	}
	if c[1].Type != events.PartFile || c[1].MediaType != "application/pdf" || c[1].Filename != "report.pdf" || !bytes.Equal(bytesOf(c[1]), pdf) {
		t.Errorf("file part: %s %s %q, %d bytes, want the PDF's %d", c[1].Type, c[1].MediaType, c[1].Filename, len(bytesOf(c[1])), len(pdf))
	}
	if c[2].Text != "What is on this screenshot?" {
		t.Errorf("text part %+v", c[2])
	}
	// The request as published: the schema, the image inline, the PDF
	// as the ref of its upload, and small.
	tr, size := published()
	rf := tr.ResponseFormat
	if rf == nil || rf.Type != events.FormatJSONSchema || rf.Name != "answer" || !jsonSame(rf.Schema, []byte(schema)) {
		t.Fatalf("response_format %+v, want json_schema \"answer\" with the file's schema", rf)
	}
	if mf := reqs[0].ResponseFormat; mf != nil && (mf.Name != "answer" || !jsonSame(mf.Schema, []byte(schema))) {
		t.Errorf("the model's response_format %+v", mf)
	}
	sum := sha256.Sum256(pdf)
	tc := tr.Messages[len(tr.Messages)-1].Content
	if len(tc) != 3 || tc[1].Ref != "sha256:"+hex.EncodeToString(sum[:]) || tc[1].Size != int64(len(pdf)) || tc[1].Data != "" || tc[0].Data == "" {
		t.Errorf("the published request's parts %+v; want the image inline and the PDF's sha256 ref and size", tc)
	}
	if size > 64<<10 {
		t.Errorf("the published turn request has %d bytes: the PDF rode in it", size)
	}

	// --json, and a text file attached.
	notes := writeFile(t, dir, "notes.md", []byte("# Notes\n\n- one\n"))
	r = runCLI(t, env, "turn", "submit", "--model", "script:any", "--tools", "none", "--prompt", "Summarise", "--attach", notes, "--json", "--follow")
	if r.code != 0 {
		t.Fatalf("--json: exit %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
	if tr, _ := published(); tr.ResponseFormat == nil || tr.ResponseFormat.Type != events.FormatJSON || len(tr.ResponseFormat.Schema) != 0 {
		t.Errorf("--json: response_format %+v", tr.ResponseFormat)
	}
	reqs = script.Requests()
	last := reqs[len(reqs)-1]
	c = last.Messages[len(last.Messages)-1].Content
	if len(c) != 2 || c[0].Type != events.PartFile || c[0].MediaType != "text/markdown" || c[0].Filename != "notes.md" || string(bytesOf(c[0])) != "# Notes\n\n- one\n" {
		t.Errorf("--attach notes.md: %+v", c)
	}

	// chat --attach: the first message has the file.
	r = runCLI(t, env, "chat", "--model", "script:any", "--tools", "", "--attach", shotPath, "What is this?")
	if r.code != 0 {
		t.Fatalf("chat: exit %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
	reqs = script.Requests()
	last = reqs[len(reqs)-1]
	c = last.Messages[len(last.Messages)-1].Content
	if len(c) != 2 || c[0].Type != events.PartImage || !bytes.Equal(bytesOf(c[0]), shot) || c[1].Text != "What is this?" {
		t.Errorf("chat --attach: %d parts", len(c))
	}
}

func jsonSame(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

// Files --attach cannot send, and bad --schema files, are refused before
// anything is submitted, naming the file and what is wrong.
func TestAttachRefusals(t *testing.T) {
	dir := t.TempDir()
	text := writeFile(t, dir, "fake.png", []byte("not a picture"))
	zip := writeFile(t, dir, "archive.bin", []byte("PK\x03\x04\x14\x00\x00\x00\x08\x00"))
	empty := writeFile(t, dir, "empty.pdf", nil)
	list := writeFile(t, dir, "list.json", []byte(`[1,2]`))
	schema := writeFile(t, dir, "s.json", []byte(`{"type":"object"}`))
	missing := filepath.Join(dir, "nope.png")
	env := Env{Getenv: envOf("NATS_URL", "nats://127.0.0.1:1")}
	submit := []string{"turn", "submit", "--model", "script:any", "--prompt", "hi"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{append(submit, "--attach", missing), "--attach " + missing + ": open"},
		{append(submit, "--attach", text), "--attach " + text + " (image/png): holds text, not image/png"},
		{append(submit, "--attach", zip), "--attach " + zip + ": application/zip is not a type a model is sent"},
		{append(submit, "--attach", empty), "the file is empty"},
		{append(submit, "--schema", list), "--schema " + list + ": not a JSON Schema object"},
		{append(submit, "--schema", schema, "--json"), "pick one"},
		{[]string{"chat", "--model", "script:any", "--attach", text, "hi"}, "holds text, not image/png"},
	} {
		r := runCLI(t, env, c.args...)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args[len(c.args)-2:], r.code, r.stderr, c.want)
		}
	}
}

// A completed turn's structured output is printed, indented, before the
// completion line.
func TestRendererShowsOutput(t *testing.T) {
	var b strings.Builder
	r := NewRenderer(&b, false)
	e, err := events.NewEnvelope("/t", events.TypeTurnCompleted, events.TurnCompleted{StopReason: events.StopEndTurn, Output: json.RawMessage(`{"answer":"a chart","n":[1,2]}`)})
	if err != nil {
		t.Fatal(err)
	}
	e.TurnID = "t1"
	got, err := r.Render(e)
	if err != nil || got.State != StateCompleted {
		t.Fatalf("%+v %v", got, err)
	}
	want := "output: {\n  \"answer\": \"a chart\",\n  \"n\": [\n    1,\n    2\n  ]\n}\n✓ completed\n"
	if b.String() != want {
		t.Errorf("rendered %q, want %q", b.String(), want)
	}
}
