package replay

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nuid"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/ingest"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/provider/anthropic"
	"github.com/llmworker/llmworker/pkg/provider/gemini"
	"github.com/llmworker/llmworker/pkg/provider/openai"
	"github.com/llmworker/llmworker/pkg/provider/openairesponses"
)

// replayKey is the API key the adapters are given: they refuse to start
// without one, and the replay server ignores it.
const replayKey = "replay-no-key"

// Factory returns the ingest factory of the replay provider: register it as
// ingest.Config.Providers[replay.Prefix]. The model is a scenario name;
// another name is refused with an error matching ingest.ErrUnknownModel.
func (s *Server) Factory() ingest.Factory {
	return func(model string) (llm.Provider, error) {
		sc, err := Lookup(model)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ingest.ErrUnknownModel, err)
		}
		return s.Provider(sc)
	}
}

// Provider returns the replay provider of a scenario (cached per scenario).
func (s *Server) Provider(sc Scenario) (llm.Provider, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.provs[sc.Name]; ok {
		return p, nil
	}
	p := &provider{srv: s, sc: sc}
	for _, step := range sc.Steps {
		a, tr, err := s.adapter(sc, step)
		if err != nil {
			return nil, err
		}
		p.steps = append(p.steps, a)
		p.transports = append(p.transports, tr)
	}
	s.provs[sc.Name] = p
	return p, nil
}

// fixtureTransport names the fixture on every request it sends.
type fixtureTransport struct {
	name string
	base *http.Transport
}

func (t *fixtureTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(HeaderFixture, t.name)
	return t.base.RoundTrip(r)
}

// adapter builds the real adapter of sc pointed at the server, with a
// client that asks for fixture.
func (s *Server) adapter(sc Scenario, fixture string) (llm.Provider, *http.Transport, error) {
	base := http.DefaultTransport.(*http.Transport).Clone()
	hc := &http.Client{Transport: &fixtureTransport{name: fixture, base: base}}
	var (
		p   llm.Provider
		err error
	)
	switch sc.Adapter {
	case "anthropic":
		p, err = anthropic.New(anthropic.Config{APIKey: replayKey, BaseURL: s.url, HTTPClient: hc, MaxRetries: -1})
	case "openai":
		p, err = openai.New(openai.Config{APIKey: replayKey, BaseURL: s.url + "/v1", HTTPClient: hc, MaxRetries: -1})
	case "openai-responses":
		p, err = openairesponses.New(openairesponses.Config{APIKey: replayKey, BaseURL: s.url + "/v1", HTTPClient: hc, MaxRetries: -1})
	case "gemini":
		p, err = gemini.New(gemini.Config{APIKey: replayKey, BaseURL: s.url, HTTPClient: hc, MaxRetries: -1})
	default:
		err = fmt.Errorf("%w: adapter %q", ErrUnknownScenario, sc.Adapter)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("replay: %s adapter: %w", sc.Adapter, err)
	}
	return p, base, nil
}

// provider plays a scenario: it picks the step from the request and lets
// the real adapter of that step's recording parse it.
type provider struct {
	srv        *Server
	sc         Scenario
	steps      []llm.Provider
	transports []*http.Transport
}

var _ llm.Provider = (*provider)(nil)

func (p *provider) Stream(ctx context.Context, req *llm.Request) (llm.Stream, error) {
	select {
	case <-p.srv.done:
		return nil, ErrClosed
	default:
	}
	step := min(StepOf(req.Messages), len(p.steps)-1)
	r := *req
	// The adapters send the model after the colon; the recorded one reads
	// better in any log than "anthropic".
	r.Model = p.sc.Adapter + ":" + p.sc.Model
	st, err := p.steps[step].Stream(ctx, &r)
	if err != nil {
		return nil, err
	}
	if pace := p.srv.cfg.Pace; pace > 0 {
		st = &paced{Stream: st, ctx: ctx, done: p.srv.done, perToken: pace, closed: make(chan struct{})}
	}
	return &uniqueIDs{Stream: st, suffix: "_" + nuid.Next()}, nil
}

// Tokens estimates the tokens of a streamed piece of text as a model
// counts them: about four characters each, at least one per piece.
func Tokens(s string) int {
	return max(1, (utf8.RuneCountInString(s)+3)/4)
}

// paced hands out each delta (text, thinking, tool input) once a model
// writing perToken would have written it, so that a recording streams as
// it did live instead of arriving at once: a recorded delta of many
// tokens takes as long as those tokens, however the provider chunked
// them.
type paced struct {
	llm.Stream
	ctx      context.Context
	done     <-chan struct{}
	perToken time.Duration
	// closed ends a wait: Close may be called while Next waits.
	closed    chan struct{}
	closeOnce sync.Once
}

func (p *paced) Next() bool {
	if !p.Stream.Next() {
		return false
	}
	d, ok := p.Stream.Current().(events.BlockDelta)
	if !ok {
		return true
	}
	t := time.NewTimer(p.perToken * time.Duration(Tokens(d.Content)))
	defer t.Stop()
	// A cancelled or closed stream ends at the adapter's next read.
	select {
	case <-t.C:
	case <-p.ctx.Done():
	case <-p.done:
	case <-p.closed:
	}
	return true
}

func (p *paced) Close() error {
	p.closeOnce.Do(func() { close(p.closed) })
	return p.Stream.Close()
}

// uniqueIDs gives the recorded tool calls ids of their own
// (docs/protocol.md §3): a recording plays the same call ids every time,
// while a live provider's are unique, and clients key a session's calls by
// id (the transcript sent back to the model, the gateway's approval ids,
// the AI SDK's tool parts).
type uniqueIDs struct {
	llm.Stream
	suffix string
}

func (u *uniqueIDs) Current() events.Event {
	ev := u.Stream.Current()
	if bs, ok := ev.(events.BlockStart); ok && bs.BlockType == events.BlockToolUse && bs.ID != "" {
		bs.ID += u.suffix
		return bs
	}
	return ev
}

func (p *provider) closeIdle() {
	for _, t := range p.transports {
		t.CloseIdleConnections()
	}
}
