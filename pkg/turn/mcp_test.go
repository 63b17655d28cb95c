package turn_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/hook"
	"github.com/llmworker/llmworker/pkg/llm/llmtest"
	"github.com/llmworker/llmworker/pkg/mcp"
	"github.com/llmworker/llmworker/pkg/tool"
	"github.com/llmworker/llmworker/pkg/toolexec"
	"github.com/llmworker/llmworker/pkg/turn"
)

// A turn whose model calls the tools of an MCP server hosted on toolexec:
// the first call completes with the server's result, the second is
// skipped by a hook matching ^mcp__inventory__delete and never reaches
// the server.
func TestTurnCallsMCPServerTools(t *testing.T) {
	var deletes atomic.Int64
	s := sdk.NewServer(&sdk.Implementation{Name: "inventory", Version: "1"}, nil)
	sdk.AddTool(s, &sdk.Tool{Name: "count", Description: "Counts items in stock."}, func(ctx context.Context, _ *sdk.CallToolRequest, in struct {
		Item string `json:"item"`
	}) (*sdk.CallToolResult, struct {
		Item  string `json:"item"`
		Count int    `json:"count"`
	}, error) {
		out := struct {
			Item  string `json:"item"`
			Count int    `json:"count"`
		}{in.Item, 12}
		return nil, out, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "delete", Description: "Deletes an item."}, func(ctx context.Context, _ *sdk.CallToolRequest, in struct {
		Item string `json:"item"`
	}) (*sdk.CallToolResult, any, error) {
		deletes.Add(1)
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "deleted"}}}, nil, nil
	})
	srv := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil))
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	host, err := mcp.Connect(ctx, []mcp.ServerConfig{{Name: "inventory", URL: srv.URL}}, mcp.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = host.Close() })

	e := newEnv(t)
	e.scripted(llmtest.NewScripted(
		llmtest.ToolStep(
			llmtest.ToolCallSpec{ID: "call_1", Name: "mcp__inventory__count", Input: `{"item":"bolts"}`},
			llmtest.ToolCallSpec{ID: "call_2", Name: "mcp__inventory__delete", Input: `{"item":"bolts"}`},
		),
		llmtest.TextStep("12 bolts in stock."),
	))
	e.startToolexec(toolexec.Config{}, host.Tools()...)
	chain := &hook.Chain{}
	if err := chain.BeforeToolCall(hook.Func[hook.ToolCallInput, hook.BeforeToolCallResult](
		func(ctx context.Context, in *hook.ToolCallInput) (hook.BeforeToolCallResult, error) {
			return hook.BeforeToolCallResult{Action: hook.ToolSkip, Reason: "deleting is not allowed"}, nil
		}), hook.Options{Name: "no-deletes", Matcher: "^mcp__inventory__delete$"}); err != nil {
		t.Fatal(err)
	}
	e.startTurn(turn.Config{Hooks: chain})

	id := newID("mcp")
	w := e.watch(id)
	e.submit(events.TurnRequest{TurnID: id, Model: "test:m", Messages: []events.Message{events.UserText("How many bolts?")}, Tools: []string{"mcp__inventory__count", "mcp__inventory__delete"}})
	evs := w.waitType(events.TypeTurnCompleted)
	var results []events.ToolCallResult
	for _, ev := range evs {
		if ev.Type == events.TypeToolResult {
			results = append(results, decode[events.ToolCallResult](t, ev))
		}
	}
	if len(results) != 1 || results[0].CallID != "call_1" || results[0].IsError || results[0].Content != `{"count":12,"item":"bolts"}` {
		t.Fatalf("results %+v:%s", results, describe(evs))
	}
	if find(evs, events.TypeToolSkipped) < 0 || !strings.Contains(describe(evs), "deleting is not allowed") {
		t.Errorf("the delete was not skipped:%s", describe(evs))
	}
	if deletes.Load() != 0 {
		t.Error("the skipped call reached the server")
	}
}

// A remote tool's progress reports reach the turn's UI subscribers as
// llmw.tool.progress events, between the call's start and its result.
func TestRemoteToolProgressEvents(t *testing.T) {
	type args struct {
		Pages int `json:"pages"`
	}
	// The result waits until the first report is an event of the turn.
	reported := make(chan struct{})
	scan := tool.Must("scan", "Scans pages.", func(ctx context.Context, a args) (string, error) {
		for i := 1; i <= a.Pages; i++ {
			tool.ReportProgress(ctx, tool.Progress{Progress: float64(i), Total: float64(a.Pages), Message: "page"})
		}
		select {
		case <-reported:
		case <-ctx.Done():
		}
		return "scanned", nil
	})
	e := newEnv(t)
	e.scripted(llmtest.NewScripted(llmtest.ToolStep(llmtest.ToolCallSpec{ID: "call_1", Name: "scan", Input: `{"pages":3}`}), llmtest.TextStep("done")))
	e.startToolexec(toolexec.Config{}, scan)
	e.startTurn(turn.Config{})
	id := newID("progress")
	var once sync.Once
	sub, err := e.nc.Subscribe(e.subj.EventsOfTurn(id), func(m *nats.Msg) {
		if m.Header.Get(events.HeaderType) == events.TypeToolProgress {
			once.Do(func() { close(reported) })
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	w := e.watch(id)
	e.submit(events.TurnRequest{TurnID: id, Model: "test:m", Messages: []events.Message{events.UserText("scan")}, Tools: []string{"scan"}})
	evs := w.waitType(events.TypeTurnCompleted)
	checkSeq(t, evs)
	started, progress, result := find(evs, events.TypeToolStarted), find(evs, events.TypeToolProgress), find(evs, events.TypeToolResult)
	if !(started >= 0 && started < progress && progress < result) {
		t.Fatalf("started %d, progress %d, result %d:%s", started, progress, result, describe(evs))
	}
	if p := decode[events.ToolProgress](t, evs[progress]); p.CallID != "call_1" || p.Name != "scan" || p.Progress != 1 || p.Total != 3 {
		t.Errorf("first progress %+v", p)
	}
	if n := count(evs, events.TypeToolProgress); n != 2 {
		t.Errorf("%d progress events, want the first and the final of the burst:%s", n, describe(evs))
	}
	if !strings.HasSuffix(w.events()[progress].Subject, ".tool") {
		t.Errorf("progress on %s, want the tool channel", w.events()[progress].Subject)
	}
}

// A slow MCP tool's notifications/progress reach the turn's UI as
// llmw.tool.progress events in order, and a cancel of the turn (what
// `llmworker turn cancel` publishes) reaches the server as the
// cancellation of its request.
func TestMCPToolProgressAndTurnCancel(t *testing.T) {
	cancelled := make(chan struct{}, 1)
	s := sdk.NewServer(&sdk.Implementation{Name: "scanner", Version: "1"}, nil)
	sdk.AddTool(s, &sdk.Tool{Name: "scan", Description: "Scans until stopped."}, func(ctx context.Context, req *sdk.CallToolRequest, in struct {
		Pages int `json:"pages"`
	}) (*sdk.CallToolResult, any, error) {
		for i := 1; i <= in.Pages; i++ {
			_ = req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{
				ProgressToken: req.Params.GetProgressToken(), Progress: float64(i), Total: float64(in.Pages), Message: "page"})
			time.Sleep(250 * time.Millisecond) // > the 200 ms throttle: every report passes
		}
		<-ctx.Done()
		cancelled <- struct{}{}
		return nil, nil, ctx.Err()
	})
	srv := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil))
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	host, err := mcp.Connect(ctx, []mcp.ServerConfig{{Name: "scanner", URL: srv.URL}}, mcp.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = host.Close() })

	e := newEnv(t)
	e.scripted(llmtest.NewScripted(llmtest.ToolStep(llmtest.ToolCallSpec{ID: "call_1", Name: "mcp__scanner__scan", Input: `{"pages":3}`}), llmtest.TextStep("never")))
	e.startToolexec(toolexec.Config{}, host.Tools()...)
	e.startTurn(turn.Config{})
	id := newID("mcpcancel")
	w := e.watch(id)
	e.submit(events.TurnRequest{TurnID: id, Model: "test:m", Messages: []events.Message{events.UserText("scan")}, Tools: []string{"mcp__scanner__scan"}})
	evs := w.waitFor("three progress events", func(evs []ev) bool { return count(evs, events.TypeToolProgress) >= 3 })
	var got []float64
	for _, ev := range evs {
		if ev.Type == events.TypeToolProgress {
			p := decode[events.ToolProgress](t, ev)
			if p.CallID != "call_1" || p.Total != 3 {
				t.Errorf("progress %+v", p)
			}
			got = append(got, p.Progress)
		}
	}
	if len(got) != 3 || got[0] != 1 || got[1] != 2 || got[2] != 3 {
		t.Fatalf("progress %v, want 1 2 3 in order:%s", got, describe(evs))
	}
	e.cancelTurn(id)
	select {
	case <-cancelled:
	case <-time.After(15 * time.Second):
		t.Fatal("the MCP server never saw the turn's cancel")
	}
	if end := w.waitEnd(); end.Type != events.TypeTurnAborted {
		t.Fatalf("turn ended with %s, want aborted", end.Type)
	}
}
