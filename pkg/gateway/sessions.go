package gateway

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/internal/leaf/jsread"
	"github.com/llmworker/llmworker/pkg/events"
)

// turnInfo is what LLMW_EVENTS says of one turn: its last event on the
// turn channel.
type turnInfo struct {
	ID      string
	Session string
	// Last is the type of the last turn-channel event (llmw.turn.*).
	Last string
	Env  *events.Envelope
	Seq  uint64
	Time time.Time
}

// Status is running, paused, completed, failed or aborted.
func (t turnInfo) Status() string {
	switch t.Last {
	case events.TypeTurnPaused:
		return "paused"
	case events.TypeTurnCompleted:
		return "completed"
	case events.TypeTurnFailed:
		return "failed"
	case events.TypeTurnAborted:
		return "aborted"
	}
	return "running"
}

// Active reports whether the turn runs or waits for approval.
func (t turnInfo) Active() bool {
	s := t.Status()
	return s == "running" || s == "paused"
}

// turnSubject is P.events.<session>.<turn>.turn ("*" for either).
func (g *Gateway) turnSubject(session, turnID string) string {
	return g.subj.Events(session, turnID, events.ChannelTurn)
}

// latestTurn is the session's latest turn: the last turn-channel event of
// any of its turns in LLMW_EVENTS. Nothing is kept in the gateway, so that
// every replica answers the same.
func (g *Gateway) latestTurn(ctx context.Context, session string) (turnInfo, bool, error) {
	return g.lastOn(ctx, g.turnSubject(session, "*"))
}

// lastOn is the last message stored on subject (wildcards allowed), as
// the stream's leader has it: every answer follows from it (409 for a
// message while a turn runs, 204 for a resume of a finished one, where a
// resumed stream starts), and a replica that had not applied the latest
// events (right after they were stored, or back from a partition) would
// answer with an earlier turn's or an earlier state.
func (g *Gateway) lastOn(ctx context.Context, subject string) (turnInfo, bool, error) {
	m, err := jsread.LastMsg(ctx, g.js.Conn(), jsread.APIPrefix(g.js), events.StreamEvents, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return turnInfo{}, false, nil
	}
	if err != nil {
		return turnInfo{}, false, fmt.Errorf("gateway: last event on %s: %w", subject, err)
	}
	env, err := events.DecodeEnvelope(m.Header, m.Data)
	if err != nil {
		return turnInfo{}, false, fmt.Errorf("gateway: event %d on %s: %w", m.Sequence, m.Subject, err)
	}
	t := turnInfo{Last: env.Type, Env: env, Seq: m.Sequence, Time: m.Time}
	t.Session, t.ID = subjectIDs(g.subj.P(), m.Subject)
	return t, true, nil
}

// subjectIDs reads session and turn of P.events.<session>.<turn>.<ch>.
func subjectIDs(p, subject string) (session, turnID string) {
	rest := strings.TrimPrefix(subject, p+".events.")
	parts := strings.Split(rest, ".")
	if len(parts) < 3 {
		return "", ""
	}
	return parts[0], parts[1]
}

// SessionInfo is one entry of GET /api/sessions.
type SessionInfo struct {
	ID string `json:"id"`
	// Turns are the session's turn ids, oldest first.
	Turns []string `json:"turns"`
	// LastTurn, Status and Updated describe the latest turn.
	LastTurn string    `json:"lastTurn"`
	Status   string    `json:"status"`
	Updated  time.Time `json:"updated"`
}

// maxSessions bounds GET /api/sessions: the listing reads the stream's
// subjects, a demo-sized view (a large installation lists its sessions
// from its own store).
const maxSessions = 100

// sessions lists the sessions stored in LLMW_EVENTS that allow reports
// true for, newest first.
func (g *Gateway) sessions(ctx context.Context, allow func(string) bool) ([]SessionInfo, error) {
	info, err := g.events.Info(ctx, jetstream.WithSubjectFilter(g.turnSubject("*", "*")))
	if err != nil {
		return nil, fmt.Errorf("gateway: list sessions: %w", err)
	}
	byID := map[string]*SessionInfo{}
	for subj := range info.State.Subjects {
		s, _ := subjectIDs(g.subj.P(), subj)
		if s == "" || s == events.NoSession || byID[s] != nil || !allow(s) {
			continue
		}
		byID[s] = &SessionInfo{ID: s}
	}
	out := make([]SessionInfo, 0, len(byID))
	for _, si := range byID {
		turns, err := g.turnsOf(ctx, si.ID)
		if err != nil {
			return nil, err
		}
		if len(turns) == 0 {
			continue
		}
		last := turns[len(turns)-1]
		for _, t := range turns {
			si.Turns = append(si.Turns, t.ID)
		}
		si.LastTurn, si.Status, si.Updated = last.ID, last.Status(), last.Time
		if si.Status == "running" {
			// A running turn whose sub-agent waits for approval is paused
			// as its stream and messages say.
			w, err := g.waiting(ctx, si.ID, last.ID)
			if err != nil {
				return nil, err
			}
			if w {
				si.Status = "paused"
			}
		}
		out = append(out, *si)
	}
	slices.SortFunc(out, func(a, b SessionInfo) int { return b.Updated.Compare(a.Updated) })
	if len(out) > maxSessions {
		out = out[:maxSessions]
	}
	return out, nil
}

// turnsOf is the session's turns in the order of their last turn-channel
// event (a session's turns run one after another).
func (g *Gateway) turnsOf(ctx context.Context, session string) ([]turnInfo, error) {
	filter := g.turnSubject(session, "*")
	info, err := g.events.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		return nil, fmt.Errorf("gateway: turns of %s: %w", session, err)
	}
	n := len(info.State.Subjects)
	if n == 0 {
		return nil, nil
	}
	cons, err := g.js.OrderedConsumer(ctx, events.StreamEvents, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{filter}, DeliverPolicy: jetstream.DeliverLastPerSubjectPolicy,
	})
	if err != nil {
		return nil, fmt.Errorf("gateway: turns of %s: %w", session, err)
	}
	batch, err := cons.Fetch(n, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		return nil, fmt.Errorf("gateway: turns of %s: %w", session, err)
	}
	var out []turnInfo
	for m := range batch.Messages() {
		env, err := events.DecodeEnvelope(m.Headers(), m.Data())
		if err != nil {
			continue
		}
		md, err := m.Metadata()
		if err != nil {
			continue
		}
		t := turnInfo{Last: env.Type, Env: env, Seq: md.Sequence.Stream, Time: md.Timestamp}
		t.Session, t.ID = subjectIDs(g.subj.P(), m.Subject())
		out = append(out, t)
	}
	if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
		return nil, fmt.Errorf("gateway: turns of %s: %w", session, err)
	}
	slices.SortFunc(out, func(a, b turnInfo) int { return int(a.Seq) - int(b.Seq) })
	return out, nil
}
