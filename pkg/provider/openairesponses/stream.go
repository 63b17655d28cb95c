package openairesponses

import (
	"context"
	"strings"

	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/provider/openai"
)

// stream turns Responses API events into §3 events. Each output item is a
// block: a reasoning item a thinking block (summary parts as thinking
// deltas, separated by a blank line; stopped at output_item.done with the
// item packed into the signature), each output_text part of a message a
// text block, a function_call item a tool_use block named from its
// output_item.added. Text and tool_use blocks stop at the response's
// terminal event, which carries the stop reason.
type stream struct {
	openai.Emitter
	ctx context.Context // the caller's: its cancel means "cancelled"
	sdk *ssestream.Stream[responses.ResponseStreamEventUnion]

	terminal bool // a terminal event arrived
	items    map[int64]*item
	sigs     map[*openai.Block]string
	calls    int
	refusal  strings.Builder
	warnings []events.Warning
}

type item struct {
	kind     string // reasoning, function_call, message
	id       string
	block    *openai.Block           // reasoning, function_call
	parts    map[int64]*openai.Block // message: output_text parts by content_index
	summary  []*strings.Builder      // reasoning: summary parts as streamed
	args     bool                    // function_call: argument deltas were sent
	callID   string
	name     string
	pendArgs strings.Builder // function_call args before its name
}

var (
	_ llm.SelfBounded = (*stream)(nil)
	_ llm.Warner      = (*stream)(nil)
)

func newStream(ctx context.Context, g *llm.Guard, src *ssestream.Stream[responses.ResponseStreamEventUnion]) *stream {
	s := &stream{ctx: ctx, sdk: src, items: map[int64]*item{}, sigs: map[*openai.Block]string{}}
	s.Init(g, s.pull, src.Close)
	g.Start()
	return s
}

// pull reads the next event, until the terminal one; Close may be called
// while it waits, as cancelling the request ends a read in progress.
func (s *stream) pull() {
	if s.terminal {
		s.end(nil)
		s.Finish()
		return
	}
	ev, ok, err := llm.ReadNext(&s.Pump, s.sdk)
	if ok {
		s.Guard().Touch()
		s.event(ev)
		return
	}
	s.end(err)
	s.Finish()
}

// Warnings implements llm.Warner: the settings of the request that were
// not sent.
func (s *stream) Warnings() []events.Warning { return s.warnings }

func (s *stream) event(ev responses.ResponseStreamEventUnion) {
	switch ev.Type {
	case "response.output_item.added":
		s.itemAdded(ev.OutputIndex, &ev.Item)
	case "response.output_item.done":
		s.itemDone(ev.OutputIndex, &ev.Item)
	case "response.content_part.added":
		if ev.Part.Type == "output_text" {
			s.textPart(ev.OutputIndex, ev.ContentIndex)
		}
	case "response.output_text.delta":
		if ev.Delta != "" {
			b := s.textPart(ev.OutputIndex, ev.ContentIndex)
			s.Emit(events.TextDelta(b.Index, ev.Delta))
		}
	case "response.reasoning_summary_part.added":
		it := s.reasoning(ev.OutputIndex, ev.ItemID)
		if len(it.summary) > 0 {
			s.Emit(events.ThinkingDelta(it.block.Index, "\n\n"))
		}
		it.summary = append(it.summary, new(strings.Builder))
	case "response.reasoning_summary_text.delta", "response.reasoning_text.delta":
		if ev.Delta == "" {
			return
		}
		it := s.reasoning(ev.OutputIndex, ev.ItemID)
		if ev.Type == "response.reasoning_summary_text.delta" {
			if len(it.summary) == 0 {
				it.summary = append(it.summary, new(strings.Builder))
			}
			// Appended, not concatenated: a long summary streamed in
			// small deltas would be copied whole at every delta.
			it.summary[len(it.summary)-1].WriteString(ev.Delta)
		}
		s.Emit(events.ThinkingDelta(it.block.Index, ev.Delta))
	case "response.function_call_arguments.delta":
		it := s.items[ev.OutputIndex]
		if it == nil || it.kind != "function_call" || ev.Delta == "" {
			return
		}
		if it.block == nil {
			it.pendArgs.WriteString(ev.Delta)
			return
		}
		it.args = true
		s.Emit(events.InputJSONDelta(it.block.Index, ev.Delta))
	case "response.function_call_arguments.done":
		if it := s.items[ev.OutputIndex]; it != nil && it.kind == "function_call" {
			s.callArgsDone(it, ev.Arguments)
		}
	case "response.refusal.delta":
		s.refusal.WriteString(ev.Delta)
	case "response.refusal.done":
		if s.refusal.Len() == 0 {
			s.refusal.WriteString(ev.Refusal)
		}
	case "response.completed", "response.incomplete":
		s.complete(&ev.Response)
	case "response.failed":
		s.terminal = true
		s.usage(&ev.Response)
		code, msg := string(ev.Response.Error.Code), ev.Response.Error.Message
		if code == "" {
			code = "response_failed"
		}
		if msg == "" {
			msg = "the response failed"
		}
		s.Fail(events.ErrorEvent{Code: code, Message: msg})
	case "error":
		s.terminal = true
		code := ev.Code
		if code == "" {
			code = "provider_error"
		}
		msg := ev.Message
		if msg == "" {
			msg = ev.RawJSON()
		}
		s.Fail(events.ErrorEvent{Code: code, Message: msg})
	}
}

func (s *stream) itemAdded(idx int64, oi *responses.ResponseOutputItemUnion) {
	switch oi.Type {
	case "reasoning":
		s.reasoning(idx, oi.ID)
	case "function_call":
		it := &item{kind: "function_call", id: oi.ID, callID: oi.CallID, name: oi.Name}
		s.items[idx] = it
		s.openCall(it)
	case "message":
		if s.items[idx] == nil {
			s.items[idx] = &item{kind: "message", id: oi.ID}
		}
	}
}

// compaction sends a compaction item (the server compacted the context,
// request.go) whole, at its output_item.done: a thinking block without
// text whose stop carries the item (llm.NativeCompactionSignature). An
// item without encrypted content could not be sent back, and is not
// sent.
func (s *stream) compaction(oi *responses.ResponseOutputItemUnion) {
	if oi.EncryptedContent == "" {
		return
	}
	b := s.Open(events.BlockStart{BlockType: events.BlockThinking})
	sig := compactionSig{T: sigCompaction, ID: oi.ID, EncryptedContent: oi.EncryptedContent}
	s.Stop(b, "", llm.NativeCompactionSignature(marshalSig(sig)))
}

func (s *stream) openCall(it *item) {
	if it.block != nil || it.name == "" {
		return // a call is named from its output item; wait for the name
	}
	if it.callID == "" {
		it.callID = openai.NewCallID()
	}
	s.calls++
	it.block = s.Open(events.BlockStart{BlockType: events.BlockToolUse, ID: it.callID, Name: it.name})
	if it.id != "" {
		s.sigs[it.block] = marshalSig(callSig{T: sigFunctionCall, ID: it.id})
	}
	if it.pendArgs.Len() > 0 {
		it.args = true
		s.Emit(events.InputJSONDelta(it.block.Index, it.pendArgs.String()))
		it.pendArgs.Reset()
	}
}

// callArgsDone sends the complete arguments when none were streamed.
func (s *stream) callArgsDone(it *item, args string) {
	if it.block == nil || it.args || args == "" {
		return
	}
	it.args = true
	s.Emit(events.InputJSONDelta(it.block.Index, args))
}

func (s *stream) reasoning(idx int64, id string) *item {
	it := s.items[idx]
	if it == nil || it.kind != "reasoning" {
		it = &item{kind: "reasoning", id: id}
		s.items[idx] = it
	}
	if it.block == nil {
		it.block = s.Open(events.BlockStart{BlockType: events.BlockThinking})
	}
	return it
}

func (s *stream) textPart(idx, part int64) *openai.Block {
	it := s.items[idx]
	if it == nil || it.kind != "message" {
		it = &item{kind: "message"}
		s.items[idx] = it
	}
	if it.parts == nil {
		it.parts = map[int64]*openai.Block{}
	}
	b := it.parts[part]
	if b == nil {
		b = s.Open(events.BlockStart{BlockType: events.BlockText})
		it.parts[part] = b
	}
	return b
}

func (s *stream) itemDone(idx int64, oi *responses.ResponseOutputItemUnion) {
	switch oi.Type {
	case "reasoning":
		it := s.reasoning(idx, oi.ID)
		sig := reasoningSig{T: sigReasoning, ID: oi.ID, EncryptedContent: oi.EncryptedContent}
		if sig.ID == "" {
			sig.ID = it.id
		}
		for _, p := range oi.Summary {
			sig.Summary = append(sig.Summary, p.Text)
		}
		if len(oi.Summary) == 0 {
			for _, p := range it.summary {
				sig.Summary = append(sig.Summary, p.String())
			}
		}
		s.Stop(it.block, "", marshalSig(sig))
	case "compaction":
		s.compaction(oi)
	case "function_call":
		it := s.items[idx]
		if it == nil || it.kind != "function_call" {
			it = &item{kind: "function_call", id: oi.ID, callID: oi.CallID}
			s.items[idx] = it
		}
		if it.name == "" {
			it.name = oi.Name
		}
		if it.callID == "" {
			it.callID = oi.CallID
		}
		if it.id == "" {
			it.id = oi.ID
		}
		s.openCall(it)
		if it.block != nil {
			s.callArgsDone(it, oi.Arguments.OfString)
		}
	}
}

// complete ends the stream at response.completed or response.incomplete.
func (s *stream) complete(r *responses.Response) {
	s.terminal = true
	stop := events.StopEndTurn
	if s.calls > 0 {
		stop = events.StopToolUse
	}
	if r.Status == "incomplete" || r.IncompleteDetails.Reason != "" {
		switch r.IncompleteDetails.Reason {
		case "max_output_tokens":
			stop = events.StopMaxTokens
		case "content_filter":
			stop = events.StopContentFilter
			s.Emit(events.ErrorEvent{Code: "content_filter", Message: "the response was stopped by OpenAI's content filter (incomplete: content_filter)"})
		default:
			stop = ""
		}
	}
	if s.refusal.Len() > 0 {
		stop = events.StopRefusal
		s.Emit(events.ErrorEvent{Code: "refusal", Message: s.refusal.String()})
	}
	s.usage(r)
	s.stopAll(stop)
	s.Emit(events.StatusEvent{Status: events.StatusCompleted, Model: string(r.Model), ResponseID: r.ID})
}

func (s *stream) stopAll(stop events.StopReason) {
	if s.Opened() == 0 && stop != "" && stop != events.StopEndTurn {
		// Nothing was streamed: an empty text block carries the stop reason.
		s.Open(events.BlockStart{BlockType: events.BlockText})
	}
	// Stop in index order; tool_use blocks keep their item id signature.
	for s.HasOpen() {
		b := s.First()
		s.Stop(b, stop, s.sigs[b])
	}
}

func (s *stream) usage(r *responses.Response) {
	if !r.JSON.Usage.Valid() {
		return
	}
	u := &r.Usage
	var ev events.UsageEvent
	if u.JSON.InputTokens.Valid() {
		ev.InputTokens = ptr(u.InputTokens)
	}
	if u.JSON.OutputTokens.Valid() {
		ev.OutputTokens = ptr(u.OutputTokens)
	}
	if u.JSON.TotalTokens.Valid() {
		ev.TotalTokens = ptr(u.TotalTokens)
	}
	if u.JSON.InputTokensDetails.Valid() {
		if u.InputTokensDetails.JSON.CachedTokens.Valid() {
			ev.CacheReadInputTokens = ptr(u.InputTokensDetails.CachedTokens)
		}
		if u.InputTokensDetails.JSON.CacheWriteTokens.Valid() {
			ev.CacheCreationInputTokens = ptr(u.InputTokensDetails.CacheWriteTokens)
		}
	}
	if u.JSON.OutputTokensDetails.Valid() && u.OutputTokensDetails.JSON.ReasoningTokens.Valid() {
		ev.ReasoningTokens = ptr(u.OutputTokensDetails.ReasoningTokens)
	}
	s.Emit(ev)
}

func (s *stream) end(err error) {
	switch {
	case s.terminal:
		// the terminal event queued everything
	case s.Guard().Idle():
		s.Fail(s.Guard().IdleError())
	case s.ctx.Err() != nil:
		s.EndCtx(s.ctx.Err())
	case err != nil:
		s.Fail(openai.StreamErrorEvent(err))
	default:
		s.Fail(events.ErrorEvent{Code: "incomplete_stream", Message: "the stream ended before response.completed"})
	}
}

func ptr(v int64) *int64 { return &v }
