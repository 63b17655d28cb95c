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
// order, and builds its messages turn by turn; a turn's child turns
// (sub-agents, whose events are not the session's) are read where their
// parent names them.
func (g *Gateway) history(ctx context.Context, session string) ([]ChatMessage, error) {
	turns := map[string]*turnHistory{}
	var order []*turnHistory
	children := map[string]bool{}
	err := g.readStored(ctx, g.subj.Events(session, "*", "*"), func(id string, ev events.WorkerEvent) error {
		if st, ok := ev.(events.TurnStarted); ok && st.ParentTurnID != "" {
			// A child turn whose events are the session's: its parent's
			// message holds it.
			children[id] = true
		}
		if children[id] {
			return nil
		}
		t := turns[id]
		if t == nil {
			t = newTurnHistory(id)
			turns[id] = t
			order = append(order, t)
		}
		t.add(id, ev)
		return g.children(ctx, t)
	})
	if err != nil {
		return nil, fmt.Errorf("gateway: history of %s: %w", session, err)
	}
	out := []ChatMessage{}
	for _, t := range order {
		out = append(out, t.input...)
		out = append(out, t.answer())
	}
	return out, nil
}

// waiting reports whether the tree of a running turn waits only for a
// person (Mapper.Waiting): one of its sub-agents' child turns is paused
// for approval.
func (g *Gateway) waiting(ctx context.Context, session, turnID string) (bool, error) {
	t := newTurnHistory(turnID)
	err := g.readStored(ctx, g.subj.Events(session, turnID, "*"), func(id string, ev events.WorkerEvent) error {
		t.add(id, ev)
		return g.children(ctx, t)
	})
	if err != nil {
		return false, fmt.Errorf("gateway: events of turn %s: %w", turnID, err)
	}
	return t.m.Waiting(), nil
}

// children reads the stored events of the child turns t's mapper found
// and adds them to t, depth first.
func (g *Gateway) children(ctx context.Context, t *turnHistory) error {
	for _, c := range t.m.Found() {
		err := g.readStored(ctx, g.subj.Events(c.SessionID, c.TurnID, "*"), func(id string, ev events.WorkerEvent) error {
			t.add(id, ev)
			return g.children(ctx, t)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// readStored calls f with each worker event stored on filter when it is
// called, in stored order, and the turn whose subject it is on. Events
// stored after the count was read (a running turn's) are left to its
// stream; events of types this gateway does not know are skipped.
func (g *Gateway) readStored(ctx context.Context, filter string, f func(turnID string, ev events.WorkerEvent) error) error {
	info, err := g.events.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		return err
	}
	var total uint64
	for _, n := range info.State.Subjects {
		total += n
	}
	if total == 0 {
		return nil
	}
	cons, err := g.js.OrderedConsumer(ctx, events.StreamEvents, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{filter}, DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return err
	}
	for got := uint64(0); got < total; {
		batch, err := cons.Fetch(int(min(total-got, historyFetch)), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return err
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
			if err := f(id, ev); err != nil {
				return err
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return err
		}
		if n == 0 {
			break
		}
		got += uint64(n)
	}
	return nil
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
		id: id, m: NewTreeMapper(id),
		msg:  ChatMessage{UIMessage: UIMessage{ID: id, Role: "assistant", Parts: []UIPart{}}},
		meta: MessageMetadata{TurnID: id, Status: "running"},
		byID: map[string]int{}, tools: map[string]int{}, data: map[string]int{},
	}
}

func (t *turnHistory) answer() ChatMessage {
	m := t.msg
	meta := t.meta
	if meta.Status == "running" && t.m.Waiting() {
		// Only a person is waited for, by a sub-agent's child turn: the
		// turn is paused as its stream says (it ends there).
		meta.Status = "paused"
	}
	m.Metadata = &meta
	return m
}

// add folds one event of the turn, or of one of its child turns, into
// the turn's messages.
func (t *turnHistory) add(turnID string, ev events.WorkerEvent) {
	if turnID != t.id {
		if e, ok := ev.(events.TurnResumed); ok {
			t.decided(t.m.namespace(turnID), e)
		}
		t.fold(turnID, ev)
		return
	}
	switch e := ev.(type) {
	case events.TurnStarted:
		if !e.Resumed && t.input == nil {
			t.input = inputMessages(e.SessionID, t.id, e.Input)
		}
	case events.TurnPaused:
		t.meta.Status = "paused"
	case events.TurnResumed:
		t.meta.Status = "running"
		t.decided("", e)
	case events.TurnCompleted:
		t.meta.Status = "completed"
	case events.TurnFailed:
		t.meta.Status = "failed"
	case events.TurnAborted:
		t.meta.Status = "aborted"
	}
	t.fold(turnID, ev)
}

// fold applies the parts of one event of the tree.
func (t *turnHistory) fold(turnID string, ev events.WorkerEvent) {
	t.chunks = t.m.MapOf(t.chunks[:0], turnID, ev)
	for i := range t.chunks {
		t.apply(&t.chunks[i])
	}
}

// decided records a resume's decisions on the calls' parts (ns: the
// prefix of the resumed turn's toolCallIds).
func (t *turnHistory) decided(ns string, e events.TurnResumed) {
	for id, d := range e.Decisions {
		if i, ok := t.tools[ns+id]; ok && t.msg.Parts[i].Approval != nil {
			ok := d.Kind != events.DecisionDeny
			t.msg.Parts[i].Approval.Approved = &ok
			t.msg.Parts[i].Approval.Reason = d.Reason
			t.msg.Parts[i].State = "approval-responded"
		}
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
		*ps = append(*ps, UIPart{Type: typ, State: "streaming", ProviderMetadata: c.ProviderMetadata})
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
		*ps = append(*ps, UIPart{Type: "tool-" + c.ToolName, ToolCallID: c.ToolCallID, State: "input-streaming", ProviderExecuted: c.ProviderExecuted, CallProviderMetadata: c.ProviderMetadata})
	case PartToolInputAvailable, PartToolInputError:
		p := tool()
		if p == nil {
			t.tools[c.ToolCallID] = len(*ps)
			*ps = append(*ps, UIPart{Type: "tool-" + c.ToolName, ToolCallID: c.ToolCallID})
			p = &(*ps)[len(*ps)-1]
		}
		p.Input = c.Input
		p.State = "input-available"
		if c.ProviderMetadata != nil {
			p.CallProviderMetadata = c.ProviderMetadata
		}
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
