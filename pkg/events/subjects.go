package events

import "strings"

// DefaultPrefix is the subject prefix P of docs/protocol.md §1.
const DefaultPrefix = "llmw"

// JetStream streams and KV buckets of docs/protocol.md §5–§8.
const (
	StreamTurns       = "LLMW_TURNS"
	StreamEvents      = "LLMW_EVENTS"
	StreamToolCalls   = "LLMW_TOOLCALLS"
	StreamToolResults = "LLMW_TOOLRESULTS"
	BucketSessions    = "LLMW_SESSIONS"
	BucketTools       = "LLMW_TOOLS"
	BucketHooks       = "LLMW_HOOKS"
	BucketTurnState   = "LLMW_TURN_STATE"
	// BucketMedia is the object store of media parts too large to ride in
	// messages (docs/protocol.md §4, pkg/media).
	BucketMedia = "LLMW_MEDIA"
	// BucketRequests holds the completion requests too large for one
	// NATS message while ingest reads them (docs/protocol.md §3,
	// "Completion request"): the request message names the object.
	BucketRequests = "LLMW_REQUESTS"
	// BucketQuota holds the provider limits every ingest replica shares
	// (pkg/quota): running calls, recent requests and tokens, cooldowns.
	BucketQuota = "LLMW_QUOTA"
	// StreamTranscripts holds turn and session transcripts, one message
	// per item (docs/protocol.md §8, pkg/transcript).
	StreamTranscripts = "LLMW_TRANSCRIPTS"
	// BucketAgents holds the agent definitions (pkg/agents), one key per
	// agent name, with AgentHistory revisions of each.
	BucketAgents = "LLMW_AGENTS"
	// BucketA2APush holds the push notification configs of A2A tasks
	// (pkg/a2a), one key per task id.
	BucketA2APush = "LLMW_A2A_PUSH"
)

// AgentHistory is how many revisions of one agent LLMW_AGENTS keeps (the
// most JetStream KV allows): "NAME@REV" resolves while REV is among them.
const AgentHistory = 64

// NoSession is the session token of worker events of a turn without a
// session.
const NoSession = "_"

// ValidToken reports whether s can be one token of a NATS subject (and a KV
// key): non-empty, no '.', '*', '>', whitespace or control characters.
func ValidToken(s string) bool {
	if s == "" || len(s) > 256 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c == '.' || c == '*' || c == '>' || c == 0x7f {
			return false
		}
	}
	return true
}

// Subjects builds every subject of docs/protocol.md under one prefix. The zero
// value uses DefaultPrefix.
type Subjects struct {
	Prefix string
}

// NewSubjects returns the subject builder for prefix ("" = DefaultPrefix).
func NewSubjects(prefix string) Subjects { return Subjects{Prefix: prefix} }

// P returns the prefix in use (DefaultPrefix for the zero value).
func (s Subjects) P() string { return s.p() }

func (s Subjects) p() string {
	if s.Prefix == "" {
		return DefaultPrefix
	}
	return s.Prefix
}

func (s Subjects) join(parts ...string) string {
	return s.p() + "." + strings.Join(parts, ".")
}

// Transcript is P.transcript.<kind>.<key>: the items of one turn's
// (kind "turn") or session's (kind "session") transcript in
// LLMW_TRANSCRIPTS; key is the turn's or session's KV key.
func (s Subjects) Transcript(kind, key string) string { return s.join("transcript", kind, key) }

// TranscriptAll is P.transcript.>, LLMW_TRANSCRIPTS' subjects.
func (s Subjects) TranscriptAll() string { return s.join("transcript", ">") }

// LLMComplete is P.llm.complete, the ingest micro endpoint.
func (s Subjects) LLMComplete() string { return s.join("llm", "complete") }

// LLMStream is P.llm.stream.<request_id>.
func (s Subjects) LLMStream(requestID string) string { return s.join("llm", "stream", requestID) }

// LLMGroupStream is P.llm.stream.<group>.<request_id>, the stream subject
// of a request that names a stream group (CompletionRequest.StreamGroup).
func (s Subjects) LLMGroupStream(group, requestID string) string {
	return s.join("llm", "stream", group, requestID)
}

// LLMGroupStreams is P.llm.stream.<group>.*: every stream of a group.
func (s Subjects) LLMGroupStreams(group string) string { return s.join("llm", "stream", group, "*") }

// LLMCancel is P.llm.cancel.<request_id>.
func (s Subjects) LLMCancel(requestID string) string { return s.join("llm", "cancel", requestID) }

// LLMCancelAll is P.llm.cancel.* (what ingest subscribes to).
func (s Subjects) LLMCancelAll() string { return s.join("llm", "cancel", "*") }

// TurnSubmit is P.turn.submit.
func (s Subjects) TurnSubmit() string { return s.join("turn", "submit") }

// TurnResume is P.turn.resume.
func (s Subjects) TurnResume() string { return s.join("turn", "resume") }

// TurnCancel is P.turn.cancel.<turn_id>.
func (s Subjects) TurnCancel(turnID string) string { return s.join("turn", "cancel", turnID) }

// TurnRejected is P.turn.rejected.<turn_id>, where the turn service
// answers a request it does not run (llmw.turn.rejected); "_" stands for a
// turn id that is missing or cannot be a subject token.
func (s Subjects) TurnRejected(turnID string) string {
	if !ValidToken(turnID) {
		turnID = "_"
	}
	return s.join("turn", "rejected", turnID)
}

// TurnRejectedAll is P.turn.rejected.*.
func (s Subjects) TurnRejectedAll() string { return s.join("turn", "rejected", "*") }

// TurnCancelAll is P.turn.cancel.*.
func (s Subjects) TurnCancelAll() string { return s.join("turn", "cancel", "*") }

// TurnCancelAny is P.turn.cancel.>: the cancels of one turn and the
// subjects of more tokens after cancel, which name no single turn.
func (s Subjects) TurnCancelAny() string { return s.join("turn", "cancel", ">") }

// Events is P.events.<session_id>.<turn_id>.<channel>; an empty session is "_".
func (s Subjects) Events(sessionID, turnID string, ch Channel) string {
	if sessionID == "" {
		sessionID = NoSession
	}
	return s.join("events", sessionID, turnID, string(ch))
}

// EventsOfTurn is P.events.*.<turn_id>.> (every channel of one turn).
func (s Subjects) EventsOfTurn(turnID string) string { return s.join("events", "*", turnID, ">") }

// EventsOfSession is P.events.<session_id>.> (every turn of one session).
func (s Subjects) EventsOfSession(sessionID string) string {
	if sessionID == "" {
		sessionID = NoSession
	}
	return s.join("events", sessionID, ">")
}

// EventsAll is P.events.> (every worker event LLMW_EVENTS stored and
// republished).
func (s Subjects) EventsAll() string { return s.join("events", ">") }

// Emit is P.emit.<session_id|_>.<turn_id>.<channel>, where the turn service
// publishes a worker event: LLMW_EVENTS stores it as
// P.events.<session_id|_>.<turn_id>.<channel> and republishes it there, so
// that subscribers see only the events the stream accepted.
func (s Subjects) Emit(sessionID, turnID string, ch Channel) string {
	if sessionID == "" {
		sessionID = NoSession
	}
	return s.join("emit", sessionID, turnID, string(ch))
}

// EmitAll is P.emit.> (what LLMW_EVENTS captures).
func (s Subjects) EmitAll() string { return s.join("emit", ">") }

// ToolCall is P.tool.call.<name>.
func (s Subjects) ToolCall(name string) string { return s.join("tool", "call", name) }

// ToolCallAll is P.tool.call.> (what LLMW_TOOLCALLS captures).
func (s Subjects) ToolCallAll() string { return s.join("tool", "call", ">") }

// ToolResult is P.tool.result.<turn_id>.<call_id>.
func (s Subjects) ToolResult(turnID, callID string) string {
	return s.join("tool", "result", turnID, callID)
}

// ToolResultsOfTurn is P.tool.result.<turn_id>.*.
func (s Subjects) ToolResultsOfTurn(turnID string) string {
	return s.join("tool", "result", turnID, "*")
}

// ToolResultAll is P.tool.result.> (what LLMW_TOOLRESULTS captures).
func (s Subjects) ToolResultAll() string { return s.join("tool", "result", ">") }

// ToolStored is P.tool.stored.<turn_id>.<call_id>: where LLMW_TOOLRESULTS
// republishes a result once it stored it, so that a message there is the
// call's result of record (a duplicate, or a result the stream failed to
// store, is not republished).
func (s Subjects) ToolStored(turnID, callID string) string {
	return s.join("tool", "stored", turnID, callID)
}

// ToolStoredAll is P.tool.stored.> (LLMW_TOOLRESULTS' republish).
func (s Subjects) ToolStoredAll() string { return s.join("tool", "stored", ">") }

// ToolCancel is P.tool.cancel.<turn_id>.<call_id>. It names the turn as
// well as the call because call ids are not unique across turns (see
// ToolMsgID): a cancel of one turn's call_1 must not stop another turn's.
func (s Subjects) ToolCancel(turnID, callID string) string {
	return s.join("tool", "cancel", turnID, callID)
}

// ToolCancelAll is P.tool.cancel.*.* (what a tool host subscribes to).
func (s Subjects) ToolCancelAll() string { return s.join("tool", "cancel", "*", "*") }

// ToolProgress is P.tool.progress.<turn_id>.<call_id>: a tool host's
// progress reports of a running call (core NATS, llmw.tool.progress),
// which the turn waiting for the call turns into worker events.
func (s Subjects) ToolProgress(turnID, callID string) string {
	return s.join("tool", "progress", turnID, callID)
}

// ToolProgressAll is P.tool.progress.*.*.
func (s Subjects) ToolProgressAll() string { return s.join("tool", "progress", "*", "*") }

// MCPResume is P.mcp.resume.<turn_id>: a resume of a tool call that a
// before_tool_call hook paused in `llmworker mcp` (request/reply; the
// gateway holding the call answers). The calls of the MCP gateway are not
// turns of the turn service, so their resumes do not go to
// P.turn.resume.
func (s Subjects) MCPResume(turnID string) string { return s.join("mcp", "resume", turnID) }

// MCPResumeAll is P.mcp.resume.* (what an MCP gateway subscribes to).
func (s Subjects) MCPResumeAll() string { return s.join("mcp", "resume", "*") }

// SessionCompact is P.session.compact.<session_id>: a request to compact
// a session between its turns (request/reply; one turn service replica
// answers, queue group llmw-turn).
func (s Subjects) SessionCompact(sessionID string) string {
	return s.join("session", "compact", sessionID)
}

// SessionCompactAll is P.session.compact.* (what the turn service
// subscribes to).
func (s Subjects) SessionCompactAll() string { return s.join("session", "compact", "*") }

// Hook is the default subject a hook named name answers on: P.hook.<name>.
func (s Subjects) Hook(name string) string { return s.join("hook", name) }

// LastToken returns the last token of a subject (the id in P.llm.cancel.<id>).
func LastToken(subject string) string {
	if i := strings.LastIndexByte(subject, '.'); i >= 0 {
		return subject[i+1:]
	}
	return subject
}

// ToolMsgID is the Nats-Msg-Id of a tool call and of its result: the turn id
// and the call id together. Providers (and OpenAI-compatible local servers)
// do not promise call ids that are unique across turns, and JetStream
// de-duplicates by Nats-Msg-Id across the whole stream, so the call id alone
// would drop another turn's call as a duplicate.
func ToolMsgID(turnID, callID string) string { return turnID + "." + callID }
