package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nuid"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/llmworker/llmworker/internal/leaf/fixtures"
	"github.com/llmworker/llmworker/internal/replay"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/natstest"
	"github.com/llmworker/llmworker/pkg/telemetry"
	"github.com/llmworker/llmworker/pkg/turn"
)

// One turn with two tool calls, a remote hook that pauses it and a resume
// by someone else is one trace under the submitter's span, across the
// turn, ingest, toolexec and hookbridge services (all on one embedded
// NATS here, each hop through NATS as between processes): every span
// has the name, kind, parent and GenAI attributes docs/architecture.md
// ("Tracing") gives.
func TestOneTracePerTurn(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() {
		otel.SetTracerProvider(prev)
		_ = tp.Shutdown(context.Background())
	})
	st := startShared(t, 0)
	tracer := tp.Tracer("test")
	sctx, submitter := tracer.Start(context.Background(), "submit")
	rctx, approver := tracer.Start(context.Background(), "approve")
	turnID, done := approvedTurn(t, st, sctx, rctx)
	submitter.End()
	approver.End()
	// The tool calls the model made, from the transcript.
	calls := map[string]string{} // call id → tool
	for _, m := range done.Messages {
		for _, p := range m.ToolUses() {
			calls[p.ID] = p.Name
		}
	}
	if len(calls) != 2 {
		t.Fatalf("transcript has calls %v, want the scenario's two", calls)
	}

	// Spans end shortly after the events that tell the turn's end (the
	// run's span after its last publish): wait for the second
	// invoke_agent.
	var spans []sdktrace.ReadOnlySpan
	natstest.EventuallyWithin(t, 10*time.Second, "the resumed run's invoke_agent span", func() bool {
		spans = ofTrace(rec.Ended(), submitter.SpanContext().TraceID())
		return len(named(spans, "invoke_agent")) == 2
	})
	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		byID[s.SpanContext().SpanID()] = s
	}
	parent := func(s sdktrace.ReadOnlySpan) sdktrace.ReadOnlySpan { return byID[s.Parent().SpanID()] }
	for _, s := range rec.Ended() {
		if attr(s, telemetry.TurnID) == turnID && s.SpanContext().TraceID() != submitter.SpanContext().TraceID() {
			t.Errorf("span %q of the turn is in trace %s, not the submitter's", s.Name(), s.SpanContext().TraceID())
		}
	}

	// The turn: two runs (before and after the pause), both children of
	// the submitter's span; the resumed one links the approver's.
	agents := named(spans, "invoke_agent")
	for _, a := range agents {
		if a.Parent().SpanID() != submitter.SpanContext().SpanID() || a.SpanKind() != trace.SpanKindInternal {
			t.Errorf("invoke_agent parent %s kind %v, want the submitter %s", a.Parent().SpanID(), a.SpanKind(), submitter.SpanContext().SpanID())
		}
		if attr(a, telemetry.GenAIOperationName) != "invoke_agent" || attr(a, telemetry.TurnID) != turnID {
			t.Errorf("invoke_agent attributes %v", a.Attributes())
		}
	}
	statuses := []string{attr(agents[0], telemetry.TurnStatus), attr(agents[1], telemetry.TurnStatus)}
	if statuses[0] != "paused" || statuses[1] != "completed" {
		t.Errorf("invoke_agent statuses %v, want paused then completed", statuses)
	}
	if l := agents[1].Links(); len(l) != 1 || l[0].SpanContext.SpanID() != approver.SpanContext().SpanID() {
		t.Errorf("resumed invoke_agent links %v, want the approver's span", l)
	}

	// Three model calls, each a client span of a run with the server span
	// of ingest under it; their tokens add up to the turn's usage.
	sc, err := replay.Lookup("gemini")
	if err != nil {
		t.Fatal(err)
	}
	chats := named(spans, "chat gemini")
	if len(chats) != 3 {
		t.Fatalf("chat spans: %d, want 3 (%v)", len(chats), spanNames(spans))
	}
	var input, output int64
	for _, c := range chats {
		if p := parent(c); p == nil || p.Name() != "invoke_agent" || c.SpanKind() != trace.SpanKindClient {
			t.Errorf("chat span parent %v kind %v", p, c.SpanKind())
		}
		if attr(c, telemetry.GenAIOperationName) != "chat" || attr(c, telemetry.GenAIRequestModel) != "gemini" || attr(c, telemetry.GenAIProviderName) != "replay" {
			t.Errorf("chat attributes %v", c.Attributes())
		}
		input += intAttr(c, telemetry.GenAIUsageInputTokens)
		output += intAttr(c, telemetry.GenAIUsageOutputTokens)
		if v, ok := attrValueOf(c, telemetry.TimeToFirstChunk); !ok || v.AsFloat64() <= 0 || v.AsFloat64() > c.EndTime().Sub(c.StartTime()).Seconds() {
			t.Errorf("chat span time to first chunk %v, want a positive number of seconds within the span", v.Emit())
		}
		if attr(c, telemetry.GenAIResponseFinishReasons) == "" {
			t.Errorf("chat span without finish reasons: %v", c.Attributes())
		}
		// The model and response id the provider named in the step's
		// recorded stream.
		step := intAttr(c, telemetry.Step)
		if step < 1 || int(step) > len(sc.Steps) {
			t.Fatalf("chat span step %d, the scenario has %d", step, len(sc.Steps))
		}
		model, id := geminiResponse(t, sc.Steps[step-1])
		if model == "" || attr(c, telemetry.GenAIResponseModel) != model || attr(c, telemetry.GenAIResponseID) != id {
			t.Errorf("step %d: response model %q id %q, the recording names %q %q", step, attr(c, telemetry.GenAIResponseModel), attr(c, telemetry.GenAIResponseID), model, id)
		}
	}
	if done.Usage.InputTokens == nil || done.Usage.OutputTokens == nil || input != *done.Usage.InputTokens || output != *done.Usage.OutputTokens {
		t.Errorf("chat spans count %d/%d tokens, the turn's usage %+v", input, output, done.Usage)
	}
	completes := named(spans, "llm.complete gemini")
	if len(completes) != 3 {
		t.Errorf("ingest spans: %d, want 3", len(completes))
	}
	for _, c := range completes {
		if p := parent(c); p == nil || p.Name() != "chat gemini" || c.SpanKind() != trace.SpanKindServer {
			t.Errorf("ingest span parent %v kind %v", p, c.SpanKind())
		}
	}

	// Each call: execute_tool under a run, toolexec's consumer span under it.
	for id, name := range calls {
		var exec sdktrace.ReadOnlySpan
		for _, s := range named(spans, "execute_tool "+name) {
			if attr(s, telemetry.GenAIToolCallID) == id {
				exec = s
			}
		}
		if exec == nil {
			t.Errorf("no execute_tool span for %s %s: %v", name, id, spanNames(spans))
			continue
		}
		if p := parent(exec); p == nil || p.Name() != "invoke_agent" || attr(exec, telemetry.GenAIToolName) != name {
			t.Errorf("execute_tool %s: parent %v attributes %v", name, p, exec.Attributes())
		}
		found := false
		for _, s := range named(spans, "toolexec "+name) {
			if s.Parent().SpanID() == exec.SpanContext().SpanID() && s.SpanKind() == trace.SpanKindConsumer {
				found = true
			}
		}
		if !found {
			t.Errorf("no toolexec span under execute_tool %s", name)
		}
	}

	// The approval hook: the chain's span in the first run, the hook
	// server's under it, both with the decision.
	hooks := named(spans, "hook before_tool_call approve-capital")
	if len(hooks) != 2 {
		t.Fatalf("hook spans: %d, want the chain's and the server's (%v)", len(hooks), spanNames(spans))
	}
	var chain, server sdktrace.ReadOnlySpan
	for _, h := range hooks {
		if h.SpanKind() == trace.SpanKindServer {
			server = h
		} else {
			chain = h
		}
	}
	if chain == nil || server == nil || server.Parent().SpanID() != chain.SpanContext().SpanID() || parent(chain) != agents[0] {
		t.Fatalf("hook spans not chained: chain %v server %v", chain, server)
	}
	if attr(chain, telemetry.HookDecision) != "pause" || attr(server, telemetry.HookDecision) != "pause" {
		t.Errorf("hook decisions %q %q, want pause", attr(chain, telemetry.HookDecision), attr(server, telemetry.HookDecision))
	}
}

// approvedTurn runs the gemini replay scenario on st (startShared): the
// turn, submitted under sctx, pauses at the approval hook of get_capital
// and is resumed under rctx with the call approved; it returns the turn's
// id and its llmw.turn.completed.
func approvedTurn(t *testing.T, st *Stack, sctx, rctx context.Context) (string, events.TurnCompleted) {
	t.Helper()
	tc, err := turn.NewClient(st.NC, turn.ClientOptions{Prefix: st.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	turnID := nuid.Next()
	if err := tc.Submit(sctx, &events.TurnRequest{TurnID: turnID, Model: "replay:gemini",
		Messages: []events.Message{events.UserText("capital?")}, Tools: []string{"*"}}); err != nil {
		t.Fatal(err)
	}
	paused, err := events.DecodeData[events.TurnPaused](waitFor(t, st, turnID, events.TypeTurnPaused))
	if err != nil || len(paused.Pending) != 1 {
		t.Fatalf("paused = %+v, %v", paused, err)
	}
	if err := tc.Resume(rctx, &events.ResumeRequest{TurnID: turnID,
		Decisions: map[string]events.Decision{paused.Pending[0].ID: {Kind: events.DecisionApprove}}}); err != nil {
		t.Fatal(err)
	}
	done, err := events.DecodeData[events.TurnCompleted](waitFor(t, st, turnID, events.TypeTurnCompleted))
	if err != nil {
		t.Fatal(err)
	}
	return turnID, done
}

func ofTrace(spans []sdktrace.ReadOnlySpan, id trace.TraceID) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.SpanContext().TraceID() == id {
			out = append(out, s)
		}
	}
	return out
}

// named returns the spans called name in the order they started.
func named(spans []sdktrace.ReadOnlySpan, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].StartTime().Before(out[j-1].StartTime()); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

func spanNames(spans []sdktrace.ReadOnlySpan) []string {
	out := make([]string, len(spans))
	for i, s := range spans {
		out[i] = s.Name()
	}
	return out
}

func attr(s sdktrace.ReadOnlySpan, k attribute.Key) string {
	for _, a := range s.Attributes() {
		if a.Key == k {
			return a.Value.Emit()
		}
	}
	return ""
}

func intAttr(s sdktrace.ReadOnlySpan, k attribute.Key) int64 {
	for _, a := range s.Attributes() {
		if a.Key == k {
			return a.Value.AsInt64()
		}
	}
	return 0
}

// geminiResponse reads the last modelVersion and responseId of a recorded
// Gemini stream (internal/leaf/fixtures): SSE data lines of JSON chunks.
func geminiResponse(t *testing.T, fixture string) (model, id string) {
	t.Helper()
	b, err := fixtures.Read(fixture)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		data, ok := strings.CutPrefix(strings.TrimSpace(line), "data:")
		if !ok {
			continue
		}
		var c struct {
			ModelVersion string `json:"modelVersion"`
			ResponseID   string `json:"responseId"`
		}
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("%s: %v", fixture, err)
		}
		model, id = cmp.Or(c.ModelVersion, model), cmp.Or(c.ResponseID, id)
	}
	return model, id
}

func attrValueOf(s sdktrace.ReadOnlySpan, k attribute.Key) (attribute.Value, bool) {
	for _, a := range s.Attributes() {
		if a.Key == k {
			return a.Value, true
		}
	}
	return attribute.Value{}, false
}
