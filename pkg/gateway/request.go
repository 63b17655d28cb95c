package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/llmworker/llmworker/pkg/events"
)

// ChatRequest is the body of POST /api/chat as the AI SDK's
// DefaultChatTransport sends it (vercel/ai
// packages/ai/src/ui/http-chat-transport.ts): the chat id, the UI
// messages and the trigger, plus the fields of its "body" option that the
// gateway's Config lets a request narrow.
type ChatRequest struct {
	// ID is the chat id: the llmworker session.
	ID       string      `json:"id"`
	Messages []UIMessage `json:"messages"`
	// Trigger is "submit-message" (or "" for the same); the AI SDK's
	// "regenerate-message" is refused.
	Trigger   string `json:"trigger,omitempty"`
	MessageID string `json:"messageId,omitempty"`
	// Model picks one of Config.Models.
	Model string `json:"model,omitempty"`
	// Tools narrow Config.Tools.
	Tools []string `json:"tools,omitempty"`
	// MaxSteps lowers Config.MaxSteps.
	MaxSteps int `json:"maxSteps,omitempty"`
}

// UIMessage is the part of an AI SDK UI message the gateway reads.
type UIMessage struct {
	ID    string   `json:"id,omitempty"`
	Role  string   `json:"role"`
	Parts []UIPart `json:"parts"`
}

// UIPart is a UI message part. Of a request the gateway reads text and
// file parts of the user's message, and tool parts (type "tool-<name>" or
// "dynamic-tool") in state "approval-responded"; a session's history
// (GET /api/chat/{id}/messages) has every field.
type UIPart struct {
	Type string `json:"type"`
	// Text of a text or reasoning part.
	Text       string `json:"text,omitempty"`
	ToolCallID string `json:"toolCallId,omitempty"`
	// State of a tool part (input-streaming … output-denied), or of a
	// text or reasoning part (streaming, done).
	State            string          `json:"state,omitempty"`
	Input            json.RawMessage `json:"input,omitempty"`
	Output           json.RawMessage `json:"output,omitempty"`
	ErrorText        string          `json:"errorText,omitempty"`
	ProviderExecuted bool            `json:"providerExecuted,omitempty"`
	Approval         *UIApproval     `json:"approval,omitempty"`
	// ProviderMetadata of a text or reasoning part and
	// CallProviderMetadata of a tool part: on a sub-agent's parts,
	// {"llmw": ChildOwner}.
	ProviderMetadata     json.RawMessage `json:"providerMetadata,omitempty"`
	CallProviderMetadata json.RawMessage `json:"callProviderMetadata,omitempty"`
	// ID and Data of a data part.
	ID   string          `json:"id,omitempty"`
	Data json.RawMessage `json:"data,omitempty"`
	// MediaType, Filename and URL of a file part: the AI SDK's
	// FileUIPart, whose url is a data URL (an attachment) or a URL the
	// provider fetches (https).
	MediaType string `json:"mediaType,omitempty"`
	Filename  string `json:"filename,omitempty"`
	URL       string `json:"url,omitempty"`
}

// UIApproval is a tool part's approval (AI SDK v6).
type UIApproval struct {
	ID       string `json:"id"`
	Approved *bool  `json:"approved,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

func badf(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrBadRequest, fmt.Sprintf(format, a...))
}

// validate checks the fields every chat request needs.
func (r *ChatRequest) validate() error {
	if r.ID == "" {
		return badf("id: missing (the chat id)")
	}
	if !events.ValidToken(r.ID) {
		return badf("id: must be 1-256 characters without '.', '*', '>' or spaces, got %q", r.ID)
	}
	switch r.Trigger {
	case "", "submit-message":
	case "regenerate-message":
		return badf("trigger: regenerate-message is not supported (the session keeps the answer; send a new message)")
	default:
		return badf("trigger: want submit-message, got %q", r.Trigger)
	}
	if len(r.Messages) == 0 {
		return badf("messages: empty")
	}
	if r.MaxSteps < 0 {
		return badf("maxSteps: must not be negative")
	}
	return nil
}

// approvals returns the approval responses of the last message (an
// assistant message whose paused calls the person answered), by call id.
func (r *ChatRequest) approvals() map[string]UIPart {
	last := r.Messages[len(r.Messages)-1]
	if last.Role != "assistant" {
		return nil
	}
	out := map[string]UIPart{}
	for _, p := range last.Parts {
		if (strings.HasPrefix(p.Type, "tool-") || p.Type == "dynamic-tool") && p.State == "approval-responded" && p.Approval != nil {
			out[p.ToolCallID] = p
		}
	}
	return out
}

// userContent is the content of the last message, which must be the
// user's: its text parts, and its file parts as image and file parts
// (attachments.go). It needs text or an attachment.
func (r *ChatRequest) userContent() ([]events.Part, error) {
	mi := len(r.Messages) - 1
	last := r.Messages[mi]
	if last.Role != "user" {
		return nil, badf("messages: the last message must be the user's (or an assistant message with approval responses), got role %q", last.Role)
	}
	var out []events.Part
	hasText := false
	for i, p := range last.Parts {
		switch {
		case p.Type == "text":
			if strings.TrimSpace(p.Text) != "" {
				hasText = true
			}
			if p.Text != "" {
				out = append(out, events.Part{Type: events.PartText, Text: p.Text})
			}
		case p.Type == "file":
			mp, err := fileToPart(p)
			if err != nil {
				return nil, badf("messages[%d].parts[%d]%s: %v", mi, i, filenameNote(p), err)
			}
			out = append(out, mp)
		case p.Type == "step-start" || strings.HasPrefix(p.Type, "data-"):
		default:
			return nil, badf("messages[%d].parts[%d]: type %q is not supported in a user message (text and file only)", mi, i, p.Type)
		}
	}
	if !hasText && !slices.ContainsFunc(out, func(p events.Part) bool { return p.IsMedia() }) {
		return nil, badf("messages[%d]: the user message has no text and no file", mi)
	}
	return out, nil
}

// decisions turns approval responses into the decisions of a paused
// turn's pending calls. Every pending call needs one. An approved call
// whose input differs from the paused call's input is an edit.
//
// ns is the prefix of the paused turn's toolCallIds in the stream ("" for
// the session's turn, "<child_turn_id>." for a sub-agent's child turn).
func decisions(pending []events.ToolCall, resp map[string]UIPart, ns string) (map[string]events.Decision, error) {
	out := make(map[string]events.Decision, len(pending))
	for _, c := range pending {
		id := ns + c.ID
		p, ok := resp[id]
		if !ok {
			return nil, badf("messages: no approval response for the paused call %s (%s)", id, c.Name)
		}
		if p.Approval.ID != "" && p.Approval.ID != ApprovalID(id) {
			return nil, badf("approval %q does not answer call %s (want %q)", p.Approval.ID, id, ApprovalID(id))
		}
		if p.Approval.Approved == nil {
			return nil, badf("approval of call %s: approved missing", id)
		}
		switch {
		case !*p.Approval.Approved:
			out[c.ID] = events.Decision{Kind: events.DecisionDeny, Reason: p.Approval.Reason}
		case len(p.Input) > 0 && !jsonEqual(p.Input, c.Input):
			if !json.Valid(p.Input) || bytes.TrimSpace(p.Input)[0] != '{' {
				return nil, badf("approval of call %s: the edited input must be a JSON object", id)
			}
			out[c.ID] = events.Decision{Kind: events.DecisionEdit, Input: p.Input}
		default:
			out[c.ID] = events.Decision{Kind: events.DecisionApprove}
		}
	}
	// Responses to calls that are not pending are earlier pauses' (the
	// client keeps its parts); they are ignored.
	return out, nil
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(a, b)
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}
