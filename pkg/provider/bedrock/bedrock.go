package bedrock

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/transport/http/protocol/restjson1"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
)

// Name is the provider prefix of Bedrock models ("bedrock:<model id>").
const Name = "bedrock"

// Config configures a Provider. The zero value uses the SDK's standard
// configuration: region from AWS_REGION (or the shared profile),
// credentials from the default chain, the endpoint from
// AWS_ENDPOINT_URL_BEDROCK_RUNTIME or AWS_ENDPOINT_URL when set.
type Config struct {
	// Region overrides the SDK's region.
	Region string
	// Credentials overrides the SDK's default credential chain.
	Credentials aws.CredentialsProvider
	// BaseURL overrides the endpoint (the SDK reads
	// AWS_ENDPOINT_URL_BEDROCK_RUNTIME itself).
	BaseURL string
	// HTTPClient defaults to the SDK's client (which honours AWS_CA_BUNDLE).
	HTTPClient *http.Client
	// WrapTransport, when set, wraps the transport of Bedrock's calls:
	// HTTPClient's, or the SDK's own (keeping its TLS settings).
	WrapTransport func(http.RoundTripper) http.RoundTripper
	// MaxRetries bounds the SDK's attempts beyond the first for a request
	// that fails before its stream begins (throttling, 5xx, connection
	// errors). 0 keeps the SDK default (2 retries); a negative value
	// disables retries.
	MaxRetries int
	// IdleTimeout ends a stream as failed (error code "idle_timeout") when
	// Bedrock sends nothing for that long: 0 means DefaultIdleTimeout, a
	// negative value no limit.
	IdleTimeout time.Duration
}

// DefaultIdleTimeout is the IdleTimeout of a zero Config.
const DefaultIdleTimeout = 10 * time.Minute

// Provider streams completions from Amazon Bedrock's ConverseStream.
type Provider struct {
	client *bedrockruntime.Client
	idle   time.Duration
}

var _ llm.Provider = (*Provider)(nil)

// New returns a Provider configured as config.LoadDefaultConfig reads the
// environment and shared files. Credentials are resolved at the first
// call, not here; New fails with ErrMissingRegion when no region is known.
func New(cfg Config) (*Provider, error) {
	var opts []func(*config.LoadOptions) error
	if cfg.Region != "" {
		opts = append(opts, config.WithRegion(cfg.Region))
	}
	if cfg.Credentials != nil {
		opts = append(opts, config.WithCredentialsProvider(cfg.Credentials))
	}
	switch {
	case cfg.MaxRetries < 0:
		opts = append(opts, config.WithRetryMaxAttempts(1))
	case cfg.MaxRetries > 0:
		opts = append(opts, config.WithRetryMaxAttempts(cfg.MaxRetries+1))
	}
	awsCfg, err := config.LoadDefaultConfig(context.Background(), opts...)
	if err != nil {
		return nil, &llm.APIError{ErrKind: llm.KindMissingAPIKey, Err: fmt.Errorf("bedrock: load AWS configuration: %w", err)}
	}
	if awsCfg.Region == "" {
		return nil, &llm.APIError{ErrKind: llm.KindMissingAPIKey, Err: ErrMissingRegion}
	}
	client := bedrockruntime.NewFromConfig(awsCfg, func(o *bedrockruntime.Options) {
		if cfg.BaseURL != "" {
			o.BaseEndpoint = aws.String(cfg.BaseURL)
		}
		// Bedrock's calls only: the credential providers (STS, instance
		// metadata) keep the SDK's client.
		o.HTTPClient = httpClient(cfg, awsCfg.HTTPClient)
	})
	return &Provider{client: client, idle: llm.Limit(cfg.IdleTimeout, DefaultIdleTimeout)}, nil
}

// httpClient is the client of Bedrock's calls: HTTPClient's or the SDK's
// transport, under WrapTransport, with request bodies held in memory.
func httpClient(cfg Config, sdkClient aws.HTTPClient) *http.Client {
	c := cfg.HTTPClient
	if c == nil {
		c = &http.Client{}
		if bc, ok := sdkClient.(*awshttp.BuildableClient); ok {
			c.Transport, c.Timeout = bc.GetTransport(), bc.GetTimeout()
		}
	}
	cp := *c
	rt := cp.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	rt = heldBody{rt}
	if cfg.WrapTransport != nil {
		rt = cfg.WrapTransport(rt)
	}
	cp.Transport = rt
	return &cp
}

// heldBody sends a copy of the request body. The SDK closes the body it
// gave the transport as soon as the response headers arrive; a streaming
// response can arrive before the transport has finished with the body (its
// last read, to see the end), and that read then fails and takes the
// connection, and the stream on it, down. Converse bodies are JSON the SDK
// holds in memory already.
type heldBody struct{ rt http.RoundTripper }

func (h heldBody) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return h.rt.RoundTrip(r)
	}
	b, err := io.ReadAll(r.Body)
	_ = r.Body.Close()
	if err != nil {
		return nil, err
	}
	r2 := r.Clone(r.Context())
	r2.Body = io.NopCloser(bytes.NewReader(b))
	r2.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	r2.ContentLength = int64(len(b))
	return h.rt.RoundTrip(r2)
}

// Stream starts a ConverseStream call. The model is req.Model without its
// "bedrock:" prefix: a model id, an inference profile id or an ARN. Errors
// before the stream begins are returned (wrapping ErrInvalidRequest,
// ErrMissingCredentials or ErrRequestFailed, or the context's error);
// everything after is reported in the stream, which is well-formed
// (docs/protocol.md §3) and implements llm.Warner when some settings were
// not sent.
func (p *Provider) Stream(ctx context.Context, req *llm.Request) (llm.Stream, error) {
	in, warnings, err := buildInput(req)
	if err != nil {
		return nil, err
	}
	// The request context is cancelled with a cause by the idle timer, so
	// that a silent provider is told apart from the caller's cancel.
	g := llm.NewGuard(ctx, p.idle)
	out, err := p.client.ConverseStream(g.Context(), in, ownCodec)
	if err != nil {
		g.Stop()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("bedrock: %w", ctx.Err())
		}
		return nil, classify(err)
	}
	s := newStream(ctx, g, out.GetStream())
	return withWarnings(llm.Normalize(ctx, s, llm.NormalizeOptions{IdleTimeout: p.idle}), warnings), nil
}

// ownCodec gives a call a protocol of its own. The client's protocol holds
// one event-stream decoder (smithy-go's restjson1 Protocol, one Codec with
// its decoder and payload buffer), which the reader goroutines of
// concurrent streams would otherwise share: their messages would be decoded
// into each other's buffers. A Protocol costs two small allocations.
func ownCodec(o *bedrockruntime.Options) {
	o.Protocol = restjson1.New(nil)
}

// classify wraps an error of the call before its stream began.
func classify(err error) error {
	var re *awshttp.ResponseError
	status := 0
	if errors.As(err, &re) {
		status = re.HTTPStatusCode()
	}
	var ae smithy.APIError
	if status == 0 && !errors.As(err, &ae) && strings.Contains(err.Error(), "get identity") {
		// The SDK's auth middleware found no credentials in its chain;
		// its error has no type of its own to test for.
		return &llm.APIError{ErrKind: llm.KindMissingAPIKey, Err: fmt.Errorf("%w: %w", ErrMissingCredentials, err)}
	}
	e := llm.NewAPIError(status, fmt.Errorf("%w: %w", ErrRequestFailed, err))
	if re != nil && re.Response != nil {
		// Bedrock's throttling answers carry no Retry-After (the
		// cooldown default applies); a proxy in front of it may send one.
		e.Wait = llm.ParseRetryAfter(re.Response.Header, time.Now())
	}
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "ThrottlingException", "ServiceQuotaExceededException":
			e.ErrKind = llm.KindRateLimited
		case "ResourceNotFoundException":
			e.ErrKind = llm.KindUnknownModel
		case "AccessDeniedException", "UnrecognizedClientException", "ExpiredTokenException":
			e.ErrKind = llm.KindAuth
		case "ValidationException":
			e.ErrKind = llm.KindInvalidRequest
			// "Input is too long for requested model.", or the model's
			// own "prompt is too long: N tokens > M maximum".
			e.MarkOverflow("", ae.ErrorMessage())
		}
	}
	return e
}

// warnStream adds the request's warnings to a normalized stream, keeping
// the interfaces the normalized stream implements that ingest reads.
type warnStream struct {
	llm.Stream
	warnings []events.Warning
}

var (
	_ llm.Warner     = (*warnStream)(nil)
	_ llm.WellFormed = (*warnStream)(nil)
	_ llm.Buffered   = (*warnStream)(nil)
)

func withWarnings(s llm.Stream, w []events.Warning) llm.Stream {
	if len(w) == 0 {
		return s
	}
	return &warnStream{Stream: s, warnings: w}
}

// Warnings implements llm.Warner.
func (s *warnStream) Warnings() []events.Warning { return s.warnings }

// WellFormed implements llm.WellFormed: the wrapped stream is
// llm.Normalize's.
func (s *warnStream) WellFormed() {}

// Buffered implements llm.Buffered.
func (s *warnStream) Buffered() int {
	if b, ok := s.Stream.(llm.Buffered); ok {
		return b.Buffered()
	}
	return 0
}
