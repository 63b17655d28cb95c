package turn

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/nats-io/nuid"

	"github.com/llmworker/llmworker/internal/leaf/jsread"
	"github.com/llmworker/llmworker/pkg/compact"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/transcript"
	"github.com/llmworker/llmworker/pkg/worker"
)

// CompactOptions configures CompactSession. The zero value compacts for
// the model of the session's last turn, with the default setting merged
// under the session's.
type CompactOptions struct {
	// Model is the model (provider:model) the projection is compacted
	// for, which also summarizes unless the setting names a summarizer;
	// "" is the model of the session's last turn, from its state in
	// LLMW_TURN_STATE (ErrSessionModel once that expired).
	Model string
	// Limits are the model table's limits (pkg/models); nil knows none,
	// and the compaction then aims at compact.ForcedShare of the
	// projection's estimate.
	Limits llm.LimitsFunc
	// Compaction is the default setting (a turn service's); the
	// session's is merged over it.
	Compaction events.CompactionConfig
}

// CompactSession compacts session id on demand: pkg/compact's policy,
// forced, over the projection the session's next turn would read (the
// session's compaction and the originals after it), its summaries made
// on p (worker.Summarizer). The compaction becomes the session's with
// the record's expected revision, as a turn's end stores one
// (sessionEnd.compactionStart): a turn of the session that ended
// meanwhile with a compaction that reaches as far or further keeps its
// own, and CompactSession fails. It returns the compaction the record
// took; nil, nil when the policy made none. A projection that compacts
// no further (only its last unit is left) is compact.ErrOverflow. The
// summarizer's usage is in the compaction's Usage, charged to no turn;
// its ID is "<session_id>.s<unique>", its Turn empty.
func CompactSession(ctx context.Context, js jetstream.JetStream, p llm.Provider, id string, o CompactOptions) (*events.Compaction, error) {
	nc, api := js.Conn(), jsread.APIPrefix(js)
	rec, _, err := readSession(ctx, nc, api, id)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, fmt.Errorf("%w: %q", ErrNoSession, id)
	}
	if err != nil {
		return nil, err
	}
	if rec.Transcript == nil {
		return nil, fmt.Errorf("turn: session %q is stored in the inline format; its next turn moves it to %s, then it can be compacted", id, events.StreamTranscripts)
	}
	model := o.Model
	if model == "" {
		st, ok, err := LoadState(ctx, js, rec.LastTurn)
		if err != nil {
			return nil, err
		}
		if !ok || st.Request == nil || st.Request.Model == "" {
			return nil, fmt.Errorf("%w: the state of its last turn %q is gone; name the model", ErrSessionModel, rec.LastTurn)
		}
		model = st.Request.Model
	}
	prefix, err := transcriptPrefix(ctx, js)
	if err != nil {
		return nil, err
	}
	tx := transcript.New(js, prefix)
	key := kvKey(id)
	ref := rec.ref()
	e := &sessionEnd{from: ref.Len}
	active := rec.Compaction
	if c := active; c != nil && c.To <= ref.Len && c.Native() == "" {
		e.base, e.start = c.To, rec.CompactionStart
	} else if c != nil && c.To > ref.Len {
		active = nil
	}
	var msgs []events.Message
	if ref.Len > e.base {
		if msgs, e.seqs, err = tx.ReadSeqs(ctx, transcript.KindSession, key, transcript.Range{Upto: ref, From: e.base, Start: e.start}); err != nil {
			return nil, fmt.Errorf("%w: session %q: %w", ErrTranscriptUnavailable, id, err)
		}
	}
	cfg := o.Compaction.Merge(rec.CompactionConfig)
	summarizer := cfg.SummarizerModel
	if summarizer == "" {
		summarizer = model
	}
	limits := func(m string) llm.ModelLimits {
		if o.Limits == nil {
			return llm.ModelLimits{}
		}
		l, _ := o.Limits(m)
		return l
	}
	pol := compact.Policy{Config: cfg, Summarize: worker.Summarizer(p, "session-"+key+"-"+nuid.Next())}
	res, err := pol.Plan(ctx, compact.Input{Messages: msgs, Base: e.base, Active: active, Model: model,
		Limits: limits(model), SummarizerLimits: limits(summarizer), Force: true})
	if err != nil {
		return nil, fmt.Errorf("turn: compact session %q: %w", id, err)
	}
	if res.Compaction == nil {
		return nil, nil
	}
	c := res.Compaction
	c.ID = id + ".s" + nuid.Next()
	if c.Usage != nil && *c.Usage == (events.UsageEvent{}) {
		c.Usage = nil
	}
	e.compaction = c
	kv, err := js.KeyValue(ctx, events.BucketSessions)
	if err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		cur, rev, err := readSession(ctx, nc, api, id)
		if err != nil {
			return nil, err
		}
		tail, err := tx.Tail(ctx, transcript.KindSession, key)
		if err != nil {
			return nil, err
		}
		start, ok := e.compactionStart(cur, cur.ref().Len, tail)
		if !ok {
			return nil, fmt.Errorf("%w: session %q: a turn that ended meanwhile stored a compaction that reaches as far (to %d), or one that replaces what this one covered", ErrCompactionConflict, id, c.To)
		}
		next := *cur
		next.Compaction, next.CompactionStart = c, start
		b, err := json.Marshal(&next)
		if err != nil {
			return nil, err
		}
		if _, err = kv.Update(ctx, key, b, rev); err == nil {
			return c, nil
		}
		if !isConflict(err) || attempt >= sessionAttempts {
			return nil, fmt.Errorf("turn: store the compaction of session %q: %w", id, err)
		}
	}
}

// CompactRequest is the body of a request on P.session.compact.<id>
// (Client.CompactSession): the model to compact for ("" = the model of
// the session's last turn).
type CompactRequest struct {
	Model string `json:"model,omitempty"`
}

// CompactReply is the answer of a request on P.session.compact.<id>: the
// compaction the session took, null when there was nothing to compact.
type CompactReply struct {
	Compaction *events.Compaction `json:"compaction"`
}

// The error codes of an answer on P.session.compact.<id> (the micro
// error header Nats-Service-Error-Code), as HTTP statuses.
const (
	compactBadRequest = "400" // the body
	compactNoSession  = "404"
	compactNoModel    = "412" // no model named, and the last turn's is gone
	compactConflict   = "409"
	compactOverflow   = "422" // nothing left to compact
	compactFailed     = "500"
)

// compactTimeout bounds a compaction asked for on the bus: its
// summarizer calls and the session's write.
const compactTimeout = 5 * time.Minute

// onCompact answers a request on P.session.compact.<id>: CompactSession
// with the replica's model table, compaction setting and provider. The
// replica's compactions run one at a time (micro calls the handler in
// order); turns are not held by them.
func (s *Service) onCompact(req micro.Request) {
	id := events.LastToken(req.Subject())
	var body CompactRequest
	if data := req.Data(); len(data) > 0 {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&body); err != nil {
			_ = req.Error(compactBadRequest, "the body is not {\"model\": \"provider:model\"}: "+err.Error(), nil)
			return
		}
	}
	ctx, cancel := context.WithTimeout(s.compactCtx, compactTimeout)
	defer cancel()
	tab := s.models()
	c, err := CompactSession(ctx, s.js, s.provider, id, CompactOptions{Model: body.Model, Limits: tab.Lookup, Compaction: s.cfg.Compaction})
	if err != nil {
		code := compactFailed
		switch {
		case errors.Is(err, ErrNoSession):
			code = compactNoSession
		case errors.Is(err, ErrSessionModel):
			code = compactNoModel
		case errors.Is(err, ErrCompactionConflict):
			code = compactConflict
		case errors.Is(err, compact.ErrOverflow):
			code = compactOverflow
		}
		s.log.Info("turn: compact session", "session_id", id, "err", err)
		_ = req.Error(code, err.Error(), nil)
		return
	}
	_ = req.RespondJSON(CompactReply{Compaction: c})
}

// compactError is the error of an answer on P.session.compact.<id>: the
// sentinel its code stands for, and the reason.
func compactError(code, reason string) error {
	var kind error
	switch code {
	case compactNoSession:
		kind = ErrNoSession
	case compactBadRequest:
		kind = events.ErrInvalid
	case compactNoModel:
		kind = ErrSessionModel
	case compactConflict:
		kind = ErrCompactionConflict
	case compactOverflow:
		kind = compact.ErrOverflow
	default:
		return fmt.Errorf("turn: compact session: %s", reason)
	}
	return fmt.Errorf("%w: %s", kind, reason)
}

// CompactSession asks a turn service replica to compact session id at once
// (P.session.compact.<id>, CompactSession with the replica's model
// table, compaction setting and provider), for model ("" = the model of
// the session's last turn). It returns the compaction the session took,
// nil when there was nothing to compact. Errors match ErrNoSession,
// ErrSessionModel, ErrCompactionConflict, compact.ErrOverflow (nothing
// left to compact), events.ErrInvalid, or nats.ErrNoResponders (no turn
// service runs); ctx bounds the wait (the summarizer's calls included).
func (c *Client) CompactSession(ctx context.Context, id, model string) (*events.Compaction, error) {
	if !events.ValidToken(id) {
		return nil, fmt.Errorf("%w: session id %q is not a subject token", events.ErrInvalid, id)
	}
	var data []byte
	if model != "" {
		data, _ = json.Marshal(CompactRequest{Model: model})
	}
	m, err := c.nc.RequestWithContext(ctx, c.subjects.SessionCompact(id), data)
	if err != nil {
		return nil, fmt.Errorf("turn: compact session %q: %w", id, err)
	}
	if code := m.Header.Get(micro.ErrorCodeHeader); code != "" {
		return nil, compactError(code, m.Header.Get(micro.ErrorHeader))
	}
	var reply CompactReply
	if err := json.Unmarshal(m.Data, &reply); err != nil {
		return nil, fmt.Errorf("turn: compact session %q: the answer is not a compaction: %w", id, err)
	}
	return reply.Compaction, nil
}
