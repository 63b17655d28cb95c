package openai

import (
	"context"
	"encoding/json"
	"strings"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
)

// chatStream turns Chat Completions chunks into §3 events. Chat sends no
// block starts or stops, so they are synthesized: a block opens at its first
// non-empty delta; text and reasoning are one block each until the other
// kind (or a tool call) interrupts; every tool call index is its own
// tool_use block, opened when its name is known and stopped when the next
// call begins if its arguments are a whole JSON value (Chat Completions
// streams the calls one after another, by index), else at the finish
// reason, as the last call is: a call's stop comes as soon as its
// arguments are whole, so that a tool that may start early does, and the
// argument deltas of a server that interleaves parallel calls never mix.
type chatStream struct {
	// model and responseID are the chunks' model and id, for the
	// completed status.
	model, responseID string

	Emitter
	ctx context.Context // the caller's: its cancel means "cancelled"
	sdk *ssestream.Stream[sdk.ChatCompletionChunk]

	finished    bool // a finish_reason was seen
	text, think *Block
	tools       map[int64]*toolCall
	calls       []*toolCall // the open tool calls
	interleaved bool        // a stopped call got arguments: the stream failed
	refusal     strings.Builder
	warnings    []events.Warning
}

type toolCall struct {
	id, name string
	args     strings.Builder // arguments received before the name
	input    strings.Builder // arguments sent, to tell when they are whole
	block    *Block
	stopped  bool // stopped before the finish reason
}

var (
	_ llm.SelfBounded = (*chatStream)(nil)
	_ llm.Warner      = (*chatStream)(nil)
)

func newChatStream(ctx context.Context, g *llm.Guard, src *ssestream.Stream[sdk.ChatCompletionChunk]) *chatStream {
	s := &chatStream{ctx: ctx, sdk: src}
	s.Init(g, s.pull, src.Close)
	g.Start()
	return s
}

// pull reads the next chunk; Close may be called while it waits, as
// cancelling the request ends a read in progress.
func (s *chatStream) pull() {
	c, ok, err := llm.ReadNext(&s.Pump, s.sdk)
	if ok {
		s.Guard().Touch()
		if s.chunk(c); s.interleaved {
			s.Finish()
		}
		return
	}
	s.end(err)
	s.Finish()
}

// Warnings implements llm.Warner: the settings of the request that were
// not sent.
func (s *chatStream) Warnings() []events.Warning { return s.warnings }

func (s *chatStream) chunk(c sdk.ChatCompletionChunk) {
	if c.Model != "" {
		s.model = c.Model
	}
	if c.ID != "" {
		s.responseID = c.ID
	}
	for i := range c.Choices {
		ch := &c.Choices[i]
		if ch.Index != 0 {
			continue // n > 1 is not supported: only the first choice is streamed
		}
		d := &ch.Delta
		if r := reasoningOf(d); r != "" {
			s.thinking(r)
		}
		if d.Content != "" {
			s.textDelta(d.Content)
		}
		if d.Refusal != "" {
			s.refusal.WriteString(d.Refusal)
		}
		for j := range d.ToolCalls {
			if s.toolDelta(&d.ToolCalls[j]); s.interleaved {
				return
			}
		}
		if ch.FinishReason != "" {
			s.finish(ch.FinishReason)
		}
	}
	if c.JSON.Usage.Valid() {
		s.Emit(usageOf(&c.Usage))
	}
}

// reasoningOf returns the reasoning text OpenAI-compatible servers stream
// in delta.reasoning (Groq, OpenRouter) or delta.reasoning_content (vLLM,
// DeepSeek). OpenAI itself streams no reasoning on Chat Completions.
func reasoningOf(d *sdk.ChatCompletionChunkChoiceDelta) string {
	if len(d.JSON.ExtraFields) == 0 {
		return ""
	}
	for _, k := range [...]string{"reasoning", "reasoning_content"} {
		f, ok := d.JSON.ExtraFields[k]
		if !ok {
			continue
		}
		raw := f.Raw()
		if len(raw) < 2 || raw[0] != '"' {
			continue
		}
		var v string
		if json.Unmarshal([]byte(raw), &v) == nil && v != "" {
			return v
		}
	}
	return ""
}

func (s *chatStream) thinking(t string) {
	if s.text != nil {
		s.Stop(s.text, "", "")
		s.text = nil
	}
	if s.think == nil {
		s.think = s.Open(events.BlockStart{BlockType: events.BlockThinking})
	}
	s.Emit(events.ThinkingDelta(s.think.Index, t))
}

func (s *chatStream) textDelta(t string) {
	if s.think != nil {
		s.Stop(s.think, "", "")
		s.think = nil
	}
	if s.text == nil {
		s.text = s.Open(events.BlockStart{BlockType: events.BlockText})
	}
	s.Emit(events.TextDelta(s.text.Index, t))
}

func (s *chatStream) toolDelta(tc *sdk.ChatCompletionChunkChoiceDeltaToolCall) {
	if s.tools == nil {
		s.tools = make(map[int64]*toolCall)
	}
	st := s.tools[tc.Index]
	// Some compatible servers send every parallel call at index 0: a new id
	// with a name on an index whose call has started is a new call.
	if st != nil && st.block != nil && tc.ID != "" && tc.ID != st.id && tc.Function.Name != "" {
		st = nil
	}
	if st == nil {
		st = &toolCall{}
		s.tools[tc.Index] = st
	}
	if st.id == "" {
		st.id = tc.ID
	}
	if st.name == "" {
		st.name = tc.Function.Name
	}
	if st.block == nil {
		st.args.WriteString(tc.Function.Arguments)
		if st.name == "" {
			return // not named yet: keep the arguments until it is
		}
		for _, b := range [...]**Block{&s.think, &s.text} {
			s.Stop(*b, "", "")
			*b = nil
		}
		if st.id == "" {
			st.id = NewCallID()
		}
		s.stopWhole()
		st.block = s.Open(events.BlockStart{BlockType: events.BlockToolUse, ID: st.id, Name: st.name})
		if st.args.Len() > 0 {
			s.Emit(events.InputJSONDelta(st.block.Index, st.args.String()))
			st.input.WriteString(st.args.String())
			st.args.Reset()
		}
		s.calls = append(s.calls, st)
		return
	}
	if tc.Function.Arguments == "" {
		return
	}
	if st.stopped {
		// More arguments for a call whose arguments were a whole JSON
		// value when the next call began, and which was stopped then.
		s.interleaved = true
		s.Fail(events.ErrorEvent{Code: "interleaved_tool_calls", Message: "tool call " + st.id +
			" got arguments after they were a whole JSON value and the next call had begun"})
		return
	}
	st.input.WriteString(tc.Function.Arguments)
	s.Emit(events.InputJSONDelta(st.block.Index, tc.Function.Arguments))
}

// stopWhole stops the open calls whose arguments are a whole JSON value: a
// new call begins, and Chat Completions streams calls one after another.
// A call without arguments yet, or with a part of them (a server that
// interleaves parallel calls), stays open to the finish reason.
func (s *chatStream) stopWhole() {
	open := s.calls[:0]
	for _, c := range s.calls {
		if c.input.Len() > 0 && json.Valid([]byte(c.input.String())) {
			s.Stop(c.block, "", "")
			c.stopped = true
			continue
		}
		open = append(open, c)
	}
	clear(s.calls[len(open):])
	s.calls = open
}

// StopReason maps a Chat Completions finish_reason.
func StopReason(finish string) events.StopReason {
	switch finish {
	case "stop":
		return events.StopEndTurn
	case "length":
		return events.StopMaxTokens
	case "tool_calls", "function_call":
		return events.StopToolUse
	case "content_filter":
		return events.StopContentFilter
	}
	return ""
}

func (s *chatStream) finish(reason string) {
	s.finished = true
	stop := StopReason(reason)
	if s.refusal.Len() > 0 {
		// A refusal is never a silent empty answer: say so in an error event
		// and in the stop reason.
		stop = events.StopRefusal
		s.Emit(events.ErrorEvent{Code: "refusal", Message: s.refusal.String()})
		s.refusal.Reset()
	} else if stop == events.StopContentFilter {
		s.Emit(events.ErrorEvent{Code: "content_filter", Message: "the answer was stopped by OpenAI's content filter (finish_reason content_filter)"})
	}
	if s.Opened() == 0 && !s.HasOpen() && stop != "" && stop != events.StopEndTurn {
		// Nothing was streamed: an empty text block carries the stop reason
		// (a refusal, a filter, max tokens spent on reasoning).
		s.text = s.Open(events.BlockStart{BlockType: events.BlockText})
	}
	s.StopAll(stop)
	s.text, s.think, s.calls = nil, nil, s.calls[:0]
	for k := range s.tools {
		delete(s.tools, k)
	}
}

func (s *chatStream) end(err error) {
	switch {
	case s.Guard().Idle():
		s.Fail(s.Guard().IdleError())
	case s.ctx.Err() != nil:
		s.EndCtx(s.ctx.Err())
	case err != nil:
		s.Fail(StreamErrorEvent(err))
	case !s.finished:
		if s.refusal.Len() > 0 {
			s.finish("stop")
			s.Emit(events.StatusEvent{Status: events.StatusCompleted, Model: s.model, ResponseID: s.responseID})
			return
		}
		s.Fail(events.ErrorEvent{Code: "incomplete_stream", Message: "the stream ended without a finish_reason"})
	default:
		s.Emit(events.StatusEvent{Status: events.StatusCompleted, Model: s.model, ResponseID: s.responseID})
	}
}

func usageOf(u *sdk.CompletionUsage) events.UsageEvent {
	var ev events.UsageEvent
	if u.JSON.PromptTokens.Valid() {
		ev.InputTokens = ptr(u.PromptTokens)
	}
	if u.JSON.CompletionTokens.Valid() {
		ev.OutputTokens = ptr(u.CompletionTokens)
	}
	if u.JSON.TotalTokens.Valid() {
		ev.TotalTokens = ptr(u.TotalTokens)
	}
	if u.JSON.PromptTokensDetails.Valid() && u.PromptTokensDetails.JSON.CachedTokens.Valid() {
		ev.CacheReadInputTokens = ptr(u.PromptTokensDetails.CachedTokens)
	}
	if u.JSON.CompletionTokensDetails.Valid() && u.CompletionTokensDetails.JSON.ReasoningTokens.Valid() {
		ev.ReasoningTokens = ptr(u.CompletionTokensDetails.ReasoningTokens)
	}
	return ev
}

func ptr(v int64) *int64 { return &v }
