package turn_test

import (
	"context"
	"errors"
	"iter"
	"strings"
	"sync"
	"testing"
	"time"

	spec "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/llm/llmtest"
	"github.com/llmworker/llmworker/pkg/natstest"
	"github.com/llmworker/llmworker/pkg/turn"
)

// gatedAgent is a weatherAgent whose first task waits, before the
// remote answers anything, until gate is closed, then is submitted and
// says nothing more until hold is closed (then canceled); reached is closed when it
// starts waiting. Later tasks are the weatherAgent's.
type gatedAgent struct {
	*weatherAgent
	gate, reached, hold chan struct{}
	once                sync.Once
}

func (g *gatedAgent) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[spec.Event, error] {
	first := false
	g.once.Do(func() { first = true })
	if !first {
		return g.weatherAgent.Execute(ctx, ec)
	}
	return func(yield func(spec.Event, error) bool) {
		close(g.reached)
		select {
		case <-g.gate:
		case <-ctx.Done():
			return
		}
		if !yield(spec.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		select {
		case <-g.hold:
			yield(spec.NewStatusUpdateEvent(ec, spec.TaskStateCanceled, nil), nil)
		case <-ctx.Done():
		}
	}
}

// A replica whose NATS connection closes while its run of a remote
// agent's turn waits for the remote's answer cannot store the task the
// remote then names, and the task says nothing more: the run ends at
// once instead of retrying the write on a connection that never comes
// back, and another replica takes the turn (and its parent) over and
// completes it.
func TestRemoteRunEndsWhenItsConnectionCloses(t *testing.T) {
	g := &gatedAgent{weatherAgent: newWeatherAgent(), gate: make(chan struct{}), reached: make(chan struct{}), hold: make(chan struct{})}
	var freeGate sync.Once
	open := func() { freeGate.Do(func() { close(g.gate) }) }
	url := serveRemote(t, g, false, false)
	t.Cleanup(func() { open(); close(g.hold) }) // before the server closes
	var a *turn.Service
	var ncA *nats.Conn
	f := remoteFamily(t, url, func(f *family) {
		ncA = f.connect()
		var err error
		a, err = turn.New(ncA, turn.Config{Instance: "a", Logger: quietLogger(), AckWait: time.Second,
			RetryTimeout: 30 * time.Second, RemoteAgents: a2aClient})
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
	id := newID("remote-closed")
	childID := turn.ChildTurnID(id, "call_1")
	pw, cw := f.watch(id), f.watch(childID)
	f.submit(events.TurnRequest{TurnID: id, Agent: "lead", Messages: []events.Message{events.UserText("weather?")}})
	<-g.reached
	cw.waitType(events.TypeTurnStarted)
	ncA.Close() // the replica's connection is gone while the remote works
	open()

	f.startTurn(turn.Config{Instance: "b", AckWait: time.Second, RemoteAgents: a2aClient})
	pw.completed()
	if r := toolResult(t, pw.events(), "call_1"); r.IsError || r.Content != "Sunny in Paris" {
		t.Fatalf("call result %+v; want the remote's artifact", r)
	}
	natstest.Eventually(t, "replica a's runs to end", func() bool { return len(a.Running()) == 0 })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.Stop(ctx); err != nil {
		t.Fatalf("Stop of replica a: %v; want its runs ended", err)
	}
}

// stallStateReads has the server deliver every read of LLMW_TURN_STATE
// from its stream's leader ($JS.API.STREAM.MSG.GET, readState) to a
// subscriber that never answers, as a stream whose leader is gone leaves
// them: the reader waits for its own timeout. It returns a channel that
// gets each read held and a function that ends the stall (also at the
// test's end).
func stallStateReads(t *testing.T, e *env) (<-chan *nats.Msg, func()) {
	t.Helper()
	held := make(chan *nats.Msg, 64)
	sub, err := e.nc.ChanSubscribe("stalled.state.get", held)
	if err != nil {
		t.Fatal(err)
	}
	acc := e.emb.Server.GlobalAccount()
	get := jetstream.DefaultAPIPrefix + "STREAM.MSG.GET.KV_" + events.BucketTurnState
	if err := acc.AddMapping(get, "stalled.state.get"); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	end := func() {
		once.Do(func() {
			acc.RemoveMapping(get)
			_ = sub.Unsubscribe()
		})
	}
	t.Cleanup(end)
	return held, end
}

// A replica stops (Stop) while a parent it runs waits for its child and
// its read of the child's state gets no answer from the stream's leader:
// the read ends with the drain, the parent is handed off within the
// drain's time, and another replica takes it over and completes it with
// the child's answer.
func TestStopOfAWaitingParentEndsAStalledRead(t *testing.T) {
	f, _ := geoFamily(t)
	f.scriptResearch("Paris, approved.")
	a := f.startTurn(turn.Config{Instance: "a", AckWait: 2 * time.Second, Hooks: pauseChain(t)})
	id := newID("stalled-parent")
	childID := turn.ChildTurnID(id, "call_1")
	w, cw := f.watch(id), f.watch(childID)
	f.submit(events.TurnRequest{TurnID: id, Agent: "lead", Messages: []events.Message{events.UserText("capital of France?")}})
	cw.waitType(events.TypeTurnPaused)
	w.waitFor("llmw.tool.child paused", func(evs []ev) bool { return strings.Contains(statuses(childEvents(t, evs)), "paused") })
	held, unstall := stallStateReads(t, f.env)
	select {
	case <-held: // the parent's read of its child's state, unanswered
	case <-time.After(waitFor):
		t.Fatal("the waiting parent read no state of its child")
	}
	// Well under kvTimeout (10 s), which bounds a read the drain does not
	// end.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := a.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v; want the waiting parent handed off within the drain", err)
	}
	unstall()

	f.startTurn(turn.Config{Instance: "b", AckWait: 2 * time.Second, Hooks: pauseChain(t)})
	f.resume(events.ResumeRequest{TurnID: childID, Decisions: map[string]events.Decision{"c1": {Kind: events.DecisionApprove}}})
	c := w.completed()
	if got := c.Messages[len(c.Messages)-1].Text(); got != "Paris, approved." {
		t.Fatalf("parent's answer %q", got)
	}
	if r := toolResult(t, w.events(), "call_1"); r.IsError || r.Content != "Paris" {
		t.Fatalf("call result %+v; want the child's answer", r)
	}
	if n := count(w.events(), events.TypeTurnStarted); n < 2 {
		t.Fatalf("%d llmw.turn.started of the parent; want it handed off and continued", n)
	}
}

// A replica stops (Stop) while its run retries the turn's final state
// write, which the bucket refuses: once the drain's time runs out the
// run is handed off and gives the write up instead of retrying it for
// RetryTimeout, and the replica that takes the request over records the
// end.
func TestStopEndsTheRetriesOfAHandedOffRun(t *testing.T) {
	e := newEnv(t)
	id := newID("stop-retrying")
	restore := make(chan func(), 1)
	step := llmtest.TextStep("the answer")
	step.OnCall = func(ctx context.Context, _ *llm.Request) error {
		// The checkpoint before this call is stored (written while the
		// call is made); the final write is refused.
		e.awaitRevision(id, 2)
		restore <- e.refuseStateWrites()
		return nil
	}
	e.scripted(llmtest.NewScripted(step))
	a := e.startTurn(turn.Config{Instance: "a", AckWait: 2 * time.Second, RetryTimeout: 30 * time.Second})
	w := e.watch(id)
	e.submit(events.TurnRequest{TurnID: id, Model: "test:m", Messages: []events.Message{events.UserText("go")}})
	w.completed()
	undo := <-restore
	stopped := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		stopped <- a.Stop(ctx)
	}()
	select {
	case err := <-stopped:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Stop: %v; want the drain's time run out (the final write refused)", err)
		}
	case <-time.After(10 * time.Second): // well under RetryTimeout
		t.Fatal("Stop still waits for the final write of a run it handed off")
	}
	undo()
	e.startTurn(turn.Config{Instance: "b", AckWait: 2 * time.Second})
	ctx := natstest.Context(t)
	natstest.Eventually(t, "the state to record the end", func() bool {
		st, ok, err := turn.LoadState(ctx, e.js, id)
		return err == nil && ok && st.Status == turn.StatusCompleted
	})
	if n := count(w.events(), events.TypeTurnCompleted); n != 1 {
		t.Fatalf("%d completed events:%s", n, describe(w.events()))
	}
}
