package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/pkg/cenats"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/natstest"
)

// `turn submit --follow` renders a sub-agent's child turn, and the child
// of that child, indented under the call that runs it. No turn service
// runs here: the test stores the turns' events itself, shaped as
// docs/protocol.md ("Tool child") says, once the submit is stored.
func TestFollowIndentsChildTurns(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{Provision: true})
	subj := events.NewSubjects("")
	seq := map[string]uint64{}
	emit := func(turn string, evs ...events.WorkerEvent) {
		t.Helper()
		for _, ev := range evs {
			data, err := events.MarshalData(ev)
			if err != nil {
				t.Fatal(err)
			}
			seq[turn]++
			env := &events.Envelope{Source: "/llmw/test/1", Type: ev.WorkerType(), TurnID: turn, Seq: seq[turn], Data: data}
			if _, err := srv.JS.PublishMsg(natstest.Context(t), cenats.NewMsg(subj.Emit("", turn, ev.Channel()), env)); err != nil {
				t.Fatal(err)
			}
		}
	}
	text := func(step int, s string) []events.WorkerEvent {
		return []events.WorkerEvent{
			events.WorkerBlockStart{BlockStart: events.BlockStart{Index: 0, BlockType: events.BlockText}, Step: step},
			events.WorkerBlockDelta{BlockDelta: events.TextDelta(0, s), Step: step},
			events.WorkerBlockStop{BlockStop: events.BlockStop{Index: 0, BlockType: events.BlockText}, Step: step},
		}
	}
	subAgent := func(callID, name, child string, depth int, status events.ChildStatus) events.ToolChild {
		return events.ToolChild{CallID: callID, Name: name, ChildTurnID: child, Agent: name + "@3", Depth: depth, Status: status}
	}
	callOf := func(id, name, input string) events.ToolCallComplete {
		return events.ToolCallComplete{Step: 1, ID: id, Name: name, Input: json.RawMessage(input)}
	}

	out, errOut := &syncBuffer{}, &syncBuffer{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code := make(chan int, 1)
	go func() {
		code <- Main(ctx, []string{"turn", "submit", "--model", "m:x", "--prompt", "tidy up", "--id", "tR", "--follow"},
			Env{Getenv: envOf("NATS_URL", srv.URL()), Stdout: out, Stderr: errOut})
	}()
	waitFor := func(what string) {
		t.Helper()
		natstest.Eventually(t, what, func() bool { return strings.Contains(out.String(), what) })
	}
	waitFor("tR\n") // submitted: the turn id is printed

	emit("tR", events.TurnStarted{TurnID: "tR", Model: "m:x"}, events.TurnStep{Step: 1, Model: "m:x"},
		callOf("c1", "cleaner", `{"prompt":"tidy"}`), events.ToolStarted{CallID: "c1", Name: "cleaner"},
		subAgent("c1", "cleaner", "tC", 1, events.ChildStarted))
	waitFor("(turn tC): started")
	emit("tC", events.TurnStarted{TurnID: "tC", Model: "m:x", ParentTurnID: "tR", ParentCallID: "c1", RootTurnID: "tR", Depth: 1}, events.TurnStep{Step: 1, Model: "m:x"})
	emit("tC", text(1, "Looking at /tmp.")...)
	emit("tC", callOf("c5", "lister", `{"prompt":"list"}`), events.ToolStarted{CallID: "c5", Name: "lister"},
		subAgent("c5", "lister", "tG", 2, events.ChildStarted))
	waitFor("(turn tG): started")
	emit("tG", events.TurnStarted{TurnID: "tG", Model: "m:x", ParentTurnID: "tC", ParentCallID: "c5", RootTurnID: "tR", Depth: 2}, events.TurnStep{Step: 1, Model: "m:x"})
	emit("tG", text(1, "Two old files.\nBoth empty.")...)
	emit("tG", events.TurnCompleted{StopReason: events.StopEndTurn})
	waitFor("✓ completed")
	emit("tC", subAgent("c5", "lister", "tG", 2, events.ChildCompleted), events.ToolCallResult{CallID: "c5", Name: "lister", Content: "Two old files."},
		events.TurnCompleted{StopReason: events.StopEndTurn})
	waitFor("← lister")
	emit("tR", subAgent("c1", "cleaner", "tC", 1, events.ChildCompleted), events.ToolCallResult{CallID: "c1", Name: "cleaner", Content: "Done."},
		events.TurnStep{Step: 2, Model: "m:x"})
	emit("tR", text(2, "All tidy.")...)
	emit("tR", events.TurnCompleted{StopReason: events.StopEndTurn})
	if c := <-code; c != 0 {
		t.Fatalf("exit %d: %s\n%s", c, errOut.String(), out.String())
	}

	got := out.String()
	want := []string{
		"tR",
		"→ cleaner {\"prompt\":\"tidy\"}",
		"  … cleaner running",
		"  ↳ sub-agent cleaner@3 (turn tC): started",
		"  │ Looking at /tmp.",
		"  │ → lister {\"prompt\":\"list\"}",
		"  │   … lister running",
		"  │   ↳ sub-agent lister@3 (turn tG): started",
		"  │   │ Two old files.",
		"  │   │ Both empty.",
		"  │   │ ✓ completed",
		"  │   ↳ sub-agent lister@3 (turn tG): completed",
		"  │   ← lister (0 ms): Two old files.",
		"  │ ✓ completed",
		"  ↳ sub-agent cleaner@3 (turn tC): completed",
		"  ← cleaner (0 ms): Done.",
		"All tidy.",
		"✓ completed",
	}
	lines := strings.Split(strings.TrimRight(got, "\n"), "\n")
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("--follow printed:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}

	// tail --turn replays the tree the same way.
	r := runCLI(t, Env{Getenv: envOf("NATS_URL", srv.URL())}, "tail", "--turn", "tR")
	if r.code != 0 || r.stdout != strings.Join(want[1:], "\n")+"\n" {
		t.Errorf("tail --turn: exit %d, printed:\n%s\nwant:\n%s", r.code, r.stdout, strings.Join(want[1:], "\n"))
	}
	// So does tail --turn --follow=false, which stops once the tree has
	// caught up.
	r = runCLI(t, Env{Getenv: envOf("NATS_URL", srv.URL())}, "tail", "--turn", "tR", "--follow=false")
	if r.code != 0 || r.stdout != strings.Join(want[1:], "\n")+"\n" {
		t.Errorf("tail --turn --follow=false: exit %d, printed:\n%s\nwant:\n%s", r.code, r.stdout, strings.Join(want[1:], "\n"))
	}
}

// The sub-agent example of deploy/ is stored after the agent it calls,
// as the README's "Agents and sub-agents" puts them.
func TestDeploySubAgentExample(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{Provision: true})
	env := Env{Getenv: envOf("NATS_URL", srv.URL())}
	for _, f := range []string{"agents.example.yaml", "agents.travel.example.yaml"} {
		if r := runCLI(t, env, "agent", "put", "../../deploy/"+f); r.code != 0 {
			t.Fatalf("agent put %s: exit %d: %s%s", f, r.code, r.stdout, r.stderr)
		}
	}
	r := runCLI(t, env, "agent", "show", "travel")
	if r.code != 0 || !strings.Contains(r.stdout, "geo") {
		t.Fatalf("agent show travel: exit %d: %s%s", r.code, r.stdout, r.stderr)
	}
}

// chat asks about a paused child's call as about its own turn's, and
// the answer resumes the child's turn.
func TestChatApprovesAChildCall(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{Provision: true})
	subj := events.NewSubjects("")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, errOut := &syncBuffer{}, &syncBuffer{}
	code := make(chan int, 1)
	go func() {
		code <- Main(ctx, []string{"chat", "--model", "anthropic:x", "tidy up"},
			Env{Getenv: envOf("NATS_URL", srv.URL(), "ANTHROPIC_API_KEY", "k"), Stdin: strings.NewReader("a\n"), Stdout: out, Stderr: errOut})
	}()
	// The submitted turn's id, as the turn service would read it.
	cons, err := srv.JS.CreateOrUpdateConsumer(ctx, events.StreamTurns, jetstream.ConsumerConfig{
		Durable: "test", FilterSubjects: []string{subj.TurnSubmit(), subj.TurnResume()}, AckPolicy: jetstream.AckExplicitPolicy,
	})
	if err != nil {
		t.Fatal(err)
	}
	next := func() (string, events.ResumeRequest) {
		t.Helper()
		m, err := cons.Next(jetstream.FetchMaxWait(10 * time.Second))
		if err != nil {
			t.Fatalf("nothing submitted or resumed: %v\n%s%s", err, out.String(), errOut.String())
		}
		_ = m.Ack()
		env, err := events.DecodeEnvelope(m.Headers(), m.Data())
		if err != nil {
			t.Fatal(err)
		}
		var rq events.ResumeRequest
		_ = json.Unmarshal(env.Data, &rq)
		return env.Type, rq
	}
	typ, req := next()
	if typ != events.TypeTurnSubmit {
		t.Fatalf("first request %s", typ)
	}
	root := req.TurnID
	seq := map[string]uint64{}
	emit := func(turn string, evs ...events.WorkerEvent) {
		t.Helper()
		for _, ev := range evs {
			data, _ := events.MarshalData(ev)
			seq[turn]++
			env := &events.Envelope{Source: "/llmw/test/1", Type: ev.WorkerType(), TurnID: turn, Seq: seq[turn], Data: data}
			if _, err := srv.JS.PublishMsg(ctx, cenats.NewMsg(subj.Emit("", turn, ev.Channel()), env)); err != nil {
				t.Fatal(err)
			}
		}
	}
	pending := []events.ToolCall{{ID: "c7", Name: "delete", Input: json.RawMessage(`{"path":"/tmp/old"}`)}}
	emit(root, events.TurnStarted{TurnID: root}, events.ToolCallComplete{Step: 1, ID: "c1", Name: "cleaner", Input: json.RawMessage(`{"prompt":"tidy"}`)},
		events.ToolChild{CallID: "c1", Name: "cleaner", ChildTurnID: "tC", Depth: 1, Status: events.ChildStarted})
	emit("tC", events.TurnStarted{TurnID: "tC", ParentTurnID: root, ParentCallID: "c1", RootTurnID: root, Depth: 1},
		events.ToolCallComplete{Step: 1, ID: "c7", Name: "delete", Input: pending[0].Input},
		events.TurnPaused{Reason: "needs a person", Pending: pending})

	typ, rq := next()
	if typ != events.TypeTurnResume || rq.TurnID != "tC" || rq.Decisions["c7"].Kind != events.DecisionApprove {
		t.Fatalf("the answer: %s %+v, want the child tC's c7 approved", typ, rq)
	}
	emit("tC", events.TurnResumed{Decisions: rq.Decisions}, events.ToolCallResult{CallID: "c7", Name: "delete", Content: "deleted"},
		events.TurnCompleted{StopReason: events.StopEndTurn})
	emit(root, events.ToolChild{CallID: "c1", Name: "cleaner", ChildTurnID: "tC", Depth: 1, Status: events.ChildCompleted},
		events.ToolCallResult{CallID: "c1", Name: "cleaner", Content: "tidy"}, events.TurnCompleted{StopReason: events.StopEndTurn})
	if c := <-code; c != 0 {
		t.Fatalf("exit %d: %s\n%s", c, errOut.String(), out.String())
	}
	for _, want := range []string{"  │ ⏸ turn paused: needs a person", "approve delete c7?", "  │   ← delete (0 ms): deleted"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("chat printed no %q:\n%s", want, out.String())
		}
	}
}
