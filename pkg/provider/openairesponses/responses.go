package openairesponses

import (
	"context"
	"time"

	sdk "github.com/openai/openai-go/v3"

	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/provider/openai"
)

// Prefix is the provider prefix of the models this adapter serves
// ("openai-responses:o3").
const Prefix = "openai-responses"

// Config is the configuration of both OpenAI adapters; see openai.Config.
type Config = openai.Config

// Provider streams Responses API responses. It is safe for concurrent use.
type Provider struct {
	client sdk.Client
	idle   time.Duration
}

var _ llm.Provider = (*Provider)(nil)

// New returns a Provider for cfg. It fails with ErrMissingAPIKey when no key
// is configured.
func New(cfg Config) (*Provider, error) {
	opts, err := openai.ClientOptions(cfg)
	if err != nil {
		return nil, err
	}
	return &Provider{client: sdk.NewClient(opts...), idle: openai.IdleTimeoutOf(cfg)}, nil
}

// Stream starts a streamed response. The request is sent (and retried)
// before Stream returns, so an error status, an unreachable server or an
// invalid request is Stream's error (ErrRequestFailed, ErrInvalidRequest);
// after that every failure is an error event and a failed status in the
// stream, which is well-formed (docs/protocol.md §3). The stream is an
// llm.Warner: its Warnings name the request's settings this API does not
// have (stop, seed, presence_penalty, frequency_penalty, top_k), which were
// not sent. A content part the API cannot take (audio) is refused before
// the call with llm.UnsupportedContent.
func (p *Provider) Stream(ctx context.Context, req *llm.Request) (llm.Stream, error) {
	params, warnings, err := buildParams(req)
	if err != nil {
		return nil, openai.MappingError(err)
	}
	g := llm.NewGuard(ctx, p.idle)
	s := p.client.Responses.NewStreaming(g.Context(), params)
	if err := s.Err(); err != nil {
		_ = s.Close()
		g.Stop()
		return nil, openai.RequestError(err)
	}
	rs := newStream(ctx, g, s)
	rs.warnings = warnings
	return openai.Wrap(ctx, rs, p.idle), nil
}
