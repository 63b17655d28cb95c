//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/internal/leaf/jsread"
	"github.com/llmworker/llmworker/internal/replay"
	"github.com/llmworker/llmworker/internal/replay/demotools"
	"github.com/llmworker/llmworker/pkg/agents"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/turn"
)

// submit publishes a turn request for a replay scenario, as a client does:
// retried until JetStream stores it (the turn id is the Nats-Msg-Id, so a
// retry after a lost ack is dropped as a duplicate).
func (c *cluster) submit(turnID, scenario string) {
	c.t.Helper()
	c.submitTraced(turnID, scenario, "")
}

// submitTraced is submit with a W3C traceparent on the request, as a
// traced client sends it: the turn's spans join that trace.
func (c *cluster) submitTraced(turnID, scenario, traceparent string) {
	c.t.Helper()
	var req events.TurnRequest
	if scenario == agentScenario {
		c.putAgents()
		req = events.TurnRequest{TurnID: turnID, Agent: leadAgent, Messages: []events.Message{events.UserText("What is the temperature of the capital of France?")}}
	} else {
		sc, err := replay.Lookup(scenario)
		if err != nil {
			c.t.Fatal(err)
		}
		req = events.TurnRequest{
			TurnID:   turnID,
			Model:    sc.ModelString(),
			Messages: []events.Message{events.UserText(sc.Prompt)},
			Tools:    []string{"*"},
		}
	}
	env, err := events.NewEnvelope(events.Source("e2e", "test"), events.TypeTurnSubmit, req)
	if err != nil {
		c.t.Fatal(err)
	}
	env.Subject, env.TurnID, env.TraceParent = turnID, turnID, traceparent
	h := nats.Header(env.BinaryHeader())
	h.Set(events.HeaderMsgID, turnID)
	c.retry("submit "+turnID, func(ctx context.Context) error {
		_, err := c.js.PublishMsg(ctx, &nats.Msg{Subject: c.subj.TurnSubmit(), Header: h, Data: env.Data})
		return err
	})
}

// agentScenario is the turn of the turn mix that runs a sub-agent: the
// agent leadAgent (the gemini recording) has the demo get_temperature
// and, as its sub-agent, the agent get_capital (the openai recording,
// with the demo get_capital), whose input is the tool's {"country": …}:
// the recorded get_capital call runs a child turn, whose answer the
// recording's next step reads as the call's result.
const agentScenario = "agent"

// leadAgent is the agent of agentScenario's turns.
const leadAgent = "e2e-lead"

// scenarioNames are the scenarios of a turn mix: the replay scenarios
// and agentScenario.
func scenarioNames() []string { return append(replay.Names(), agentScenario) }

// putAgents stores the agents of agentScenario, once per cluster.
func (c *cluster) putAgents() {
	c.t.Helper()
	c.agentsOnce.Do(func() {
		reg := agents.New(c.js)
		for _, def := range []events.AgentDefinition{
			{Name: "get_capital", Description: "The capital city of a country.", Model: "replay:openai", Tools: []string{"get_capital"},
				InputSchema: json.RawMessage(`{"type":"object","properties":{"country":{"type":"string"}},"required":["country"]}`)},
			{Name: leadAgent, Model: "replay:gemini", Tools: []string{"get_temperature"}, Agents: []string{"get_capital"}},
		} {
			c.retry("put agent "+def.Name, func(ctx context.Context) error {
				_, _, err := reg.Put(ctx, def, agents.PutOptions{})
				return err
			})
		}
	})
}

// follower records a turn's worker events from LLMW_EVENTS with an ordered
// consumer, as a UI does (it survives a node loss by recreating itself).
type follower struct {
	c      *cluster
	turnID string
	mu     sync.Mutex
	evs    []*events.Envelope
	errs   []string
	done   bool // the events were read from the stream; the consumer is stopped
	cc     jetstream.ConsumeContext
	quit   chan struct{}
	exited chan struct{}
}

// follow starts a follower. Creating its consumer is retried in the
// background for as long as the test runs: around a node loss the cluster
// can take a minute or more to place a new consumer (a UI would keep
// retrying too), and the checks read the stream directly in the end
// (completed, readAll), so a follower that is late costs nothing.
func (c *cluster) follow(turnID string) *follower {
	c.t.Helper()
	f := &follower{c: c, turnID: turnID, quit: make(chan struct{}), exited: make(chan struct{})}
	ready := make(chan struct{})
	go f.start(ready)
	c.t.Cleanup(f.stop)
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		c.t.Logf("follow %s: its consumer is not up yet; still trying", turnID)
	}
	return f
}

func (f *follower) start(ready chan struct{}) {
	defer close(f.exited)
	for attempt := 0; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		cons, err := f.c.js.OrderedConsumer(ctx, events.StreamEvents, jetstream.OrderedConsumerConfig{
			FilterSubjects: []string{f.c.subj.EventsOfTurn(f.turnID)},
		})
		cancel()
		var cc jetstream.ConsumeContext
		if err == nil {
			cc, err = cons.Consume(f.record)
		}
		if err == nil {
			f.mu.Lock()
			if f.done {
				f.mu.Unlock()
				cc.Stop()
				return
			}
			f.cc = cc
			f.mu.Unlock()
			close(ready)
			return
		}
		if attempt%12 == 11 {
			f.c.t.Logf("follow %s: %v (still trying)", f.turnID, err)
		}
		select {
		case <-f.quit:
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (f *follower) record(m jetstream.Msg) {
	env, err := events.DecodeEnvelope(m.Headers(), m.Data())
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.done {
		return
	}
	if err != nil {
		f.errs = append(f.errs, err.Error())
		return
	}
	f.evs = append(f.evs, env)
}

// stopConsumer stops the live consumer (if it is up) and its retries.
func (f *follower) stopConsumer() {
	select {
	case <-f.quit:
	default:
		close(f.quit)
	}
	<-f.exited
	f.mu.Lock()
	cc := f.cc
	f.cc = nil
	f.mu.Unlock()
	if cc != nil {
		cc.Stop()
	}
}

func (f *follower) stop() { f.stopConsumer() }

func (f *follower) events() []*events.Envelope {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*events.Envelope(nil), f.evs...)
}

func (f *follower) types() string {
	var ts []string
	for _, e := range f.events() {
		ts = append(ts, strings.TrimPrefix(e.Type, "llmw."))
	}
	return strings.Join(ts, " ")
}

// wait returns the first event of one of the types, polling until timeout.
// Events of the turn channel are also looked up in the stream directly
// (the last one of the channel), so that a follower whose consumer is
// still being recreated after a node loss does not hold the test up; the
// events are then read again from the stream (see completed).
func (f *follower) wait(timeout time.Duration, types ...string) *events.Envelope {
	f.c.t.Helper()
	var found *events.Envelope
	f.c.eventually(timeout, fmt.Sprintf("turn %s: event %v", f.turnID, types), func() (bool, string) {
		for _, e := range f.events() {
			if slices.Contains(types, e.Type) {
				found = e
				return true, ""
			}
		}
		last, err := f.c.lastTurnEvent(f.turnID)
		if last != nil && slices.Contains(types, last.Type) {
			f.c.t.Logf("turn %s: %s found in the stream before the follower had it (%d events so far)", f.turnID, last.Type, len(f.events()))
			found = last
			return true, ""
		}
		f.mu.Lock()
		errs := f.errs
		f.mu.Unlock()
		return false, fmt.Sprintf("seen [%s], decode errors %v; last turn-channel event in the stream: %v (%v)", f.types(), errs, last, err)
	})
	return found
}

// lastTurnEvent is the last event on the turn's turn channel in LLMW_EVENTS.
func (c *cluster) lastTurnEvent(turnID string) (*events.Envelope, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := c.js.Stream(ctx, events.StreamEvents)
	if err != nil {
		return nil, err
	}
	m, err := st.GetLastMsgForSubject(ctx, c.subj.Events("", turnID, events.ChannelTurn))
	if err != nil {
		return nil, err
	}
	return events.DecodeEnvelope(m.Header, m.Data)
}

// readAll reads every event of a turn from LLMW_EVENTS with direct gets
// (next message on the turn's subjects), which any replica answers: after
// a node loss the cluster may still place a new consumer on the lost node
// until it is marked offline, and such a consumer never delivers.
func (c *cluster) readAll(turnID string) []*events.Envelope {
	c.t.Helper()
	var out []*events.Envelope
	c.retry("read the events of "+turnID, func(ctx context.Context) error {
		out = nil
		st, err := c.js.Stream(ctx, events.StreamEvents)
		if err != nil {
			return err
		}
		// How many events the turn has, from the stream's leader: the
		// gets below are direct gets (LLMW_EVENTS allows them), which a
		// replica still behind the leader may answer without the last
		// events.
		info, err := st.Info(ctx, jetstream.WithSubjectFilter(c.subj.EventsOfTurn(turnID)))
		if err != nil {
			return err
		}
		var stored uint64
		for _, n := range info.State.Subjects {
			stored += n
		}
		for seq := uint64(1); ; {
			// Each get has its own 5 s: a turn of several hundred events
			// read one get at a time, on a cluster loaded by the other
			// tests and just healed, takes longer than one attempt's ctx.
			gctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			m, err := st.GetMsg(gctx, seq, jetstream.WithGetMsgSubject(c.subj.EventsOfTurn(turnID)))
			cancel()
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				if uint64(len(out)) < stored {
					return fmt.Errorf("read %d of the %d events the leader stores (a replica behind it answered)", len(out), stored)
				}
				return nil
			}
			if err != nil {
				return fmt.Errorf("after %d events: %w", len(out), err)
			}
			env, err := events.DecodeEnvelope(m.Header, m.Data)
			if err != nil {
				return err
			}
			out = append(out, env)
			seq = m.Sequence + 1
		}
	})
	return out
}

// completed waits for the turn's end and requires llmw.turn.completed.
func (f *follower) completed(timeout time.Duration) events.TurnCompleted {
	f.c.t.Helper()
	end := f.wait(timeout, events.TypeTurnCompleted, events.TypeTurnFailed, events.TypeTurnAborted)
	if end.Type != events.TypeTurnCompleted {
		ended, _ := events.DecodeData[events.TurnEnded](end)
		f.c.t.Fatalf("turn %s ended %s: %s (%s); events [%s]", f.turnID, end.Type, ended.Reason, ended.Code, f.types())
	}
	done, err := events.DecodeData[events.TurnCompleted](end)
	if err != nil {
		f.c.t.Fatalf("turn %s: completed data: %v", f.turnID, err)
	}
	// What the stream holds, whatever the follower got so far, up to the
	// end found: a replica that is behind may answer a message get
	// without the last events yet.
	f.stopConsumer()
	var all []*events.Envelope
	f.c.eventually(time.Minute, fmt.Sprintf("turn %s: the stored events up to its end", f.turnID), func() (bool, string) {
		all = f.c.readAll(f.turnID)
		for _, e := range all {
			if e.ID == end.ID {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d events read, the end (%s) not among them", len(all), end.ID)
	})
	f.mu.Lock()
	f.evs, f.done = all, true
	f.mu.Unlock()
	return done
}

// of returns the events of one type.
func (f *follower) of(typ string) []*events.Envelope {
	var out []*events.Envelope
	for _, e := range f.events() {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

// instance is the replica named in an event's source /llmw/<svc>/<instance>.
func instance(e *events.Envelope) string {
	return e.Source[strings.LastIndexByte(e.Source, '/')+1:]
}

// toolResults counts the messages per call id that LLMW_TOOLRESULTS holds
// for a turn (one subject P.tool.result.<turn>.<call> per call).
func (c *cluster) toolResults(turnID string) map[string]uint64 {
	c.t.Helper()
	var out map[string]uint64
	c.retry("LLMW_TOOLRESULTS info", func(ctx context.Context) error {
		st, err := c.js.Stream(ctx, events.StreamToolResults)
		if err != nil {
			return err
		}
		info, err := st.Info(ctx, jetstream.WithSubjectFilter(c.subj.ToolResultsOfTurn(turnID)))
		if err != nil {
			return err
		}
		out = map[string]uint64{}
		for subj, n := range info.State.Subjects {
			out[events.LastToken(subj)] = n
		}
		return nil
	})
	return out
}

// state reads the turn's checkpoint from KV LLMW_TURN_STATE.
func (c *cluster) state(turnID string) *turn.State {
	c.t.Helper()
	var st *turn.State
	c.retry("state of "+turnID, func(ctx context.Context) error {
		s, ok, err := turn.LoadState(ctx, c.js, turnID)
		if err == nil && !ok {
			err = errors.New("no state")
		}
		st = s
		return err
	})
	return st
}

// checkTranscript checks a completed replay turn: the scenario's tools were
// called, each answered once with the demo data, and the model answered in
// text after them.
func (c *cluster) checkTranscript(turnID, scenario string, done events.TurnCompleted) (callIDs []string) {
	c.t.Helper()
	sc, _ := replay.Lookup(scenario)
	want := map[string]bool{}
	for _, n := range sc.Tools {
		want[n] = true
	}
	results := map[string]int{}
	lastText := ""
	for _, m := range done.Messages {
		for _, p := range m.Content {
			switch p.Type {
			case events.PartToolUse:
				if !want[p.Name] {
					c.t.Errorf("turn %s: call of %q, want only %v", turnID, p.Name, sc.Tools)
				}
				delete(want, p.Name)
				callIDs = append(callIDs, p.ID)
			case events.PartToolResult:
				results[p.ToolUseID]++
				if p.IsError || !strings.Contains(p.Content, demotools.DemoNote) {
					c.t.Errorf("turn %s: result for %s: error %v, %q", turnID, p.ToolUseID, p.IsError, p.Content)
				}
			case events.PartText:
				if m.Role == events.RoleAssistant {
					lastText = p.Text
				}
			}
		}
	}
	if len(want) > 0 {
		c.t.Errorf("turn %s: tools never called: %v", turnID, want)
	}
	for _, id := range callIDs {
		if results[id] != 1 {
			c.t.Errorf("turn %s: %d results for call %s in the transcript, want 1", turnID, results[id], id)
		}
	}
	if last := done.Messages[len(done.Messages)-1]; last.Role != events.RoleAssistant || strings.TrimSpace(lastText) == "" {
		c.t.Errorf("turn %s: no final assistant text (last role %s)", turnID, last.Role)
	}
	// LLMW_TOOLRESULTS holds exactly one result per call, none else.
	stored := c.toolResults(turnID)
	if len(stored) != len(callIDs) {
		c.t.Errorf("turn %s: LLMW_TOOLRESULTS has results for %v, want one each for %v", turnID, stored, callIDs)
	}
	for _, id := range callIDs {
		if stored[id] != 1 {
			c.t.Errorf("turn %s: LLMW_TOOLRESULTS has %d results for call %s, want 1 (a direct get finds: %s)", turnID, stored[id], id, c.directGet(turnID, id))
		}
	}
	// The state says completed one write after the completed event
	// (docs/architecture.md, the run's end): poll while it says running.
	st := c.state(turnID)
	for deadline := time.Now().Add(15 * time.Second); st.Status == turn.StatusRunning && time.Now().Before(deadline); st = c.state(turnID) {
		time.Sleep(50 * time.Millisecond)
	}
	if st.Status != turn.StatusCompleted {
		c.t.Errorf("turn %s: checkpoint status %q, want completed", turnID, st.Status)
	}
	return callIDs
}

// slowStarts returns, per toolexec replica, the call ids whose slow tool
// execution started there (from the replicas' logs).
func (c *cluster) slowStarts() map[string][]string {
	c.t.Helper()
	out := map[string][]string{}
	for _, name := range []string{"toolexec-1", "toolexec-2"} {
		for _, rec := range c.logRecords(name, "slow tool start") {
			id, _ := rec["call_id"].(string)
			out[name] = append(out[name], id)
		}
	}
	return out
}

// leaderGet reads a call's result from the leader of LLMW_TOOLRESULTS,
// for failure messages.
func (c *cluster) leaderGet(turnID, callID string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	m, err := jsread.LastMsg(ctx, c.nc, jsread.APIPrefix(c.js), events.StreamToolResults, c.subj.ToolResult(turnID, callID))
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("seq %d %s", m.Sequence, m.Data)
}

// directGet reads a call's result with a direct get, for failure messages.
func (c *cluster) directGet(turnID, callID string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := c.js.Stream(ctx, events.StreamToolResults)
	if err != nil {
		return err.Error()
	}
	m, err := st.GetLastMsgForSubject(ctx, c.subj.ToolResult(turnID, callID))
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("seq %d %s", m.Sequence, m.Data)
}
