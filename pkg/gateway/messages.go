package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/pkg/events"
)

// MessageMetadata is the metadata of an assistant message of GET
// /api/chat/{id}/messages: how its turn stands.
type MessageMetadata struct {
	TurnID string `json:"turnId"`
	// Status is running, paused, completed, failed or aborted.
	Status string `json:"status"`
	// FinishReason is the finish part's (completed and failed turns).
	FinishReason string `json:"finishReason,omitempty"`
	// Error is the error or abort part's text.
	Error string `json:"error,omitempty"`
}

// ChatMessage is a UI message of a session's history: UIMessage with the
// assistant's metadata.
type ChatMessage struct {
	UIMessage
	Metadata *MessageMetadata `json:"metadata,omitempty"`
}

// Messages is the answer of GET /api/chat/{id}/messages.
type Messages struct {
	Messages []ChatMessage `json:"messages"`
}

// historyFetch is how many events one fetch of a session's history asks
// for.
const historyFetch = 256

// handleMessages is GET /api/chat/{id}/messages: the session's
// conversation as AI SDK UI messages (what useChat takes as its initial
// messages), read from LLMW_EVENTS: per turn, the messages its request
// added (llmw.turn.started's input) and the assistant message its stream
// builds.
func (g *Gateway) handleMessages(w http.ResponseWriter, r *http.Request) {
	session := r.PathValue("id")
	if !events.ValidToken(session) {
		writeError(w, badf("chat id: must be 1-256 characters without '.', '*', '>' or spaces, got %q", session))
		return
	}
	if err := g.authorize(r, session, Read); err != nil {
		writeError(w, err)
		return
	}
	msgs, err := g.history(r.Context(), session)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, Messages{Messages: msgs})
}

// history reads every stored event of the session once, in stored
// order, and builds its messages turn by turn.
func (g *Gateway) history(ctx context.Context, session string) ([]ChatMessage, error) {
	filter := g.subj.Events(session, "*", "*")
	info, err := g.events.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		return nil, fmt.Errorf("gateway: history of %s: %w", session, err)
	}
	var total uint64
	for _, n := range info.State.Subjects {
		total += n
	}
	out := []ChatMessage{}
	if total == 0 {
		return out, nil
	}
	cons, err := g.js.OrderedConsumer(ctx, events.StreamEvents, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{filter}, DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return nil, fmt.Errorf("gateway: history of %s: %w", session, err)
	}
	turns := map[string]*turnHistory{}
	var order []*turnHistory
	// Events stored after the count was read (a running turn's) are
	// left to its stream.
	for got := uint64(0); got < total; {
		batch, err := cons.Fetch(int(min(total-got, historyFetch)), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return nil, fmt.Errorf("gateway: history of %s: %w", session, err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			_, id := subjectIDs(g.subj.P(), m.Subject())
			env, err := events.DecodeEnvelope(m.Headers(), m.Data())
			if err != nil {
				continue
			}
			ev, err := events.DecodeWorkerEnvelope(env)
			if err != nil {
				continue // a type this gateway does not know
			}
			t := turns[id]
			if t == nil {
				t = newTurnHistory(id)
				turns[id] = t
				order = append(order, t)
			}
			t.add(ev)
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return nil, fmt.Errorf("gateway: history of %s: %w", session, err)
		}
		if n == 0 {
			break
		}
		got += uint64(n)
	}
	for _, t := range order {
		out = append(out, t.input...)
		out = append(out, t.answer())
	}
	return out, nil
}

// turnHistory builds the messages of one turn from its events.
type turnHistory struct {
	id     string
	input  []ChatMessage
	m      *Mapper
	chunks []Chunk
	msg    ChatMessage
	meta   MessageMetadata
	byID   map[string]int // text/reasoning part index by chunk id
	tools  map[string]int // tool part index by call id
	data   map[string]int // data part index by type and id
}

func newTurnHistory(id string) *turnHistory {
	return &turnHistory{
		id: id, m: NewMapper(),
		msg:  ChatMessage{UIMessage: UIMessage{ID: id, Role: "assistant", Parts: []UIPart{}}},
		meta: MessageMetadata{TurnID: id, Status: "running"},
		byID: map[string]int{}, tools: map[string]int{}, data: map[string]int{},
	}
}

func (t *turnHistory) answer() ChatMessage {
	m := t.msg
	meta := t.meta
	m.Metadata = &meta
	return m
}

func (t *turnHistory) add(ev events.WorkerEvent) {
	switch e := ev.(type) {
	case events.TurnStarted:
		if !e.Resumed && t.input == nil {
			t.input = inputMessages(e.SessionID, t.id, e.Input)
		}
	case events.TurnPaused:
		t.meta.Status = "paused"
	case events.TurnResumed:
		t.meta.Status = "running"
		for id, d := range e.Decisions {
			if i, ok := t.tools[id]; ok && t.msg.Parts[i].Approval != nil {
				ok := d.Kind != events.DecisionDeny
				t.msg.Parts[i].Approval.Approved = &ok
				t.msg.Parts[i].Approval.Reason = d.Reason
				t.msg.Parts[i].State = "approval-responded"
			}
		}
	case events.TurnCompleted:
		t.meta.Status = "completed"
	case events.TurnFailed:
		t.meta.Status = "failed"
	case events.TurnAborted:
		t.meta.Status = "aborted"
	}
	t.chunks = t.m.Map(t.chunks[:0], ev)
	for i := range t.chunks {
		t.apply(&t.chunks[i])
	}
}

// apply folds one part of the turn's stream into its assistant message,
// as the AI SDK's readUIMessageStream does.
func (t *turnHistory) apply(c *Chunk) {
	ps := &t.msg.Parts
	tool := func() *UIPart {
		i, ok := t.tools[c.ToolCallID]
		if !ok {
			return nil
		}
		return &(*ps)[i]
	}
	switch c.Type {
	case PartStartStep:
		*ps = append(*ps, UIPart{Type: "step-start"})
	case PartTextStart, PartReasoningStart:
		typ := "text"
		if c.Type == PartReasoningStart {
			typ = "reasoning"
		}
		t.byID[c.ID] = len(*ps)
		*ps = append(*ps, UIPart{Type: typ, State: "streaming"})
	case PartTextDelta, PartReasoningDelta:
		if i, ok := t.byID[c.ID]; ok {
			(*ps)[i].Text += c.Delta
		}
	case PartTextEnd, PartReasoningEnd:
		if i, ok := t.byID[c.ID]; ok {
			(*ps)[i].State = "done"
		}
	case PartToolInputStart:
		t.tools[c.ToolCallID] = len(*ps)
		*ps = append(*ps, UIPart{Type: "tool-" + c.ToolName, ToolCallID: c.ToolCallID, State: "input-streaming", ProviderExecuted: c.ProviderExecuted})
	case PartToolInputAvailable, PartToolInputError:
		p := tool()
		if p == nil {
			t.tools[c.ToolCallID] = len(*ps)
			*ps = append(*ps, UIPart{Type: "tool-" + c.ToolName, ToolCallID: c.ToolCallID})
			p = &(*ps)[len(*ps)-1]
		}
		p.Input = c.Input
		p.State = "input-available"
		if c.Type == PartToolInputError {
			p.State, p.ErrorText = "output-error", c.ErrorText
		}
	case PartToolApprovalRequest:
		if p := tool(); p != nil {
			p.State, p.Approval = "approval-requested", &UIApproval{ID: c.ApprovalID}
		}
	case PartToolOutputAvailable:
		if p := tool(); p != nil {
			p.State, p.Output = "output-available", c.Output
			p.ProviderExecuted = p.ProviderExecuted || c.ProviderExecuted
		}
	case PartToolOutputError:
		if p := tool(); p != nil {
			p.State, p.ErrorText = "output-error", c.ErrorText
		}
	case PartToolOutputDenied:
		if p := tool(); p != nil {
			p.State = "output-denied"
		}
	case PartError:
		t.meta.Error = c.ErrorText
	case PartAbort:
		t.meta.Error = c.Reason
	case PartFinish:
		t.meta.FinishReason = c.FinishReason
	case PartFinishStep, PartToolInputDelta:
	default: // data-*
		key := c.Type + "\x00" + c.ID
		if i, ok := t.data[key]; ok && c.ID != "" {
			(*ps)[i].Data = c.Data
			return
		}
		t.data[key] = len(*ps)
		*ps = append(*ps, UIPart{Type: c.Type, ID: c.ID, Data: c.Data})
	}
}

// inputMessages are a turn request's messages as UI messages: text parts
// of the user's and the assistant's messages, and the user's images and
// files as file parts (uiFilePart); tool results and thinking stay in the
// session's transcript.
func inputMessages(session, turnID string, in []events.Message) []ChatMessage {
	var out []ChatMessage
	for _, m := range in {
		if m.Role != events.RoleUser && m.Role != events.RoleAssistant {
			continue
		}
		var parts []UIPart
		for i := range m.Content {
			p := &m.Content[i]
			switch {
			case p.Type == events.PartText:
				parts = append(parts, UIPart{Type: "text", Text: p.Text})
			case p.IsMedia() && m.Role == events.RoleUser:
				parts = append(parts, uiFilePart(session, p))
			}
		}
		if len(parts) == 0 {
			continue
		}
		out = append(out, ChatMessage{UIMessage: UIMessage{
			ID: fmt.Sprintf("%s-input-%d", turnID, len(out)+1), Role: string(m.Role), Parts: parts,
		}})
	}
	if out == nil {
		out = []ChatMessage{}
	}
	return out
}
