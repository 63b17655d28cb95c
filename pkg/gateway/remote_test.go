package gateway_test

import (
	"context"
	"iter"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	spec "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/internal/cli"
	"github.com/llmworker/llmworker/pkg/agents"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/gateway"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/llm/llmtest"
	"github.com/llmworker/llmworker/pkg/turn"
)

// weather is a remote A2A agent on a2a-go's a2asrv: a task says it is
// working ("Looking at the sky") and works on until its client follows
// it (as a remote that takes a while does: the working status is only
// seen by a follower that subscribes while it stands), then streams its
// answer artifact "Sunny in Paris" in two chunks and completes.
type weather struct{ followed *followSignal }

// followSignal is closed by the first SubscribeToTask of each task.
type followSignal struct {
	a2asrv.PassthroughCallInterceptor
	mu sync.Mutex
	ch map[spec.TaskID]chan struct{}
}

// of is closed when task id is followed.
func (f *followSignal) of(id spec.TaskID) <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.chanOf(id)
}

func (f *followSignal) chanOf(id spec.TaskID) chan struct{} {
	if f.ch[id] == nil {
		f.ch[id] = make(chan struct{})
	}
	return f.ch[id]
}

func (f *followSignal) Before(ctx context.Context, cc *a2asrv.CallContext, req *a2asrv.Request) (context.Context, any, error) {
	r, ok := req.Payload.(*spec.SubscribeToTaskRequest)
	if !ok || cc.Method() != "SubscribeToTask" {
		return ctx, nil, nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := f.chanOf(r.ID)
	select {
	case <-ch:
	default:
		close(ch)
	}
	return ctx, nil, nil
}

func (w weather) Execute(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[spec.Event, error] {
	return func(yield func(spec.Event, error) bool) {
		if !yield(spec.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		if !yield(spec.NewStatusUpdateEvent(ec, spec.TaskStateWorking, spec.NewMessage(spec.MessageRoleAgent, spec.NewTextPart("Looking at the sky"))), nil) {
			return
		}
		// The subscription registers just after its interceptor runs.
		select {
		case <-w.followed.of(ec.TaskID):
			time.Sleep(100 * time.Millisecond)
		case <-time.After(10 * time.Second):
		}
		first := spec.NewArtifactEvent(ec, spec.NewTextPart("Sunny "))
		if !yield(first, nil) {
			return
		}
		rest := spec.NewArtifactUpdateEvent(ec, first.Artifact.ID, spec.NewTextPart("in Paris"))
		rest.LastChunk = true
		if !yield(rest, nil) {
			return
		}
		yield(spec.NewStatusUpdateEvent(ec, spec.TaskStateCompleted, nil), nil)
	}
}

func (weather) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[spec.Event, error] {
	return func(yield func(spec.Event, error) bool) {
		yield(spec.NewStatusUpdateEvent(ec, spec.TaskStateCanceled, nil), nil)
	}
}

// serveWeather serves weather with its card and JSON-RPC (A2A 1.0) and
// returns its URL.
func serveWeather(t *testing.T) string {
	t.Helper()
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	card := &spec.AgentCard{Name: "weather", Description: "Tells the weather.", Version: "1",
		Capabilities:        spec.AgentCapabilities{Streaming: true},
		DefaultInputModes:   []string{"text"},
		DefaultOutputModes:  []string{"text"},
		Skills:              []spec.AgentSkill{{ID: "weather", Name: "weather", Description: "weather"}},
		SupportedInterfaces: []*spec.AgentInterface{spec.NewAgentInterface(srv.URL+"/a2a", spec.TransportProtocolJSONRPC)},
	}
	followed := &followSignal{ch: map[spec.TaskID]chan struct{}{}}
	mux.Handle("/a2a", a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(weather{followed}, a2asrv.WithCallInterceptors(followed))))
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(card))
	return srv.URL
}

// reasoningOf joins the reasoning deltas of the parts whose id starts
// with prefix.
func reasoningOf(ps []part, prefix string) string {
	var b strings.Builder
	for _, p := range ps {
		if p.Type == "reasoning-delta" && strings.HasPrefix(p.field("id"), prefix) {
			b.WriteString(p.field("delta"))
		}
	}
	return b.String()
}

// A remote A2A sub-agent's progress shows in a chat as a local one's
// does, on the turn service as `llmworker up` runs it (its A2A client
// pkg/a2a/remote): the child turn's reasoning (the remote's working
// status) and text (its artifact) nested under the parent's call, owned
// by the child, live and in a replay of the turn; the call's output is
// the artifact. `turn submit --follow` prints them indented under the
// call, as it does a local child's.
func TestRemoteSubAgentChat(t *testing.T) {
	parent := llmtest.NewScripted(
		llmtest.ToolStep(llmtest.ToolCallSpec{ID: "call_1", Name: "weather", Input: `{"prompt":"weather in Paris?"}`}),
		llmtest.TextStep("It is sunny."),
		llmtest.ToolStep(llmtest.ToolCallSpec{ID: "call_1", Name: "weather", Input: `{"prompt":"weather in Paris?"}`}),
		llmtest.TextStep("Sunny, says the remote agent."),
	)
	st := startStack(t, stackOpts{providers: map[string]llm.Provider{"parent": parent}})
	js, err := jetstream.New(st.NC)
	if err != nil {
		t.Fatal(err)
	}
	reg := agents.New(js)
	for _, def := range []events.AgentDefinition{
		{Name: "weather", Description: "Tells the weather.", A2AURL: serveWeather(t)},
		{Name: "lead", Model: "parent:m", Agents: []string{"weather"}},
	} {
		if _, _, err := reg.Put(ctxT(t), def, agents.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	_, srv := startGateway(t, st, gateway.Config{Agent: "lead"})
	c := &gateway.Client{URL: srv.URL}
	s, err := c.Chat(ctxT(t), &gateway.ChatRequest{ID: "sw", Messages: []gateway.UIMessage{userMsg("weather?")}})
	if err != nil {
		t.Fatal(err)
	}
	live, done := readAll(t, s, nil)
	if !done {
		t.Fatal("the stream did not end")
	}
	parentID := live[0].field("messageId")
	childID := turn.ChildTurnID(parentID, "call_1")
	body, err := c.HTTPGet(ctxT(t), "/api/chat/sw/stream?turn="+parentID)
	if err != nil {
		t.Fatal(err)
	}
	under := gateway.ChildOwner{TurnID: childID, ToolCallID: "call_1", Depth: 1}
	for _, c := range []struct {
		name string
		ps   []part
	}{{"the live stream", live}, {"the replay", partsOf(t, body)}} {
		ps := c.ps
		onceEach(t, c.name, ps)
		if got := reasoningOf(ps, childID+".reasoning-"); got != "Looking at the sky" {
			t.Errorf("%s: the child's reasoning = %q, want the remote's working status", c.name, got)
		}
		if got := textOf(ps, childID+".text-"); got != "Sunny in Paris" {
			t.Errorf("%s: the child's text = %q, want the remote's artifact", c.name, got)
		}
		for _, typ := range []string{"reasoning-start", "text-start"} {
			i := slices.IndexFunc(ps, func(p part) bool { return p.Type == typ && strings.HasPrefix(p.field("id"), childID+".") })
			if i < 0 || owner(ps[i]) != under {
				t.Errorf("%s: the child's %s is not owned by %s under call_1: %v", c.name, typ, childID, types(ps))
			}
		}
		if k := find(ps, "tool-output-available", "toolCallId", "call_1"); k < 0 || ps[k].field("output") != "Sunny in Paris" {
			t.Errorf("%s: the sub-agent call's output is not the remote's artifact: %v", c.name, types(ps))
		}
		if got := textOf(ps, "text-"); got != "It is sunny." {
			t.Errorf("%s: the parent's text = %q", c.name, got)
		}
		if last := ps[len(ps)-1]; last.Type != "finish" || last.field("finishReason") != "stop" {
			t.Errorf("%s ends with %s, want finish stop", c.name, last.Raw)
		}
	}

	out, errOut := &strings.Builder{}, &strings.Builder{}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	env := cli.Env{Getenv: func(k string) string {
		if k == "NATS_URL" {
			return st.URL
		}
		return ""
	}, Stdout: out, Stderr: errOut}
	if code := cli.Main(ctx, []string{"turn", "submit", "--agent", "lead", "--prompt", "weather?", "--id", "tW", "--follow"}, env); code != 0 {
		t.Fatalf("turn submit --follow: exit %d: %s\n%s", code, errOut.String(), out.String())
	}
	got := out.String()
	cliChild := turn.ChildTurnID("tW", "call_1")
	for _, want := range []string{
		"↳ sub-agent weather@",
		"(turn " + cliChild + "): started",
		"  │ thinking: Looking at the sky",
		"  │ Sunny in Paris\n",
		"Sunny, says the remote agent.",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("--follow printed no %q:\n%s", want, got)
		}
	}
}
