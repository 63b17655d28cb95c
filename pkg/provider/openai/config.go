package openai

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/shared"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/provider/setup"
)

// Defaults of Config.
const (
	// DefaultMaxRetries is the number of retries of a request that failed
	// before the first byte (connection error, 408, 409, 429, 5xx).
	DefaultMaxRetries = 2
	// DefaultBaseURL is OpenAI's API, used when neither Config.BaseURL
	// nor a non-empty $OPENAI_BASE_URL names another server.
	DefaultBaseURL = "https://api.openai.com/v1/"
	// DefaultIdleTimeout bounds the silence between two stream events.
	// Reasoning models can think for minutes without sending a byte on Chat
	// Completions, hence the generous default.
	DefaultIdleTimeout = 10 * time.Minute
)

// Config configures both OpenAI adapters (this package and
// pkg/provider/openairesponses). The zero value works when $OPENAI_API_KEY
// is set.
type Config struct {
	// APIKey defaults to $OPENAI_API_KEY.
	APIKey string
	// BaseURL defaults to $OPENAI_BASE_URL, else https://api.openai.com/v1.
	// Any OpenAI-compatible server works for Chat Completions.
	BaseURL string
	// Organization and Project default to $OPENAI_ORG_ID and
	// $OPENAI_PROJECT_ID.
	Organization string
	Project      string
	// HTTPClient defaults to the SDK's client.
	HTTPClient *http.Client
	// MaxRetries: 0 means DefaultMaxRetries, a negative value no retries.
	// Retries honour Retry-After / Retry-After-Ms and back off otherwise.
	MaxRetries int
	// IdleTimeout: 0 means DefaultIdleTimeout, a negative value none. A
	// stream silent for longer ends with error idle_timeout and status
	// failed.
	IdleTimeout time.Duration
	// Options are appended to the SDK options (headers, middleware).
	Options []option.RequestOption
}

// ClientOptions returns the SDK request options of cfg (on top of the SDK's
// own environment defaults). It returns ErrMissingAPIKey when no key is
// configured. It is shared with pkg/provider/openairesponses.
func ClientOptions(cfg Config) ([]option.RequestOption, error) {
	if cfg.APIKey == "" && os.Getenv("OPENAI_API_KEY") == "" {
		return nil, &llm.APIError{ErrKind: llm.KindMissingAPIKey, Err: ErrMissingAPIKey}
	}
	var opts []option.RequestOption
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	// The SDK applies every OPENAI_* variable that is set, even to ""
	// (compose passes ${X:-} as an empty string), and an empty base URL
	// breaks every call. Here an empty variable means unset: the base URL
	// is always given, and empty organization and project headers dropped.
	opts = append(opts, option.WithBaseURL(BaseURL(cfg)))
	switch {
	case cfg.Organization != "":
		opts = append(opts, option.WithOrganization(cfg.Organization))
	case os.Getenv("OPENAI_ORG_ID") == "":
		opts = append(opts, option.WithHeaderDel("OpenAI-Organization"))
	}
	switch {
	case cfg.Project != "":
		opts = append(opts, option.WithProject(cfg.Project))
	case os.Getenv("OPENAI_PROJECT_ID") == "":
		opts = append(opts, option.WithHeaderDel("OpenAI-Project"))
	}
	if cfg.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(cfg.HTTPClient))
	}
	opts = append(opts, option.WithMaxRetries(setup.Retries(cfg.MaxRetries, DefaultMaxRetries)))
	return append(opts, cfg.Options...), nil
}

// BaseURL returns the server cfg's clients call: Config.BaseURL, else a
// non-empty $OPENAI_BASE_URL, else DefaultBaseURL.
func BaseURL(cfg Config) string {
	if cfg.BaseURL != "" {
		return cfg.BaseURL
	}
	if base := os.Getenv("OPENAI_BASE_URL"); base != "" {
		return base
	}
	return DefaultBaseURL
}

// IsOpenAIHost reports whether base is a URL of OpenAI's API
// (api.openai.com or a regional host under it) or of Azure OpenAI
// (*.openai.azure.com, *.cognitiveservices.azure.com), whose Chat
// Completions read max_completion_tokens. Any other server is taken for
// an OpenAI-compatible one (Ollama, llama.cpp, vLLM, …).
func IsOpenAIHost(base string) bool {
	u, err := url.Parse(base)
	if err != nil {
		return false
	}
	host := strings.ToLower(u.Hostname())
	if host == "api.openai.com" {
		return true
	}
	for _, suffix := range []string{".api.openai.com", ".openai.azure.com", ".cognitiveservices.azure.com"} {
		if strings.HasSuffix(host, suffix) {
			return true
		}
	}
	return false
}

// IdleTimeoutOf returns the effective idle timeout of cfg (0 = none).
func IdleTimeoutOf(cfg Config) time.Duration {
	return llm.Limit(cfg.IdleTimeout, DefaultIdleTimeout)
}

// ModelName strips the "openai:" prefix (or the given one) from a model.
// Other colons are kept: "ft:gpt-4o:org::id" is a fine-tuned model name.
func ModelName(model, prefix string) string {
	if rest, ok := strings.CutPrefix(model, prefix+":"); ok {
		return rest
	}
	return model
}

// EffortForBudget maps a thinking budget in tokens to a reasoning effort:
// up to 2048 low, up to 8192 medium, above high.
func EffortForBudget(budget int) shared.ReasoningEffort {
	switch {
	case budget <= 2048:
		return shared.ReasoningEffortLow
	case budget <= 8192:
		return shared.ReasoningEffortMedium
	}
	return shared.ReasoningEffortHigh
}

// RequestError wraps an error the SDK returned before the stream started
// with ErrRequestFailed, naming the HTTP status and the API's message, in
// an *llm.APIError that carries the status and the provider's
// Retry-After. A context error is returned as is.
func RequestError(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var apiErr *sdk.Error
	if errors.As(err, &apiErr) {
		msg := apiErr.Message
		if msg == "" {
			msg = strings.TrimSpace(apiErr.RawJSON())
		}
		if msg == "" {
			msg = topLevelMessage(apiErr.Response)
		}
		status := fmt.Sprintf("%d %s", apiErr.StatusCode, http.StatusText(apiErr.StatusCode))
		e := llm.NewAPIError(apiErr.StatusCode, fmt.Errorf("%w: HTTP %s: %w", ErrRequestFailed, status, err))
		if msg != "" {
			e.Err = fmt.Errorf("%w: HTTP %s: %s: %w", ErrRequestFailed, status, msg, err)
		}
		if apiErr.Response != nil {
			// retry-after-ms or retry-after, of the last answer after
			// the SDK's own retries.
			e.Wait = llm.ParseRetryAfter(apiErr.Response.Header, time.Now())
		}
		// context_length_exceeded (OpenAI, Azure OpenAI), or the message
		// or error type of a compatible server (vLLM, llama.cpp, Ollama).
		e.MarkOverflow(apiErr.Code, msg).MarkOverflow(apiErr.Type, "")
		return e
	}
	return llm.NewAPIError(0, fmt.Errorf("%w: %w", ErrRequestFailed, err))
}

// topLevelMessage is the "message" of an error answer whose body has no
// "error" object (vLLM's {"object": "error", "message": …}), which the
// SDK leaves in the response's body; "" when there is none.
func topLevelMessage(res *http.Response) string {
	if res == nil || res.Body == nil {
		return ""
	}
	b, err := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	res.Body = io.NopCloser(bytes.NewReader(b))
	if err != nil {
		return ""
	}
	var body struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(b, &body) != nil {
		return ""
	}
	return body.Message
}

// StreamErrorEvent turns an error that ended an SDK stream after it started
// into an error event: a mid-stream SSE error (`event: error` or a chunk
// with an "error" object) keeps the provider's code and message; anything
// else is code "stream_error".
func StreamErrorEvent(err error) events.ErrorEvent {
	var se *ssestream.StreamError
	if errors.As(err, &se) {
		var body struct {
			Error json.RawMessage `json:"error"`
			Code  string          `json:"code"`
		}
		if json.Unmarshal(se.Event.Data, &body) == nil && len(body.Error) > 0 {
			var e struct {
				Code    any    `json:"code"`
				Type    string `json:"type"`
				Message string `json:"message"`
			}
			if json.Unmarshal(body.Error, &e) == nil {
				code := codeString(e.Code)
				if code == "" {
					code = e.Type
				}
				if code == "" {
					code = "provider_error"
				}
				msg := e.Message
				if msg == "" {
					msg = string(body.Error)
				}
				return events.ErrorEvent{Code: code, Message: msg}
			}
			var s string
			if json.Unmarshal(body.Error, &s) == nil && s != "" {
				return events.ErrorEvent{Code: "provider_error", Message: s}
			}
			return events.ErrorEvent{Code: "provider_error", Message: string(body.Error)}
		}
		return events.ErrorEvent{Code: "provider_error", Message: se.Error()}
	}
	msg := err.Error()
	if msg == "" {
		msg = "stream error"
	}
	return events.ErrorEvent{Code: "stream_error", Message: msg}
}

func codeString(v any) string {
	switch c := v.(type) {
	case string:
		return c
	case float64:
		return fmt.Sprint(c)
	}
	return ""
}

// NewCallID returns a synthesized tool call id ("call_" + 24 hex digits)
// for a provider that sent none.
func NewCallID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "call_" + hex.EncodeToString(b[:])
}

// ToolParameters decodes a tool's input schema into the map the SDK wants.
func ToolParameters(t events.ToolDefinition) (map[string]any, error) {
	if len(t.InputSchema) == 0 {
		return map[string]any{"type": "object", "properties": map[string]any{}}, nil
	}
	var m map[string]any
	if err := json.Unmarshal(t.InputSchema, &m); err != nil || m == nil {
		return nil, fmt.Errorf("%w: tool %q: input_schema is not a JSON object", ErrInvalidRequest, t.Name)
	}
	return m, nil
}

// ToolArguments returns the JSON arguments of a tool_use part ("{}" when
// empty).
func ToolArguments(p events.Part) (string, error) {
	in := strings.TrimSpace(string(p.Input))
	if in == "" {
		return "{}", nil
	}
	if !json.Valid([]byte(in)) {
		return "", fmt.Errorf("%w: tool_use %q: input is not valid JSON", ErrInvalidRequest, p.ID)
	}
	return in, nil
}
