package openai

import (
	"context"
	"time"

	sdk "github.com/openai/openai-go/v3"

	"github.com/llmworker/llmworker/pkg/llm"
)

// Prefix is the provider prefix of the models this adapter serves
// ("openai:gpt-4.1-mini").
const Prefix = "openai"

// Provider streams Chat Completions. It is safe for concurrent use.
type Provider struct {
	client sdk.Client
	idle   time.Duration // 0 = none
	// compatible: the server is not OpenAI's or Azure's (IsOpenAIHost),
	// so the output limit goes as max_tokens, the field such servers
	// read; OpenAI's own API takes max_completion_tokens.
	compatible bool
}

var _ llm.Provider = (*Provider)(nil)

// New returns a Provider for cfg. It fails with ErrMissingAPIKey when no key
// is configured.
func New(cfg Config) (*Provider, error) {
	opts, err := ClientOptions(cfg)
	if err != nil {
		return nil, err
	}
	return &Provider{client: sdk.NewClient(opts...), idle: IdleTimeoutOf(cfg), compatible: !IsOpenAIHost(BaseURL(cfg))}, nil
}

// Stream starts a streamed chat completion. The request is sent (and
// retried) before Stream returns, so an error status, an unreachable server
// or an invalid request is Stream's error (ErrRequestFailed,
// ErrInvalidRequest); after that every failure is an error event and a
// failed status in the stream, which is well-formed (docs/protocol.md §3).
// The stream is an llm.Warner: its Warnings name the request's settings
// this API does not have (top_k), which were not sent. A content part the
// API cannot take is refused before the call with llm.UnsupportedContent.
func (p *Provider) Stream(ctx context.Context, req *llm.Request) (llm.Stream, error) {
	params, warnings, err := buildParams(req, p.compatible)
	if err != nil {
		return nil, MappingError(err)
	}
	g := llm.NewGuard(ctx, p.idle)
	s := p.client.Chat.Completions.NewStreaming(g.Context(), params)
	if err := s.Err(); err != nil {
		_ = s.Close()
		g.Stop()
		return nil, RequestError(err)
	}
	cs := newChatStream(ctx, g, s)
	cs.warnings = warnings
	return Wrap(ctx, cs, p.idle), nil
}
