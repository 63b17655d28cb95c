package events

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// CloudEvent types of the provider stream events (docs/protocol.md §3).
const (
	TypeLLMPing       = "llmw.llm.ping"
	TypeLLMUsage      = "llmw.llm.usage"
	TypeLLMStatus     = "llmw.llm.status"
	TypeLLMError      = "llmw.llm.error"
	TypeLLMBlockStart = "llmw.llm.block.start"
	TypeLLMBlockDelta = "llmw.llm.block.delta"
	TypeLLMBlockStop  = "llmw.llm.block.stop"
	TypeLLMBlockAbort = "llmw.llm.block.abort"
	// TypeLLMComplete is the completion request sent to ingest.
	TypeLLMComplete = "llmw.llm.complete"
	// TypeLLMCancel is the message an ingest client publishes on
	// P.llm.cancel.<request_id> to stop a provider call; ingest reads the
	// id from the subject, the data is {"request_id"}.
	TypeLLMCancel = "llmw.llm.cancel"
)

// Event is one provider stream event: the flat enumeration of docs/architecture.md#the-timeline.
// It is implemented by the value types PingEvent, UsageEvent, StatusEvent,
// ErrorEvent, BlockStart, BlockDelta, BlockStop and BlockAbort, and by nothing
// else.
type Event interface {
	// EventType is the CloudEvent type of the event, e.g. "llmw.llm.block.delta".
	EventType() string
	isEvent()
}

var (
	_ Event = PingEvent{}
	_ Event = UsageEvent{}
	_ Event = StatusEvent{}
	_ Event = ErrorEvent{}
	_ Event = BlockStart{}
	_ Event = BlockDelta{}
	_ Event = BlockStop{}
	_ Event = BlockAbort{}
)

// BlockType is the kind of a content block.
type BlockType string

const (
	BlockText       BlockType = "text"
	BlockThinking   BlockType = "thinking"
	BlockToolUse    BlockType = "tool_use"
	BlockToolResult BlockType = "tool_result"
)

// Valid reports whether b is one of the four block types.
func (b BlockType) Valid() bool {
	switch b {
	case BlockText, BlockThinking, BlockToolUse, BlockToolResult:
		return true
	}
	return false
}

// StreamStatus is the status carried by llmw.llm.status.
type StreamStatus string

const (
	StatusStarted   StreamStatus = "started"
	StatusCompleted StreamStatus = "completed"
	StatusCancelled StreamStatus = "cancelled"
	StatusFailed    StreamStatus = "failed"
	// StatusQueued comes before a stream starts, from ingest, while the
	// call waits for a provider limit the cluster shares (pkg/quota); it
	// carries no seq (docs/protocol.md §3).
	StatusQueued StreamStatus = "queued"
)

// Valid reports whether s is one of the five statuses.
func (s StreamStatus) Valid() bool {
	switch s {
	case StatusStarted, StatusCompleted, StatusCancelled, StatusFailed, StatusQueued:
		return true
	}
	return false
}

// Terminal reports whether s ends a stream.
func (s StreamStatus) Terminal() bool {
	return s == StatusCompleted || s == StatusCancelled || s == StatusFailed
}

// StopReason says why the model stopped. The empty StopReason is JSON null.
// The first four are docs/protocol.md §3's; the rest are additions documented in
// docs/protocol.md so that a refusal or a filtered answer is never mistaken
// for an ordinary end of turn.
type StopReason string

const (
	StopEndTurn       StopReason = "end_turn"
	StopMaxTokens     StopReason = "max_tokens"
	StopSequence      StopReason = "stop_sequence"
	StopToolUse       StopReason = "tool_use"
	StopPauseTurn     StopReason = "pause_turn"     // the provider paused a long server-tool turn
	StopRefusal       StopReason = "refusal"        // the model refused
	StopContentFilter StopReason = "content_filter" // a safety system cut the answer
)

// Valid reports whether r is empty or a known stop reason.
func (r StopReason) Valid() bool {
	switch r {
	case "", StopEndTurn, StopMaxTokens, StopSequence, StopToolUse, StopPauseTurn, StopRefusal, StopContentFilter:
		return true
	}
	return false
}

// MarshalJSON writes the empty reason as null.
func (r StopReason) MarshalJSON() ([]byte, error) {
	if r == "" {
		return []byte("null"), nil
	}
	return json.Marshal(string(r))
}

// UnmarshalJSON reads null as the empty reason.
func (r *StopReason) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*r = ""
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	*r = StopReason(s)
	return nil
}

// PingEvent is llmw.llm.ping.
type PingEvent struct {
	// Timestamp is unix milliseconds; 0 when the provider gave none.
	Timestamp int64 `json:"timestamp,omitempty"`
}

// UsageEvent is llmw.llm.usage. A nil field is unknown, not zero.
type UsageEvent struct {
	InputTokens              *int64 `json:"input_tokens,omitempty"`
	OutputTokens             *int64 `json:"output_tokens,omitempty"`
	TotalTokens              *int64 `json:"total_tokens,omitempty"`
	CacheReadInputTokens     *int64 `json:"cache_read_input_tokens,omitempty"`
	CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens,omitempty"`
	ReasoningTokens          *int64 `json:"reasoning_tokens,omitempty"`
}

// StatusEvent is llmw.llm.status.
type StatusEvent struct {
	Status StreamStatus `json:"status" jsonschema:"enum=started,enum=completed,enum=cancelled,enum=failed,enum=queued"`
	// Position is, on a queued status, the call's place in the queue of
	// the ingest replica that holds it (1 = next); 0 when unknown.
	Position int `json:"position,omitempty"`
	// Model and ResponseID are, on a completed status, the model that
	// answered and the provider's id of the response, as the provider
	// named them in its stream (e.g. "claude-haiku-4-5-20251001" for a
	// request for "claude-haiku-4-5", and "msg_01…"); empty when it named
	// none. They are gen_ai.response.model and gen_ai.response.id of the
	// model call's span.
	Model      string `json:"model,omitempty"`
	ResponseID string `json:"response_id,omitempty"`
	// StopReason is, on a completed status, the stop reason of the whole
	// response when the provider sends it after the blocks (Anthropic):
	// their stops went out as they came, without it (docs/protocol.md §3).
	StopReason StopReason `json:"stop_reason,omitempty"`
}

// ErrorEvent is llmw.llm.error.
type ErrorEvent struct {
	// Code is a short machine-readable code, e.g. "refusal", "rate_limited".
	Code    string `json:"code,omitempty"`
	Message string `json:"message"`
}

// BlockStart is llmw.llm.block.start.
type BlockStart struct {
	Index     int       `json:"index"`
	BlockType BlockType `json:"block_type" jsonschema:"enum=text,enum=thinking,enum=tool_use,enum=tool_result"`
	// ID and Name identify a tool_use block.
	ID   string `json:"id,omitempty"`
	Name string `json:"name,omitempty"`
	// Server marks a tool the provider runs itself; it is never dispatched
	// to local tools.
	Server bool `json:"server,omitempty"`
	// ToolUseID links a tool_result block to its (server) tool_use block.
	ToolUseID string `json:"tool_use_id,omitempty"`
}

// DeltaKind says which of the three fields a BlockDelta carries.
type DeltaKind uint8

const (
	DeltaText DeltaKind = iota
	DeltaThinking
	DeltaInputJSON
)

func (k DeltaKind) String() string {
	switch k {
	case DeltaText:
		return "text"
	case DeltaThinking:
		return "thinking"
	case DeltaInputJSON:
		return "input_json"
	}
	return "delta(" + strconv.Itoa(int(k)) + ")"
}

// BlockDelta is llmw.llm.block.delta. On the wire it is {"index", "text"},
// {"index", "thinking"} or {"index", "input_json"}: exactly one of the three.
type BlockDelta struct {
	Index int
	Kind  DeltaKind
	// Content is the text, thinking or partial tool-input JSON.
	Content string
}

// TextDelta, ThinkingDelta and InputJSONDelta build deltas.
func TextDelta(index int, s string) BlockDelta {
	return BlockDelta{Index: index, Kind: DeltaText, Content: s}
}
func ThinkingDelta(index int, s string) BlockDelta {
	return BlockDelta{Index: index, Kind: DeltaThinking, Content: s}
}
func InputJSONDelta(index int, s string) BlockDelta {
	return BlockDelta{Index: index, Kind: DeltaInputJSON, Content: s}
}

// MarshalJSON writes the delta in its wire form.
func (d BlockDelta) MarshalJSON() ([]byte, error) { return d.AppendJSON(nil), nil }

// AppendJSON appends the wire form of d to b without reflection; it is the
// hot path of every streamed token.
func (d BlockDelta) AppendJSON(b []byte) []byte {
	b = append(b, `{"index":`...)
	b = strconv.AppendInt(b, int64(d.Index), 10)
	switch d.Kind {
	case DeltaThinking:
		b = append(b, `,"thinking":`...)
	case DeltaInputJSON:
		b = append(b, `,"input_json":`...)
	default:
		b = append(b, `,"text":`...)
	}
	b = AppendJSONString(b, d.Content)
	return append(b, '}')
}

type wireDelta struct {
	Index     *int    `json:"index"`
	Text      *string `json:"text"`
	Thinking  *string `json:"thinking"`
	InputJSON *string `json:"input_json"`
	Step      int     `json:"step"`
}

// UnmarshalJSON reads the wire form and checks that exactly one of text,
// thinking and input_json is present.
func (d *BlockDelta) UnmarshalJSON(b []byte) error {
	var w wireDelta
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	return d.fromWire(&w)
}

func (d *BlockDelta) fromWire(w *wireDelta) error {
	if w.Index == nil {
		return missing("index")
	}
	n := 0
	d.Index = *w.Index
	if w.Text != nil {
		n++
		d.Kind, d.Content = DeltaText, *w.Text
	}
	if w.Thinking != nil {
		n++
		d.Kind, d.Content = DeltaThinking, *w.Thinking
	}
	if w.InputJSON != nil {
		n++
		d.Kind, d.Content = DeltaInputJSON, *w.InputJSON
	}
	if n != 1 {
		return &FieldError{Field: "text", Problem: fmt.Sprintf("exactly one of text, thinking and input_json must be present, got %d", n)}
	}
	return nil
}

// BlockStop is llmw.llm.block.stop.
type BlockStop struct {
	Index      int        `json:"index"`
	BlockType  BlockType  `json:"block_type" jsonschema:"enum=text,enum=thinking,enum=tool_use,enum=tool_result"`
	StopReason StopReason `json:"stop_reason"`
	// Signature is opaque provider data that must round-trip into the next
	// request (a thinking signature, encrypted reasoning, a Gemini thought
	// signature on a function call).
	Signature string `json:"signature,omitempty"`
}

// BlockAbort is llmw.llm.block.abort.
type BlockAbort struct {
	Index     int       `json:"index"`
	BlockType BlockType `json:"block_type" jsonschema:"enum=text,enum=thinking,enum=tool_use,enum=tool_result"`
	Reason    string    `json:"reason"`
}

func (PingEvent) EventType() string   { return TypeLLMPing }
func (UsageEvent) EventType() string  { return TypeLLMUsage }
func (StatusEvent) EventType() string { return TypeLLMStatus }
func (ErrorEvent) EventType() string  { return TypeLLMError }
func (BlockStart) EventType() string  { return TypeLLMBlockStart }
func (BlockDelta) EventType() string  { return TypeLLMBlockDelta }
func (BlockStop) EventType() string   { return TypeLLMBlockStop }
func (BlockAbort) EventType() string  { return TypeLLMBlockAbort }

func (PingEvent) isEvent()   {}
func (UsageEvent) isEvent()  {}
func (StatusEvent) isEvent() {}
func (ErrorEvent) isEvent()  {}
func (BlockStart) isEvent()  {}
func (BlockDelta) isEvent()  {}
func (BlockStop) isEvent()   {}
func (BlockAbort) isEvent()  {}

// Validate checks the required status.
func (e StatusEvent) Validate() error {
	if e.Status == "" {
		return missing("status")
	}
	if !e.Status.Valid() {
		return invalidf("status", "must be started, completed, cancelled, failed or queued, got %q", e.Status)
	}
	if !e.StopReason.Valid() {
		return invalidf("stop_reason", "unknown stop reason %q", e.StopReason)
	}
	return nil
}

// Validate checks the required message.
func (e ErrorEvent) Validate() error {
	if e.Message == "" {
		return missing("message")
	}
	return nil
}

func validateIndexType(index int, bt BlockType) error {
	if index < 0 {
		return invalidf("index", "must not be negative, got %d", index)
	}
	if bt == "" {
		return missing("block_type")
	}
	if !bt.Valid() {
		return invalidf("block_type", "must be text, thinking, tool_use or tool_result, got %q", bt)
	}
	return nil
}

// Validate checks index, block type, and id and name of tool_use blocks.
func (e BlockStart) Validate() error {
	if err := validateIndexType(e.Index, e.BlockType); err != nil {
		return err
	}
	if e.BlockType == BlockToolUse {
		if e.ID == "" {
			return missing("id")
		}
		if e.Name == "" {
			return missing("name")
		}
	}
	return nil
}

// Validate checks the index.
func (e BlockDelta) Validate() error {
	if e.Index < 0 {
		return invalidf("index", "must not be negative, got %d", e.Index)
	}
	return nil
}

// Validate checks index, block type and stop reason.
func (e BlockStop) Validate() error {
	if err := validateIndexType(e.Index, e.BlockType); err != nil {
		return err
	}
	if !e.StopReason.Valid() {
		return invalidf("stop_reason", "unknown stop reason %q", e.StopReason)
	}
	return nil
}

// Validate checks index and block type.
func (e BlockAbort) Validate() error { return validateIndexType(e.Index, e.BlockType) }

// rawIndexed reads "index" as a pointer, so that a missing one is told
// apart from 0, a valid index.
type rawIndexed struct {
	Index *int `json:"index"`
}

// DecodeStreamEvent decodes the data of a provider stream event of the given
// CloudEvent type. Errors match ErrInvalid (naming the field) or
// ErrUnknownType.
func DecodeStreamEvent(typ string, data []byte) (Event, error) {
	switch typ {
	case TypeLLMPing:
		return Decode[PingEvent](data)
	case TypeLLMUsage:
		return Decode[UsageEvent](data)
	case TypeLLMStatus:
		return Decode[StatusEvent](data)
	case TypeLLMError:
		return Decode[ErrorEvent](data)
	case TypeLLMBlockDelta:
		if d, ok := decodeDeltaFast(data); ok {
			return d, nil
		}
		return Decode[BlockDelta](data)
	case TypeLLMBlockStart, TypeLLMBlockStop, TypeLLMBlockAbort:
		var ri rawIndexed
		if err := Unmarshal(data, &ri); err != nil {
			return nil, err
		}
		if ri.Index == nil {
			return nil, missing("index")
		}
		switch typ {
		case TypeLLMBlockStart:
			return Decode[BlockStart](data)
		case TypeLLMBlockStop:
			return Decode[BlockStop](data)
		default:
			return Decode[BlockAbort](data)
		}
	}
	return nil, fmt.Errorf("%w: %q", ErrUnknownType, typ)
}

// MarshalEvent returns the JSON data of a stream event.
func MarshalEvent(e Event) ([]byte, error) {
	if d, ok := e.(BlockDelta); ok {
		return d.AppendJSON(nil), nil
	}
	return json.Marshal(e)
}
