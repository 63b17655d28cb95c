package timeline

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/llmworker/llmworker/pkg/events"
)

// CollectedText is one text block a TextBlockCollector kept.
type CollectedText struct {
	Index int
	Text  string
	// Signature is opaque provider data of the block (e.g. a Gemini thought
	// signature) that must round-trip into the next request.
	Signature string
}

// TextCollectorState is the scope of a TextBlockCollector: the text of the
// block so far.
type TextCollectorState struct {
	buf strings.Builder
}

// Text returns the text collected in the current block so far.
func (s *TextCollectorState) Text() string { return s.buf.String() }

// TextBlockCollector collects the text of every text block that stops.
// Aborted blocks and blocks without text are not kept, and neither are
// tool_result blocks (results of provider-run tools): they are routed to text
// handlers but are not the model's answer.
//
// Register it with On(t, TextBlock, c). Its methods are safe to call from
// other goroutines while the Timeline runs.
type TextBlockCollector struct {
	mu     sync.Mutex
	blocks []CollectedText
}

var _ Handler[TextBlockEvent, TextCollectorState] = (*TextBlockCollector)(nil)

// NewTextBlockCollector returns an empty collector. The zero value is also
// ready to use.
func NewTextBlockCollector() *TextBlockCollector { return &TextBlockCollector{} }

// OnEvent implements Handler.
func (c *TextBlockCollector) OnEvent(s *TextCollectorState, ev TextBlockEvent) {
	if ev.BlockType == events.BlockToolResult {
		return
	}
	switch ev.Phase {
	case PhaseStart:
		s.buf.Reset()
	case PhaseDelta:
		s.buf.WriteString(ev.Text)
	case PhaseStop:
		if s.buf.Len() == 0 {
			return
		}
		c.mu.Lock()
		c.blocks = append(c.blocks, CollectedText{Index: ev.Index, Text: s.buf.String(), Signature: ev.Signature})
		c.mu.Unlock()
	}
}

// Collected returns the texts of the collected blocks in the order they
// stopped.
func (c *TextBlockCollector) Collected() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return texts(c.blocks)
}

// TakeCollected returns the collected texts and empties the collector.
func (c *TextBlockCollector) TakeCollected() []string { return texts(c.TakeBlocks()) }

// Blocks returns the collected blocks with their index and signature.
func (c *TextBlockCollector) Blocks() []CollectedText {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]CollectedText(nil), c.blocks...)
}

// TakeBlocks returns the collected blocks and empties the collector.
func (c *TextBlockCollector) TakeBlocks() []CollectedText {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.blocks
	c.blocks = nil
	return b
}

// HasContent reports whether a block with text was collected.
func (c *TextBlockCollector) HasContent() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.blocks) > 0
}

// Clear drops everything collected.
func (c *TextBlockCollector) Clear() {
	c.mu.Lock()
	c.blocks = nil
	c.mu.Unlock()
}

func texts(bs []CollectedText) []string {
	if bs == nil {
		return nil
	}
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = b.Text
	}
	return out
}

// CollectedThinking is one thinking block a ThinkingBlockCollector kept.
type CollectedThinking struct {
	Index    int
	Thinking string
	// Signature must be sent back with the thinking in the next request
	// (Anthropic rejects tool loops whose thinking lost its signature).
	Signature string
}

// ThinkingCollectorState is the scope of a ThinkingBlockCollector.
type ThinkingCollectorState struct {
	buf strings.Builder
}

// ThinkingBlockCollector collects thinking blocks that stop with thinking or
// a signature (redacted thinking has only the latter). Its methods are safe
// to call from other goroutines while the Timeline runs.
type ThinkingBlockCollector struct {
	mu     sync.Mutex
	blocks []CollectedThinking
}

var _ Handler[ThinkingBlockEvent, ThinkingCollectorState] = (*ThinkingBlockCollector)(nil)

// NewThinkingBlockCollector returns an empty collector.
func NewThinkingBlockCollector() *ThinkingBlockCollector { return &ThinkingBlockCollector{} }

// OnEvent implements Handler.
func (c *ThinkingBlockCollector) OnEvent(s *ThinkingCollectorState, ev ThinkingBlockEvent) {
	switch ev.Phase {
	case PhaseStart:
		s.buf.Reset()
	case PhaseDelta:
		s.buf.WriteString(ev.Thinking)
	case PhaseStop:
		if s.buf.Len() == 0 && ev.Signature == "" {
			return
		}
		c.mu.Lock()
		c.blocks = append(c.blocks, CollectedThinking{Index: ev.Index, Thinking: s.buf.String(), Signature: ev.Signature})
		c.mu.Unlock()
	}
}

// Collected returns the collected blocks in the order they stopped.
func (c *ThinkingBlockCollector) Collected() []CollectedThinking {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]CollectedThinking(nil), c.blocks...)
}

// TakeCollected returns the collected blocks and empties the collector.
func (c *ThinkingBlockCollector) TakeCollected() []CollectedThinking {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.blocks
	c.blocks = nil
	return b
}

// HasContent reports whether a block was collected.
func (c *ThinkingBlockCollector) HasContent() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.blocks) > 0
}

// Clear drops everything collected.
func (c *ThinkingBlockCollector) Clear() {
	c.mu.Lock()
	c.blocks = nil
	c.mu.Unlock()
}

// CollectedCall is one tool call a ToolCallCollector kept.
type CollectedCall struct {
	Index int
	ID    string
	Name  string
	// Input is the input JSON the model streamed, without surrounding
	// white space; {} when it streamed none. It is always a valid JSON
	// object, so it can go into a transcript as is: when the streamed input
	// is invalid, Input is {} and Err says why.
	Input json.RawMessage
	// RawInput is the input exactly as streamed.
	RawInput string
	// Server marks a tool the provider ran itself; never run it locally.
	Server bool
	// Signature is opaque provider data of the block that must round-trip.
	Signature string
	// Err is set when RawInput is not a JSON object; it matches
	// ErrInvalidToolInput and its message says what is wrong, for the model.
	Err error
}

// ToolCall returns the call as hooks and tools see it.
func (c CollectedCall) ToolCall() events.ToolCall {
	return events.ToolCall{ID: c.ID, Name: c.Name, Input: c.Input}
}

// ToolCallScope is the scope of a ToolCallCollector: the input JSON of the
// block so far.
type ToolCallScope struct {
	// one is the input while it came in at most one delta (buf empty): the
	// usual case of providers that send a call's input whole, kept
	// without a copy.
	one string
	buf strings.Builder
}

// InputJSON returns the input JSON streamed in the current block so far.
func (s *ToolCallScope) InputJSON() string {
	if s.buf.Len() == 0 {
		return s.one
	}
	return s.buf.String()
}

// ToolCallCollector collects the tool calls of tool_use blocks that stop,
// parsing their input JSON at the stop. Aborted blocks are not kept. Its
// methods are safe to call from other goroutines while the Timeline runs.
type ToolCallCollector struct {
	mu    sync.Mutex
	calls []CollectedCall
}

var _ Handler[ToolUseBlockEvent, ToolCallScope] = (*ToolCallCollector)(nil)

// NewToolCallCollector returns an empty collector. The zero value is also
// ready to use.
func NewToolCallCollector() *ToolCallCollector { return &ToolCallCollector{} }

// OnEvent implements Handler.
func (c *ToolCallCollector) OnEvent(s *ToolCallScope, ev ToolUseBlockEvent) {
	switch ev.Phase {
	case PhaseStart:
		s.one = ""
		s.buf.Reset()
	case PhaseDelta:
		switch {
		case s.buf.Len() > 0:
			s.buf.WriteString(ev.InputJSON)
		case s.one == "":
			s.one = ev.InputJSON
		case ev.InputJSON != "":
			s.buf.Grow(len(s.one) + len(ev.InputJSON))
			s.buf.WriteString(s.one)
			s.buf.WriteString(ev.InputJSON)
			s.one = ""
		}
	case PhaseStop:
		call := CollectedCall{Index: ev.Index, ID: ev.ID, Name: ev.Name, Server: ev.Server,
			Signature: ev.Signature, RawInput: s.InputJSON()}
		call.Input, call.Err = parseInput(call.RawInput)
		if call.Err != nil {
			call.Err = fmt.Errorf("%w for call %q of tool %q: %w", ErrInvalidToolInput, ev.ID, ev.Name, call.Err)
		}
		c.mu.Lock()
		c.calls = append(c.calls, call)
		c.mu.Unlock()
	}
}

// notObjectError is the cause when the input is valid JSON but no object.
type notObjectError struct{ got string }

func (e *notObjectError) Error() string { return "tool input must be a JSON object, got " + e.got }

// parseInput checks the streamed input. It never panics, whatever the bytes.
func parseInput(raw string) (json.RawMessage, error) {
	in := bytes.TrimSpace([]byte(raw))
	if len(in) == 0 {
		return json.RawMessage("{}"), nil
	}
	// json.Valid checks without allocating; for invalid input,
	// unmarshalling into a RawMessage gives a syntax error with an offset,
	// which json.Valid does not.
	if !json.Valid(in) {
		var v json.RawMessage
		err := json.Unmarshal(in, &v)
		if err == nil { // cannot happen: the two agree on validity
			err = errors.New("invalid JSON")
		}
		return json.RawMessage("{}"), err
	}
	if in[0] != '{' {
		kind := "a number"
		switch in[0] {
		case '[':
			kind = "an array"
		case '"':
			kind = "a string"
		case 't', 'f':
			kind = "a boolean"
		case 'n':
			kind = "null"
		}
		return json.RawMessage("{}"), &notObjectError{got: kind}
	}
	return json.RawMessage(in), nil
}

// Collected returns the collected calls in the order their blocks stopped.
func (c *ToolCallCollector) Collected() []CollectedCall {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]CollectedCall(nil), c.calls...)
}

// CollectedAt returns the call collected from the block at index (the
// last one, should a stream use an index twice), without copying the
// others; false when none was.
func (c *ToolCallCollector) CollectedAt(index int) (CollectedCall, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := len(c.calls) - 1; i >= 0; i-- {
		if c.calls[i].Index == index {
			return c.calls[i], true
		}
	}
	return CollectedCall{}, false
}

// TakeCollected returns the collected calls and empties the collector.
func (c *ToolCallCollector) TakeCollected() []CollectedCall {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.calls
	c.calls = nil
	return b
}

// HasPendingCalls reports whether calls were collected and not taken.
func (c *ToolCallCollector) HasPendingCalls() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.calls) > 0
}

// Clear drops everything collected.
func (c *ToolCallCollector) Clear() {
	c.mu.Lock()
	c.calls = nil
	c.mu.Unlock()
}
