package remote_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"iter"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	spec "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"go.uber.org/goleak"

	"github.com/llmworker/llmworker/pkg/a2a/remote"
	"github.com/llmworker/llmworker/pkg/turn"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echo answers a message with one artifact holding its text.
type echo struct{}

func (echo) Execute(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[spec.Event, error] {
	return func(yield func(spec.Event, error) bool) {
		if !yield(spec.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		a := spec.NewArtifactEvent(ec, spec.NewTextPart("echo: "+ec.Message.Parts[0].Text()))
		a.LastChunk = true
		if !yield(a, nil) {
			return
		}
		yield(spec.NewStatusUpdateEvent(ec, spec.TaskStateCompleted, nil), nil)
	}
}

func (echo) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[spec.Event, error] {
	return func(yield func(spec.Event, error) bool) {
		yield(spec.NewStatusUpdateEvent(ec, spec.TaskStateCanceled, nil), nil)
	}
}

// authSeen records the Authorization header of each request a handler
// gets.
type authSeen struct {
	mu   sync.Mutex
	seen []string
}

func (a *authSeen) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.seen = append(a.seen, r.Header.Get("Authorization"))
		a.mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

func (a *authSeen) all() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.seen...)
}

// The token goes to the host of the agent's URL (the card's) and to no
// other: a card whose interface is on another host gets its calls
// without it.
func TestTokenOnlyToTheAgentsHost(t *testing.T) {
	var cardAuth, otherAuth authSeen
	other := httptest.NewServer(otherAuth.wrap(a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(echo{}))))
	defer other.Close()
	card := &spec.AgentCard{Name: "echo", Version: "1", SupportedInterfaces: []*spec.AgentInterface{spec.NewAgentInterface(other.URL, spec.TransportProtocolJSONRPC)}}
	mux := http.NewServeMux()
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(card))
	home := httptest.NewServer(cardAuth.wrap(mux))
	defer home.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a, err := remote.Open(ctx, home.URL, remote.Config{Token: "s3cret-token", PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = a.Close() }()
	task, err := a.Send(ctx, "m-1", "hi")
	if err != nil {
		t.Fatal(err)
	}
	done, err := a.Follow(ctx, task.ID, func(remote.Update) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if done.State != remote.StateCompleted || done.Answer() != "echo: hi" {
		t.Fatalf("task %+v; want completed with the echo", done)
	}
	if got := cardAuth.all(); len(got) != 1 || got[0] != "Bearer s3cret-token" {
		t.Fatalf("the card's host got Authorization %q; want the token once (the card)", got)
	}
	for _, h := range otherAuth.all() {
		if h != "" {
			t.Fatalf("another host got Authorization %q; want none", h)
		}
	}
	if len(otherAuth.all()) == 0 {
		t.Fatal("the interface's host got no request")
	}
}

// Open refuses what is not an absolute http(s) URL and a card that
// cannot be fetched, naming the URL.
func TestOpenErrors(t *testing.T) {
	ctx := context.Background()
	for _, u := range []string{"ftp://x/y", "/relative", "http://"} {
		if _, err := remote.Open(ctx, u, remote.Config{}); err == nil {
			t.Errorf("Open(%q) = nil error", u)
		}
	}
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	_, err := remote.Open(ctx, srv.URL, remote.Config{})
	if err == nil || !errors.Is(err, remote.ErrCard) {
		t.Fatalf("Open of a URL without a card: %v; want ErrCard", err)
	}
}

func TestTokenEnv(t *testing.T) {
	if got := remote.TokenEnv("researcher-2"); got != "LLMW_A2A_TOKEN_RESEARCHER_2" {
		t.Fatalf("TokenEnv = %q", got)
	}
	t.Setenv("LLMW_A2A_TOKEN_WEATHER", "tok")
	if remote.TokenFor("weather") != "tok" {
		t.Fatal("TokenFor does not read the variable")
	}
}

// onePixelPNG is a 1×1 PNG image (a well-known fixture).
const onePixelPNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="

// charts answers a message with one artifact "report" that holds a
// text part, a PNG file as bytes, a PDF file by URL and a data part.
type charts struct{}

func chartParts() spec.ContentParts {
	png, _ := base64.StdEncoding.DecodeString(onePixelPNG)
	img := spec.NewRawPart(png)
	img.MediaType, img.Filename = "image/png", "chart.png"
	doc := spec.NewFileURLPart("https://example.com/report.pdf", "application/pdf")
	doc.Filename = "report.pdf"
	return spec.ContentParts{spec.NewTextPart("Sales rose."), img, doc, spec.NewDataPart(map[string]any{"q1": 3, "q2": 5})}
}

func (charts) Execute(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[spec.Event, error] {
	return func(yield func(spec.Event, error) bool) {
		if !yield(spec.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		a := spec.NewArtifactEvent(ec, chartParts()...)
		a.Artifact.Name = "report"
		a.LastChunk = true
		if !yield(a, nil) {
			return
		}
		yield(spec.NewStatusUpdateEvent(ec, spec.TaskStateCompleted, nil), nil)
	}
}

func (charts) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[spec.Event, error] {
	return func(yield func(spec.Event, error) bool) {
		yield(spec.NewStatusUpdateEvent(ec, spec.TaskStateCanceled, nil), nil)
	}
}

// serve serves exec on an httptest server over JSON-RPC with a streaming
// card: protocol 1.0, or with v03 the 0.3 binding and a card in the 0.3
// form alone (the A2A 0.3 specification's AgentCard). It returns the
// agent's URL.
func serve(t *testing.T, exec a2asrv.AgentExecutor, v03 bool) string {
	t.Helper()
	h := a2asrv.NewHandler(exec)
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	if v03 {
		mux.Handle("/a2a", a2av0.NewJSONRPCHandler(h))
		mux.HandleFunc(a2asrv.WellKnownAgentCardPath, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"protocolVersion": "0.3.0", "name": "charts", "description": "Draws charts.", "version": "1",
				"url": "` + srv.URL + `/a2a", "preferredTransport": "JSONRPC", "capabilities": {"streaming": true},
				"defaultInputModes": ["text"], "defaultOutputModes": ["text"], "skills": []}`))
		})
		return srv.URL
	}
	card := &spec.AgentCard{Name: "charts", Version: "1", Capabilities: spec.AgentCapabilities{Streaming: true},
		SupportedInterfaces: []*spec.AgentInterface{spec.NewAgentInterface(srv.URL+"/a2a", spec.TransportProtocolJSONRPC)}}
	mux.Handle("/a2a", a2asrv.NewJSONRPCHandler(h))
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(card))
	return srv.URL
}

// An artifact's parts reach the turn as they are, besides its text:
// text, a file's bytes with its media type and name, a file's URL, and
// a data part's JSON — over protocol 1.0 and 0.3 alike.
func TestArtifactPartsBesidesItsText(t *testing.T) {
	png, _ := base64.StdEncoding.DecodeString(onePixelPNG)
	want := []turn.RemotePart{
		{Kind: turn.RemoteTextPart, Text: "Sales rose."},
		{Kind: turn.RemoteFilePart, Raw: png, MediaType: "image/png", Name: "chart.png"},
		{Kind: turn.RemoteFilePart, URL: "https://example.com/report.pdf", MediaType: "application/pdf", Name: "report.pdf"},
		{Kind: turn.RemoteDataPart, Data: json.RawMessage(`{"q1":3,"q2":5}`)},
	}
	for _, v03 := range []bool{false, true} {
		t.Run(map[bool]string{false: "1.0", true: "0.3"}[v03], func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			a, err := remote.Open(ctx, serve(t, charts{}, v03), remote.Config{})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = a.Close() }()
			task, err := a.Send(ctx, "m-1", "chart the sales")
			if err != nil {
				t.Fatal(err)
			}
			var text strings.Builder
			done, err := a.Follow(ctx, task.ID, func(u remote.Update) error {
				if u.Artifact != nil {
					text.WriteString(u.Artifact.Text)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if text.String() != `Sales rose.{"q1":3,"q2":5}` {
				t.Errorf("the updates' text %q; want the text part and the data's JSON", text.String())
			}
			if len(done.Artifacts) != 1 {
				t.Fatalf("task %+v; want one artifact", done)
			}
			art := done.Artifacts[0]
			if art.Name != "report" || art.Text != `Sales rose.{"q1":3,"q2":5}` {
				t.Errorf("artifact %q text %q; want report with the text part and the data's JSON", art.Name, art.Text)
			}
			if len(art.Parts) != len(want) {
				t.Fatalf("artifact parts %+v; want %+v", art.Parts, want)
			}
			for i := range want {
				g, w := art.Parts[i], want[i]
				if g.Kind != w.Kind || g.Text != w.Text || !bytes.Equal(g.Raw, w.Raw) || g.URL != w.URL || g.MediaType != w.MediaType || g.Name != w.Name || !jsonEqual(g.Data, w.Data) {
					t.Errorf("part %d = %+v; want %+v", i, g, w)
				}
			}
		})
	}
}

func jsonEqual(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

// chartsMessage answers with a message, not a task, holding the parts
// of charts' artifact.
type chartsMessage struct{ charts }

func (chartsMessage) Execute(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[spec.Event, error] {
	return func(yield func(spec.Event, error) bool) {
		yield(spec.NewMessageForTask(spec.MessageRoleAgent, ec, chartParts()...), nil)
	}
}

// An agent that answers with a message gives a completed task whose one
// artifact holds the message's parts.
func TestMessageAnswerParts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a, err := remote.Open(ctx, serve(t, chartsMessage{}, false), remote.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = a.Close() }()
	task, err := a.Send(ctx, "m-1", "chart the sales")
	if err != nil {
		t.Fatal(err)
	}
	if task.ID != "" || task.State != remote.StateCompleted || len(task.Artifacts) != 1 {
		t.Fatalf("task %+v; want a completed one without id, the message its artifact", task)
	}
	got := task.Artifacts[0].Parts
	if len(got) != 4 || got[1].Kind != turn.RemoteFilePart || got[1].MediaType != "image/png" || got[1].Name != "chart.png" ||
		!bytes.HasPrefix(got[1].Raw, []byte("\x89PNG")) || got[2].URL != "https://example.com/report.pdf" || got[3].Kind != turn.RemoteDataPart {
		t.Fatalf("the message's parts %+v; want text, the PNG, the PDF's URL and the data", got)
	}
}
