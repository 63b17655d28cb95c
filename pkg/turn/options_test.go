package turn_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/llm/llmtest"
	"github.com/llmworker/llmworker/pkg/mcp"
	"github.com/llmworker/llmworker/pkg/natstest"
	"github.com/llmworker/llmworker/pkg/tool"
	"github.com/llmworker/llmworker/pkg/toolexec"
	"github.com/llmworker/llmworker/pkg/turn"
)

// pngImage starts with the PNG signature (what part validation sniffs).
var pngImage = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89")

// lastToolResult is the tool_result part of the last message of a model
// request.
func lastToolResult(t *testing.T, req llm.Request) events.Part {
	t.Helper()
	if len(req.Messages) == 0 {
		t.Fatal("a request without messages")
	}
	m := req.Messages[len(req.Messages)-1]
	if m.Role != events.RoleTool || len(m.Content) != 1 || m.Content[0].Type != events.PartToolResult {
		t.Fatalf("last message %+v, want one tool_result", m)
	}
	return m.Content[0]
}

// An image a tool hosted on toolexec returns crosses NATS in
// llmw.tool.result and is in the tool_result of the next model call.
func TestImageOfARemoteToolReachesTheModel(t *testing.T) {
	e := newEnv(t)
	model := llmtest.NewScripted(
		llmtest.ToolStep(llmtest.ToolCallSpec{ID: "c1", Name: "screenshot", Input: `{}`}),
		llmtest.TextStep("A login form."),
	)
	e.scripted(model)
	e.startToolexec(toolexec.Config{}, tool.Must("screenshot", "Takes a screenshot.", func(context.Context, noArgs) (tool.Content, error) {
		return tool.Content{events.TextPart("the screen:"), events.ImagePart("image/png", pngImage)}, nil
	}))
	e.startTurn(turn.Config{})
	id := newID("image")
	w := e.watch(id)
	e.submit(events.TurnRequest{TurnID: id, Model: "test:m", Messages: []events.Message{events.UserText("What is on my screen?")}, Tools: []string{"screenshot"}})
	done := w.completed()

	want := []events.Part{events.TextPart("the screen:"), events.ImagePart("image/png", pngImage)}
	reqs := model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model calls, want 2", len(reqs))
	}
	if tr := lastToolResult(t, reqs[1]); tr.ToolUseID != "c1" || !reflect.DeepEqual(tr.Parts, want) {
		t.Fatalf("tool_result of the second call = %+v, want parts %+v", tr, want)
	}
	if _, results := toolUses(done.Messages); !reflect.DeepEqual(results["c1"].Parts, want) {
		t.Errorf("transcript tool_result = %+v", results["c1"])
	}
	evs := w.events()
	i := find(evs, events.TypeToolResult)
	if i < 0 || !reflect.DeepEqual(decode[events.ToolCallResult](t, evs[i]).Parts, want) {
		t.Errorf("llmw.tool.result has no image:%s", describe(evs))
	}
}

// An MCP server's ImageContent becomes an image part of the tool result
// the model reads, not a text placeholder.
func TestImageOfAnMCPToolReachesTheModel(t *testing.T) {
	s := sdk.NewServer(&sdk.Implementation{Name: "browser", Version: "1"}, nil)
	sdk.AddTool(s, &sdk.Tool{Name: "screenshot", Description: "Takes a screenshot."}, func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{
			&sdk.TextContent{Text: "the page:"},
			&sdk.ImageContent{MIMEType: "image/png", Data: pngImage},
		}}, nil, nil
	})
	srv := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil))
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	host, err := mcp.Connect(ctx, []mcp.ServerConfig{{Name: "browser", URL: srv.URL}}, mcp.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = host.Close() })

	e := newEnv(t)
	model := llmtest.NewScripted(
		llmtest.ToolStep(llmtest.ToolCallSpec{ID: "c1", Name: "mcp__browser__screenshot", Input: `{}`}),
		llmtest.TextStep("A page."),
	)
	e.scripted(model)
	e.startToolexec(toolexec.Config{}, host.Tools()...)
	e.startTurn(turn.Config{})
	id := newID("mcp-image")
	w := e.watch(id)
	e.submit(events.TurnRequest{TurnID: id, Model: "test:m", Messages: []events.Message{events.UserText("Look at the page")}, Tools: []string{"mcp__browser__screenshot"}})
	w.completed()
	want := []events.Part{events.TextPart("the page:"), events.ImagePart("image/png", pngImage)}
	if tr := lastToolResult(t, model.Requests()[1]); !reflect.DeepEqual(tr.Parts, want) {
		t.Fatalf("tool_result of the second call = %+v, want parts %+v", tr, want)
	}
}

// The turn request's model options reach every model call, also those a
// second replica makes after the first one died mid-turn: they are kept in
// the turn's state. The forced tool of the first call is not forced again,
// and the structured answer is checked and published.
func TestModelOptionsSurviveAReplicaCrash(t *testing.T) {
	e := newEnv(t)
	model := llmtest.NewScripted(
		llmtest.ToolStep(llmtest.ToolCallSpec{ID: "s1", Name: "slow", Input: `{}`}),
		llmtest.TextStep(`{"answer":"done"}`),
	)
	e.scripted(model)
	var runs atomic.Int64
	release := make(chan struct{})
	e.startToolexec(toolexec.Config{}, countingTool("slow", &runs, release))

	ncA := e.connect()
	a, err := turn.New(ncA, turn.Config{Instance: "a", Logger: quietLogger(), AckWait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	format := &events.ResponseFormat{Type: events.FormatJSONSchema, Name: "result",
		Schema: json.RawMessage(`{"type":"object","properties":{"answer":{"type":"string"}},"required":["answer"]}`)}
	id := newID("options")
	w := e.watch(id)
	e.submit(events.TurnRequest{TurnID: id, Model: "test:m", Messages: []events.Message{events.UserText("go")}, Tools: []string{"slow"},
		ModelOptions: events.ModelOptions{ResponseFormat: format, Stop: []string{"STOP"}, Seed: ptr(int64(42)), ToolChoice: events.ForceTool("slow")}})
	natstest.Eventually(t, "slow to run", func() bool { return runs.Load() == 1 })
	ncA.Close() // the replica is gone mid-turn

	e.startTurn(turn.Config{Instance: "b", AckWait: time.Second})
	w.waitFor("b to take over", func(evs []ev) bool { return count(evs, events.TypeTurnStarted) == 2 })
	close(release)
	done := w.completed()
	if string(done.Output) != `{"answer":"done"}` {
		t.Errorf("output %s, want the answer", done.Output)
	}
	reqs := model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model calls, want 2", len(reqs))
	}
	for i, req := range reqs {
		if !reflect.DeepEqual(req.ResponseFormat, format) || !reflect.DeepEqual(req.Stop, []string{"STOP"}) || req.Seed == nil || *req.Seed != 42 {
			t.Errorf("call %d: response_format %+v stop %v seed %v, want the request's", i+1, req.ResponseFormat, req.Stop, req.Seed)
		}
		if req.CacheKey != id {
			t.Errorf("call %d: cache key %q, want the turn id (no session)", i+1, req.CacheKey)
		}
	}
	if c := reqs[0].ToolChoice; c == nil || c.Mode != events.ToolNamed || c.Name != "slow" {
		t.Errorf("first call tool_choice %+v, want the forced tool", c)
	}
	if reqs[1].ToolChoice != nil {
		t.Errorf("second call (replica b) tool_choice %+v, want auto", reqs[1].ToolChoice)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_ = a.Stop(ctx)
}

func ptr[T any](v T) *T { return &v }

// A session's turns share the session id as their prompt cache key.
func TestCacheKeyIsTheSession(t *testing.T) {
	e := newEnv(t)
	model := llmtest.NewScripted(llmtest.TextStep("hi"))
	e.scripted(model)
	e.startTurn(turn.Config{})
	id := newID("cache")
	w := e.watch(id)
	e.submit(events.TurnRequest{TurnID: id, SessionID: "sess-cache", Model: "test:m", Messages: []events.Message{events.UserText("hi")}})
	w.completed()
	if got := model.Requests()[0].CacheKey; got != "sess-cache" {
		t.Fatalf("cache key %q, want the session id", got)
	}
}

// A tool_choice naming a tool the turn does not offer fails the turn as
// an invalid request, naming the field.
func TestToolChoiceOfAToolNotOffered(t *testing.T) {
	e := newEnv(t)
	e.scripted(llmtest.NewScripted())
	e.startTurn(turn.Config{})
	id := newID("choice")
	w := e.watch(id)
	e.submit(events.TurnRequest{TurnID: id, Model: "test:m", Messages: []events.Message{events.UserText("hi")}, Tools: []string{},
		ModelOptions: events.ModelOptions{ToolChoice: events.ForceTool("send_mail")}})
	end := w.waitEnd()
	f := decode[events.TurnEnded](t, end)
	if end.Type != events.TypeTurnFailed || f.Code != turn.CodeInvalidRequest || !strings.Contains(f.Reason, "tool_choice.name") {
		t.Fatalf("end %s %+v, want failed invalid_request naming tool_choice.name", end.Type, f)
	}
}

// An answer that does not fit the response format after the repair
// step fails the turn with invalid_output.
func TestInvalidOutputFailsTheTurn(t *testing.T) {
	e := newEnv(t)
	model := llmtest.NewScripted(llmtest.TextStep(`{"a":1}`), llmtest.TextStep(`still {"a":1}`))
	e.scripted(model)
	e.startTurn(turn.Config{})
	id := newID("invalid-output")
	w := e.watch(id)
	e.submit(events.TurnRequest{TurnID: id, Model: "test:m", Messages: []events.Message{events.UserText("JSON")},
		ModelOptions: events.ModelOptions{ResponseFormat: &events.ResponseFormat{Type: events.FormatJSONSchema,
			Schema: json.RawMessage(`{"type":"object","required":["b"]}`)}}})
	end := w.waitEnd()
	f := decode[events.TurnEnded](t, end)
	if end.Type != events.TypeTurnFailed || f.Code != "invalid_output" || model.Calls() != 2 {
		t.Fatalf("end %s %+v after %d calls, want failed invalid_output after 2", end.Type, f, model.Calls())
	}
}

// warningProvider wraps a provider whose streams report warnings.
type warningProvider struct {
	llm.Provider
	ws []events.Warning
}

func (p warningProvider) Stream(ctx context.Context, req *llm.Request) (llm.Stream, error) {
	s, err := p.Provider.Stream(ctx, req)
	if err != nil {
		return nil, err
	}
	return warningStream{s, p.ws}, nil
}

type warningStream struct {
	llm.Stream
	ws []events.Warning
}

func (s warningStream) Warnings() []events.Warning { return s.ws }

// A model call's warnings are published as llmw.turn.warning on the
// turn channel.
func TestTurnWarningIsPublished(t *testing.T) {
	e := newEnv(t)
	ws := []events.Warning{{Setting: "seed", Message: "anthropic has no seed; not sent"}}
	e.startTurn(turn.Config{Provider: warningProvider{llmtest.NewScripted(llmtest.TextStep("hi")), ws}})
	id := newID("warning")
	w := e.watch(id)
	e.submit(events.TurnRequest{TurnID: id, Model: "test:m", Messages: []events.Message{events.UserText("hi")},
		ModelOptions: events.ModelOptions{Seed: ptr(int64(1))}})
	w.completed()
	evs := w.events()
	i := find(evs, events.TypeTurnWarning)
	if i < 0 {
		t.Fatalf("no llmw.turn.warning:%s", describe(evs))
	}
	if !strings.HasSuffix(evs[i].Subject, ".turn") {
		t.Errorf("warning on %s, want the turn channel", evs[i].Subject)
	}
	got, err := events.DecodeWorkerEvent(evs[i].Type, evs[i].Data)
	if err != nil || !reflect.DeepEqual(got, events.TurnWarning{Step: 1, Model: "test:m", Warnings: ws}) {
		t.Fatalf("warning %+v (%v)", got, err)
	}
}

// "tools": [] offers no tools; omitted, the service's default patterns.
func TestEmptyToolsOfferNone(t *testing.T) {
	e := newEnv(t)
	model := llmtest.NewScripted(llmtest.TextStep("none"), llmtest.TextStep("default"))
	version := tool.Must("fixed_version", "the version", func(context.Context, struct{}) (string, error) { return "1.2.3", nil })
	e.startTurn(turn.Config{Provider: model, Tools: []tool.Tool{version}, DefaultTools: []string{"*"}})
	for _, tools := range [][]string{{}, nil} {
		id := newID("tools")
		w := e.watch(id)
		e.submit(events.TurnRequest{TurnID: id, Model: "test:m", Messages: []events.Message{events.UserText("hi")}, Tools: tools})
		w.completed()
	}
	reqs := model.Requests()
	if len(reqs) != 2 || len(reqs[0].Tools) != 0 || len(reqs[1].Tools) != 1 || reqs[1].Tools[0].Name != "fixed_version" {
		t.Fatalf("tools of the calls: %+v", reqs)
	}
}
