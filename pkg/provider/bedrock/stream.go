package bedrock

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	"github.com/aws/smithy-go"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
)

// sdkStream is what the translator reads; the SDK's
// *bedrockruntime.ConverseStreamEventStream satisfies it.
type sdkStream interface {
	Events() <-chan types.ConverseStreamOutput
	Err() error
	Close() error
}

var _ sdkStream = (*bedrockruntime.ConverseStreamEventStream)(nil)

// openBlock is a content block Bedrock started and has not stopped.
type openBlock struct {
	pidx     int32 // Bedrock's contentBlockIndex
	idx      int   // ours, unique in the stream
	typ      events.BlockType
	sig      strings.Builder
	redacted []byte
	isRedact bool
}

// stream translates ConverseStream events into docs/protocol.md §3 events.
// It is a pull iterator (llm.Pump): each Next reads SDK events until at
// least one of ours is queued.
type stream struct {
	llm.Pump
	ctx context.Context // the caller's: its cancel means "cancelled"
	src sdkStream

	stopped  bool              // messageStop arrived
	reason   events.StopReason // messageStop's
	errEv    *events.ErrorEvent
	failCode string
	next     int
	open     []*openBlock
	held     events.BlockStop
	haveHeld bool
	usage    *events.UsageEvent
}

var _ llm.SelfBounded = (*stream)(nil)

func newStream(ctx context.Context, g *llm.Guard, src sdkStream) *stream {
	s := &stream{ctx: ctx, src: src}
	s.Init(g, s.pull, src.Close)
	g.Start()
	return s
}

func (s *stream) pull() {
	select {
	case ev, ok := <-s.src.Events():
		if !ok {
			s.end(s.src.Err())
			return
		}
		s.Guard().Touch()
		s.handle(ev)
	case <-s.Guard().Context().Done():
		s.end(nil)
	}
}

func (s *stream) handle(ev types.ConverseStreamOutput) {
	switch v := ev.(type) {
	case *types.ConverseStreamOutputMemberContentBlockStart:
		s.blockStart(&v.Value)
	case *types.ConverseStreamOutputMemberContentBlockDelta:
		s.blockDelta(&v.Value)
	case *types.ConverseStreamOutputMemberContentBlockStop:
		b := s.take(index(v.Value.ContentBlockIndex))
		if b == nil {
			return
		}
		s.flushHeld("")
		s.held = events.BlockStop{Index: b.idx, BlockType: b.typ}
		switch {
		case b.isRedact:
			s.held.Signature = RedactedSignaturePrefix + base64.StdEncoding.EncodeToString(b.redacted)
		case b.sig.Len() > 0:
			s.held.Signature = b.sig.String()
		}
		s.haveHeld = true
	case *types.ConverseStreamOutputMemberMessageStop:
		s.messageStop(v.Value.StopReason)
	case *types.ConverseStreamOutputMemberMetadata:
		s.metadata(&v.Value)
	}
}

func index(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}

func (s *stream) newIndex() int {
	i := s.next
	s.next++
	return i
}

func (s *stream) find(pidx int32) *openBlock {
	for _, b := range s.open {
		if b.pidx == pidx {
			return b
		}
	}
	return nil
}

func (s *stream) take(pidx int32) *openBlock {
	for i, b := range s.open {
		if b.pidx == pidx {
			s.open = append(s.open[:i], s.open[i+1:]...)
			return b
		}
	}
	return nil
}

func (s *stream) start(pidx int32, st events.BlockStart) *openBlock {
	s.flushHeld("")
	st.Index = s.newIndex()
	b := &openBlock{pidx: pidx, idx: st.Index, typ: st.BlockType}
	s.open = append(s.open, b)
	s.Emit(st)
	return b
}

func (s *stream) blockStart(ev *types.ContentBlockStartEvent) {
	pidx := index(ev.ContentBlockIndex)
	if old := s.take(pidx); old != nil {
		s.Emit(events.BlockAbort{Index: old.idx, BlockType: old.typ, Reason: "block restarted"})
	}
	if tu, ok := ev.Start.(*types.ContentBlockStartMemberToolUse); ok {
		name := deref(tu.Value.Name)
		if name == "" {
			return
		}
		id := deref(tu.Value.ToolUseId)
		if id == "" {
			id = synthID()
		}
		s.start(pidx, events.BlockStart{BlockType: events.BlockToolUse, ID: id, Name: name})
	}
}

func (s *stream) blockDelta(ev *types.ContentBlockDeltaEvent) {
	pidx := index(ev.ContentBlockIndex)
	b := s.find(pidx)
	switch d := ev.Delta.(type) {
	case *types.ContentBlockDeltaMemberText:
		// Text blocks have no contentBlockStart: the first delta opens one.
		if b == nil {
			b = s.start(pidx, events.BlockStart{BlockType: events.BlockText})
		}
		if d.Value != "" && b.typ == events.BlockText {
			s.Emit(events.TextDelta(b.idx, d.Value))
		}
	case *types.ContentBlockDeltaMemberToolUse:
		// Input without a started call has no tool name and is dropped.
		if b != nil && b.typ == events.BlockToolUse && deref(d.Value.Input) != "" {
			s.Emit(events.InputJSONDelta(b.idx, *d.Value.Input))
		}
	case *types.ContentBlockDeltaMemberReasoningContent:
		if b == nil {
			b = s.start(pidx, events.BlockStart{BlockType: events.BlockThinking})
		}
		if b.typ != events.BlockThinking {
			return
		}
		switch r := d.Value.(type) {
		case *types.ReasoningContentBlockDeltaMemberText:
			if r.Value != "" {
				s.Emit(events.ThinkingDelta(b.idx, r.Value))
			}
		case *types.ReasoningContentBlockDeltaMemberSignature:
			b.sig.WriteString(r.Value)
		case *types.ReasoningContentBlockDeltaMemberRedactedContent:
			b.isRedact = true
			b.redacted = append(b.redacted, r.Value...)
		}
	}
}

// messageStop maps the stop reason. Bedrock sends it after the last block
// stops, so the held last stop carries it; usage follows in metadata.
func (s *stream) messageStop(r types.StopReason) {
	s.stopped = true
	s.abortOpen("block not stopped before messageStop")
	switch r {
	case types.StopReasonEndTurn:
		s.reason = events.StopEndTurn
	case types.StopReasonToolUse:
		s.reason = events.StopToolUse
	case types.StopReasonMaxTokens, types.StopReasonModelContextWindowExceeded:
		s.reason = events.StopMaxTokens
	case types.StopReasonStopSequence:
		s.reason = events.StopSequence
	case types.StopReasonGuardrailIntervened:
		s.reason = events.StopContentFilter
		s.errEv = &events.ErrorEvent{Code: "content_filter", Message: "bedrock: a guardrail intervened (stopReason guardrail_intervened)"}
	case types.StopReasonContentFiltered:
		s.reason = events.StopContentFilter
		s.errEv = &events.ErrorEvent{Code: "content_filter", Message: "bedrock: the answer was stopped by the content filter (stopReason content_filtered)"}
	case types.StopReasonMalformedToolUse:
		s.failCode = "malformed_tool_call"
	case types.StopReasonMalformedModelOutput:
		s.failCode = "malformed_model_output"
	default:
		// A reason this SDK does not know: the answer is whole, say so.
		s.reason = events.StopEndTurn
	}
	if s.failCode != "" {
		s.fail(s.failCode, "bedrock: the model's output could not be used (stopReason "+string(r)+")")
		return
	}
	if s.haveHeld {
		s.flushHeld(s.reason)
	} else if s.reason != events.StopEndTurn && s.reason != events.StopToolUse {
		// No block to carry the reason: an empty text block says it.
		i := s.newIndex()
		s.Emit(events.BlockStart{Index: i, BlockType: events.BlockText})
		s.Emit(events.BlockStop{Index: i, BlockType: events.BlockText, StopReason: s.reason})
	}
}

func (s *stream) metadata(m *types.ConverseStreamMetadataEvent) {
	if u := m.Usage; u != nil {
		ue := events.UsageEvent{
			InputTokens:              i64(u.InputTokens),
			OutputTokens:             i64(u.OutputTokens),
			TotalTokens:              i64(u.TotalTokens),
			CacheReadInputTokens:     i64(u.CacheReadInputTokens),
			CacheCreationInputTokens: i64(u.CacheWriteInputTokens),
		}
		s.usage = &ue
	}
	if s.errEv != nil && m.Trace != nil && m.Trace.Guardrail != nil && m.Trace.Guardrail.ActionReason != nil {
		s.errEv.Message += ": " + *m.Trace.Guardrail.ActionReason
	}
}

func i64(p *int32) *int64 {
	if p == nil {
		return nil
	}
	v := int64(*p)
	return &v
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func (s *stream) flushHeld(reason events.StopReason) {
	if !s.haveHeld {
		return
	}
	s.held.StopReason = reason
	s.Emit(s.held)
	s.haveHeld = false
}

func (s *stream) abortOpen(reason string) {
	for _, b := range s.open {
		s.Emit(events.BlockAbort{Index: b.idx, BlockType: b.typ, Reason: reason})
	}
	s.open = s.open[:0]
}

func (s *stream) terminal(st events.StreamStatus) {
	s.Emit(events.StatusEvent{Status: st})
	s.Finish()
}

func (s *stream) fail(code, msg string) {
	s.flushHeld("")
	s.abortOpen(code)
	if s.usage != nil {
		s.Emit(*s.usage)
	}
	s.Emit(events.ErrorEvent{Code: code, Message: msg})
	s.terminal(events.StatusFailed)
}

// end handles the end of the SDK stream: after messageStop it completes,
// otherwise it fails with what ended it.
func (s *stream) end(err error) {
	switch {
	case s.Guard().Idle():
		ie := s.Guard().IdleError()
		s.fail(ie.Code, ie.Message)
	case s.ctx.Err() != nil:
		s.flushHeld("")
		s.abortOpen("cancelled")
		s.terminal(events.StatusCancelled)
	case err != nil:
		s.fail(streamErrorCode(err), err.Error())
	case s.stopped:
		if s.usage != nil {
			s.Emit(*s.usage)
		}
		if s.errEv != nil {
			s.Emit(*s.errEv)
		}
		s.terminal(events.StatusCompleted)
	default:
		s.fail("incomplete_stream", "the stream ended before messageStop")
	}
}

// streamErrorCode maps an exception Bedrock sent inside the stream to a
// stream error code (docs/protocol.md §10).
func streamErrorCode(err error) string {
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return llm.CodeStreamError
	}
	switch ae.ErrorCode() {
	case "throttlingException", "ThrottlingException":
		return "rate_limited"
	case "modelStreamErrorException", "ModelStreamErrorException":
		return llm.CodeStreamError
	case "validationException", "ValidationException":
		if llm.IsContextOverflow("", ae.ErrorMessage()) {
			return llm.CodeContextOverflow
		}
		return "invalid_request"
	case "serviceUnavailableException", "ServiceUnavailableException":
		return "service_unavailable"
	case "internalServerException", "InternalServerException":
		return "internal_error"
	}
	if c := ae.ErrorCode(); c != "" {
		return strings.ToLower(c[:1]) + c[1:]
	}
	return llm.CodeStreamError
}

// synthID returns a unique tool-use id for a call Bedrock sent without one.
func synthID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "tooluse_synth_" + hex.EncodeToString(b[:])
}
