package events

import (
	"encoding/json"
	"fmt"
)

// WorkerEvent is one worker event for UIs (docs/protocol.md, "Worker
// events"): what a turn publishes on P.events.<session>.<turn>.<channel>.
// Each CloudEvent type has exactly one Go type, so a UI switches on Go
// types instead of strings:
//
//	llmw.turn.started      turn                 TurnStarted
//	llmw.turn.step         turn                 TurnStep
//	llmw.turn.paused       turn                 TurnPaused
//	llmw.turn.resumed      turn                 TurnResumed
//	llmw.turn.completed    turn                 TurnCompleted
//	llmw.turn.failed       turn                 TurnFailed
//	llmw.turn.aborted      turn                 TurnAborted
//	llmw.turn.warning      turn                 TurnWarning
//	llmw.turn.queued       turn                 TurnQueued
//	llmw.turn.compacted    turn                 TurnCompacted
//	llmw.block.start       text|thinking|tool   WorkerBlockStart
//	llmw.block.delta       text|thinking|tool   WorkerBlockDelta
//	llmw.block.stop        text|thinking|tool   WorkerBlockStop
//	llmw.block.abort       text|thinking|tool   WorkerBlockAbort
//	llmw.text.complete     text                 TextComplete
//	llmw.toolcall.complete tool                 ToolCallComplete
//	llmw.tool.started      tool                 ToolStarted
//	llmw.tool.progress     tool                 ToolProgress
//	llmw.tool.result       tool                 ToolCallResult
//	llmw.tool.skipped      tool                 ToolSkipped
//	llmw.tool.cancelled    tool                 ToolCancelled
//	llmw.tool.child        tool                 ToolChild
//	llmw.hook.decision     hook                 HookDecision
//	llmw.hook.message      hook                 HookMessage
//	llmw.usage             usage                UsageReport
//
// Block events travel on the channel of their block type (BlockChannel;
// tool_result blocks of provider-run tools with text). ToolCallResult is
// also what a tool executor replies (docs/protocol.md, "Tool result"): that
// reply has the same CloudEvent type, llmw.tool.result, and the same data,
// so one Go type serves both and the mapping stays one to one. The
// interface is sealed: only this package's types implement it.
// DecodeWorkerEvent reads one back; MarshalWorkerEvent writes its data.
type WorkerEvent interface {
	// WorkerType is the CloudEvent type, e.g. "llmw.turn.started".
	WorkerType() string
	// Channel is the last token of the event's subject.
	Channel() Channel
	isWorkerEvent()
}

// TurnFailed is the data of llmw.turn.failed (the shape of TurnEnded).
type TurnFailed TurnEnded

// TurnAborted is the data of llmw.turn.aborted (the shape of TurnEnded).
type TurnAborted TurnEnded

func (TurnStarted) WorkerType() string      { return TypeTurnStarted }
func (TurnStep) WorkerType() string         { return TypeTurnStep }
func (TurnPaused) WorkerType() string       { return TypeTurnPaused }
func (TurnResumed) WorkerType() string      { return TypeTurnResumed }
func (TurnCompleted) WorkerType() string    { return TypeTurnCompleted }
func (TurnFailed) WorkerType() string       { return TypeTurnFailed }
func (TurnAborted) WorkerType() string      { return TypeTurnAborted }
func (TurnWarning) WorkerType() string      { return TypeTurnWarning }
func (TurnQueued) WorkerType() string       { return TypeTurnQueued }
func (TurnCompacted) WorkerType() string    { return TypeTurnCompacted }
func (WorkerBlockStart) WorkerType() string { return TypeBlockStart }
func (WorkerBlockDelta) WorkerType() string { return TypeBlockDelta }
func (WorkerBlockStop) WorkerType() string  { return TypeBlockStop }
func (WorkerBlockAbort) WorkerType() string { return TypeBlockAbort }
func (TextComplete) WorkerType() string     { return TypeTextComplete }
func (ToolCallComplete) WorkerType() string { return TypeToolCallComplete }
func (ToolStarted) WorkerType() string      { return TypeToolStarted }
func (ToolProgress) WorkerType() string     { return TypeToolProgress }
func (ToolCallResult) WorkerType() string   { return TypeToolResult }
func (ToolSkipped) WorkerType() string      { return TypeToolSkipped }
func (ToolCancelled) WorkerType() string    { return TypeToolCancelled }
func (ToolChild) WorkerType() string        { return TypeToolChild }
func (HookDecision) WorkerType() string     { return TypeHookDecision }
func (HookMessage) WorkerType() string      { return TypeHookMessage }
func (UsageReport) WorkerType() string      { return TypeUsage }

func (TurnStarted) Channel() Channel        { return ChannelTurn }
func (TurnStep) Channel() Channel           { return ChannelTurn }
func (TurnPaused) Channel() Channel         { return ChannelTurn }
func (TurnResumed) Channel() Channel        { return ChannelTurn }
func (TurnCompleted) Channel() Channel      { return ChannelTurn }
func (TurnFailed) Channel() Channel         { return ChannelTurn }
func (TurnAborted) Channel() Channel        { return ChannelTurn }
func (TurnWarning) Channel() Channel        { return ChannelTurn }
func (TurnQueued) Channel() Channel         { return ChannelTurn }
func (TurnCompacted) Channel() Channel      { return ChannelTurn }
func (e WorkerBlockStart) Channel() Channel { return BlockChannel(e.BlockType) }
func (e WorkerBlockStop) Channel() Channel  { return BlockChannel(e.BlockType) }
func (e WorkerBlockAbort) Channel() Channel { return BlockChannel(e.BlockType) }
func (TextComplete) Channel() Channel       { return ChannelText }
func (ToolCallComplete) Channel() Channel   { return ChannelTool }
func (ToolStarted) Channel() Channel        { return ChannelTool }
func (ToolProgress) Channel() Channel       { return ChannelTool }
func (ToolCallResult) Channel() Channel     { return ChannelTool }
func (ToolSkipped) Channel() Channel        { return ChannelTool }
func (ToolCancelled) Channel() Channel      { return ChannelTool }
func (ToolChild) Channel() Channel          { return ChannelTool }
func (HookDecision) Channel() Channel       { return ChannelHook }
func (HookMessage) Channel() Channel        { return ChannelHook }
func (UsageReport) Channel() Channel        { return ChannelUsage }

// Channel of a delta follows from what it carries: a text delta belongs to
// a text or tool_result block, thinking to thinking, input JSON to
// tool_use, the same channels BlockChannel gives their blocks.
func (e WorkerBlockDelta) Channel() Channel {
	switch e.Kind {
	case DeltaThinking:
		return ChannelThinking
	case DeltaInputJSON:
		return ChannelTool
	}
	return ChannelText
}

func (TurnStarted) isWorkerEvent()      {}
func (TurnStep) isWorkerEvent()         {}
func (TurnPaused) isWorkerEvent()       {}
func (TurnResumed) isWorkerEvent()      {}
func (TurnCompleted) isWorkerEvent()    {}
func (TurnFailed) isWorkerEvent()       {}
func (TurnAborted) isWorkerEvent()      {}
func (TurnWarning) isWorkerEvent()      {}
func (TurnQueued) isWorkerEvent()       {}
func (TurnCompacted) isWorkerEvent()    {}
func (WorkerBlockStart) isWorkerEvent() {}
func (WorkerBlockDelta) isWorkerEvent() {}
func (WorkerBlockStop) isWorkerEvent()  {}
func (WorkerBlockAbort) isWorkerEvent() {}
func (TextComplete) isWorkerEvent()     {}
func (ToolCallComplete) isWorkerEvent() {}
func (ToolStarted) isWorkerEvent()      {}
func (ToolProgress) isWorkerEvent()     {}
func (ToolCallResult) isWorkerEvent()   {}
func (ToolSkipped) isWorkerEvent()      {}
func (ToolCancelled) isWorkerEvent()    {}
func (ToolChild) isWorkerEvent()        {}
func (HookDecision) isWorkerEvent()     {}
func (HookMessage) isWorkerEvent()      {}
func (UsageReport) isWorkerEvent()      {}

// MarshalWorkerEvent returns the JSON data of a worker event. Deltas, one
// per streamed token, are written without reflection.
func MarshalWorkerEvent(e WorkerEvent) ([]byte, error) {
	if d, ok := e.(WorkerBlockDelta); ok {
		return d.AppendJSON(nil), nil
	}
	return json.Marshal(e)
}

// DecodeWorkerEvent decodes the data of a worker event of CloudEvent type
// typ. An unknown type is ErrUnknownType; data that is not the type's JSON
// is an error matching ErrInvalid that names the field.
func DecodeWorkerEvent(typ string, data []byte) (WorkerEvent, error) {
	switch typ {
	case TypeTurnStarted:
		return decodeWorker[TurnStarted](data)
	case TypeTurnStep:
		return decodeWorker[TurnStep](data)
	case TypeTurnPaused:
		return decodeWorker[TurnPaused](data)
	case TypeTurnResumed:
		return decodeWorker[TurnResumed](data)
	case TypeTurnCompleted:
		return decodeWorker[TurnCompleted](data)
	case TypeTurnFailed:
		return decodeWorker[TurnFailed](data)
	case TypeTurnAborted:
		return decodeWorker[TurnAborted](data)
	case TypeTurnWarning:
		return decodeWorker[TurnWarning](data)
	case TypeTurnQueued:
		return decodeWorker[TurnQueued](data)
	case TypeTurnCompacted:
		return decodeWorker[TurnCompacted](data)
	case TypeBlockStart:
		return decodeWorker[WorkerBlockStart](data)
	case TypeBlockDelta:
		return decodeWorker[WorkerBlockDelta](data)
	case TypeBlockStop:
		return decodeWorker[WorkerBlockStop](data)
	case TypeBlockAbort:
		return decodeWorker[WorkerBlockAbort](data)
	case TypeTextComplete:
		return decodeWorker[TextComplete](data)
	case TypeToolCallComplete:
		return decodeWorker[ToolCallComplete](data)
	case TypeToolStarted:
		return decodeWorker[ToolStarted](data)
	case TypeToolProgress:
		return decodeWorker[ToolProgress](data)
	case TypeToolResult:
		return decodeWorker[ToolCallResult](data)
	case TypeToolSkipped:
		return decodeWorker[ToolSkipped](data)
	case TypeToolCancelled:
		return decodeWorker[ToolCancelled](data)
	case TypeToolChild:
		return decodeWorker[ToolChild](data)
	case TypeHookDecision:
		return decodeWorker[HookDecision](data)
	case TypeHookMessage:
		return decodeWorker[HookMessage](data)
	case TypeUsage:
		return decodeWorker[UsageReport](data)
	}
	return nil, fmt.Errorf("%w: %q is no worker event", ErrUnknownType, typ)
}

// DecodeWorkerEnvelope decodes the data of env as its type's worker event.
func DecodeWorkerEnvelope(env *Envelope) (WorkerEvent, error) {
	return DecodeWorkerEvent(env.Type, env.Data)
}

func decodeWorker[T WorkerEvent](data []byte) (WorkerEvent, error) {
	v, err := Decode[T](data)
	if err != nil {
		return nil, err
	}
	return v, nil
}
