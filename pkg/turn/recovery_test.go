package turn_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/internal/leaf/poll"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/hook"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/llm/llmtest"
	"github.com/llmworker/llmworker/pkg/natstest"
	"github.com/llmworker/llmworker/pkg/tool"
	"github.com/llmworker/llmworker/pkg/toolexec"
	"github.com/llmworker/llmworker/pkg/turn"
	"github.com/llmworker/llmworker/pkg/worker"
)

func countingTool(name string, runs *atomic.Int64, release <-chan struct{}) tool.Tool {
	return tool.Must(name, "counts its runs", func(ctx context.Context, _ noArgs) (string, error) {
		runs.Add(1)
		if release != nil {
			select {
			case <-release:
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}
		return name + " done", nil
	})
}

// A replica stopped mid-stream (Stop with a tiny timeout) hands the turn
// off: another replica aborts the half-streamed block, makes the model call
// again and finishes; the tool of the first step does not run again and
// seq goes on without a gap.
func TestReplicaStoppedMidStream(t *testing.T) {
	e := newEnv(t)
	e.scripted(llmtest.NewScripted(
		llmtest.ToolStep(llmtest.ToolCallSpec{ID: "c1", Name: "count", Input: `{}`}),
		llmtest.BlockingStep("half an ans"),
		llmtest.TextStep("the whole answer"),
	))
	var runs atomic.Int64
	e.startToolexec(toolexec.Config{}, countingTool("count", &runs, nil))
	// The turn is not over when a hands it off: a runs no on_abort hook.
	var aborts atomic.Int64
	chain := &hook.Chain{}
	_ = chain.OnAbort(hook.Func[hook.AbortInput, hook.AbortResult](func(context.Context, *hook.AbortInput) (hook.AbortResult, error) {
		aborts.Add(1)
		return hook.AbortResult{}, nil
	}), hook.Options{Name: "count_aborts"})
	a, err := turn.New(e.connect(), turn.Config{Instance: "a", Logger: quietLogger(), AckWait: 2 * time.Second, Hooks: chain})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	id := newID("handoff")
	w := e.watch(id)
	e.submit(events.TurnRequest{TurnID: id, Model: "test:m", Messages: []events.Message{events.UserText("go")}, Tools: []string{"count"}})
	w.waitFor("the second step streaming", func(evs []ev) bool {
		return count(evs, events.TypeBlockDelta) > 0 && count(evs, events.TypeTurnStep) == 2 &&
			strings.Contains(string(evs[len(evs)-1].Data), "half an ans")
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	_ = a.Stop(ctx) // too short: the turn is handed off
	before := len(w.events())

	e.startTurn(turn.Config{Instance: "b", AckWait: 2 * time.Second})
	done := w.completed()
	evs := w.events()
	checkSeq(t, evs)
	// Nothing was published by a after the hand-off but before b: b's first
	// event is the abort of the half-streamed block.
	if evs[before].Type != events.TypeBlockAbort {
		t.Fatalf("first event after the hand-off is %s:%s", evs[before].Type, describe(evs))
	}
	abort := decode[events.WorkerBlockAbort](t, evs[before])
	if abort.Step != 2 || abort.BlockType != events.BlockText {
		t.Fatalf("abort %+v", abort)
	}
	if st := decode[events.TurnStarted](t, evs[before+1]); evs[before+1].Type != events.TypeTurnStarted || !st.Resumed {
		t.Fatalf("after the abort: %s %s", evs[before+1].Type, evs[before+1].Data)
	}
	if got := done.Messages[len(done.Messages)-1].Text(); got != "the whole answer" {
		t.Fatalf("final text %q", got)
	}
	if runs.Load() != 1 {
		t.Fatalf("the tool ran %d times", runs.Load())
	}
	if aborts.Load() != 0 {
		t.Fatalf("the handing-off replica ran on_abort hooks %d times", aborts.Load())
	}
	e.consumerIdle(t)
}

// A replica whose connection dies while its tools run: after AckWait
// another replica resumes from the checkpoint; the tool that finished is
// not run again, the one still running on toolexec delivers its one result
// to the new replica.
func TestReplicaDiesMidToolCall(t *testing.T) {
	e := newEnv(t)
	e.scripted(llmtest.NewScripted(
		llmtest.ToolStep(llmtest.ToolCallSpec{ID: "f1", Name: "fast", Input: `{}`}, llmtest.ToolCallSpec{ID: "s1", Name: "slow", Input: `{}`}),
		llmtest.TextStep("all done"),
	))
	var fastRuns, slowRuns atomic.Int64
	release := make(chan struct{})
	e.startToolexec(toolexec.Config{}, countingTool("fast", &fastRuns, nil), countingTool("slow", &slowRuns, release))

	ncA := e.connect()
	a, err := turn.New(ncA, turn.Config{Instance: "a", Logger: quietLogger(), AckWait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	id := newID("dies")
	w := e.watch(id)
	e.submit(events.TurnRequest{TurnID: id, Model: "test:m", Messages: []events.Message{events.UserText("go")}, Tools: []string{"*"}})
	// fast finished (its result is on the turn's events), slow runs.
	w.waitFor("the fast result", func(evs []ev) bool { return count(evs, events.TypeToolResult) == 1 })
	natstest.Eventually(t, "slow to run", func() bool { return slowRuns.Load() == 1 })
	ncA.Close() // the replica is gone

	e.startTurn(turn.Config{Instance: "b", AckWait: time.Second})
	// b re-dispatched slow (dropped as a duplicate) and waits for its result.
	w.waitFor("b to take over", func(evs []ev) bool { return count(evs, events.TypeTurnStarted) == 2 })
	close(release)
	done := w.completed()
	_, results := toolUses(done.Messages)
	if results["f1"].Content != "fast done" || results["s1"].Content != "slow done" {
		t.Fatalf("results %+v", results)
	}
	if fastRuns.Load() != 1 || slowRuns.Load() != 1 {
		t.Fatalf("fast ran %d, slow ran %d times; want once each", fastRuns.Load(), slowRuns.Load())
	}
	checkSeq(t, w.events())
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_ = a.Stop(ctx)
}

// With an ephemeral store (Config.Ephemeral: the store goes with the
// process) nothing could continue a turn after Stop, so Stop ends every
// turn with an event instead of handing it off: the running one when the
// deadline passes, the paused one at once. A client waiting on either gets
// llmw.turn.aborted.
func TestEphemeralStopEndsTurns(t *testing.T) {
	e := newEnv(t)
	e.scripted(llmtest.NewScripted(
		llmtest.ToolStep(llmtest.ToolCallSpec{ID: "call_1", Name: "get_capital", Input: `{"country":"France"}`}),
		llmtest.BlockingStep("half an ans"),
	))
	var runs atomic.Int64
	e.startToolexec(toolexec.Config{}, capitalTool(&runs))
	s, err := turn.New(e.connect(), turn.Config{Instance: "only", Logger: quietLogger(), Hooks: pauseChain(t), Ephemeral: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	paused, running := newID("eph-paused"), newID("eph-running")
	wp, wr := e.watch(paused), e.watch(running)
	e.submit(events.TurnRequest{TurnID: paused, Model: "test:m", Messages: []events.Message{events.UserText("capital?")}, Tools: []string{"get_capital"}})
	if end := wp.waitEnd(); end.Type != events.TypeTurnPaused {
		t.Fatalf("first turn ended with %s", end.Type)
	}
	e.submit(events.TurnRequest{TurnID: running, Model: "test:m", Messages: []events.Message{events.UserText("go")}})
	wr.waitFor("the answer streaming", func(evs []ev) bool { return count(evs, events.TypeBlockDelta) > 0 })

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := s.Stop(ctx); err != nil {
		t.Fatalf("Stop = %v; an ephemeral stop hands nothing off", err)
	}
	for _, w := range []*watcher{wp, wr} {
		end := w.waitFor("llmw.turn.aborted", func(evs []ev) bool { return find(evs, events.TypeTurnAborted) >= 0 })
		ab := decode[events.TurnEnded](t, end[find(end, events.TypeTurnAborted)])
		if ab.Code != turn.CodeCancelled || !strings.Contains(ab.Reason, "temporary") {
			t.Errorf("aborted %+v: want code cancelled and a reason naming the temporary store", ab)
		}
	}
	for _, id := range []string{paused, running} {
		st, ok, err := turn.LoadState(context.Background(), e.js, id)
		if err != nil || !ok || st.Status != turn.StatusAborted {
			t.Errorf("%s: state %+v %v %v, want aborted", id, st, ok, err)
		}
	}
	if runs.Load() != 0 {
		t.Errorf("the paused call ran %d times", runs.Load())
	}
}

// A cancel of a turn whose replica died is not lost: no replica runs the
// turn when the cancel comes, so the one that takes it over (after
// AckWait) applies it, and the turn ends aborted instead of running on.
func TestCancelOfATurnWhoseReplicaDied(t *testing.T) {
	e := newEnv(t)
	// A's answer streams slowly (and ends: nothing cancels it once A is
	// gone); a takeover would get the whole answer.
	slow := make([]string, 40)
	for i := range slow {
		slow[i] = "word "
	}
	e.scripted(llmtest.NewScripted(llmtest.TextStep(slow...).WithDelay(50*time.Millisecond), llmtest.TextStep("the whole answer")))
	ncA := e.connect()
	a, err := turn.New(ncA, turn.Config{Instance: "a", Logger: quietLogger(), AckWait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	id := newID("orphan")
	w := e.watch(id)
	e.submit(events.TurnRequest{TurnID: id, Model: "test:m", Messages: []events.Message{events.UserText("go")}})
	w.waitFor("the answer streaming", func(evs []ev) bool { return count(evs, events.TypeBlockDelta) > 0 })
	e.startTurn(turn.Config{Instance: "b", AckWait: time.Second})
	cid, err := ncA.GetClientID()
	if err != nil {
		t.Fatal(err)
	}
	ncA.Close() // a is gone with the turn
	// The cancel goes out once the server has dropped a's subscriptions:
	// one that reaches a replica as it dies is lost, as any core NATS
	// message (docs/protocol.md, "Cancel").
	poll.Until(t, 5*time.Second, "a's connection closed at the server", func() bool {
		cz, err := e.emb.Server.Connz(&server.ConnzOptions{CID: cid})
		return err == nil && len(cz.Conns) == 0
	})
	if err := e.nc.Publish(e.subj.TurnCancel(id), nil); err != nil {
		t.Fatal(err)
	}
	end := w.waitEnd()
	if end.Type != events.TypeTurnAborted {
		t.Fatalf("the turn ended %s, want aborted by the cancel:%s", end.Type, describe(w.events()))
	}
	if ab := decode[events.TurnEnded](t, end); ab.Code != turn.CodeCancelled {
		t.Fatalf("aborted %+v", ab)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_ = a.Stop(ctx)
}

// A replica that claims a turn after its owner's last checkpoint but whose
// claim events never get in before the owner's end (a claim written into
// the state, as a claimant that then gave up its claim after ten lost
// attempts leaves it) does not leave the state saying running until the
// request's next delivery, an AckWait later: the owner, whose end is
// stored, records it over the claim and acknowledges the request.
func TestEndRecordedOverAClaimThatCameTooLate(t *testing.T) {
	e := newEnv(t)
	id := newID("late-claim")
	claimed := make(chan error, 1)
	step := llmtest.TextStep("the answer")
	step.OnCall = func(ctx context.Context, _ *llm.Request) error {
		// Once the checkpoint before this model call is stored (it is
		// written while the call is made), claim it.
		e.awaitRevision(id, 2)
		claimed <- e.claimState(id, "b")
		return nil
	}
	e.scripted(llmtest.NewScripted(step))
	// An AckWait far beyond the wait below: the request must not need a
	// redelivery for the state to record the end.
	e.startTurn(turn.Config{Instance: "a", AckWait: 2 * time.Minute})
	w := e.watch(id)
	e.submit(events.TurnRequest{TurnID: id, Model: "test:m", Messages: []events.Message{events.UserText("go")}})
	w.completed()
	if err := <-claimed; err != nil {
		t.Fatalf("claim: %v", err)
	}
	var st *turn.State
	natstest.Eventually(t, "the state to record the end", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		s, ok, err := turn.LoadState(ctx, e.js, id)
		st = s
		return err == nil && ok && s.Status != turn.StatusRunning
	})
	if st.Status != turn.StatusCompleted || st.Owner != "a" {
		t.Fatalf("state %s by %q, want completed by a", st.Status, st.Owner)
	}
	e.consumerIdle(t)
}

// awaitRevision waits until turn id's state has had rev writes: a new
// turn's state is created (1), then its first checkpoint is written (2).
func (e *env) awaitRevision(id string, rev uint64) {
	natstest.Eventually(e.t, fmt.Sprintf("revision %d of the state", rev), func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		kv, err := e.js.KeyValue(ctx, events.BucketTurnState)
		if err != nil {
			return false
		}
		entry, err := kv.Get(ctx, turn.StateKey(id))
		return err == nil && entry.Revision() >= rev
	})
}

// The checkpoint before a model call is written while the call is made:
// here the state takes no write while the second model call runs, and the
// call is made all the same. Its checkpoint then fails (the bucket took
// no write for RetryTimeout), which stops the call and hands the turn
// off: the request's next delivery continues it from the checkpoint that
// was stored, with the tool's result, once the bucket takes writes again.
func TestModelCallMadeWhileItsCheckpointIsWritten(t *testing.T) {
	e := newEnv(t)
	id := newID("pipelined")
	restore := make(chan func(), 1)
	var runs atomic.Int64
	refusing := tool.Must("refusing", "makes the state refuse writes", func(ctx context.Context, _ noArgs) (string, error) {
		if runs.Add(1) == 1 {
			restore <- e.refuseStateWrites()
		}
		return "done", nil
	})
	called := make(chan string, 1)
	second := llmtest.BlockingStep("never fin")
	second.OnCall = func(ctx context.Context, _ *llm.Request) error {
		rctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		st, _, err := turn.LoadState(rctx, e.js, id)
		if err != nil || st.Checkpoint == nil {
			called <- fmt.Sprintf("no checkpoint (%v)", err)
		} else {
			called <- string(st.Checkpoint.Phase)
		}
		return nil
	}
	e.scripted(llmtest.NewScripted(
		llmtest.ToolStep(llmtest.ToolCallSpec{ID: "c1", Name: "refusing", Input: `{}`}),
		second,
		llmtest.TextStep("the answer"),
	))
	e.startToolexec(toolexec.Config{}, refusing)
	e.startTurn(turn.Config{Instance: "a", AckWait: 2 * time.Minute, RetryTimeout: 300 * time.Millisecond})
	w := e.watch(id)
	e.submit(events.TurnRequest{TurnID: id, Model: "test:m", Messages: []events.Message{events.UserText("go")}, Tools: []string{"refusing"}})
	select {
	case phase := <-called:
		if phase != string(worker.PhaseTools) {
			t.Fatalf("the state during the second model call: %s, want the first step's phase %q (its own checkpoint not stored yet)", phase, worker.PhaseTools)
		}
	case <-time.After(waitFor):
		t.Fatalf("no second model call:%s", describe(w.events()))
	}
	// The run hands the turn off once it stopped the call (the call blocks
	// until then).
	e.awaitRedelivery()
	(<-restore)()
	done := w.completed()
	if got := done.Messages[len(done.Messages)-1].Text(); got != "the answer" {
		t.Fatalf("final text %q", got)
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("the tool ran %d times", n)
	}
	evs := w.events()
	if n := count(evs, events.TypeTurnCompleted); n != 1 {
		t.Fatalf("%d completed events:%s", n, describe(evs))
	}
	checkSeq(t, evs)
	e.consumerIdle(t)
}

// claimState rewrites turn id's state as a replica claiming it does: the
// same state with another owner, at the revision it read.
func (e *env) claimState(id, owner string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	kv, err := e.js.KeyValue(ctx, events.BucketTurnState)
	if err != nil {
		return err
	}
	entry, err := kv.Get(ctx, turn.StateKey(id))
	if err != nil {
		return err
	}
	var st turn.State
	if err := json.Unmarshal(entry.Value(), &st); err != nil {
		return err
	}
	if st.Status != turn.StatusRunning {
		return fmt.Errorf("state %s, want running", st.Status)
	}
	st.Owner = owner
	b, err := json.Marshal(&st)
	if err != nil {
		return err
	}
	_, err = kv.Update(ctx, turn.StateKey(id), b, entry.Revision())
	return err
}

// A turn whose end is stored in its events but whose state took no write
// (the bucket refused every write for RetryTimeout) is not left saying
// running with its request gone: the request comes back, and a replica
// records the end from the events once the bucket takes writes again,
// without publishing a second end.
func TestEndRecordedAfterTheStateTookNoWrite(t *testing.T) {
	e := newEnv(t)
	id := newID("no-write")
	restore := make(chan func(), 1)
	step := llmtest.TextStep("the answer")
	step.OnCall = func(ctx context.Context, _ *llm.Request) error {
		// Once the checkpoint before this model call is stored (it is
		// written while the call is made), the final write that follows
		// it is refused.
		e.awaitRevision(id, 2)
		restore <- e.refuseStateWrites()
		return nil
	}
	e.scripted(llmtest.NewScripted(step))
	e.startTurn(turn.Config{Instance: "a", AckWait: 2 * time.Minute, RetryTimeout: 300 * time.Millisecond})
	w := e.watch(id)
	e.submit(events.TurnRequest{TurnID: id, Model: "test:m", Messages: []events.Message{events.UserText("go")}})
	w.completed()
	undo := <-restore
	ctx := natstest.Context(t)
	cons := e.awaitRedelivery()
	if st, ok, err := turn.LoadState(ctx, e.js, id); err != nil || !ok || st.Status != turn.StatusRunning {
		t.Fatalf("state before the bucket takes writes: %+v, %v, %v", st, ok, err)
	}
	undo()
	natstest.Eventually(t, "the state to record the end", func() bool {
		st, ok, err := turn.LoadState(ctx, e.js, id)
		return err == nil && ok && st.Status == turn.StatusCompleted
	})
	natstest.Eventually(t, "the request to be answered", func() bool {
		info, err := cons.Info(ctx)
		return err == nil && info.NumPending == 0 && info.NumAckPending == 0
	})
	evs := w.events()
	if n := count(evs, events.TypeTurnCompleted); n != 1 {
		t.Fatalf("%d completed events:%s", n, describe(evs))
	}
	checkSeq(t, evs)
}

// awaitRedelivery waits until a turn request was delivered again and
// returns the turn service's consumer.
func (e *env) awaitRedelivery() jetstream.Consumer {
	e.t.Helper()
	ctx := natstest.Context(e.t)
	cons, err := e.js.Consumer(ctx, events.StreamTurns, turn.ConsumerName)
	if err != nil {
		e.t.Fatal(err)
	}
	natstest.Eventually(e.t, "the request to come back", func() bool {
		info, err := cons.Info(ctx)
		return err == nil && info.NumRedelivered > 0
	})
	return cons
}

// refuseStateWrites makes LLMW_TURN_STATE refuse every write (its
// messages may be no larger than 16 bytes) and returns what undoes it.
func (e *env) refuseStateWrites() func() {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := e.js.Stream(ctx, "KV_"+events.BucketTurnState)
	if err != nil {
		e.t.Error(err)
		return func() {}
	}
	cfg := s.CachedInfo().Config
	was := cfg.MaxMsgSize
	cfg.MaxMsgSize = 16
	if _, err := e.js.UpdateStream(ctx, cfg); err != nil {
		e.t.Error(err)
		return func() {}
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		cfg.MaxMsgSize = was
		if _, err := e.js.UpdateStream(ctx, cfg); err != nil {
			e.t.Error(err)
		}
	}
}

// A submit of a running turn sent again with its data (a client's retry,
// or a parent continued on another replica submitting its child again)
// that a replica dispatches just as the turn's own request comes back
// to it, its replica dead, does not take the turn's continuation with
// it: the duplicate is acknowledged, and the turn's request waits for it
// and continues the turn there.
func TestDuplicateSubmitDoesNotSwallowARecovery(t *testing.T) {
	e := newEnv(t)
	slow := make([]string, 40)
	for i := range slow {
		slow[i] = "word "
	}
	e.scripted(llmtest.NewScripted(llmtest.TextStep(slow...).WithDelay(50*time.Millisecond), llmtest.TextStep("the whole answer")))
	ncA := e.connect()
	a, err := turn.New(ncA, turn.Config{Instance: "a", Logger: quietLogger(), AckWait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	id := newID("dup-recovery")
	req := events.TurnRequest{TurnID: id, Model: "test:m", Messages: []events.Message{events.UserText("go")}}
	w := e.watch(id)
	e.submit(req)
	w.waitFor("the answer streaming", func(evs []ev) bool { return count(evs, events.TypeBlockDelta) > 0 })

	// On b, the duplicate is dispatched first and holds the turn's place
	// until the turn's redelivered request has found it there.
	dupIn, found := make(chan struct{}), make(chan struct{})
	var dupOnce, foundOnce sync.Once
	turn.SetDispatchHook(t, func(stage, turnID string, redelivered bool) {
		if turnID != id {
			return
		}
		switch {
		case stage == "arrived" && redelivered:
			wait(dupIn)
		case stage == "registered" && !redelivered:
			dupOnce.Do(func() { close(dupIn) })
			wait(found)
		case stage == "found run" && redelivered:
			foundOnce.Do(func() { close(found) })
		}
	})
	ncA.Close() // a is gone with the turn
	e.submit(req)
	e.startTurn(turn.Config{Instance: "b", AckWait: time.Second})
	if c := w.completed(); c.Messages[len(c.Messages)-1].Text() != "the whole answer" {
		t.Fatalf("the turn completed with %q, want the answer of the model call b made again", c.Messages[len(c.Messages)-1].Text())
	}
	select {
	case <-found:
	default:
		t.Fatal("the turn's redelivered request never found the duplicate's run: the situation under test did not arise")
	}
	e.consumerIdle(t)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_ = a.Stop(ctx)
}

// wait waits for c to be closed, for waitFor at most.
func wait(c <-chan struct{}) {
	select {
	case <-c:
	case <-time.After(waitFor):
	}
}

// A turn whose state create was stored but failed for its replica (its
// acknowledgement lost while a node restarts) published nothing: the
// replica that continues it when its request comes back starts it, with
// one llmw.turn.started that is not resumed and carries the turn's
// input, as a client following the turn from its first event expects.
func TestTurnWhoseCreateFailedAfterItWasStoredStartsOnce(t *testing.T) {
	e := newEnv(t)
	e.scripted(llmtest.NewScripted(llmtest.TextStep("the answer")))
	id := newID("lost-create")
	var failed atomic.Bool
	turn.SetAfterStateCreated(t, func(turnID string) error {
		if turnID == id && failed.CompareAndSwap(false, true) {
			return context.DeadlineExceeded
		}
		return nil
	})
	e.startTurn(turn.Config{Instance: "a", AckWait: 2 * time.Second})
	w := e.watch(id)
	e.submit(events.TurnRequest{TurnID: id, Model: "test:m", Messages: []events.Message{events.UserText("go")}})
	if c := w.completed(); c.Messages[len(c.Messages)-1].Text() != "the answer" {
		t.Fatalf("the turn completed with %q", c.Messages[len(c.Messages)-1].Text())
	}
	if !failed.Load() {
		t.Fatal("no state create failed: the situation under test did not arise")
	}
	var starts []events.TurnStarted
	for _, e := range w.events() {
		if e.Type == events.TypeTurnStarted {
			starts = append(starts, decode[events.TurnStarted](t, e))
		}
	}
	if len(starts) != 1 || starts[0].Resumed {
		t.Fatalf("llmw.turn.started events %+v; want one, not resumed", starts)
	}
	if in := starts[0].Input; len(in) != 1 || in[0].Text() != "go" {
		t.Fatalf("the start's input %+v; want the request's message", in)
	}
}
