package turn

import (
	"context"
	"encoding/json"
	"strings"
)

// RemoteAgents opens the remote A2A agents (a definition's a2a_url)
// whose turns the service runs (Config.RemoteAgents; remote.go). The
// A2A client is the caller's to give: pkg/a2a/remote.Agents, a2a-go's
// client, is the one cmd/turn and `llmworker up` give, so that pkg/turn
// links no A2A SDK of its own.
type RemoteAgents interface {
	// OpenRemote opens agent name, whose definition's a2a_url is url.
	OpenRemote(ctx context.Context, name, url string) (RemoteAgent, error)
}

// RemoteAgentsFunc is a function that is a RemoteAgents, as
// http.HandlerFunc is a function that is an http.Handler.
type RemoteAgentsFunc func(ctx context.Context, name, url string) (RemoteAgent, error)

// OpenRemote calls f.
func (f RemoteAgentsFunc) OpenRemote(ctx context.Context, name, url string) (RemoteAgent, error) {
	return f(ctx, name, url)
}

// RemoteAgent is a remote agent opened for one run of a turn: the A2A
// calls the run makes (docs/protocol.md §12 "Remote agents").
type RemoteAgent interface {
	// Send sends a user message of text with message id msgID and
	// returns the task it started once the agent accepted it. An agent
	// that answers with a message and no task gives a completed
	// RemoteTask without an id, the message its one artifact.
	Send(ctx context.Context, msgID, text string) (*RemoteTask, error)
	// Reply sends text, with message id msgID, to task, which waits for
	// input, and returns the task as the agent answered.
	Reply(ctx context.Context, task *RemoteTask, msgID, text string) (*RemoteTask, error)
	// Follow follows task id until it is final or waits for input,
	// calling f with each update, and returns the task then, every
	// artifact whole (its Parts included); every artifact's text reaches
	// f. f's error ends Follow with it; so does ctx's end.
	Follow(ctx context.Context, id string, f func(RemoteUpdate) error) (*RemoteTask, error)
	// Cancel asks the agent to cancel task id.
	Cancel(ctx context.Context, id string) error
	// Close releases the agent.
	Close() error
}

// RemoteState is where a remote task stands (A2A's task states).
type RemoteState string

const (
	RemoteSubmitted     RemoteState = "submitted"
	RemoteWorking       RemoteState = "working"
	RemoteInputRequired RemoteState = "input-required"
	RemoteAuthRequired  RemoteState = "auth-required"
	RemoteCompleted     RemoteState = "completed"
	RemoteFailed        RemoteState = "failed"
	RemoteCanceled      RemoteState = "canceled"
	RemoteRejected      RemoteState = "rejected"
)

// Final says whether the task ended.
func (s RemoteState) Final() bool {
	return s == RemoteCompleted || s == RemoteFailed || s == RemoteCanceled || s == RemoteRejected
}

// Waits says whether the task waits for its client (input or auth).
func (s RemoteState) Waits() bool { return s == RemoteInputRequired || s == RemoteAuthRequired }

// RemoteTask is a remote task as its latest snapshot says.
type RemoteTask struct {
	ID        string      `json:"id"`
	ContextID string      `json:"context_id,omitempty"`
	State     RemoteState `json:"state"`
	// Message is the text of the status message (the question of an
	// input-required task, the reason of a failed one).
	Message   string           `json:"message,omitempty"`
	Artifacts []RemoteArtifact `json:"artifacts,omitempty"`
}

// Answer is the text of the task's artifacts, in order, one a line; the
// status message when it has none.
func (t *RemoteTask) Answer() string {
	var b strings.Builder
	for _, a := range t.Artifacts {
		if a.Text == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		b.WriteString(a.Text)
	}
	if b.Len() == 0 {
		return t.Message
	}
	return b.String()
}

// RemoteArtifact is a remote artifact (or a chunk of one, in a
// RemoteUpdate): Text is its text parts, and each data part as its JSON,
// one after the other; Parts are all its parts in order, files included.
// A RemoteTask's artifacts hold their Parts whole; an update's chunk may
// leave them out (its Text is what the turn streams).
type RemoteArtifact struct {
	ID    string       `json:"id"`
	Name  string       `json:"name,omitempty"`
	Text  string       `json:"text"`
	Parts []RemotePart `json:"parts,omitempty"`
}

// RemotePartKind is what a remote artifact's part holds.
type RemotePartKind string

const (
	// RemoteTextPart is text (Text).
	RemoteTextPart RemotePartKind = "text"
	// RemoteDataPart is structured data (Data, its JSON).
	RemoteDataPart RemotePartKind = "data"
	// RemoteFilePart is a file: its bytes (Raw) or its URL.
	RemoteFilePart RemotePartKind = "file"
)

// RemotePart is one part of a remote artifact: text, data, or a file
// given by its bytes or by its URL, with the media type and file name
// the remote gave it ("" when it gave none).
type RemotePart struct {
	Kind      RemotePartKind  `json:"kind"`
	Text      string          `json:"text,omitempty"`
	Data      json.RawMessage `json:"data,omitempty"`
	Raw       []byte          `json:"raw,omitempty"`
	URL       string          `json:"url,omitempty"`
	MediaType string          `json:"media_type,omitempty"`
	Name      string          `json:"name,omitempty"`
}

// RemoteUpdate is what Follow reports: a status (State set) or an
// artifact chunk (Artifact set).
type RemoteUpdate struct {
	State   RemoteState
	Message string
	// Artifact is a chunk: Append continues the artifact of its id,
	// Last says it is complete.
	Artifact *RemoteArtifact
	Append   bool
	Last     bool
}
