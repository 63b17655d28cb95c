package anthropic

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/packages/ssestream"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
)

// sdkStream is what the translator reads; *ssestream.Stream satisfies it.
type sdkStream interface {
	Next() bool
	Current() sdk.MessageStreamEventUnion
	Err() error
	Close() error
}

var _ sdkStream = (*ssestream.Stream[sdk.MessageStreamEventUnion])(nil)

// openBlock is a content block the provider started and has not stopped.
type openBlock struct {
	pidx   int64 // the provider's index
	idx    int   // our index, unique in the stream
	typ    events.BlockType
	sig    strings.Builder
	signed bool
	skip   bool // a block type we do not map (e.g. container_upload)
	// answer marks the call of the structured-output tool, streamed as
	// the text it carries; input holds a wrapped answer until the call
	// ends, and wrote says whether any text was sent.
	answer bool
	input  strings.Builder
	wrote  bool
	// compaction is the compaction block being received (its stop
	// carries it whole, llm.NativeCompactionSignature), nil for others.
	compaction *sdk.BetaCompactionBlockParam
}

// stream translates the Messages API event stream into docs/protocol.md §3 events.
// It is a pull iterator with no goroutine (llm.Pump): each Next reads SDK
// events until at least one of ours is queued.
type stream struct {
	llm.Pump
	// model and responseID are message_start's, for the completed status.
	model, responseID string

	ctx context.Context // the caller's: its cancel means "cancelled"
	src sdkStream

	sawStop bool // message_stop arrived
	next    int
	open    []*openBlock
	// reason is message_delta's stop reason, sent after the blocks: the
	// completed status carries it, so that no block's stop waits for it.
	reason events.StopReason
	usage  events.UsageEvent

	// output is the structured-output tool of the request, whose call is
	// the answer, not a tool call; calls counts the other tool calls.
	output   outputTool
	calls    int
	warnings []events.Warning
}

var _ llm.Warner = (*stream)(nil)

// Warnings implements llm.Warner: the request's settings that were not
// sent.
func (s *stream) Warnings() []events.Warning { return s.warnings }

var _ llm.SelfBounded = (*stream)(nil)

func newStream(ctx context.Context, g *llm.Guard, src sdkStream) *stream {
	s := &stream{ctx: ctx, src: src}
	s.Init(g, s.pull, src.Close)
	g.Start()
	return s
}

// pull reads the next SDK event and handles it, or handles the end of the
// source. The event is a union of every event type, about 5 KB: it is
// copied once, out of the SDK's Current, and read in place after that
// (returning it through one more call would copy it again, a tenth of the
// adapter's instructions on a stream of small deltas).
func (s *stream) pull() {
	var ev sdk.MessageStreamEventUnion
	ok := false
	err := s.Read(func() (err error) {
		// The SDK decodes into typed values and is not known to panic; a
		// stream must fail rather than crash its process if it ever does.
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("anthropic: malformed event: %v", p)
			}
		}()
		if ok = s.src.Next(); ok {
			ev = s.src.Current()
			return nil
		}
		return s.src.Err()
	})
	if !ok || err != nil {
		s.end(err)
		return
	}
	s.Guard().Touch()
	s.handle(&ev)
}

func (s *stream) handle(ev *sdk.MessageStreamEventUnion) {
	if s.sawStop {
		return
	}
	switch ev.Type {
	case "message_start":
		s.model, s.responseID = string(ev.Message.Model), ev.Message.ID
		s.mergeStartUsage(&ev.Message.Usage)
	case "content_block_start":
		s.blockStart(ev)
	case "content_block_delta":
		s.blockDelta(ev)
	case "content_block_stop":
		b := s.take(ev.Index)
		if b != nil && b.compaction != nil {
			s.compactionStop(b)
			return
		}
		if b == nil || b.skip {
			return
		}
		if b.answer {
			s.finishAnswer(b)
		}
		stop := events.BlockStop{Index: b.idx, BlockType: b.typ}
		if b.signed {
			stop.Signature = b.sig.String()
		}
		s.Emit(stop)
	case "message_delta":
		reason := mapStopReason(ev.Delta.StopReason)
		if reason == events.StopToolUse && s.calls == 0 && s.output.name != "" {
			// The model called only the structured-output tool: it
			// answered.
			reason = events.StopEndTurn
		}
		s.mergeDeltaUsage(&ev.Usage)
		s.reason = reason
		if s.next == 0 && reason != "" && reason != events.StopEndTurn && reason != events.StopToolUse {
			// No block at all (a refusal before any content): an empty
			// text block says why, for a reader of the blocks only.
			i := s.newIndex()
			s.Emit(events.BlockStart{Index: i, BlockType: events.BlockText})
			s.Emit(events.BlockStop{Index: i, BlockType: events.BlockText, StopReason: reason})
		}
		s.Emit(s.usage)
		if reason == events.StopRefusal {
			msg := ev.Delta.StopDetails.Explanation
			if msg == "" {
				msg = "the model refused to answer"
			}
			s.Emit(events.ErrorEvent{Code: "refusal", Message: msg})
		}
	case "message_stop":
		s.sawStop = true
		s.abortOpen("block not stopped before message_stop")
		s.terminal(events.StatusCompleted)
	}
}

func (s *stream) newIndex() int {
	i := s.next
	s.next++
	return i
}

func (s *stream) find(pidx int64) *openBlock {
	for _, b := range s.open {
		if b.pidx == pidx {
			return b
		}
	}
	return nil
}

func (s *stream) take(pidx int64) *openBlock {
	for i, b := range s.open {
		if b.pidx == pidx {
			s.open = append(s.open[:i], s.open[i+1:]...)
			return b
		}
	}
	return nil
}

func (s *stream) start(pidx int64, st events.BlockStart) *openBlock {
	st.Index = s.newIndex()
	b := &openBlock{pidx: pidx, idx: st.Index, typ: st.BlockType}
	s.open = append(s.open, b)
	s.Emit(st)
	return b
}

func (s *stream) blockStart(ev *sdk.MessageStreamEventUnion) {
	if old := s.take(ev.Index); old != nil && !old.skip {
		s.Emit(events.BlockAbort{Index: old.idx, BlockType: old.typ, Reason: "block restarted"})
	}
	cb := &ev.ContentBlock
	switch t := cb.Type; {
	case t == "text":
		b := s.start(ev.Index, events.BlockStart{BlockType: events.BlockText})
		if cb.Text != "" {
			s.Emit(events.TextDelta(b.idx, cb.Text))
		}
	case t == "thinking":
		b := s.start(ev.Index, events.BlockStart{BlockType: events.BlockThinking})
		if cb.Thinking != "" {
			s.Emit(events.ThinkingDelta(b.idx, cb.Thinking))
		}
		if cb.Signature != "" {
			b.sig.WriteString(cb.Signature)
			b.signed = true
		}
	case t == "redacted_thinking":
		b := s.start(ev.Index, events.BlockStart{BlockType: events.BlockThinking})
		b.sig.WriteString(RedactedSignaturePrefix)
		b.sig.WriteString(cb.Data)
		b.signed = true
	case t == "tool_use" && s.output.name != "" && cb.Name == s.output.name:
		b := s.start(ev.Index, events.BlockStart{BlockType: events.BlockText})
		b.answer = true
		if in := strings.TrimSpace(cb.JSON.Input.Raw()); in != "" && in != "{}" && in != "null" {
			s.answerDelta(b, in)
		}
	case t == "tool_use" || t == "server_tool_use":
		if cb.Name == "" {
			s.open = append(s.open, &openBlock{pidx: ev.Index, skip: true})
			return
		}
		if t == "tool_use" {
			s.calls++
		}
		id := cb.ID
		if id == "" {
			id = synthID()
		}
		b := s.start(ev.Index, events.BlockStart{BlockType: events.BlockToolUse, ID: id, Name: cb.Name, Server: t == "server_tool_use"})
		// Streamed calls start with "input":{} and send the input as
		// deltas; a call that arrives whole has it here.
		if in := strings.TrimSpace(cb.JSON.Input.Raw()); in != "" && in != "{}" && in != "null" {
			s.Emit(events.InputJSONDelta(b.idx, in))
		}
	case t == "compaction":
		// The provider compacted the context (request.go, compaction).
		// Its summary is not the assistant's: nothing streams until the
		// block is whole.
		var c sdk.BetaCompactionBlock
		if err := c.UnmarshalJSON([]byte(cb.RawJSON())); err != nil {
			s.open = append(s.open, &openBlock{pidx: ev.Index, skip: true})
			return
		}
		p := c.ToParam()
		s.open = append(s.open, &openBlock{pidx: ev.Index, skip: true, compaction: &p})
	case strings.HasSuffix(t, "_tool_result"):
		// A server tool's result (web_search_tool_result, ...). The text is
		// the raw result block, so it can be sent back as it came.
		b := s.start(ev.Index, events.BlockStart{BlockType: events.BlockToolResult, ToolUseID: cb.ToolUseID})
		if raw := cb.RawJSON(); raw != "" {
			s.Emit(events.TextDelta(b.idx, raw))
		}
	default:
		s.open = append(s.open, &openBlock{pidx: ev.Index, skip: true})
	}
}

func (s *stream) blockDelta(ev *sdk.MessageStreamEventUnion) {
	d := &ev.Delta
	b := s.find(ev.Index)
	if b == nil {
		// A delta without a start: text and thinking can be shown; input
		// JSON without a tool name cannot, and is dropped.
		switch d.Type {
		case "text_delta":
			b = s.start(ev.Index, events.BlockStart{BlockType: events.BlockText})
		case "thinking_delta":
			b = s.start(ev.Index, events.BlockStart{BlockType: events.BlockThinking})
		default:
			return
		}
	}
	if b.compaction != nil {
		s.compactionDelta(b, ev)
		return
	}
	if b.skip {
		return
	}
	switch d.Type {
	case "text_delta":
		if d.Text != "" && (b.typ == events.BlockText || b.typ == events.BlockToolResult) {
			s.Emit(events.TextDelta(b.idx, d.Text))
		}
	case "thinking_delta":
		if d.Thinking != "" && b.typ == events.BlockThinking {
			s.Emit(events.ThinkingDelta(b.idx, d.Thinking))
		}
	case "signature_delta":
		if b.typ == events.BlockThinking {
			b.sig.WriteString(d.Signature)
			b.signed = true
		}
	case "input_json_delta":
		if d.PartialJSON != "" && b.answer {
			s.answerDelta(b, d.PartialJSON)
		} else if d.PartialJSON != "" && b.typ == events.BlockToolUse {
			s.Emit(events.InputJSONDelta(b.idx, d.PartialJSON))
		}
	}
}

// answerDelta passes on a piece of the structured-output tool's input as
// answer text; a wrapped answer is kept until the call ends.
func (s *stream) answerDelta(b *openBlock, in string) {
	if s.output.wrapped {
		b.input.WriteString(in)
		return
	}
	s.Emit(events.TextDelta(b.idx, in))
	b.wrote = true
}

// finishAnswer sends what remains of the answer when its call ends: the
// value of a wrapped answer, "{}" for a call whose input was empty (the
// API's default input).
func (s *stream) finishAnswer(b *openBlock) {
	if s.output.wrapped {
		var in struct {
			Value json.RawMessage `json:"value"`
		}
		raw := b.input.String()
		if json.Unmarshal([]byte(raw), &in) == nil && len(in.Value) > 0 {
			raw = string(in.Value)
		}
		if raw != "" {
			s.Emit(events.TextDelta(b.idx, raw))
		}
		return
	}
	if !b.wrote {
		s.Emit(events.TextDelta(b.idx, "{}"))
	}
}

// compactionDelta applies a compaction_delta (the summary and the opaque
// content, which the SDK's beta types read) or a signature_delta to the
// compaction block b.
func (s *stream) compactionDelta(b *openBlock, ev *sdk.MessageStreamEventUnion) {
	switch ev.Delta.Type {
	case "compaction_delta":
		var e sdk.BetaRawContentBlockDeltaEvent
		if e.UnmarshalJSON([]byte(ev.RawJSON())) != nil {
			return
		}
		d := e.Delta.AsCompactionDelta()
		if d.JSON.Content.Valid() && d.Content != "" {
			b.compaction.Content = sdk.String(b.compaction.Content.Value + d.Content)
		}
		if d.JSON.EncryptedContent.Valid() && d.EncryptedContent != "" {
			b.compaction.EncryptedContent = sdk.String(b.compaction.EncryptedContent.Value + d.EncryptedContent)
		}
	case "signature_delta":
		b.compaction.Signature = sdk.String(b.compaction.Signature.Value + ev.Delta.Signature)
	}
}

// compactionStop sends the compaction block b, whole, as a thinking
// block without text whose stop signature carries it
// (llm.NativeCompactionSignature). A failed compaction (no summary),
// which the API treats as nothing, is not sent.
func (s *stream) compactionStop(b *openBlock) {
	if b.compaction.Content.Value == "" {
		return
	}
	data, err := json.Marshal(b.compaction)
	if err != nil {
		return
	}
	i := s.newIndex()
	s.Emit(events.BlockStart{Index: i, BlockType: events.BlockThinking})
	s.Emit(events.BlockStop{Index: i, BlockType: events.BlockThinking, Signature: llm.NativeCompactionSignature(string(data))})
}

func (s *stream) abortOpen(reason string) {
	for _, b := range s.open {
		if !b.skip {
			s.Emit(events.BlockAbort{Index: b.idx, BlockType: b.typ, Reason: reason})
		}
	}
	s.open = s.open[:0]
}

func (s *stream) terminal(st events.StreamStatus) {
	ev := events.StatusEvent{Status: st}
	if st == events.StatusCompleted {
		ev.Model, ev.ResponseID, ev.StopReason = s.model, s.responseID, s.reason
	}
	s.Emit(ev)
	s.Finish()
}

func (s *stream) fail(code, msg string) {
	s.abortOpen(code)
	s.Emit(events.ErrorEvent{Code: code, Message: msg})
	s.terminal(events.StatusFailed)
}

// end handles the end of the SDK stream without message_stop.
func (s *stream) end(err error) {
	switch {
	case s.Guard().Idle():
		ie := s.Guard().IdleError()
		s.fail(ie.Code, ie.Message)
	case s.ctx.Err() != nil:
		s.abortOpen("cancelled")
		s.terminal(events.StatusCancelled)
	case err != nil:
		s.fail(apiErrorInfo(err))
	default:
		s.fail("incomplete_stream", "the stream ended before message_stop")
	}
}

func (s *stream) mergeStartUsage(u *sdk.Usage) {
	setIf(&s.usage.InputTokens, u.InputTokens, u.JSON.InputTokens.Valid())
	setIf(&s.usage.OutputTokens, u.OutputTokens, u.JSON.OutputTokens.Valid())
	setIf(&s.usage.CacheReadInputTokens, u.CacheReadInputTokens, u.JSON.CacheReadInputTokens.Valid())
	setIf(&s.usage.CacheCreationInputTokens, u.CacheCreationInputTokens, u.JSON.CacheCreationInputTokens.Valid())
	setIf(&s.usage.ReasoningTokens, u.OutputTokensDetails.ThinkingTokens, u.JSON.OutputTokensDetails.Valid() && u.OutputTokensDetails.JSON.ThinkingTokens.Valid())
}

// mergeDeltaUsage applies message_delta usage, which is cumulative: fields
// it carries replace those of message_start.
func (s *stream) mergeDeltaUsage(u *sdk.MessageDeltaUsage) {
	setIf(&s.usage.InputTokens, u.InputTokens, u.JSON.InputTokens.Valid())
	setIf(&s.usage.OutputTokens, u.OutputTokens, u.JSON.OutputTokens.Valid())
	setIf(&s.usage.CacheReadInputTokens, u.CacheReadInputTokens, u.JSON.CacheReadInputTokens.Valid())
	setIf(&s.usage.CacheCreationInputTokens, u.CacheCreationInputTokens, u.JSON.CacheCreationInputTokens.Valid())
	setIf(&s.usage.ReasoningTokens, u.OutputTokensDetails.ThinkingTokens, u.JSON.OutputTokensDetails.Valid() && u.OutputTokensDetails.JSON.ThinkingTokens.Valid())
	s.addCompactionUsage(u)
}

// addCompactionUsage adds the tokens of the compactions the provider ran
// in the call (usage.iterations entries of type compaction, which the
// SDK's beta types read) to the call's: the API bills them but leaves
// them out of the top-level fields.
func (s *stream) addCompactionUsage(u *sdk.MessageDeltaUsage) {
	// A field the non-beta type lacks is an extra field, which the SDK
	// marks as not valid for its type: its raw JSON is what counts.
	f, ok := u.JSON.ExtraFields["iterations"]
	if !ok || f.Raw() == "" || f.Raw() == "null" {
		return
	}
	var its sdk.BetaIterationsUsage
	if json.Unmarshal([]byte(f.Raw()), &its) != nil {
		return
	}
	add := func(dst **int64, v int64) {
		if v == 0 {
			return
		}
		if *dst != nil {
			v += **dst
		}
		*dst = &v
	}
	for _, it := range its {
		if it.Type != "compaction" {
			continue
		}
		c := it.AsCompaction()
		add(&s.usage.InputTokens, c.InputTokens)
		add(&s.usage.OutputTokens, c.OutputTokens)
		add(&s.usage.CacheReadInputTokens, c.CacheReadInputTokens)
		add(&s.usage.CacheCreationInputTokens, c.CacheCreationInputTokens)
	}
}

func setIf(dst **int64, v int64, ok bool) {
	if ok {
		*dst = &v
	}
}

func mapStopReason(r sdk.StopReason) events.StopReason {
	switch r {
	case sdk.StopReasonEndTurn:
		return events.StopEndTurn
	case sdk.StopReasonMaxTokens, sdk.StopReasonModelContextWindowExceeded:
		return events.StopMaxTokens
	case sdk.StopReasonStopSequence:
		return events.StopSequence
	case sdk.StopReasonToolUse:
		return events.StopToolUse
	case sdk.StopReasonPauseTurn:
		return events.StopPauseTurn
	case sdk.StopReasonRefusal:
		return events.StopRefusal
	}
	return ""
}

// errorMessage returns error.message of an API error body.
func errorMessage(raw string) string {
	var env struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
		Message string `json:"message"`
	}
	if json.Unmarshal([]byte(raw), &env) != nil {
		return ""
	}
	if env.Error.Message != "" {
		return env.Error.Message
	}
	return env.Message
}
