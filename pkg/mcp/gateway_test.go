package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/trace"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/hook/hooknats"
	"github.com/llmworker/llmworker/pkg/mcp"
	"github.com/llmworker/llmworker/pkg/natstest"
	"github.com/llmworker/llmworker/pkg/provision"
	"github.com/llmworker/llmworker/pkg/tool"
	"github.com/llmworker/llmworker/pkg/toolexec"
)

type keyIn struct {
	Key string `json:"key" jsonschema:"the key to look up"`
}

// gatewayWorld is an installation: NATS, a toolexec replica with Go
// tools, remote hooks answering on NATS, and an MCP gateway served over
// streamable HTTP.
type gatewayWorld struct {
	s       *natstest.Server
	srv     *toolexec.Server
	gw      *mcp.Gateway
	url     string
	ran     sync.Map // tool name → *atomic.Int64: calls that reached the tool
	release chan struct{}
}

func (w *gatewayWorld) count(name string) int64 {
	v, _ := w.ran.LoadOrStore(name, new(atomic.Int64))
	return v.(*atomic.Int64).Load()
}

func (w *gatewayWorld) hit(name string) {
	v, _ := w.ran.LoadOrStore(name, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
}

func newGatewayWorld(t *testing.T, cfg mcp.GatewayConfig) *gatewayWorld {
	t.Helper()
	w := &gatewayWorld{s: natstest.Start(t, natstest.Options{}), release: make(chan struct{})}
	ctx := natstest.Context(t)
	tools := []tool.Tool{
		tool.Must("lookup", "Looks a key up.", func(ctx context.Context, in keyIn) (string, error) {
			w.hit("lookup")
			return "value of " + in.Key, nil
		}),
		tool.Must("delete_key", "Deletes a key.", func(ctx context.Context, in keyIn) (string, error) {
			w.hit("delete_key")
			return "deleted " + in.Key, nil
		}),
		tool.Must("pay", "Pays an invoice.", func(ctx context.Context, in keyIn) (string, error) {
			w.hit("pay")
			return "paid " + in.Key, nil
		}),
		tool.Must("secret", "Reads a secret.", func(ctx context.Context, in keyIn) (string, error) {
			w.hit("secret")
			return "password=hunter2", nil
		}),
		tool.Must("slow", "Reports progress, then answers.", func(ctx context.Context, in keyIn) (string, error) {
			w.hit("slow")
			for i := 1; i <= 3; i++ {
				tool.ReportProgress(ctx, tool.Progress{Progress: float64(i), Total: 3, Message: "step"})
				time.Sleep(250 * time.Millisecond) // > the 200 ms throttle: each report passes
			}
			return "slow done", nil
		}),
		tool.Must("traced", "Says the trace it runs in.", func(ctx context.Context, in keyIn) (string, error) {
			return trace.SpanContextFromContext(ctx).TraceID().String(), nil
		}),
		tool.Must("hold", "Answers when the test lets it.", func(ctx context.Context, in keyIn) (string, error) {
			w.hit("hold")
			select {
			case <-w.release:
				return "held " + in.Key, nil
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}),
	}
	var err error
	w.srv, err = toolexec.New(w.s.NC, toolexec.Config{Provision: provision.Options{Memory: true}})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.srv.Register(tools...); err != nil {
		t.Fatal(err)
	}
	if err := w.srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = w.srv.Stop(sctx)
	})

	// The installation's hooks, answering as remote hooks do.
	hooks, err := hooknats.NewServer(w.s.NC, hooknats.ServerConfig{Provision: provision.Options{Memory: true}, RecheckInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(hooks.HandleFunc(ctx, events.HookRegistration{Name: "guard", Event: events.HookBeforeToolCall, Matcher: "^delete_"},
		func(ctx context.Context, req *events.HookRequest) (*events.HookResponse, error) {
			return hooknats.Respond(events.HookSkip, "deletes need a ticket"), nil
		}))
	must(hooks.HandleFunc(ctx, events.HookRegistration{Name: "approval", Event: events.HookBeforeToolCall, Matcher: "^pay$"},
		func(ctx context.Context, req *events.HookRequest) (*events.HookResponse, error) {
			return hooknats.Respond(events.HookPause, "payments need a person"), nil
		}))
	must(hooks.HandleFunc(ctx, events.HookRegistration{Name: "mask", Event: events.HookAfterToolCall, Matcher: "^secret$"},
		func(ctx context.Context, req *events.HookRequest) (*events.HookResponse, error) {
			r := hooknats.Respond(events.HookContinue, "")
			masked := strings.ReplaceAll(req.ToolResult.Content, "hunter2", "*******")
			r.ToolResult = &events.ToolResult{ToolUseID: req.ToolResult.ToolUseID, Content: masked, IsError: req.ToolResult.IsError}
			return r, nil
		}))
	must(hooks.Start(ctx))
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = hooks.Stop(sctx)
	})

	w.gw, err = mcp.NewGateway(ctx, w.s.NC, w.s.JS, cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(w.gw.Handler())
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := w.gw.Close(sctx); err != nil {
			t.Error(err)
		}
	})
	w.url = hs.URL
	return w
}

// client connects the official SDK's client to the gateway.
func (w *gatewayWorld) client(t *testing.T, o *sdk.ClientOptions) *sdk.ClientSession {
	t.Helper()
	c := sdk.NewClient(&sdk.Implementation{Name: "test-client", Version: "1"}, o)
	cs, err := c.Connect(natstest.Context(t), &sdk.StreamableClientTransport{Endpoint: w.url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func text(t *testing.T, r *sdk.CallToolResult) string {
	t.Helper()
	var parts []string
	for _, c := range r.Content {
		tc, ok := c.(*sdk.TextContent)
		if !ok {
			t.Fatalf("content %T, want text", c)
		}
		parts = append(parts, tc.Text)
	}
	return strings.Join(parts, "")
}

func call(t *testing.T, cs *sdk.ClientSession, name string, args any) *sdk.CallToolResult {
	t.Helper()
	r, err := cs.CallTool(natstest.Context(t), &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	return r
}

// An MCP client sees the catalog and calls a tool, which runs on the
// toolexec replica; a tool a replica starts hosting reaches the client
// with tools/list_changed.
func TestGatewayListsAndCallsTheCatalog(t *testing.T) {
	w := newGatewayWorld(t, mcp.GatewayConfig{})
	changed := make(chan struct{}, 8)
	cs := w.client(t, &sdk.ClientOptions{ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) {
		select {
		case changed <- struct{}{}:
		default:
		}
	}})
	list, err := cs.ListTools(natstest.Context(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range list.Tools {
		names = append(names, tl.Name)
		if tl.Name == "lookup" {
			if tl.Description != "Looks a key up." {
				t.Errorf("description %q", tl.Description)
			}
			b, _ := json.Marshal(tl.InputSchema)
			if !strings.Contains(string(b), `"key"`) {
				t.Errorf("input schema %s lacks the key property", b)
			}
		}
	}
	want := []string{"delete_key", "hold", "lookup", "pay", "secret", "slow", "traced"}
	slices.Sort(names)
	if !slices.Equal(names, want) {
		t.Fatalf("tools %v, want %v", names, want)
	}

	r := call(t, cs, "lookup", map[string]any{"key": "k1"})
	if r.IsError || text(t, r) != "value of k1" {
		t.Fatalf("lookup: error=%v %q", r.IsError, text(t, r))
	}
	if w.count("lookup") != 1 {
		t.Fatalf("the tool ran %d times, want 1", w.count("lookup"))
	}

	if err := w.srv.Add(natstest.Context(t), tool.Must("added", "Came later.", func(ctx context.Context, in keyIn) (string, error) {
		return "added " + in.Key, nil
	})); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("no tools/list_changed after a replica added a tool")
	}
	natstest.Eventually(t, "the added tool is listed", func() bool {
		l, err := cs.ListTools(natstest.Context(t), nil)
		return err == nil && slices.ContainsFunc(l.Tools, func(tl *sdk.Tool) bool { return tl.Name == "added" })
	})
	if r := call(t, cs, "added", map[string]any{"key": "x"}); text(t, r) != "added x" {
		t.Fatalf("added: %q", text(t, r))
	}
}

// Refusals are MCP error results that say what refused the call, and the
// tool never runs: a hook's skip, an unknown tool, input that does not
// fit the schema.
func TestGatewayRefusals(t *testing.T) {
	w := newGatewayWorld(t, mcp.GatewayConfig{})
	cs := w.client(t, nil)

	r := call(t, cs, "delete_key", map[string]any{"key": "k1"})
	got := text(t, r)
	if !r.IsError || !strings.Contains(got, `hook "guard"`) || !strings.Contains(got, "deletes need a ticket") {
		t.Fatalf("denied call: error=%v %q; want an error naming hook guard and its reason", r.IsError, got)
	}
	if n := w.count("delete_key"); n != 0 {
		t.Fatalf("a denied call ran the tool %d times", n)
	}

	r = call(t, cs, "lookup", map[string]any{"key": 42})
	if !r.IsError || !strings.Contains(text(t, r), "key") {
		t.Fatalf("wrong input type: error=%v %q; want an error naming the field", r.IsError, text(t, r))
	}
	if n := w.count("lookup"); n != 0 {
		t.Fatalf("invalid input reached the tool (%d runs)", n)
	}

	// The SDK refuses a tool the server does not list before the call
	// reaches the gateway's handler; either way the client learns it.
	if r, err := cs.CallTool(natstest.Context(t), &sdk.CallToolParams{Name: "nope", Arguments: map[string]any{}}); err == nil && !r.IsError {
		t.Fatalf("unknown tool answered %q", text(t, r))
	} else if err == nil && !strings.Contains(text(t, r), "nope") {
		t.Fatalf("unknown tool: %q does not name it", text(t, r))
	} else if err != nil && !strings.Contains(err.Error(), "nope") {
		t.Fatalf("unknown tool: %v does not name it", err)
	}
}

// after_tool_call hooks see the result before the client does.
func TestGatewayAfterHookMasksTheResult(t *testing.T) {
	w := newGatewayWorld(t, mcp.GatewayConfig{})
	cs := w.client(t, nil)
	r := call(t, cs, "secret", map[string]any{"key": "db"})
	if got := text(t, r); got != "password=*******" {
		t.Fatalf("secret: %q, want the masked result", got)
	}
}

// pausedTurn waits for the gateway's llmw.turn.paused event of the call
// whose input has key and returns its turn id and the pause.
func pausedTurn(t *testing.T, ch <-chan *nats.Msg, key string) (string, events.TurnPaused) {
	t.Helper()
	deadline := time.After(15 * time.Second)
	for {
		select {
		case m := <-ch:
			env, err := events.DecodeEnvelope(m.Header, m.Data)
			if err != nil || env.Type != events.TypeTurnPaused {
				continue
			}
			if !mcp.PausedByGateway(env.Source) {
				t.Fatalf("pause source %q is not the gateway's", env.Source)
			}
			p, err := events.DecodeData[events.TurnPaused](env)
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Pending) == 1 && !strings.Contains(string(p.Pending[0].Input), `"`+key+`"`) {
				continue // an earlier call's pause
			}
			return env.TurnID, p
		case <-deadline:
			t.Fatal("no llmw.turn.paused event")
		}
	}
}

// A call a hook pauses waits for its resume: approved it runs (with the
// edited input when edited), denied it is an error naming the hook, and
// not resumed in time it fails saying so.
func TestGatewayPauseWaitsForResume(t *testing.T) {
	w := newGatewayWorld(t, mcp.GatewayConfig{PauseTimeout: 3 * time.Second})
	cs := w.client(t, nil)
	ch := make(chan *nats.Msg, 64)
	sub, err := w.s.NC.ChanSubscribe(events.NewSubjects("").EventsAll(), ch)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })

	for _, tc := range []struct {
		name     string
		decision events.Decision
		want     string
		isError  bool
		ran      int64
	}{
		{"approve", events.Decision{Kind: events.DecisionApprove}, "paid inv-approve", false, 1},
		{"edit", events.Decision{Kind: events.DecisionEdit, Input: json.RawMessage(`{"key":"inv-fixed"}`)}, "paid inv-fixed", false, 2},
		{"deny", events.Decision{Kind: events.DecisionDeny, Reason: "not this month"}, `hook "approval"`, true, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := "inv-" + tc.name
			res := make(chan *sdk.CallToolResult, 1)
			go func() {
				r, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "pay", Arguments: map[string]any{"key": key}})
				if err != nil {
					r = &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: err.Error()}}}
				}
				res <- r
			}()
			turnID, p := pausedTurn(t, ch, key)
			if p.Hook != "approval" || len(p.Pending) != 1 || p.Pending[0].Name != "pay" {
				t.Fatalf("pause %+v: want hook approval with the pay call pending", p)
			}
			select {
			case r := <-res:
				t.Fatalf("a paused call answered before its resume: %q", text(t, r))
			default:
			}
			err := mcp.Resume(natstest.Context(t), w.s.NC, "", "/test", events.ResumeRequest{
				TurnID: turnID, Decisions: map[string]events.Decision{p.Pending[0].ID: tc.decision},
			}, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			r := <-res
			if r.IsError != tc.isError || !strings.Contains(text(t, r), tc.want) {
				t.Fatalf("after %s: error=%v %q, want error=%v containing %q", tc.name, r.IsError, text(t, r), tc.isError, tc.want)
			}
			if n := w.count("pay"); n != tc.ran {
				t.Fatalf("the tool ran %d times in all, want %d", n, tc.ran)
			}
			// Settled: a second resume finds nothing to resume.
			err = mcp.Resume(natstest.Context(t), w.s.NC, "", "/test", events.ResumeRequest{
				TurnID: turnID, Decisions: map[string]events.Decision{p.Pending[0].ID: tc.decision},
			}, time.Second)
			if !errors.Is(err, mcp.ErrNotPaused) {
				t.Fatalf("second resume: %v, want ErrNotPaused", err)
			}
		})
	}

	t.Run("timeout", func(t *testing.T) {
		r := call(t, cs, "pay", map[string]any{"key": "inv-4"})
		if !r.IsError || !strings.Contains(text(t, r), "not resumed within 3s") {
			t.Fatalf("unresumed pause: error=%v %q", r.IsError, text(t, r))
		}
		if n := w.count("pay"); n != 2 {
			t.Fatalf("an unresumed call ran the tool (%d runs in all)", n)
		}
	})

	t.Run("resume without a decision for the call", func(t *testing.T) {
		go func() {
			_, _ = cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "pay", Arguments: map[string]any{"key": "inv-5"}})
		}()
		turnID, p := pausedTurn(t, ch, "inv-5")
		err := mcp.Resume(natstest.Context(t), w.s.NC, "", "/test", events.ResumeRequest{
			TurnID: turnID, Decisions: map[string]events.Decision{"call-other": {Kind: events.DecisionApprove}},
		}, 5*time.Second)
		if !errors.Is(err, mcp.ErrResumeRefused) || !strings.Contains(err.Error(), p.Pending[0].ID) {
			t.Fatalf("resume naming another call: %v, want ErrResumeRefused naming %s", err, p.Pending[0].ID)
		}
		if err := mcp.Resume(natstest.Context(t), w.s.NC, "", "/test", events.ResumeRequest{
			TurnID: turnID, Decisions: map[string]events.Decision{p.Pending[0].ID: {Kind: events.DecisionDeny}},
		}, 5*time.Second); err != nil {
			t.Fatalf("the right resume after a refused one: %v", err)
		}
	})
}

// A tool's progress reaches an MCP client that asked for it, in order.
func TestGatewayForwardsProgress(t *testing.T) {
	w := newGatewayWorld(t, mcp.GatewayConfig{})
	var mu sync.Mutex
	var got []float64
	cs := w.client(t, &sdk.ClientOptions{ProgressNotificationHandler: func(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
		if req.Params.ProgressToken != "tok-1" {
			return
		}
		mu.Lock()
		got = append(got, req.Params.Progress)
		mu.Unlock()
	}})
	params := &sdk.CallToolParams{Name: "slow", Arguments: map[string]any{"key": "x"}}
	params.SetProgressToken("tok-1")
	r, err := cs.CallTool(natstest.Context(t), params)
	if err != nil || text(t, r) != "slow done" {
		t.Fatalf("slow: %v %v", err, r)
	}
	natstest.Eventually(t, "three progress reports", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) >= 3
	})
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(got, []float64{1, 2, 3}) {
		t.Fatalf("progress %v, want [1 2 3]", got)
	}
}

// Close lets a call in flight finish with its result, and refuses calls
// that come after.
func TestGatewayCloseDrainsCalls(t *testing.T) {
	w := newGatewayWorld(t, mcp.GatewayConfig{})
	cs := w.client(t, nil)
	res := make(chan *sdk.CallToolResult, 1)
	go func() {
		r, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "hold", Arguments: map[string]any{"key": "h"}})
		if err != nil {
			r = &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: err.Error()}}}
		}
		res <- r
	}()
	natstest.Eventually(t, "the held call runs", func() bool { return w.count("hold") == 1 })
	closed := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		closed <- w.gw.Close(ctx)
	}()
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) with a call in flight", err)
	case <-time.After(300 * time.Millisecond):
	}
	close(w.release)
	if r := <-res; r.IsError || text(t, r) != "held h" {
		t.Fatalf("the call in flight: error=%v %q", r.IsError, text(t, r))
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	r, err := cs.CallTool(natstest.Context(t), &sdk.CallToolParams{Name: "lookup", Arguments: map[string]any{"key": "late"}})
	if err == nil && !r.IsError {
		t.Fatalf("a call after Close answered %q", text(t, r))
	}
	if n := w.count("lookup"); n != 0 {
		t.Fatalf("a call after Close ran the tool")
	}
}

// The client's trace context (params._meta.traceparent) reaches the tool
// on the toolexec replica.
func TestGatewayContinuesTheClientsTrace(t *testing.T) {
	w := newGatewayWorld(t, mcp.GatewayConfig{})
	cs := w.client(t, nil)
	params := &sdk.CallToolParams{Name: "traced", Arguments: map[string]any{"key": "x"}}
	params.Meta = sdk.Meta{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	r, err := cs.CallTool(natstest.Context(t), params)
	if err != nil {
		t.Fatal(err)
	}
	if got := text(t, r); got != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Fatalf("the tool ran in trace %q, want the client's", got)
	}
}

type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// Behind BearerAuth only a client with the token gets a session.
func TestGatewayBearerAuth(t *testing.T) {
	w := newGatewayWorld(t, mcp.GatewayConfig{})
	hs := httptest.NewServer(mcp.BearerAuth("s3cret", w.gw.Handler()))
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
	})
	dial := func(token string) (*sdk.ClientSession, error) {
		tr := &sdk.StreamableClientTransport{Endpoint: hs.URL}
		if token != "" {
			tr.HTTPClient = &http.Client{Transport: bearer{token, http.DefaultTransport}}
		}
		return sdk.NewClient(&sdk.Implementation{Name: "c", Version: "1"}, nil).Connect(natstest.Context(t), tr, nil)
	}
	for _, bad := range []string{"", "wrong"} {
		if cs, err := dial(bad); err == nil {
			_ = cs.Close()
			t.Fatalf("token %q: connected", bad)
		}
	}
	cs, err := dial("s3cret")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cs.Close() }()
	if r := call(t, cs, "lookup", map[string]any{"key": "k"}); text(t, r) != "value of k" {
		t.Fatalf("lookup: %q", text(t, r))
	}
}
