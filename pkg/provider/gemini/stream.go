package gemini

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/genai"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
)

// SynthesizedIDPrefix starts the tool-use ids this adapter makes up for
// function calls that come without an id (the Gemini API usually sends
// none). Such ids are not sent back to the API; results are matched to
// their call by name, as the API expects.
const SynthesizedIDPrefix = "gcall_"

type block struct {
	idx  int
	typ  events.BlockType
	sig  string
	name string
	// args assembles a call whose arguments are streamed (willContinue).
	args *argsBuilder
}

// stream translates generateContent chunks into docs/protocol.md §3 events. Gemini
// has no block events: consecutive parts of one kind (text, thought) form a
// block, each function call is a block of its own. It is a pull iterator
// (llm.Pump), whose reads of next are serialized with stop: iter.Pull
// forbids calling them concurrently.
type stream struct {
	llm.Pump
	// model and responseID are the last modelVersion and responseId the
	// chunks named, for the completed status.
	model, responseID string

	ctx  context.Context // the caller's: its cancel means "cancelled"
	tap  *tap
	next func() (*genai.GenerateContentResponse, error, bool)

	first    *genai.GenerateContentResponse
	firstErr error
	firstOK  bool
	pulled   bool // first consumed

	nextIdx  int
	open     *block
	held     events.BlockStop
	haveHeld bool
	calls    int
	idBase   string
	usage    *genai.GenerateContentResponseUsageMetadata
	finish   *genai.Candidate // the candidate that carried the finish reason

	// warnings are the request's settings that were not sent.
	warnings []events.Warning
}

var _ llm.Warner = (*stream)(nil)

// Warnings implements llm.Warner.
func (s *stream) Warnings() []events.Warning { return s.warnings }

var _ llm.SelfBounded = (*stream)(nil)

// newStream returns the stream of the request g guards; stop ends the SDK
// iterator, which closes the response body.
func newStream(ctx context.Context, g *llm.Guard, tp *tap,
	next func() (*genai.GenerateContentResponse, error, bool), stop func()) *stream {
	s := &stream{ctx: ctx, tap: tp, next: next}
	s.Init(g, s.pull, func() error { stop(); return nil })
	g.Start()
	return s
}

// idProcess is random for each process and idStreams counts the streams
// that synthesized an id in it: together they make the id bases unique
// across streams, processes and turns (a turn's tool calls are keyed by
// their ids, and its steps may run on different replicas) with one random
// read per process instead of one per stream.
var (
	idProcess = sync.OnceValue(func() string {
		var b [6]byte
		_, _ = rand.Read(b[:]) // never fails (crypto/rand, Go ≥ 1.24)
		return hex.EncodeToString(b[:])
	})
	idStreams atomic.Uint64
)

// newIDBase returns the prefix of the ids a stream synthesizes, each
// followed by the number of its call: "gcall_", 12 hex digits (the
// process), "_", the stream in base 36, "_".
func newIDBase() string {
	return SynthesizedIDPrefix + idProcess() + "_" + strconv.FormatUint(idStreams.Add(1), 36) + "_"
}

func (s *stream) pull() {
	resp, err, ok := s.read()
	switch {
	case !ok:
		s.end(nil)
	case err != nil:
		s.end(err)
	default:
		s.Guard().Touch()
		if resp != nil {
			s.handle(resp)
		}
	}
}

// read returns the first chunk, which Stream read, then the SDK's next.
func (s *stream) read() (*genai.GenerateContentResponse, error, bool) {
	if !s.pulled {
		s.pulled = true
		return s.first, s.firstErr, s.firstOK
	}
	var (
		r  *genai.GenerateContentResponse
		ok bool
	)
	err := s.Read(func() (err error) {
		r, err, ok = safeNext(s.next)
		return err
	})
	if err != nil {
		return nil, err, true
	}
	return r, nil, ok
}

// safeNext calls next, turning a panic into an error: genai's response
// converters type-assert the decoded JSON and panic on chunks of the wrong
// shape (e.g. "candidates" that is not an array); a stream must fail, not
// crash its process.
func safeNext(next func() (*genai.GenerateContentResponse, error, bool)) (r *genai.GenerateContentResponse, err error, ok bool) {
	defer func() {
		if p := recover(); p != nil {
			r, err, ok = nil, fmt.Errorf("gemini: malformed chunk: %v", p), true
		}
	}()
	return next()
}

func (s *stream) handle(r *genai.GenerateContentResponse) {
	if s.finish != nil {
		return // nothing counts after the finish reason
	}
	if r.ModelVersion != "" {
		s.model = r.ModelVersion
	}
	if r.ResponseID != "" {
		s.responseID = r.ResponseID
	}
	if r.UsageMetadata != nil && hasCounts(r.UsageMetadata) {
		s.usage = r.UsageMetadata
	}
	if pf := r.PromptFeedback; pf != nil && pf.BlockReason != "" && pf.BlockReason != genai.BlockedReasonUnspecified {
		msg := "the prompt was blocked: " + string(pf.BlockReason)
		if pf.BlockReasonMessage != "" {
			msg += ": " + pf.BlockReasonMessage
		}
		s.fail("prompt_blocked", msg)
		return
	}
	if len(r.Candidates) == 0 || r.Candidates[0] == nil {
		return
	}
	c := r.Candidates[0]
	if c.Content != nil {
		for _, p := range c.Content.Parts {
			if p != nil {
				s.part(p)
			}
		}
	}
	if c.FinishReason != "" && c.FinishReason != genai.FinishReasonUnspecified {
		s.finish = c
	}
}

func hasCounts(u *genai.GenerateContentResponseUsageMetadata) bool {
	return u.PromptTokenCount != 0 || u.CandidatesTokenCount != 0 || u.TotalTokenCount != 0 ||
		u.ThoughtsTokenCount != 0 || u.CachedContentTokenCount != 0
}

func signature(p *genai.Part) string {
	if len(p.ThoughtSignature) == 0 {
		return ""
	}
	return base64.StdEncoding.EncodeToString(p.ThoughtSignature)
}

func (s *stream) part(p *genai.Part) {
	sig := signature(p)
	if p.FunctionCall != nil {
		s.functionCall(p.FunctionCall, sig)
		return
	}
	if p.Text == "" && sig == "" {
		return // e.g. the empty closing text part after a function call
	}
	typ := events.BlockText
	if p.Thought {
		typ = events.BlockThinking
	}
	// A new block when the kind changes, and when a second signature
	// arrives: each signature belongs to the part it came with.
	if s.open != nil && (s.open.typ != typ || (sig != "" && s.open.sig != "")) {
		s.closeOpen()
	}
	if s.open == nil {
		s.openBlock(events.BlockStart{BlockType: typ})
	}
	if p.Text != "" {
		if typ == events.BlockThinking {
			s.Emit(events.ThinkingDelta(s.open.idx, p.Text))
		} else {
			s.Emit(events.TextDelta(s.open.idx, p.Text))
		}
	}
	if sig != "" {
		s.open.sig = sig
	}
}

func willContinue(fc *genai.FunctionCall) bool { return fc.WillContinue != nil && *fc.WillContinue }

func (s *stream) functionCall(fc *genai.FunctionCall, sig string) {
	if b := s.open; b != nil && b.args != nil && (fc.Name == "" || fc.Name == b.name) && fc.ID == "" {
		// The next piece of a call whose arguments are streamed.
		b.args.add(fc.PartialArgs)
		b.args.merge(fc.Args)
		if sig != "" && b.sig == "" {
			b.sig = sig
		}
		if !willContinue(fc) {
			s.closeOpen()
		}
		return
	}
	if fc.Name == "" {
		return // a terminator with no call open
	}
	s.closeOpen()
	id := fc.ID
	if id == "" {
		if s.idBase == "" {
			s.idBase = newIDBase()
		}
		id = s.idBase + strconv.Itoa(s.calls)
	}
	s.calls++
	b := s.openBlock(events.BlockStart{BlockType: events.BlockToolUse, ID: id, Name: fc.Name})
	b.name, b.sig = fc.Name, sig
	b.args = &argsBuilder{}
	b.args.add(fc.PartialArgs)
	b.args.merge(fc.Args)
	if !willContinue(fc) {
		s.closeOpen()
	}
}

func (s *stream) openBlock(st events.BlockStart) *block {
	s.flushHeld("")
	st.Index = s.nextIdx
	s.nextIdx++
	s.open = &block{idx: st.Index, typ: st.BlockType}
	s.Emit(st)
	return s.open
}

// closeOpen ends the open block; its stop is held back so that the last
// block's stop can carry the stop reason of the finish chunk.
func (s *stream) closeOpen() {
	b := s.open
	if b == nil {
		return
	}
	s.open = nil
	if b.args != nil {
		s.Emit(events.InputJSONDelta(b.idx, b.args.json()))
	}
	s.flushHeld("")
	s.held = events.BlockStop{Index: b.idx, BlockType: b.typ, Signature: b.sig}
	s.haveHeld = true
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
	if b := s.open; b != nil {
		s.open = nil
		s.Emit(events.BlockAbort{Index: b.idx, BlockType: b.typ, Reason: reason})
	}
}

func (s *stream) terminal(st events.StreamStatus) {
	ev := events.StatusEvent{Status: st}
	if st == events.StatusCompleted {
		ev.Model, ev.ResponseID = s.model, s.responseID
	}
	s.Emit(ev)
	s.Finish()
}

func (s *stream) emitUsage() {
	u := s.usage
	if u == nil {
		return
	}
	in := int64(u.PromptTokenCount)
	// Gemini counts thoughts apart from the candidates; output_tokens is
	// both, as the other providers report it.
	out := int64(u.CandidatesTokenCount) + int64(u.ThoughtsTokenCount)
	total := int64(u.TotalTokenCount)
	ev := events.UsageEvent{InputTokens: &in, OutputTokens: &out, TotalTokens: &total}
	if u.CachedContentTokenCount != 0 {
		v := int64(u.CachedContentTokenCount)
		ev.CacheReadInputTokens = &v
	}
	if u.ThoughtsTokenCount != 0 {
		v := int64(u.ThoughtsTokenCount)
		ev.ReasoningTokens = &v
	}
	s.Emit(ev)
}

func (s *stream) fail(code, msg string) {
	s.flushHeld("")
	s.abortOpen(code)
	s.emitUsage()
	s.Emit(events.ErrorEvent{Code: code, Message: msg})
	s.terminal(events.StatusFailed)
}

func (s *stream) complete(reason events.StopReason, errEv *events.ErrorEvent) {
	s.closeOpen()
	if s.haveHeld {
		s.flushHeld(reason)
	} else if reason != events.StopEndTurn && reason != events.StopToolUse {
		// No block to carry the reason: an empty text block says it.
		i := s.nextIdx
		s.nextIdx++
		s.Emit(events.BlockStart{Index: i, BlockType: events.BlockText})
		s.Emit(events.BlockStop{Index: i, BlockType: events.BlockText, StopReason: reason})
	}
	s.emitUsage()
	if errEv != nil {
		s.Emit(*errEv)
	}
	s.terminal(events.StatusCompleted)
}

// end handles the end of the SDK iterator.
func (s *stream) end(err error) {
	switch {
	case s.finish != nil:
		s.finishWith(s.finish)
	case s.Guard().Idle():
		ie := s.Guard().IdleError()
		s.fail(ie.Code, ie.Message)
	case s.ctx.Err() != nil:
		s.flushHeld("")
		s.abortOpen("cancelled")
		s.terminal(events.StatusCancelled)
	case err != nil:
		code, msg := "stream_error", err.Error()
		var ae genai.APIError
		if errors.As(err, &ae) {
			if ae.Status != "" {
				code = strings.ToLower(ae.Status)
			}
			if ae.Message != "" {
				msg = ae.Message
			}
		}
		code = overflowCode(code, msg)
		s.fail(code, msg)
	default:
		s.fail("incomplete_stream", "the stream ended without a finish reason")
	}
}

func (s *stream) finishWith(c *genai.Candidate) {
	msg := c.FinishMessage
	if msg == "" {
		msg = s.tap.message()
	}
	why := func(def string) string {
		if msg != "" {
			return def + ": " + msg
		}
		return def
	}
	switch r := c.FinishReason; r {
	case genai.FinishReasonStop:
		reason := events.StopEndTurn
		if s.calls > 0 {
			reason = events.StopToolUse
		}
		s.complete(reason, nil)
	case genai.FinishReasonMaxTokens, genai.FinishReasonContinuation:
		// CONTINUATION: the answer so far is whole but cut short, like a
		// token limit (automatic continuation is off, see buildRequest).
		s.complete(events.StopMaxTokens, nil)
	case genai.FinishReasonSafety, genai.FinishReasonRecitation, genai.FinishReasonBlocklist,
		genai.FinishReasonProhibitedContent, genai.FinishReasonSPII, genai.FinishReasonLanguage,
		genai.FinishReasonImageSafety, genai.FinishReasonImageProhibitedContent, genai.FinishReasonImageRecitation:
		s.complete(events.StopContentFilter, &events.ErrorEvent{Code: "content_filter",
			Message: why("the response was blocked: " + string(r))})
	default:
		// MALFORMED_FUNCTION_CALL, UNEXPECTED_TOOL_CALL, TOO_MANY_TOOL_CALLS,
		// OTHER and unknown reasons: the answer is not usable.
		s.fail(strings.ToLower(string(r)), why("generation failed: "+string(r)))
	}
}

// normalize wraps the translated stream. The translator already produces a
// well-formed stream and bounds its own waits; llm.Normalize is the shared
// safety net for what it yields.
func normalize(ctx context.Context, s llm.Stream, idle time.Duration) llm.Stream {
	return llm.Normalize(ctx, s, llm.NormalizeOptions{IdleTimeout: idle})
}
