package ingest

import (
	"context"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/llmworker/llmworker/pkg/cenats"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/quota"
	"github.com/llmworker/llmworker/pkg/telemetry"
)

// bytesPerToken turns a request's size into a token estimate: about four
// bytes of JSON per token for English text and code.
const bytesPerToken = 4

// limited returns p held to Config.Quota's limits for r, or p when no
// limiter is configured. size is the request's encoded size, the base of
// its token estimate.
func (s *Service) limited(p llm.Provider, r *request, size int) llm.Provider {
	if s.cfg.Quota == nil {
		return p
	}
	return &limitedProvider{s: s, p: p, r: r, size: size}
}

// limitedProvider acquires the call's limits before it opens the provider
// call and releases them when the stream is closed.
type limitedProvider struct {
	s    *Service
	p    llm.Provider
	r    *request
	size int
}

func (lp *limitedProvider) Stream(ctx context.Context, req *llm.Request) (_ llm.Stream, err error) {
	s, r := lp.s, lp.r
	session := firstOf(r.env.SessionID, r.env.TurnID, r.req.RequestID)
	est := int64(lp.size/bytesPerToken) + int64(req.MaxTokens)
	start := time.Now()
	lease, err := s.cfg.Quota.Acquire(ctx, quota.Request{
		Provider: r.provider, Model: r.model, Session: session, Tokens: est,
		Queued: func(pos int) { s.publishQueued(r, pos) },
	})
	telemetry.RecordLLMQueueWait(ctx, r.provider, r.model, time.Since(start))
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		// The queue is full or waited too long: to the requester this is
		// the provider's rate limit, reached before the provider said so.
		return nil, &llm.APIError{Status: 429, ErrKind: llm.KindRateLimited, Err: err}
	}
	opened := false
	defer func() {
		// Also when the provider panics (open recovers it).
		if !opened {
			lease.Release(context.WithoutCancel(ctx), 0)
		}
	}()
	st, err := lp.p.Stream(ctx, req)
	if err != nil {
		if isKind(err, llm.KindRateLimited) {
			lp.cool(ctx, lease, quota.RetryAfter(err))
		}
		return nil, err
	}
	opened = true
	return &limitedStream{
		ns: llm.Normalize(ctx, st, llm.NormalizeOptions{IdleTimeout: s.idle}), lease: lease, ctx: ctx, lp: lp,
	}, nil
}

// cool stops the limits of the call for every replica: the provider
// answered 429 although the limits let the call through (another client
// of the same key, a limit set too high).
func (lp *limitedProvider) cool(ctx context.Context, lease *quota.Lease, d time.Duration) {
	if err := lease.Cooldown(context.WithoutCancel(ctx), d); err != nil {
		lp.s.log.Warn("quota: cooldown not shared", "provider", lp.r.provider, "model", lp.r.model, "err", err)
	}
}

func firstOf(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// publishQueued tells the requester that its call waits for a limit: a
// status event without seq on the stream subject, ahead of the stream
// (docs/protocol.md §3).
func (s *Service) publishQueued(r *request, pos int) {
	subject := s.subj.LLMStream(r.req.RequestID)
	if g := r.req.StreamGroup; g != "" {
		subject = s.subj.LLMGroupStream(g, r.req.RequestID)
	}
	env, err := events.NewEnvelope(s.source, events.TypeLLMStatus, events.StatusEvent{Status: events.StatusQueued, Position: pos})
	if err != nil {
		return
	}
	env.Subject, env.TurnID, env.SessionID, env.TraceParent = r.env.TurnID, r.env.TurnID, r.env.SessionID, r.env.TraceParent
	m := cenats.NewMsg(subject, env)
	if s.cfg.Structured {
		body, err := env.StructuredBody()
		if err != nil {
			return
		}
		m = &nats.Msg{Subject: subject, Header: nats.Header{events.HeaderContentType: []string{events.ContentTypeStructured}}, Data: body}
	}
	if err := s.nc.PublishMsg(m); err != nil {
		s.log.Warn("queued status not published", "request_id", r.req.RequestID, "err", err)
	}
}

// limitedStream is the provider's stream, normalized, that gives its
// limits back when it is closed and charges them the tokens its usage
// events reported. It is well-formed, so ingest's own Normalize keeps it.
type limitedStream struct {
	ns    llm.Stream
	lease *quota.Lease
	ctx   context.Context
	lp    *limitedProvider
	usage events.UsageEvent
	cool  bool
}

var (
	_ llm.WellFormed = (*limitedStream)(nil)
	_ llm.Buffered   = (*limitedStream)(nil)
	_ llm.Warner     = (*limitedStream)(nil)
)

func (ls *limitedStream) Next() bool {
	if !ls.ns.Next() {
		return false
	}
	switch e := ls.ns.Current().(type) {
	case events.UsageEvent:
		ls.usage = ls.usage.Merge(e)
	case events.ErrorEvent:
		if e.Code == string(llm.KindRateLimited) && !ls.cool {
			ls.cool = true
			ls.lp.cool(ls.ctx, ls.lease, 0)
		}
	}
	return true
}

func (ls *limitedStream) Current() events.Event { return ls.ns.Current() }
func (ls *limitedStream) Err() error            { return ls.ns.Err() }
func (ls *limitedStream) WellFormed()           {}

func (ls *limitedStream) Close() error {
	err := ls.ns.Close()
	ls.lease.Release(context.WithoutCancel(ls.ctx), usedTokens(ls.usage))
	return err
}

func (ls *limitedStream) Buffered() int {
	if b, ok := ls.ns.(llm.Buffered); ok {
		return b.Buffered()
	}
	return 0
}

func (ls *limitedStream) Warnings() []events.Warning {
	if w, ok := ls.ns.(llm.Warner); ok {
		return w.Warnings()
	}
	return nil
}

// usedTokens is what a call's usage events reported, -1 when they
// reported nothing (the estimate stays).
func usedTokens(u events.UsageEvent) int64 {
	if u.TotalTokens != nil {
		return *u.TotalTokens
	}
	if u.InputTokens == nil && u.OutputTokens == nil {
		return -1
	}
	var n int64
	for _, p := range []*int64{u.InputTokens, u.OutputTokens, u.CacheReadInputTokens, u.CacheCreationInputTokens} {
		if p != nil {
			n += *p
		}
	}
	return n
}
