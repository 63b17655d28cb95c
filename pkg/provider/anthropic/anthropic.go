package anthropic

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/provider/setup"
)

// Environment variables read when the corresponding Config field is empty.
// They are the SDK's own.
const (
	EnvAPIKey  = "ANTHROPIC_API_KEY"
	EnvBaseURL = "ANTHROPIC_BASE_URL"
)

// DefaultMaxTokens is sent as max_tokens when the request has none: the
// Messages API requires the field.
const DefaultMaxTokens = 4096

// Config configures a Provider. The zero value reads the key and base URL
// from the environment and keeps the SDK's retry default.
type Config struct {
	// APIKey defaults to $ANTHROPIC_API_KEY.
	APIKey string
	// BaseURL defaults to $ANTHROPIC_BASE_URL, then the SDK's production URL.
	BaseURL string
	// HTTPClient defaults to the SDK's client.
	HTTPClient *http.Client
	// MaxRetries bounds the retries of a request that fails before its
	// stream begins (429, 408, 409, 5xx, connection errors); the SDK waits
	// as Retry-After / Retry-After-Ms say, else backs off exponentially.
	// 0 keeps the SDK default (2); a negative value disables retries.
	MaxRetries int
	// IdleTimeout ends a stream as failed (error code "idle_timeout") when
	// the provider sends nothing for that long: 0 means
	// DefaultIdleTimeout, a negative value no limit.
	IdleTimeout time.Duration
}

// DefaultIdleTimeout is the IdleTimeout of a zero Config.
const DefaultIdleTimeout = 10 * time.Minute

// Provider streams completions from the Anthropic Messages API.
type Provider struct {
	client sdk.Client
	idle   time.Duration
}

var _ llm.Provider = (*Provider)(nil)

// New returns a Provider. It fails with ErrMissingAPIKey when no key is
// configured; it does no I/O.
func New(cfg Config) (*Provider, error) {
	key := setup.Setting(cfg.APIKey, EnvAPIKey)
	if key == "" {
		return nil, &llm.APIError{ErrKind: llm.KindMissingAPIKey, Err: ErrMissingAPIKey}
	}
	base := setup.Setting(cfg.BaseURL, EnvBaseURL)
	// WithoutEnvironmentDefaults: credentials are resolved above, so the
	// SDK must not fall back to profiles or federation on its own.
	opts := []option.RequestOption{option.WithoutEnvironmentDefaults(), option.WithAPIKey(key)}
	if base != "" {
		opts = append(opts, option.WithBaseURL(base))
	}
	if cfg.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(cfg.HTTPClient))
	}
	return newProvider(opts, cfg.MaxRetries, cfg.IdleTimeout), nil
}

// newProvider makes the Provider of a client with opts and the retries
// and idle timeout of a config; 0 retries keeps the SDK's default.
func newProvider(opts []option.RequestOption, retries int, idle time.Duration) *Provider {
	if retries != 0 {
		opts = append(opts, option.WithMaxRetries(setup.Retries(retries, 0)))
	}
	return &Provider{client: sdk.NewClient(opts...), idle: llm.Limit(idle, DefaultIdleTimeout)}
}

// Stream starts a streaming completion. The model is req.Model without its
// "anthropic:" prefix. Errors before the stream begins are returned (wrapping
// ErrInvalidRequest or ErrRequestFailed, or the context's error); everything
// after is reported in the stream, which is well-formed (docs/protocol.md §3).
func (p *Provider) Stream(ctx context.Context, req *llm.Request) (llm.Stream, error) {
	r, err := buildParams(req)
	if err != nil {
		return nil, err
	}
	// The request context is cancelled with a cause by the idle timer, so
	// that a silent provider is told apart from the caller's cancel.
	g := llm.NewGuard(ctx, p.idle)
	s := p.client.Messages.NewStreaming(g.Context(), r.params, r.opts...)
	if err := s.Err(); err != nil {
		_ = s.Close()
		g.Stop()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("anthropic: %w", ctx.Err())
		}
		return nil, requestError(err)
	}
	st := newStream(ctx, g, s)
	st.output, st.warnings = r.output, r.warnings
	// Normalize's stream forwards the source's Warnings (llm.Warner).
	return normalize(ctx, st, p.idle), nil
}

// apiErrorInfo extracts a code and message from an SDK error; a prompt
// too long for the model's window ("prompt is too long: N tokens > M
// maximum", under invalid_request_error) is code context_overflow.
func apiErrorInfo(err error) (code, msg string) {
	var ae *sdk.Error
	if errors.As(err, &ae) {
		code = string(ae.Type())
		msg = errorMessage(ae.RawJSON())
		if msg == "" {
			msg = err.Error()
		}
		if llm.IsContextOverflow(code, msg) {
			return llm.CodeContextOverflow, msg
		}
		if code == "" {
			code = "stream_error"
		}
		return code, msg
	}
	if llm.IsContextOverflow("", err.Error()) {
		return llm.CodeContextOverflow, err.Error()
	}
	return "stream_error", err.Error()
}

// requestError wraps an error the SDK returned before the stream started
// in an *llm.APIError with the HTTP status and the provider's Retry-After
// (retry-after, of the last answer after the SDK's own retries).
func requestError(err error) *llm.APIError {
	var apiErr *sdk.Error
	e := llm.NewAPIError(0, fmt.Errorf("%w: %w", ErrRequestFailed, err))
	if errors.As(err, &apiErr) {
		e.Status = apiErr.StatusCode
		if apiErr.Response != nil {
			e.Wait = llm.ParseRetryAfter(apiErr.Response.Header, time.Now())
		}
		e.MarkOverflow(apiErrorInfo(err))
	}
	return e
}
