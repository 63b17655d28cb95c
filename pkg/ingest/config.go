package ingest

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/llmworker/llmworker/internal/leaf/version"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/media"
	"github.com/llmworker/llmworker/pkg/quota"
)

// ServiceName is the name of the micro service (docs/protocol.md §3).
const ServiceName = "llmw-ingest"

// EndpointName is the name of the completion endpoint.
const EndpointName = "complete"

// Version is the micro service version: llmworker's (internal/leaf/version).
var Version = version.String()

// DefaultIdleTimeout bounds a provider that stops sending: with no event for
// this long the stream ends failed with an idle_timeout error.
const DefaultIdleTimeout = 10 * time.Minute

// Factory returns the Provider that serves model (the part of
// "provider:model" after the colon). It is called for every request, so a
// Factory should cache what is expensive to build. It returns an error
// matching ErrUnknownModel for a model its provider does not serve and one
// matching ErrMissingAPIKey when no key is configured; any other error is
// answered as ErrProviderSetup.
type Factory func(model string) (llm.Provider, error)

// Static is a Factory that serves every model with p.
func Static(p llm.Provider) Factory {
	return func(string) (llm.Provider, error) { return p, nil }
}

// AllowModels restricts f to the listed models; any other model is refused
// with ErrUnknownModel.
func AllowModels(f Factory, models ...string) Factory {
	allowed := slices.Clone(models)
	return func(model string) (llm.Provider, error) {
		if !slices.Contains(allowed, model) {
			return nil, fmt.Errorf("%w: %q (served: %s)", ErrUnknownModel, model, strings.Join(allowed, ", "))
		}
		return f(model)
	}
}

// Config configures a Service. The zero value works: prefix llmw, a random
// instance name, no providers (every request is refused with
// ErrUnknownProvider), the default idle timeout, the connection's max
// payload, slog.Default and binary content mode.
type Config struct {
	// Prefix is the subject prefix P ("" = events.DefaultPrefix).
	Prefix string
	// Instance names this replica in the CloudEvents source
	// /llmw/ingest/<instance> ("" = a random id).
	Instance string
	// Providers maps a provider prefix ("openai", "anthropic", ...) to the
	// Factory of its providers.
	Providers map[string]Factory
	// IdleTimeout ends a stream whose provider sends nothing for this long
	// (0 = DefaultIdleTimeout, negative = never).
	IdleTimeout time.Duration
	// MaxPayload refuses requests whose body is larger (0 = the server's
	// max payload as the connection reports it).
	MaxPayload int
	// MaxStoredRequest refuses requests stored in LLMW_REQUESTS (those
	// too large for one message) whose data is larger (0 =
	// DefaultMaxStoredRequest).
	MaxStoredRequest int
	// Logger receives one record per request (nil = slog.Default()).
	Logger *slog.Logger
	// Structured publishes stream events in structured content mode (a JSON
	// CloudEvent body) instead of binary mode, for receivers that only know
	// structured mode.
	Structured bool
	// KeepDeltas publishes every provider delta as an event of its own. By
	// default, deltas of one block that the provider stream has already
	// delivered while ingest was still publishing earlier ones (the
	// stream's read-ahead holds them: llm.Buffered) are joined into one
	// delta event of up to MaxJoinedDelta bytes, so that a burst costs one
	// message, not one per token; a delta that finds nothing waiting
	// behind it is published at once, alone (docs/protocol.md §3).
	KeepDeltas bool
	// Media reads the media parts that requests carry as refs
	// (pkg/media): nil opens the LLMW_MEDIA object store on the service's
	// connection when the first such request arrives.
	Media media.Getter
	// Quota holds every call to the provider limits the replicas share
	// (pkg/quota): a call over a limit waits, announced by a queued
	// status on its stream subject, before the provider call opens, and
	// gives its limits back when its stream ends (nil = no limits). The
	// Service does not close it.
	Quota *quota.Limiter
}

func (c *Config) validate() error {
	if c.Prefix != "" {
		for tok := range strings.SplitSeq(c.Prefix, ".") {
			if !events.ValidToken(tok) {
				return fmt.Errorf("%w: prefix %q is not a NATS subject prefix", ErrInvalidConfig, c.Prefix)
			}
		}
	}
	if c.MaxPayload < 0 || c.MaxStoredRequest < 0 {
		return fmt.Errorf("%w: negative max payload %d or max stored request %d", ErrInvalidConfig, c.MaxPayload, c.MaxStoredRequest)
	}
	if strings.ContainsAny(c.Instance, " \t\r\n/") {
		return fmt.Errorf("%w: instance %q must not contain spaces or '/'", ErrInvalidConfig, c.Instance)
	}
	return nil
}
