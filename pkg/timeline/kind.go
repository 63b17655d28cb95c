package timeline

import (
	"strconv"

	"github.com/llmworker/llmworker/pkg/events"
)

type kindID uint8

const (
	kindInvalid kindID = iota
	kindUsage
	kindPing
	kindStatus
	kindError
	kindText
	kindThinking
	kindToolUse
)

// Kind is a typed token naming a class of events and the Go type E that
// handlers of that class receive. Only the package-level kinds (Usage, Ping,
// Status, Error, TextBlock, ThinkingBlock, ToolUseBlock) are valid: a Kind
// built elsewhere is the zero Kind, which On rejects.
type Kind[E any] struct{ id kindID }

// String names the kind, e.g. "text_block".
func (k Kind[E]) String() string {
	switch k.id {
	case kindUsage:
		return "usage"
	case kindPing:
		return "ping"
	case kindStatus:
		return "status"
	case kindError:
		return "error"
	case kindText:
		return "text_block"
	case kindThinking:
		return "thinking_block"
	case kindToolUse:
		return "tool_use_block"
	}
	return "invalid"
}

// The kinds. Meta kinds (Usage, Ping, Status, Error) receive the provider
// event as is; block kinds receive one event per phase of a block.
var (
	Usage         = Kind[events.UsageEvent]{kindUsage}
	Ping          = Kind[events.PingEvent]{kindPing}
	Status        = Kind[events.StatusEvent]{kindStatus}
	Error         = Kind[events.ErrorEvent]{kindError}
	TextBlock     = Kind[TextBlockEvent]{kindText}
	ThinkingBlock = Kind[ThinkingBlockEvent]{kindThinking}
	ToolUseBlock  = Kind[ToolUseBlockEvent]{kindToolUse}
)

// Handler handles the events of one kind. S is the handler's scope type:
// for block kinds the Timeline gives each handler a fresh zero S when a block
// starts and drops it when the block stops or is aborted; for meta kinds one S
// lives as long as the registration. Events are passed by value so that
// dispatching a delta does not allocate.
type Handler[E, S any] interface {
	OnEvent(scope *S, event E)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc[E, S any] func(scope *S, event E)

// OnEvent calls f.
func (f HandlerFunc[E, S]) OnEvent(scope *S, event E) { f(scope, event) }

var _ Handler[TextBlockEvent, struct{}] = HandlerFunc[TextBlockEvent, struct{}](nil)

// Phase is the point of a block's life an event reports.
type Phase uint8

const (
	// PhaseStart: the block began. Not sent when a block starts implicitly
	// with a delta (streams without block starts); the scope is still fresh.
	PhaseStart Phase = iota
	// PhaseDelta: a piece of the block's content.
	PhaseDelta
	// PhaseStop: the block ended normally; the scope is dropped afterwards.
	PhaseStop
	// PhaseAbort: the block was cut off (cancel, error); the scope is
	// dropped afterwards and its content should be discarded.
	PhaseAbort
)

func (p Phase) String() string {
	switch p {
	case PhaseStart:
		return "start"
	case PhaseDelta:
		return "delta"
	case PhaseStop:
		return "stop"
	case PhaseAbort:
		return "abort"
	}
	return "phase(" + strconv.Itoa(int(p)) + ")"
}

// TextBlockEvent is an event of a text block or of a tool_result block (a
// result of a tool the provider ran itself), which the Timeline routes to
// text handlers as docs/architecture.md#the-timeline says; BlockType tells them apart.
type TextBlockEvent struct {
	Phase     Phase
	Index     int
	BlockType events.BlockType // events.BlockText or events.BlockToolResult
	// Text is the delta (PhaseDelta).
	Text string
	// StopReason and Signature are set on PhaseStop.
	StopReason events.StopReason
	Signature  string
	// ToolUseID links a tool_result block to its tool_use block (every phase).
	ToolUseID string
	// Reason says why the block was aborted (PhaseAbort).
	Reason string
}

// ThinkingBlockEvent is an event of a thinking block.
type ThinkingBlockEvent struct {
	Phase Phase
	Index int
	// Thinking is the delta (PhaseDelta).
	Thinking string
	// Signature is set on PhaseStop; it must round-trip to the provider.
	Signature string
	// Reason says why the block was aborted (PhaseAbort).
	Reason string
}

// ToolUseBlockEvent is an event of a tool_use block. ID, Name and Server are
// set on every phase, so that a handler needs no scope to know which call a
// delta belongs to.
type ToolUseBlockEvent struct {
	Phase  Phase
	Index  int
	ID     string
	Name   string
	Server bool
	// InputJSON is a piece of the input JSON (PhaseDelta).
	InputJSON string
	// StopReason and Signature are set on PhaseStop.
	StopReason events.StopReason
	Signature  string
	// Reason says why the block was aborted (PhaseAbort).
	Reason string
}
