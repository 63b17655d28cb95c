package gemini

import (
	"context"
	"fmt"
	"iter"
	"net/http"
	"time"

	"google.golang.org/genai"

	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/provider/setup"
)

// Environment variables read when the corresponding Config field is empty.
// They are the SDK's own; like the SDK, GOOGLE_API_KEY wins over
// GEMINI_API_KEY.
const (
	EnvGoogleAPIKey = "GOOGLE_API_KEY"
	EnvGeminiAPIKey = "GEMINI_API_KEY"
	EnvBaseURL      = "GOOGLE_GEMINI_BASE_URL"
)

// Config configures a Provider. The zero value reads the key and base URL
// from the environment.
type Config struct {
	// APIKey defaults to $GOOGLE_API_KEY, then $GEMINI_API_KEY.
	APIKey string
	// BaseURL defaults to $GOOGLE_GEMINI_BASE_URL, then the SDK's
	// https://generativelanguage.googleapis.com/.
	BaseURL string
	// HTTPClient is copied, and its transport wrapped with the retry of
	// MaxRetries; nil means a plain http.Client.
	HTTPClient *http.Client
	// MaxRetries bounds the retries of a request that fails before its
	// stream begins (408, 429, 5xx, connection errors), waiting as
	// Retry-After / Retry-After-Ms say, else with exponential backoff.
	// 0 means 2; a negative value disables retries.
	MaxRetries int
	// IdleTimeout ends a stream as failed (error code "idle_timeout") when
	// the provider sends nothing for that long: 0 means
	// DefaultIdleTimeout, a negative value no limit.
	IdleTimeout time.Duration
}

// DefaultIdleTimeout is the IdleTimeout of a zero Config.
const DefaultIdleTimeout = 10 * time.Minute

// Provider streams completions from the Gemini API (generateContent with
// alt=sse).
type Provider struct {
	client *genai.Client
	idle   time.Duration
}

var _ llm.Provider = (*Provider)(nil)

// New returns a Provider. It fails with ErrMissingAPIKey when no key is
// configured; it does no I/O.
func New(cfg Config) (*Provider, error) {
	key := setup.Setting(cfg.APIKey, EnvGoogleAPIKey, EnvGeminiAPIKey)
	if key == "" {
		return nil, &llm.APIError{ErrKind: llm.KindMissingAPIKey, Err: ErrMissingAPIKey}
	}
	base := setup.Setting(cfg.BaseURL, EnvBaseURL)
	hc := retryClient(cfg.HTTPClient, cfg.MaxRetries)
	client, err := genai.NewClient(context.Background(), &genai.ClientConfig{
		APIKey:      key,
		Backend:     genai.BackendGeminiAPI,
		HTTPClient:  hc,
		HTTPOptions: genai.HTTPOptions{BaseURL: base},
	})
	if err != nil {
		return nil, fmt.Errorf("gemini: %w", err)
	}
	return &Provider{client: client, idle: llm.Limit(cfg.IdleTimeout, DefaultIdleTimeout)}, nil
}

// Stream starts a streaming completion. The model is req.Model without its
// "gemini:" prefix. It returns once the first chunk arrived; errors before
// that are returned (wrapping ErrInvalidRequest or ErrRequestFailed, or the
// context's error), everything after is reported in the stream, which is
// well-formed (docs/protocol.md §3).
func (p *Provider) Stream(ctx context.Context, req *llm.Request) (llm.Stream, error) {
	r, err := buildRequest(req)
	if err != nil {
		return nil, err
	}
	tp := &tap{}
	g := llm.NewGuard(withTap(ctx, tp), p.idle)
	seq := p.client.Models.GenerateContentStream(g.Context(), r.model, r.contents, r.config)
	next, stop := iter.Pull2(func(yield func(*genai.GenerateContentResponse, error) bool) {
		growStack(0)
		seq(yield)
	})
	s := newStream(ctx, g, tp, next, stop)
	// Read the first chunk here, so that a rejected request is an error of
	// Stream (after the transport's retries), not a stream.
	resp, err, ok := safeNext(next)
	if ok && err != nil && !tp.opened.Load() {
		_ = s.Release()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("gemini: %w", ctx.Err())
		}
		if g.Idle() {
			return nil, llm.NewAPIError(0, fmt.Errorf("%w: no response within %s", ErrRequestFailed, p.idle))
		}
		e := llm.NewAPIError(apiStatus(err), fmt.Errorf("%w: %w", ErrRequestFailed, err))
		e.MarkOverflow(apiError(err))
		e.Wait = time.Duration(tp.wait.Load())
		if e.Wait == 0 {
			e.Wait = retryDelay(err)
		}
		return nil, e
	}
	s.first, s.firstErr, s.firstOK = resp, err, ok
	s.warnings = r.warnings
	// Normalize's stream forwards the source's Warnings (llm.Warner).
	return normalize(ctx, s, p.idle), nil
}

// decodeStack is about the stack genai needs to decode a chunk (its JSON is
// decoded into maps, re-encoded and decoded again into the typed response):
// more than 16 KB, so the iterator's goroutine reaches 32 KB on its own
// anyway, by three copies.
const decodeStack = 32 << 10

// stackIndex is a variable so that the compiler keeps growStack's frame.
var stackIndex = 0

// growStack grows the stack of the iterator's goroutine (new per stream:
// iter.Pull) to decodeStack at once, while it holds nothing: growing it by
// doublings deep in the first chunk's decoding copies the frames in use
// each time, a cost per stream the SDK alone, decoding on a grown stack,
// does not pay.
//
//go:noinline
func growStack(i int) byte {
	var b [decodeStack]byte
	b[stackIndex] = byte(i)
	return b[i]
}
