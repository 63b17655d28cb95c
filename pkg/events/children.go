package events

// TypeToolChild is the CloudEvent type of ToolChild.
const TypeToolChild = "llmw.tool.child"

// ChildStatus is where a sub-agent's child turn is, as its parent tells
// it on ToolChild.
type ChildStatus string

// Values of ToolChild.Status, in the order a child can reach them; a child
// ends with exactly one of completed, failed or aborted.
const (
	// ChildStarted: the child turn was submitted; its events follow on
	// P.events.*.<child_turn_id>.>.
	ChildStarted ChildStatus = "started"
	// ChildPaused: the child waits for a decision on Pending (a resume
	// sent to ChildTurnID continues it).
	ChildPaused ChildStatus = "paused"
	// ChildResumed: the child took a decision and runs again.
	ChildResumed ChildStatus = "resumed"
	// ChildCompleted, ChildFailed and ChildAborted: the child's terminal
	// event; the parent's call result follows.
	ChildCompleted ChildStatus = "completed"
	ChildFailed    ChildStatus = "failed"
	ChildAborted   ChildStatus = "aborted"
)

// ToolChild is the data of llmw.tool.child, on the parent turn's tool
// channel: a call of a sub-agent runs as a child turn, and the parent's
// stream names it at each change of its status, so that a UI following
// the parent alone finds the child's subjects, shows its pauses and
// knows when it ended.
type ToolChild struct {
	// CallID is the parent's tool call that runs the child.
	CallID string `json:"call_id"`
	// Name is the tool name the parent's model called: the sub-agent's.
	Name string `json:"name"`
	// ChildTurnID is the child turn's id; its events are on
	// P.events.<child_session>.<child_turn_id>.<channel>.
	ChildTurnID string `json:"child_turn_id"`
	// ChildSessionID is the session token of the child's event subjects
	// ("_" when the child has none).
	ChildSessionID string `json:"child_session_id,omitempty"`
	// Agent is the sub-agent as the child resolved it, NAME@REV.
	Agent string `json:"agent,omitempty"`
	// Depth is the child's depth: 1 for a child of a root turn.
	Depth  int         `json:"depth"`
	Status ChildStatus `json:"status" jsonschema:"enum=started,enum=paused,enum=resumed,enum=completed,enum=failed,enum=aborted"`
	// Pending are, on paused, the child's calls that wait for a decision.
	Pending []ToolCall `json:"pending,omitempty"`
	// Code is, on failed or aborted, the child's error code.
	Code string `json:"code,omitempty"`
}

// ParentTurn is TurnRequest.Parent: where a sub-agent's child turn sits
// in its tree. The turn service writes it on the child's submit; the
// child's llmw.turn.started repeats the ids and the depth.
type ParentTurn struct {
	// TurnID and CallID are the parent turn and its call of the
	// sub-agent; the child's turn id is derived from them.
	TurnID string `json:"turn_id"`
	CallID string `json:"call_id"`
	// RootTurnID is the turn at the top of the tree (the parent's own id
	// for a child of a root turn).
	RootTurnID string `json:"root_turn_id"`
	// Depth is the child's depth: 1 for a child of a root turn.
	Depth int `json:"depth"`
	// MaxTotalTokens and MaxCost are the root turn's budgets, which bound
	// the usage of every turn of the tree together (0: none).
	MaxTotalTokens int64   `json:"max_total_tokens,omitempty"`
	MaxCost        float64 `json:"max_cost,omitempty"`
}

// Validate checks the ids and the depth, naming the field.
func (p ParentTurn) Validate() error {
	switch {
	case !ValidToken(p.TurnID):
		return invalidf("parent.turn_id", "must be a NATS subject token, got %q", p.TurnID)
	case p.CallID == "":
		return missing("parent.call_id")
	case !ValidToken(p.RootTurnID):
		return invalidf("parent.root_turn_id", "must be a NATS subject token, got %q", p.RootTurnID)
	case p.Depth < 1:
		return invalidf("parent.depth", "must be at least 1, got %d", p.Depth)
	case p.MaxTotalTokens < 0:
		return invalidf("parent.max_total_tokens", "must not be negative, got %d", p.MaxTotalTokens)
	case p.MaxCost < 0:
		return invalidf("parent.max_cost", "must not be negative, got %v", p.MaxCost)
	}
	return nil
}

// ChildUsage is one sub-agent call's share of its parent's usage
// (UsageReport.Children, TurnCompleted.Children): what its child turn
// and the child's own children used so far.
type ChildUsage struct {
	CallID      string     `json:"call_id"`
	ChildTurnID string     `json:"child_turn_id"`
	Agent       string     `json:"agent,omitempty"`
	Usage       UsageEvent `json:"usage"`
	Cost        *float64   `json:"cost,omitempty"`
}
