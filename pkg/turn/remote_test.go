package turn_test

import (
	"context"
	"encoding/json"
	"iter"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	spec "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/nats-io/nats.go"

	"github.com/llmworker/llmworker/pkg/a2a/remote"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm/llmtest"
	"github.com/llmworker/llmworker/pkg/natstest"
	"github.com/llmworker/llmworker/pkg/turn"
)

// weatherAgent is the executor of a remote A2A agent (a2a-go's a2asrv):
// a new task says it is working, then — once release is closed, or at
// once when it is nil — streams its answer artifact "Sunny in Paris" in
// two chunks and completes. With ask, a new task asks "Which city?"
// (input-required) and the reply's text names the city of the answer.
type weatherAgent struct {
	release chan struct{}
	ask     bool

	mu        sync.Mutex
	messages  []*spec.Message // every message the agent received
	cancelled []spec.TaskID
	started   chan struct{} // closed when the first task runs
	once      sync.Once
	freed     sync.Once
}

// free closes release (once): serveRemote's cleanup does, before the
// server, whose Close waits for the tasks' streams, is closed.
func (w *weatherAgent) free() {
	if w.release != nil {
		w.freed.Do(func() { close(w.release) })
	}
}

var _ a2asrv.AgentExecutor = (*weatherAgent)(nil)

func newWeatherAgent() *weatherAgent { return &weatherAgent{started: make(chan struct{})} }

func (w *weatherAgent) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[spec.Event, error] {
	return func(yield func(spec.Event, error) bool) {
		w.mu.Lock()
		w.messages = append(w.messages, ec.Message)
		w.mu.Unlock()
		city := "Paris"
		if ec.StoredTask == nil {
			if !yield(spec.NewSubmittedTask(ec, ec.Message), nil) {
				return
			}
			if !yield(spec.NewStatusUpdateEvent(ec, spec.TaskStateWorking, spec.NewMessage(spec.MessageRoleAgent, spec.NewTextPart("Looking at the sky"))), nil) {
				return
			}
			w.once.Do(func() { close(w.started) })
			if w.ask {
				yield(spec.NewStatusUpdateEvent(ec, spec.TaskStateInputRequired, spec.NewMessage(spec.MessageRoleAgent, spec.NewTextPart("Which city?"))), nil)
				return
			}
			if w.release != nil {
				select {
				case <-w.release:
				case <-ctx.Done():
					return
				}
			}
		} else {
			city = ec.Message.Parts[0].Text()
			if !yield(spec.NewStatusUpdateEvent(ec, spec.TaskStateWorking, nil), nil) {
				return
			}
		}
		first := spec.NewArtifactEvent(ec, spec.NewTextPart("Sunny "))
		first.Artifact.Name = "answer"
		if !yield(first, nil) {
			return
		}
		rest := spec.NewArtifactUpdateEvent(ec, first.Artifact.ID, spec.NewTextPart("in "+city))
		rest.LastChunk = true
		if !yield(rest, nil) {
			return
		}
		yield(spec.NewStatusUpdateEvent(ec, spec.TaskStateCompleted, nil), nil)
	}
}

func (w *weatherAgent) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[spec.Event, error] {
	return func(yield func(spec.Event, error) bool) {
		w.mu.Lock()
		w.cancelled = append(w.cancelled, ec.TaskID)
		w.mu.Unlock()
		yield(spec.NewStatusUpdateEvent(ec, spec.TaskStateCanceled, nil), nil)
	}
}

func (w *weatherAgent) received() []*spec.Message {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]*spec.Message(nil), w.messages...)
}

func (w *weatherAgent) cancels() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.cancelled)
}

// serveRemote serves exec as an A2A agent on an httptest server: its
// card at /.well-known/agent-card.json and JSON-RPC at /a2a, protocol
// 1.0, or with v03 the 0.3 card and binding (a2acompat/a2av0); the card
// declares streaming unless poll; each of wrap wraps the JSON-RPC
// handler. It returns the agent's URL.
func serveRemote(t *testing.T, exec a2asrv.AgentExecutor, v03, poll bool, wrap ...func(http.Handler) http.Handler) string {
	t.Helper()
	h := a2asrv.NewHandler(exec)
	rpc := func(h http.Handler) http.Handler {
		for _, w := range wrap {
			h = w(h)
		}
		return h
	}
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	if w, ok := exec.(*weatherAgent); ok {
		t.Cleanup(w.free)
	}
	card := &spec.AgentCard{Name: "weather", Description: "Tells the weather.", Version: "1",
		Capabilities:       spec.AgentCapabilities{Streaming: !poll},
		DefaultInputModes:  []string{"text"},
		DefaultOutputModes: []string{"text"},
		Skills:             []spec.AgentSkill{{ID: "weather", Name: "weather", Description: "weather"}},
	}
	if v03 {
		// A card of a 0.3 server, in the 0.3 form alone (the A2A 0.3
		// specification's AgentCard: url, preferredTransport,
		// protocolVersion), which a 1.0 reader finds no interface in.
		mux.Handle("/a2a", rpc(a2av0.NewJSONRPCHandler(h)))
		mux.HandleFunc(a2asrv.WellKnownAgentCardPath, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"protocolVersion": "0.3.0", "name": "weather", "description": "Tells the weather.", "version": "1",
				"url": "` + srv.URL + `/a2a", "preferredTransport": "JSONRPC",
				"capabilities": {"streaming": ` + map[bool]string{true: "false", false: "true"}[poll] + `},
				"defaultInputModes": ["text"], "defaultOutputModes": ["text"],
				"skills": [{"id": "weather", "name": "weather", "description": "weather", "tags": []}]}`))
		})
	} else {
		card.SupportedInterfaces = []*spec.AgentInterface{spec.NewAgentInterface(srv.URL+"/a2a", spec.TransportProtocolJSONRPC)}
		mux.Handle("/a2a", rpc(a2asrv.NewJSONRPCHandler(h)))
		mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(card))
	}
	return srv.URL
}

// remoteFamily is a parent agent "lead" whose model calls the remote
// sub-agent "weather" at url once (call_1) and then answers with the
// call's result; start starts the turn service(s) that provision the
// buckets.
func remoteFamily(t *testing.T, url string, start func(f *family)) *family {
	t.Helper()
	f := newFamily(t)
	f.parent.Add(
		llmtest.ToolStep(llmtest.ToolCallSpec{ID: "call_1", Name: "weather", Input: `{"prompt":"weather in Paris?"}`}),
		llmtest.TextStep("done"),
	)
	start(f)
	putAgent(t, f.env, events.AgentDefinition{Name: "weather", Description: "Tells the weather.", A2AURL: url})
	putAgent(t, f.env, events.AgentDefinition{Name: "lead", Model: "parent:m", Agents: []string{"weather"}})
	return f
}

// a2aClient is the A2A client the turn service binaries give a replica.
var a2aClient = remote.Agents(remote.Config{})

func startOne(f *family) { f.startTurn(turn.Config{RemoteAgents: a2aClient}) }

// A sub-agent with a2a_url runs as a child turn whose steps are the
// remote task's: the remote gets the call's prompt once, with the child
// turn id as its message id; the child's events show the remote's
// progress (its working status as reasoning, its artifact as text); the
// call's result is the remote's artifact.
func TestRemoteSubAgentAnswersWithItsArtifact(t *testing.T) {
	for _, c := range []struct {
		name      string
		v03, poll bool
	}{{"1.0", false, false}, {"0.3", true, false}, {"1.0 polled", false, true}} {
		t.Run(c.name, func(t *testing.T) {
			w := newWeatherAgent()
			w.release = make(chan struct{})
			f := remoteFamily(t, serveRemote(t, w, c.v03, c.poll), startOne)
			id := newID("remote")
			childID := turn.ChildTurnID(id, "call_1")
			pw, cw := f.watch(id), f.watch(childID)
			f.submit(events.TurnRequest{TurnID: id, Agent: "lead", Messages: []events.Message{events.UserText("weather?")}})
			cw.waitType(events.TypeBlockStop) // the remote's working status
			w.free()
			pw.completed()
			if r := toolResult(t, pw.events(), "call_1"); r.IsError || r.Content != "Sunny in Paris" {
				t.Fatalf("call result %+v; want the remote's artifact", r)
			}
			if s := statuses(childEvents(t, pw.events())); s != "started,completed" {
				t.Fatalf("llmw.tool.child statuses %s; want started,completed", s)
			}
			got := w.received()
			if len(got) != 1 || got[0].ID != childID || got[0].Parts[0].Text() != "weather in Paris?" {
				t.Fatalf("the remote received %s; want one message %s with the call's prompt", mustJSON(t, got), childID)
			}
			cevs := cw.waitType(events.TypeTurnCompleted)
			st := decode[events.TurnStarted](t, cevs[find(cevs, events.TypeTurnStarted)])
			if st.ParentTurnID != id || st.ParentCallID != "call_1" || st.Depth != 1 {
				t.Fatalf("child's llmw.turn.started %+v; want its parent", st)
			}
			var thinking, text strings.Builder
			for _, e := range cevs {
				if e.Type == events.TypeBlockDelta {
					d := decode[events.WorkerBlockDelta](t, e)
					if d.Kind == events.DeltaThinking {
						thinking.WriteString(d.Content)
					} else {
						text.WriteString(d.Content)
					}
				}
			}
			if thinking.String() != "Looking at the sky" || text.String() != "Sunny in Paris" {
				t.Fatalf("child's reasoning %q and text %q; want the remote's status and artifact", thinking.String(), text.String())
			}
			checkSeq(t, cevs)
		})
	}
}

// The replica running the parent and the child dies while the remote
// task runs: the replica that takes both over subscribes to the task the
// child's state names and never sends the message again, and the parent
// completes with the remote's artifact.
func TestRemoteSubAgentSurvivesItsReplica(t *testing.T) {
	w := newWeatherAgent()
	w.release = make(chan struct{})
	var a *turn.Service
	var ncA *nats.Conn
	f := remoteFamily(t, serveRemote(t, w, false, false), func(f *family) {
		ncA = f.connect()
		var err error
		if a, err = turn.New(ncA, turn.Config{Instance: "a", Logger: quietLogger(), AckWait: time.Second, RemoteAgents: a2aClient}); err != nil {
			t.Fatal(err)
		}
		if err := a.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
	id := newID("remote-dies")
	childID := turn.ChildTurnID(id, "call_1")
	pw, cw := f.watch(id), f.watch(childID)
	f.submit(events.TurnRequest{TurnID: id, Agent: "lead", Messages: []events.Message{events.UserText("weather?")}})
	<-w.started
	natstest.Eventually(t, "the child's state to name the remote task", func() bool {
		st, ok, err := turn.LoadState(natstest.Context(t), f.js, childID)
		return err == nil && ok && st.Remote != nil && st.Remote.TaskID != ""
	})
	ncA.Close() // the replica is gone, mid-task

	f.startTurn(turn.Config{Instance: "b", AckWait: time.Second, RemoteAgents: a2aClient})
	cw.waitFor("b to take the child over", func(evs []ev) bool { return count(evs, events.TypeTurnStarted) == 2 })
	w.free()
	pw.completed()
	if r := toolResult(t, pw.events(), "call_1"); r.IsError || r.Content != "Sunny in Paris" {
		t.Fatalf("call result %+v; want the remote's artifact", r)
	}
	if got := w.received(); len(got) != 1 {
		t.Fatalf("the remote received %d messages %s; want the one", len(got), mustJSON(t, got))
	}
	checkSeq(t, cw.events())
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_ = a.Stop(ctx)
}

// A replica that stops (Stop, draining) while a remote task runs hands
// the child off at once, without cancelling the task: the replica that
// continues it subscribes again, and the remote gets the message once.
func TestRemoteSubAgentHandedOffByADrain(t *testing.T) {
	w := newWeatherAgent()
	w.release = make(chan struct{})
	var a *turn.Service
	f := remoteFamily(t, serveRemote(t, w, false, false), func(f *family) {
		var err error
		if a, err = turn.New(f.connect(), turn.Config{Instance: "a", Logger: quietLogger(), RemoteAgents: a2aClient}); err != nil {
			t.Fatal(err)
		}
		if err := a.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
	id := newID("remote-drain")
	childID := turn.ChildTurnID(id, "call_1")
	pw := f.watch(id)
	f.submit(events.TurnRequest{TurnID: id, Agent: "lead", Messages: []events.Message{events.UserText("weather?")}})
	<-w.started
	natstest.Eventually(t, "the child's state to name the remote task", func() bool {
		st, ok, err := turn.LoadState(natstest.Context(t), f.js, childID)
		return err == nil && ok && st.Remote != nil && st.Remote.TaskID != ""
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v; want the remote child handed off within the drain", err)
	}
	f.startTurn(turn.Config{Instance: "b", RemoteAgents: a2aClient})
	w.free()
	pw.completed()
	if r := toolResult(t, pw.events(), "call_1"); r.IsError || r.Content != "Sunny in Paris" {
		t.Fatalf("call result %+v; want the remote's artifact", r)
	}
	if got := w.received(); len(got) != 1 || w.cancels() != 0 {
		t.Fatalf("the remote received %d messages and %d cancels; want the one message, no cancel", len(got), w.cancels())
	}
}

// A cancel of the parent cancels the child and its remote task
// (CancelTask): the child ends aborted, the parent too.
func TestRemoteSubAgentCancelledWithItsParent(t *testing.T) {
	w := newWeatherAgent()
	w.release = make(chan struct{})
	f := remoteFamily(t, serveRemote(t, w, false, false), startOne)
	id := newID("remote-cancel")
	childID := turn.ChildTurnID(id, "call_1")
	pw, cw := f.watch(id), f.watch(childID)
	f.submit(events.TurnRequest{TurnID: id, Agent: "lead", Messages: []events.Message{events.UserText("weather?")}})
	<-w.started
	natstest.Eventually(t, "the child's state to name the remote task", func() bool {
		st, ok, err := turn.LoadState(natstest.Context(t), f.js, childID)
		return err == nil && ok && st.Remote != nil && st.Remote.TaskID != ""
	})
	f.cancelTurn(id)
	if end := cw.waitEnd(); end.Type != events.TypeTurnAborted || decode[events.TurnEnded](t, end).Code != turn.CodeCancelled {
		t.Fatalf("child ended with %s %s; want aborted cancelled", end.Type, end.Data)
	}
	if end := pw.waitEnd(); end.Type != events.TypeTurnAborted {
		t.Fatalf("parent ended with %s %s; want aborted", end.Type, end.Data)
	}
	natstest.Eventually(t, "the remote task to be cancelled", func() bool { return w.cancels() == 1 })
}

// A remote input-required is a pause of the child with one pending call
// (remote_input, the remote's question as its input), which the parent's
// stream names; a resume of the child with the answer sends it to the
// remote task, and the parent completes with the artifact.
func TestRemoteSubAgentAsksForInput(t *testing.T) {
	w := newWeatherAgent()
	w.ask = true
	f := remoteFamily(t, serveRemote(t, w, false, false), startOne)
	id := newID("remote-input")
	childID := turn.ChildTurnID(id, "call_1")
	pw, cw := f.watch(id), f.watch(childID)
	f.submit(events.TurnRequest{TurnID: id, Agent: "lead", Messages: []events.Message{events.UserText("weather?")}})
	evs := cw.waitType(events.TypeTurnPaused)
	p := decode[events.TurnPaused](t, evs[find(evs, events.TypeTurnPaused)])
	var in struct{ Question string }
	if len(p.Pending) != 1 || p.Pending[0].Name != turn.RemoteInputTool || json.Unmarshal(p.Pending[0].Input, &in) != nil || in.Question != "Which city?" {
		t.Fatalf("child paused with %s; want one remote_input call with the remote's question", mustJSON(t, p.Pending))
	}
	pevs := pw.waitFor("the parent to name the pause", func(evs []ev) bool {
		return strings.Contains(statuses(childEvents(t, evs)), "paused")
	})
	if cs := childEvents(t, pevs); len(cs[len(cs)-1].Pending) != 1 {
		t.Fatalf("parent's llmw.tool.child paused %s; want the pending call", mustJSON(t, cs[len(cs)-1]))
	}
	// An approve without an answer is refused; the child stays paused.
	next := f.rejections(childID)
	f.resume(events.ResumeRequest{TurnID: childID, Decisions: map[string]events.Decision{p.Pending[0].ID: {Kind: events.DecisionApprove}}})
	if rj := next(); rj.Code != events.RejectInvalidRequest || !strings.Contains(rj.Reason, "answer") {
		t.Fatalf("rejected %+v; want invalid_request asking for an answer", rj)
	}
	f.resume(events.ResumeRequest{TurnID: childID, Decisions: map[string]events.Decision{
		p.Pending[0].ID: {Kind: events.DecisionEdit, Input: json.RawMessage(`{"answer":"Lyon"}`)}}})
	pw.completed()
	if r := toolResult(t, pw.events(), "call_1"); r.IsError || r.Content != "Sunny in Lyon" {
		t.Fatalf("call result %+v; want the remote's answer for the city given", r)
	}
	got := w.received()
	if len(got) != 2 || got[1].Parts[0].Text() != "Lyon" || got[1].TaskID == "" || got[1].ID != childID+"-input-1" {
		t.Fatalf("the remote received %s; want the prompt, then the answer to its task", mustJSON(t, got))
	}
}

// A cancel of the parent while its remote child waits for input aborts
// the paused child and cancels its remote task.
func TestRemoteSubAgentCancelledWhilePaused(t *testing.T) {
	w := newWeatherAgent()
	w.ask = true
	f := remoteFamily(t, serveRemote(t, w, false, false), startOne)
	id := newID("remote-input-cancel")
	childID := turn.ChildTurnID(id, "call_1")
	pw, cw := f.watch(id), f.watch(childID)
	f.submit(events.TurnRequest{TurnID: id, Agent: "lead", Messages: []events.Message{events.UserText("weather?")}})
	cw.waitType(events.TypeTurnPaused)
	f.cancelTurn(id)
	cw.waitType(events.TypeTurnAborted)
	pw.waitType(events.TypeTurnAborted)
	natstest.Eventually(t, "the remote task to be cancelled", func() bool { return w.cancels() == 1 })
}

// A remote agent that cannot be reached fails its turn with
// provider_error naming the agent; the parent's call gets an error
// result.
func TestRemoteSubAgentUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close()
	f := remoteFamily(t, srv.URL, startOne)
	id := newID("remote-gone")
	pw := f.watch(id)
	f.submit(events.TurnRequest{TurnID: id, Agent: "lead", Messages: []events.Message{events.UserText("weather?")}})
	pw.completed()
	if r := toolResult(t, pw.events(), "call_1"); !r.IsError || !strings.Contains(r.Content, "provider_error") || !strings.Contains(r.Content, "weather") {
		t.Fatalf("call result %+v; want an error naming the remote agent and provider_error", r)
	}
}

// A replica without an A2A client (turn.Config.RemoteAgents unset)
// refuses a turn of a remote agent: the child fails with no_a2a_client
// before any message reaches the remote, and the parent's call gets an
// error result naming it.
func TestRemoteSubAgentWithoutA2AClient(t *testing.T) {
	w := newWeatherAgent()
	f := remoteFamily(t, serveRemote(t, w, false, false), func(f *family) { f.startTurn(turn.Config{}) })
	id := newID("remote-noclient")
	childID := turn.ChildTurnID(id, "call_1")
	pw, cw := f.watch(id), f.watch(childID)
	f.submit(events.TurnRequest{TurnID: id, Agent: "lead", Messages: []events.Message{events.UserText("weather?")}})
	end := cw.waitEnd()
	if fl := decode[events.TurnEnded](t, end); end.Type != events.TypeTurnFailed || fl.Code != turn.CodeNoA2AClient || !strings.Contains(fl.Reason, "A2A client") {
		t.Fatalf("child ended with %s %s; want failed no_a2a_client naming the missing A2A client", end.Type, end.Data)
	}
	pw.completed()
	if r := toolResult(t, pw.events(), "call_1"); !r.IsError || !strings.Contains(r.Content, turn.CodeNoA2AClient) {
		t.Fatalf("call result %+v; want an error naming no_a2a_client", r)
	}
	if got := w.received(); len(got) != 0 {
		t.Fatalf("the remote received %s; want nothing", mustJSON(t, got))
	}
}
