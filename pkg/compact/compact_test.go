package compact_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/llmworker/llmworker/pkg/compact"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
)

// summarizer records the prompts and answers "S<n>" with 10 input and 2
// output tokens per call.
type summarizer struct{ prompts []string }

func (s *summarizer) summarize(_ context.Context, model, system, prompt string, maxTokens int) (string, events.UsageEvent, error) {
	s.prompts = append(s.prompts, prompt)
	return fmt.Sprintf("S%d", len(s.prompts)), events.UsageEvent{InputTokens: events.Int64(10), OutputTokens: events.Int64(2)}, nil
}

func text(n int, c byte) string { return strings.Repeat(string(c), n) }

func call(id string) events.Message {
	return events.Message{Role: events.RoleAssistant, Content: []events.Part{events.ToolUsePart(id, "fetch", json.RawMessage(`{}`))}}
}

func result(id, content string) events.Message {
	return events.Message{Role: events.RoleTool, Content: []events.Part{events.ToolResultPart(id, content, false)}}
}

func js(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A window of 10,000 tokens and no max output: the room is 10,000 −
// 1,024 (reserve) = 8,976; threshold 7,180.8, target 4,488, keep recent
// 2,244.
var small = llm.ModelLimits{ContextWindow: 10_000}

func TestBelowThresholdNothing(t *testing.T) {
	var p compact.Policy
	msgs := []events.Message{events.UserText(text(28_000, 'a'))} // 4 (message) + 7,000 (28,000 bytes / 4)
	res, err := p.Plan(context.Background(), compact.Input{Messages: msgs, Model: "t:m", Limits: small})
	if err != nil || res.Compaction != nil || res.Tokens != 7004 {
		t.Fatalf("Plan = %+v, %v; want no compaction at 7004 tokens (4 + 28000/4)", res, err)
	}
}

// A call paused for approval (no result yet) and a call the caller says
// is running (Input.Keep) inside the span stay as they are, after the
// summary; a later compaction still covers everything else, and keeps
// them again.
func TestKeptCallsInsideTheSpan(t *testing.T) {
	s := &summarizer{}
	p := compact.Policy{Summarize: s.summarize}
	paused := call("paused")
	running := []events.Message{call("running"), result("running", "partial")}
	msgs := []events.Message{
		events.UserText(text(12_000, 'a')), paused, events.UserText(text(12_000, 'b')),
		running[0], running[1], events.UserText(text(12_000, 'c')),
	}
	keep := func(id string) bool { return id == "running" }
	res, err := p.Plan(context.Background(), compact.Input{Messages: msgs, Model: "t:m", Limits: small, Keep: keep})
	if err != nil || res.Compaction == nil {
		t.Fatalf("Plan: %v %+v", err, res)
	}
	c := res.Compaction
	// The last unit (3,004 tokens ≥ 2,244) stays: the span is [0, 5).
	if sum := c.Messages[0]; sum.Role != events.RoleUser || !strings.HasSuffix(sum.Text(), "S1") {
		t.Fatalf("first message %s; want the summary S1 as a user message", js(t, sum))
	}
	want := []events.Message{c.Messages[0], paused, running[0], running[1]}
	if c.To != 5 || c.Policy != "offload,clear,summary" || js(t, c.Messages) != js(t, want) {
		t.Fatalf("compaction to=%d policy=%s messages=%s; want to=5, a summary then the kept calls", c.To, c.Policy, js(t, c.Messages))
	}
	if len(s.prompts) != 1 || strings.Contains(s.prompts[0], "partial") || !strings.Contains(s.prompts[0], text(100, 'b')) {
		t.Errorf("the summarizer read %q…; want the span without the kept calls", s.prompts[0][:200])
	}
	// Two more long messages: the next compaction covers them too.
	msgs = append(msgs, events.AssistantText("ok"), events.UserText(text(12_000, 'd')), events.AssistantText("ok"), events.UserText(text(12_000, 'e')))
	res, err = p.Plan(context.Background(), compact.Input{Messages: msgs, Model: "t:m", Limits: small, Keep: keep, Active: c})
	if err != nil || res.Compaction == nil {
		t.Fatalf("second Plan: %v %+v", err, res)
	}
	c2 := res.Compaction
	if sum := c2.Messages[0]; sum.Role != events.RoleUser || !strings.HasSuffix(sum.Text(), "S2") {
		t.Fatalf("second compaction's first message %s; want the summary S2 as a user message", js(t, sum))
	}
	want = []events.Message{c2.Messages[0], paused, running[0], running[1]}
	if c2.To != 9 || js(t, c2.Messages) != js(t, want) {
		t.Fatalf("second compaction to=%d messages=%s; want to=9 keeping the calls", c2.To, js(t, c2.Messages))
	}
	// The second summary folds in the first.
	if !strings.Contains(s.prompts[1], "S1") {
		t.Errorf("second summary's input does not hold the first summary")
	}
}

// A pinned message stays as it is; the unit of parallel calls is never
// split: a span that would end between the results ends before the
// assistant message.
func TestPinnedAndParallelUnits(t *testing.T) {
	s := &summarizer{}
	p := compact.Policy{Summarize: s.summarize, Config: events.CompactionConfig{KeepRecent: 1500}}
	pinned := events.UserText("the task: " + text(2000, 'p'))
	pinned.Pinned = true
	par := []events.Message{
		{Role: events.RoleAssistant, Content: []events.Part{events.ToolUsePart("x", "fetch", json.RawMessage(`{}`)), events.ToolUsePart("y", "fetch", json.RawMessage(`{}`))}},
		result("x", text(2000, 'x')), result("y", text(4000, 'y')),
	}
	msgs := append([]events.Message{pinned, events.UserText(text(24_000, 'a'))}, par...)
	msgs = append(msgs, events.UserText("next?"))
	res, err := p.Plan(context.Background(), compact.Input{Messages: msgs, Model: "t:m", Limits: small})
	if err != nil || res.Compaction == nil {
		t.Fatalf("Plan: %v %+v", err, res)
	}
	c := res.Compaction
	// From the end: "next?" (8 tokens), then the parallel unit (~1,530):
	// 1,500 is reached at the unit's start, position 2.
	if c.To != 2 {
		t.Fatalf("to = %d, want 2 (the start of the parallel calls' unit)", c.To)
	}
	if len(c.Messages) != 2 || js(t, c.Messages[1]) != js(t, pinned) {
		t.Errorf("messages %s; want the summary, then the pinned message", js(t, c.Messages))
	}
}

// Results above offload_above keep a preview and a note naming
// read_result; when that is enough no other tier applies.
func TestOffloadPreview(t *testing.T) {
	var p compact.Policy
	var msgs []events.Message
	msgs = append(msgs, events.UserText("go"))
	for i := range 3 {
		id := fmt.Sprint("c", i)
		msgs = append(msgs, call(id), result(id, text(10_000, byte('a'+i))))
	}
	msgs = append(msgs, events.AssistantText("done?"), events.UserText(text(9000, 'z')))
	res, err := p.Plan(context.Background(), compact.Input{Messages: msgs, Model: "t:m", Limits: small})
	if err != nil || res.Compaction == nil {
		t.Fatalf("Plan: %v %+v", err, res)
	}
	c := res.Compaction
	if c.Policy != "offload" || c.Usage != nil {
		t.Errorf("policy %q, usage %v; want offload alone", c.Policy, c.Usage)
	}
	got := c.Messages[2].Content[0].Content
	want := text(1024, 'a') + "\n[offloaded: 1024 of 10000 bytes shown; read_result with {\"call_id\": \"c0\", \"offset\": 1024} returns the rest]"
	if got != want {
		t.Errorf("offloaded result = %q…, want %q…", got[1000:], want[1000:])
	}
	if msgs[2].Content[0].Content != text(10_000, 'a') {
		t.Error("the original was modified")
	}
}

// The summarizer's input larger than its own window is folded: every
// call fits the summarizer's window, and each reads the summary so far.
func TestSummaryFolds(t *testing.T) {
	s := &summarizer{}
	cfg := events.CompactionConfig{SummarizerModel: "t:tiny", SummaryMaxTokens: 300}
	p := compact.Policy{Summarize: s.summarize, Config: cfg}
	var msgs []events.Message
	for i := range 8 {
		msgs = append(msgs, events.UserText(text(3000, byte('a'+i))), events.AssistantText("ok"))
	}
	msgs = append(msgs, events.UserText(text(16_000, 'z')))
	tiny := llm.ModelLimits{ContextWindow: 3000}
	res, err := p.Plan(context.Background(), compact.Input{Messages: msgs, Model: "t:m", Limits: small, SummarizerLimits: tiny})
	if err != nil || res.Compaction == nil {
		t.Fatalf("Plan: %v %+v", err, res)
	}
	if len(s.prompts) < 3 {
		t.Fatalf("%d summarizer calls, want the 6,000-token span folded in several", len(s.prompts))
	}
	sys := compact.EstimateText(llm.EstimateMessages, compact.SummarySystem)
	for i, pr := range s.prompts {
		if n := compact.EstimateText(llm.EstimateMessages, pr) + sys + 300; n > tiny.ContextWindow {
			t.Errorf("call %d: ~%d tokens with its output, more than the summarizer's window", i+1, n)
		}
		if i > 0 && !strings.Contains(pr, fmt.Sprintf("S%d", i)) {
			t.Errorf("call %d does not read the summary so far", i+1)
		}
	}
	c := res.Compaction
	if c.Model != "t:tiny" || *c.Usage.InputTokens != int64(10*len(s.prompts)) {
		t.Errorf("model %s usage %+v; want t:tiny and every call's usage", c.Model, c.Usage)
	}
	if !strings.HasSuffix(c.Messages[0].Text(), fmt.Sprintf("S%d", len(s.prompts))) {
		t.Errorf("summary %q is not the last call's", c.Messages[0].Text())
	}
}

// A message above the room alone is an overflow naming it, before any
// summarizer call.
func TestOverflowNamesTheMessage(t *testing.T) {
	s := &summarizer{}
	p := compact.Policy{Summarize: s.summarize}
	msgs := []events.Message{events.UserText("hi"), events.AssistantText("yes"), events.UserText(text(40_000, 'q'))}
	_, err := p.Plan(context.Background(), compact.Input{Messages: msgs, Model: "t:m", Limits: small})
	var oe *compact.OverflowError
	if !errors.Is(err, compact.ErrOverflow) || !errors.As(err, &oe) || !strings.Contains(oe.Reason, "transcript position 2 (user)") {
		t.Fatalf("err = %v, want an overflow naming position 2", err)
	}
	if len(s.prompts) != 0 {
		t.Errorf("%d summarizer calls, want none", len(s.prompts))
	}
}

// A provider-native compaction is read only by models of its origin.
func TestProjectNative(t *testing.T) {
	msgs := []events.Message{events.UserText("a"), events.AssistantText("b"), events.UserText("c")}
	c := &events.Compaction{To: 2, Messages: []events.Message{events.UserText("native")}, Policy: "native:anthropic"}
	for _, tc := range []struct {
		origin string
		want   int
	}{{"anthropic", 2}, {"vertex-anthropic", 2}, {"openai", 3}} {
		if got := compact.Project(c, msgs, 0, tc.origin); len(got) != tc.want {
			t.Errorf("%s reads %d messages, want %d", tc.origin, len(got), tc.want)
		}
	}
	c.Policy = "summary"
	if got := compact.Project(c, msgs, 0, "openai"); len(got) != 2 || got[0].Text() != "native" {
		t.Errorf("a summary is read by every model: %v", got)
	}
}

// nativeAnswer is an assistant answer that begins with a provider-native
// compaction block of origin (docs/protocol.md §5 "Compaction").
func nativeAnswer(origin, text string) events.Message {
	return events.Message{Role: events.RoleAssistant, Content: []events.Part{
		{Type: events.PartThinking, Signature: llm.NativeCompactionSignature(`{"type":"compaction"}`), Redacted: true, Origin: origin},
		events.TextPart(text),
	}}
}

// A model of another origin reads, for a provider-native compaction, the
// compaction of the tiers it was made over (its fallback) and the
// originals after it, without the provider's block; a model of the
// provider's origin reads the originals from the block on, and a block
// that does not begin the active compaction is read by no model.
func TestProjectNativeFallback(t *testing.T) {
	msgs := []events.Message{events.UserText("a"), events.AssistantText("b"), events.UserText("c"), nativeAnswer("anthropic", "d"), events.UserText("e")}
	tiers := &events.Compaction{To: 2, Messages: []events.Message{events.UserText("summary of a, b")}, Policy: "offload,clear,summary"}
	native := &events.Compaction{To: 3, Messages: []events.Message{}, Policy: "native:anthropic", Fallback: tiers}
	texts := func(ms []events.Message) string {
		var out []string
		for _, m := range ms {
			for _, p := range m.Content {
				switch {
				case p.Type == events.PartThinking && strings.HasPrefix(p.Signature, llm.NativeCompactionPrefix):
					out = append(out, "[block]")
				case p.Type == events.PartText:
					out = append(out, p.Text)
				}
			}
		}
		return strings.Join(out, " ")
	}
	for _, tc := range []struct {
		c      *events.Compaction
		origin string
		want   string
	}{
		{native, "anthropic", "[block] d e"},
		{native, "vertex-anthropic", "[block] d e"},
		{native, "openai", "summary of a, b c d e"},
		{&events.Compaction{To: 3, Messages: []events.Message{}, Policy: "native:anthropic"}, "gemini", "a b c d e"},
		{nil, "openai", "a b c d e"},
		{nil, "anthropic", "a b c d e"},
		{tiers, "anthropic", "summary of a, b c d e"},
	} {
		if got := texts(compact.Project(tc.c, msgs, 0, tc.origin)); got != tc.want {
			t.Errorf("%s reads %q, want %q", tc.origin, got, tc.want)
		}
	}
	// A message that is nothing but another origin's block is left out.
	only := []events.Message{events.UserText("a"), {Role: events.RoleAssistant, Content: nativeAnswer("anthropic", "").Content[:1]}, events.UserText("c")}
	if got := compact.Project(nil, only, 0, "openai"); len(got) != 2 {
		t.Errorf("openai reads %d messages, want the 2 user messages", len(got))
	}
}

// The tiers compact what every model reads: over a provider-native
// compaction they start from its fallback, and leave the provider's
// block out of their messages.
func TestPlanOverNative(t *testing.T) {
	big := func(c byte) events.Message { return events.UserText(text(40000, c)) }
	// The native answer is pinned: kept as it is, but for the block.
	pinned := nativeAnswer("anthropic", "answer")
	pinned.Pinned = true
	msgs := []events.Message{big('a'), events.AssistantText("ok"), big('b'), pinned, big('c'), events.AssistantText("ok"), events.UserText("last")}
	native := &events.Compaction{ID: "t.c1", To: 3, Messages: []events.Message{}, Policy: "native:anthropic"}
	s := &summarizer{}
	p := compact.Policy{Summarize: s.summarize}
	res, err := p.Plan(context.Background(), compact.Input{
		Messages: msgs, Active: native, Model: "anthropic:claude", Force: true,
		Limits: llm.ModelLimits{ContextWindow: 32000, MaxOutputTokens: 1000},
	})
	if err != nil {
		t.Fatal(err)
	}
	c := res.Compaction
	if c == nil || c.Native() != "" || c.To < 4 {
		t.Fatalf("compaction %+v, want one of the tiers past the native block", c)
	}
	kept := false
	for i, m := range c.Messages {
		for _, part := range m.Content {
			if _, ok := llm.NativeCompactionData(&part); ok {
				t.Errorf("compaction message %d holds the provider's block", i)
			}
			kept = kept || part.Text == "answer"
		}
	}
	if !kept {
		t.Errorf("compaction messages %v, want the pinned answer kept", c.Messages)
	}
	// Made from the originals, not from the native projection (which
	// begins at position 3): the summarizer read position 0.
	if len(s.prompts) == 0 || !strings.Contains(s.prompts[0], text(100, 'a')) {
		t.Errorf("the summarizer did not read position 0: %d prompts", len(s.prompts))
	}
}

// byteTokens counts a token per byte of text: sizes a test can add up.
func byteTokens(msgs []events.Message) int64 {
	var n int64
	for _, m := range msgs {
		for _, p := range m.Content {
			n += int64(len(p.Text) + len(p.Content))
		}
	}
	return n
}

// With the provider's count of an earlier request (Input.Reported), a
// request is counted as that count plus the estimate of what was added,
// in the provider's scale: the trigger and the tokens follow the
// provider, not the estimator.
func TestReportedPrefixCounts(t *testing.T) {
	// 3,000 + 100 tokens sent before, 1,000 added: 4,100 by the
	// estimator, below small's threshold (7,180.8).
	msgs := []events.Message{events.UserText(text(3000, 'a')), events.AssistantText(text(100, 'b')), events.UserText(text(1000, 'c'))}
	s := &summarizer{}
	p := compact.Policy{Estimate: byteTokens, Summarize: s.summarize}
	in := compact.Input{Messages: msgs, Model: "t:m", Limits: small}
	res, err := p.Plan(context.Background(), in)
	if err != nil || res.Compaction != nil || res.Tokens != 4100 {
		t.Fatalf("Plan without a count = %+v, %v; want no compaction at 4100 tokens", res, err)
	}
	// The provider counted the first two messages as 4,650 tokens (1.5 ×
	// 3,100): 4,650 + 1.5 × 1,000 = 6,150, still below.
	in.Reported = compact.Reported{Messages: 2, Tokens: 4650}
	res, err = p.Plan(context.Background(), in)
	if err != nil || res.Compaction != nil || res.Tokens != 6150 {
		t.Fatalf("Plan with a count of 4650 = %+v, %v; want no compaction at 6150 tokens", res, err)
	}
	// Counted as 6,200 (2 × 3,100): 6,200 + 2 × 1,000 = 8,200, above the
	// threshold: the span is summarized.
	in.Reported = compact.Reported{Messages: 2, Tokens: 6200}
	res, err = p.Plan(context.Background(), in)
	if err != nil || res.Compaction == nil || res.Compaction.TokensBefore != 8200 || len(s.prompts) != 1 {
		t.Fatalf("Plan with a count of 6200 = %+v, %v, %d summaries; want a compaction from 8200 tokens", res, err, len(s.prompts))
	}
	// A count of more messages than the projection holds is not this
	// projection's.
	in.Reported = compact.Reported{Messages: 4, Tokens: 6200}
	if res, err = p.Plan(context.Background(), in); err != nil || res.Tokens != 4100 {
		t.Fatalf("Plan with a count of 4 messages = %+v, %v; want 4100 tokens", res, err)
	}
}

// Without a summary tier, a context the cheaper tiers cannot fit is an
// overflow naming its largest message by its transcript position.
func TestOverflowWithoutASummary(t *testing.T) {
	var p compact.Policy // no Summarize
	msgs := []events.Message{events.UserText(text(20_000, 'a')), events.AssistantText("ok"), events.UserText(text(20_000, 'b')), events.AssistantText("ok"), events.UserText("go")}
	_, err := p.Plan(context.Background(), compact.Input{Messages: msgs, Model: "t:m", Limits: small})
	var oe *compact.OverflowError
	if !errors.As(err, &oe) || !strings.Contains(oe.Reason, "without a summary") || !strings.Contains(oe.Reason, "the message at transcript position 0 (user), offloaded and cleared") {
		t.Fatalf("Plan: %v; want an overflow naming position 0 without a summary", err)
	}
}
