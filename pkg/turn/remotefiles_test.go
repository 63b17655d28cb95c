package turn_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"iter"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	spec "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/nats-io/nats.go"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/media"
	"github.com/llmworker/llmworker/pkg/natstest"
	"github.com/llmworker/llmworker/pkg/turn"
)

// onePixelPNG is a 1×1 PNG image (a well-known fixture).
const onePixelPNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="

func pngFixture(t *testing.T) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(onePixelPNG)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// artifactAgent is the executor of a remote A2A agent whose task
// answers with one artifact "report" holding parts, then completes;
// with release set, only once release is closed.
type artifactAgent struct {
	parts   func() spec.ContentParts
	release chan struct{}
	started chan struct{}
	once    sync.Once
}

func (a *artifactAgent) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[spec.Event, error] {
	return func(yield func(spec.Event, error) bool) {
		if !yield(spec.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		if !yield(spec.NewStatusUpdateEvent(ec, spec.TaskStateWorking, nil), nil) {
			return
		}
		if a.started != nil {
			a.once.Do(func() { close(a.started) })
		}
		if a.release != nil {
			select {
			case <-a.release:
			case <-ctx.Done():
				return
			}
		}
		ev := spec.NewArtifactEvent(ec, a.parts()...)
		ev.Artifact.Name = "report"
		ev.LastChunk = true
		if !yield(ev, nil) {
			return
		}
		yield(spec.NewStatusUpdateEvent(ec, spec.TaskStateCompleted, nil), nil)
	}
}

func (a *artifactAgent) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[spec.Event, error] {
	return func(yield func(spec.Event, error) bool) {
		yield(spec.NewStatusUpdateEvent(ec, spec.TaskStateCanceled, nil), nil)
	}
}

// reportParts are a text part, a PNG as bytes, a PDF by its URL and a
// data part.
func reportParts(png []byte) func() spec.ContentParts {
	return func() spec.ContentParts {
		img := spec.NewRawPart(png)
		img.MediaType, img.Filename = "image/png", "chart.png"
		doc := spec.NewFileURLPart("https://example.com/report.pdf", "application/pdf")
		doc.Filename = "report.pdf"
		return spec.ContentParts{spec.NewTextPart("Sales rose."), img, doc, spec.NewDataPart(map[string]any{"q1": 3, "q2": 5})}
	}
}

// sha256Ref is the LLMW_MEDIA ref of b: "sha256:" and its hex SHA-256
// (FIPS 180-4), computed here rather than by media.Ref.
func sha256Ref(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// wantReport is the parent's tool result of the artifact reportParts
// gives: its parts in order, the PNG's bytes in LLMW_MEDIA, the data's
// JSON as text.
func wantReport(png []byte) []events.Part {
	return []events.Part{
		events.TextPart("Sales rose."),
		{Type: events.PartImage, MediaType: "image/png", Ref: sha256Ref(png), Size: int64(len(png))},
		{Type: events.PartFile, MediaType: "application/pdf", Filename: "report.pdf", URL: "https://example.com/report.pdf"},
		events.TextPart(`{"q1":3,"q2":5}`),
	}
}

// checkReport checks that the parent's call result, the child's answer
// and the parent's next model request hold the artifact's parts, the
// PNG's bytes through LLMW_MEDIA.
func checkReport(t *testing.T, f *family, pw, cw *watcher, png []byte) {
	t.Helper()
	want := wantReport(png)
	r := toolResult(t, pw.events(), "call_1")
	if r.IsError || r.Content != `Sales rose.{"q1":3,"q2":5}` || !reflect.DeepEqual(r.Parts, want) {
		t.Fatalf("call result %q (error %v) parts %+v; want the artifact's parts %+v", r.Content, r.IsError, r.Parts, want)
	}
	cevs := cw.waitType(events.TypeTurnCompleted)
	c := decode[events.TurnCompleted](t, cevs[find(cevs, events.TypeTurnCompleted)])
	if last := c.Messages[len(c.Messages)-1]; last.Role != events.RoleAssistant || !reflect.DeepEqual(last.Content, want) {
		t.Fatalf("the child's answer %+v; want the artifact's parts %+v", last, want)
	}
	st, err := media.Open(natstest.Context(t), f.js)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := st.Get(natstest.Context(t), sha256Ref(png)); err != nil || !bytes.Equal(got, png) {
		t.Fatalf("LLMW_MEDIA holds %d bytes under the PNG's ref (%v); want the PNG", len(got), err)
	}
	reqs := f.parent.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model calls of the parent, want 2", len(reqs))
	}
	tr := lastToolResult(t, reqs[1])
	if len(tr.Parts) != len(want) {
		t.Fatalf("the next model call's tool_result %+v; want the artifact's %d parts", tr.Parts, len(want))
	}
	if got, err := tr.Parts[1].Bytes(); err != nil || tr.Parts[1].Ref != "" || !bytes.Equal(got, png) || tr.Parts[1].MediaType != "image/png" {
		t.Fatalf("the next model call's image %+v; want the PNG's bytes", tr.Parts[1])
	}
	if !reflect.DeepEqual([]events.Part{tr.Parts[0], tr.Parts[2], tr.Parts[3]}, []events.Part{want[0], want[2], want[3]}) {
		t.Fatalf("the next model call's tool_result %+v; want the text, the PDF's URL and the data %+v", tr.Parts, want)
	}
}

// A remote sub-agent whose artifact holds text, a PNG as bytes, a PDF
// by URL and data answers the parent's call as a tool with images and
// files would: the call's result holds them in order (the PNG stored in
// LLMW_MEDIA, the PDF a URL part, the data its JSON), and so does the
// parent's next model request, the PNG as its bytes.
func TestRemoteSubAgentArtifactFilesReachTheParent(t *testing.T) {
	png := pngFixture(t)
	for _, c := range []struct {
		name      string
		v03, poll bool
	}{{"1.0", false, false}, {"0.3", true, false}, {"1.0 polled", false, true}} {
		t.Run(c.name, func(t *testing.T) {
			a := &artifactAgent{parts: reportParts(png)}
			f := remoteFamily(t, serveRemote(t, a, c.v03, c.poll), startOne)
			id := newID("remote-files")
			pw, cw := f.watch(id), f.watch(turn.ChildTurnID(id, "call_1"))
			f.submit(events.TurnRequest{TurnID: id, Agent: "lead", Messages: []events.Message{events.UserText("chart the sales")}})
			pw.completed()
			checkReport(t, f, pw, cw, png)
		})
	}
}

// The replica running a remote child dies once it stored the files of
// the remote's answer and before it published the answer: the replica
// that takes the child over answers with every part of the artifact,
// and the PNG is in LLMW_MEDIA once, not written again.
func TestRemoteSubAgentArtifactFilesSurviveItsReplica(t *testing.T) {
	png := pngFixture(t)
	a := &artifactAgent{parts: reportParts(png)}
	var ncA *nats.Conn
	f := remoteFamily(t, serveRemote(t, a, false, false), func(f *family) {
		ncA = f.connect()
		svc, err := turn.New(ncA, turn.Config{Instance: "a", Logger: quietLogger(), AckWait: time.Second, RemoteAgents: a2aClient})
		if err != nil {
			t.Fatal(err)
		}
		if err := svc.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			_ = svc.Stop(ctx)
		})
	})
	id := newID("remote-files-dies")
	childID := turn.ChildTurnID(id, "call_1")
	ctx := natstest.Context(t)
	mediaMsgs := func() uint64 {
		s, err := f.js.Stream(ctx, "OBJ_"+events.BucketMedia)
		if err != nil {
			t.Error(err)
			return 0
		}
		info, err := s.Info(ctx)
		if err != nil {
			t.Error(err)
			return 0
		}
		return info.State.LastSeq
	}
	var once sync.Once
	stored := make(chan uint64, 1)
	turn.SetAfterRemoteFiles(t, func(turnID string) {
		if turnID == childID {
			once.Do(func() {
				stored <- mediaMsgs()
				ncA.Close() // replica a is gone: its answer is never published
			})
		}
	})
	pw, cw := f.watch(id), f.watch(childID)
	f.submit(events.TurnRequest{TurnID: id, Agent: "lead", Messages: []events.Message{events.UserText("chart the sales")}})
	before := <-stored
	if before == 0 {
		t.Fatal("replica a stored nothing in LLMW_MEDIA")
	}
	f.startTurn(turn.Config{Instance: "b", AckWait: time.Second, RemoteAgents: a2aClient})
	pw.completed()
	checkReport(t, f, pw, cw, png)
	if n := count(cw.events(), events.TypeTurnStarted); n != 2 {
		t.Fatalf("the child started %d times; want twice (a, then b)", n)
	}
	if after := mediaMsgs(); after != before {
		t.Fatalf("LLMW_MEDIA's stream is at sequence %d after b, %d after a; want the PNG written once", after, before)
	}
}

// Files a remote agent gives that cannot reach a model — a media type
// the models do not read, none, bytes that are not of their media type
// (what a 0.3 agent's base64 that does not decode becomes), a URL that
// is not https — are each a note in the call's result naming the file
// and what was wrong, in the file's place; the rest of the artifact
// reaches the parent, and the turn completes.
func TestRemoteSubAgentArtifactBadFilesAreNoted(t *testing.T) {
	png := pngFixture(t)
	parts := func() spec.ContentParts {
		tiff := spec.NewRawPart([]byte("II*\x00\x08\x00\x00\x00"))
		tiff.MediaType, tiff.Filename = "image/tiff", "scan.tiff"
		untyped := spec.NewRawPart([]byte("plain words"))
		untyped.Filename = "notes"
		fake := spec.NewRawPart([]byte("not a png at all"))
		fake.MediaType, fake.Filename = "image/png", "fake.png"
		plain := spec.NewFileURLPart("http://example.com/a.pdf", "application/pdf")
		sniffed := spec.NewRawPart(png) // no media type: the PNG signature names it
		return spec.ContentParts{spec.NewTextPart("Here."), tiff, untyped, fake, plain, sniffed}
	}
	a := &artifactAgent{parts: parts}
	f := remoteFamily(t, serveRemote(t, a, false, false), startOne)
	id := newID("remote-bad-files")
	pw := f.watch(id)
	f.submit(events.TurnRequest{TurnID: id, Agent: "lead", Messages: []events.Message{events.UserText("chart the sales")}})
	pw.completed()
	r := toolResult(t, pw.events(), "call_1")
	if r.IsError || len(r.Parts) != 2 || r.Parts[1].Type != events.PartImage || r.Parts[1].Ref != sha256Ref(png) || r.Parts[1].MediaType != "image/png" {
		t.Fatalf("call result %+v; want the notes as text, then the PNG", r)
	}
	text := r.Parts[0].Text
	for _, want := range []string{
		"Here.\n",
		`the file "scan.tiff" (image/tiff)`, "image/tiff is not a media type the models read",
		`the file "notes" of artifact`, "it has no media type",
		`the file "fake.png" (image/png)`, "its bytes hold text, not image/png",
		"the file http://example.com/a.pdf (application/pdf)", "is not an absolute https URL",
		"from the remote agent weather is left out",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the call's result text %q does not say %q", text, want)
		}
	}
}

// A file of the remote's answer that cannot be stored (here LLMW_MEDIA
// is gone) fails the child with internal, the reason naming the file
// and the store, and the parent's call gets the error: nothing of the
// answer is dropped in silence.
func TestRemoteSubAgentArtifactFileNotStoredFailsTheChild(t *testing.T) {
	png := pngFixture(t)
	a := &artifactAgent{parts: reportParts(png)}
	f := remoteFamily(t, serveRemote(t, a, false, false), startOne)
	if err := f.js.DeleteObjectStore(natstest.Context(t), events.BucketMedia); err != nil {
		t.Fatal(err)
	}
	id := newID("remote-files-nostore")
	pw, cw := f.watch(id), f.watch(turn.ChildTurnID(id, "call_1"))
	f.submit(events.TurnRequest{TurnID: id, Agent: "lead", Messages: []events.Message{events.UserText("chart the sales")}})
	end := cw.waitEnd()
	fl := decode[events.TurnEnded](t, end)
	if end.Type != events.TypeTurnFailed || fl.Code != turn.CodeInternal || !strings.Contains(fl.Reason, `"chart.png"`) || !strings.Contains(fl.Reason, events.BucketMedia) {
		t.Fatalf("child ended with %s %+v; want failed internal naming the file and %s", end.Type, fl, events.BucketMedia)
	}
	pw.completed()
	if r := toolResult(t, pw.events(), "call_1"); !r.IsError || !strings.Contains(r.Content, "chart.png") {
		t.Fatalf("call result %+v; want an error naming the file", r)
	}
}

// replacing has the responses of a handler carry to instead of from: a
// remote whose JSON-RPC answers differ from what a2a-go's server writes.
// Its client polls (no stream), so each answer is one Write.
func replacing(from, to string) func(http.Handler) http.Handler {
	return func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h.ServeHTTP(&replacer{ResponseWriter: w, from: []byte(from), to: []byte(to)}, r)
		})
	}
}

type replacer struct {
	http.ResponseWriter
	from, to []byte
}

func (r *replacer) WriteHeader(code int) {
	r.Header().Del("Content-Length")
	r.ResponseWriter.WriteHeader(code)
}

func (r *replacer) Write(b []byte) (int, error) {
	if _, err := r.ResponseWriter.Write(bytes.ReplaceAll(b, r.from, r.to)); err != nil {
		return 0, err
	}
	return len(b), nil
}

// A file whose bytes the remote sends as base64 that does not decode:
// a2a-go's 0.3 client hands the text on as the bytes, which are then not
// of the file's media type, a note in the answer; its 1.0 client cannot
// read the task, and the child fails provider_error naming the base64.
// Neither is dropped in silence.
func TestRemoteSubAgentArtifactUndecodableBytes(t *testing.T) {
	png := pngFixture(t)
	parts := func() spec.ContentParts {
		img := spec.NewRawPart(png)
		img.MediaType, img.Filename = "image/png", "chart.png"
		return spec.ContentParts{spec.NewTextPart("The chart:"), img}
	}
	corrupt := replacing(base64.StdEncoding.EncodeToString(png), "%%not base64%%")

	t.Run("0.3", func(t *testing.T) {
		f := remoteFamily(t, serveRemote(t, &artifactAgent{parts: parts}, true, true, corrupt), startOne)
		id := newID("remote-undecodable")
		pw := f.watch(id)
		f.submit(events.TurnRequest{TurnID: id, Agent: "lead", Messages: []events.Message{events.UserText("chart the sales")}})
		pw.completed()
		r := toolResult(t, pw.events(), "call_1")
		want := "The chart:\n[the file \"chart.png\" (image/png) of artifact "
		if r.IsError || len(r.Parts) != 0 || !strings.HasPrefix(r.Content, want) || !strings.Contains(r.Content, "its bytes hold text, not image/png]") {
			t.Fatalf("call result %+v; want the text and a note that the bytes are not a PNG", r)
		}
	})
	t.Run("1.0", func(t *testing.T) {
		f := remoteFamily(t, serveRemote(t, &artifactAgent{parts: parts}, false, true, corrupt), startOne)
		id := newID("remote-undecodable")
		pw, cw := f.watch(id), f.watch(turn.ChildTurnID(id, "call_1"))
		f.submit(events.TurnRequest{TurnID: id, Agent: "lead", Messages: []events.Message{events.UserText("chart the sales")}})
		end := cw.waitEnd()
		if fl := decode[events.TurnEnded](t, end); end.Type != events.TypeTurnFailed || fl.Code != "provider_error" || !strings.Contains(fl.Reason, "base64") {
			t.Fatalf("child ended with %s %+v; want failed provider_error naming the base64", end.Type, fl)
		}
		pw.completed()
		if r := toolResult(t, pw.events(), "call_1"); !r.IsError || !strings.Contains(r.Content, "base64") {
			t.Fatalf("call result %+v; want an error naming the base64", r)
		}
	})
}
