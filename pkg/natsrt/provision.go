package natsrt

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/pkg/events"
)

// Defaults of ProvisionOptions.
const (
	DefaultEventsMaxAge      = 24 * time.Hour
	DefaultToolResultsMaxAge = 24 * time.Hour
	DefaultToolCallsMaxAge   = 24 * time.Hour
	// DefaultDuplicateWindow covers a tool call redelivered after AckWait a
	// few times and a turn replica that re-publishes a call on resume.
	DefaultDuplicateWindow = 10 * time.Minute
)

// ProvisionOptions configures Provision. The zero value gives file storage,
// one replica and the defaults above.
type ProvisionOptions struct {
	// Prefix is the subject prefix P ("" = events.DefaultPrefix).
	Prefix string
	// Replicas of every stream and bucket (0 = 1; 3 in a cluster).
	Replicas int
	// Memory selects memory storage instead of file storage (tests,
	// throw-away deployments).
	Memory bool
	// EventsMaxAge limits LLMW_EVENTS by age (0 = DefaultEventsMaxAge).
	EventsMaxAge time.Duration
	// ToolResultsMaxAge limits LLMW_TOOLRESULTS (0 = DefaultToolResultsMaxAge).
	ToolResultsMaxAge time.Duration
	// ToolCallsMaxAge drops calls nobody consumed, e.g. for a tool no
	// replica hosts any more (0 = DefaultToolCallsMaxAge).
	ToolCallsMaxAge time.Duration
	// DuplicateWindow of the streams whose messages carry client ids as
	// Nats-Msg-Id (0 = DefaultDuplicateWindow).
	DuplicateWindow time.Duration
}

func (o ProvisionOptions) withDefaults() ProvisionOptions {
	if o.Replicas <= 0 {
		o.Replicas = 1
	}
	if o.EventsMaxAge <= 0 {
		o.EventsMaxAge = DefaultEventsMaxAge
	}
	if o.ToolResultsMaxAge <= 0 {
		o.ToolResultsMaxAge = DefaultToolResultsMaxAge
	}
	if o.ToolCallsMaxAge <= 0 {
		o.ToolCallsMaxAge = DefaultToolCallsMaxAge
	}
	if o.DuplicateWindow <= 0 {
		o.DuplicateWindow = DefaultDuplicateWindow
	}
	// The server rejects a duplicate window longer than the max age.
	o.DuplicateWindow = min(o.DuplicateWindow, o.ToolResultsMaxAge, o.ToolCallsMaxAge)
	return o
}

func (o ProvisionOptions) storage() jetstream.StorageType {
	if o.Memory {
		return jetstream.MemoryStorage
	}
	return jetstream.FileStorage
}

// StreamConfigs returns the configurations Provision applies, in order
// (LLMW_TURNS, LLMW_EVENTS, LLMW_TOOLCALLS, LLMW_TOOLRESULTS).
func StreamConfigs(o ProvisionOptions) []jetstream.StreamConfig {
	o = o.withDefaults()
	s := events.NewSubjects(o.Prefix)
	st := o.storage()
	return []jetstream.StreamConfig{
		{
			Name:        events.StreamTurns,
			Description: "llmworker turn requests (submit, resume)",
			Subjects:    []string{s.TurnSubmit(), s.TurnResume()},
			Retention:   jetstream.WorkQueuePolicy,
			Storage:     st,
			Replicas:    o.Replicas,
			Duplicates:  o.DuplicateWindow,
		},
		{
			Name:        events.StreamEvents,
			Description: "llmworker worker events for UIs",
			Subjects:    []string{s.EventsAll()},
			Retention:   jetstream.LimitsPolicy,
			MaxAge:      o.EventsMaxAge,
			Storage:     st,
			Replicas:    o.Replicas,
			AllowDirect: true,
		},
		{
			Name:        events.StreamToolCalls,
			Description: "llmworker tool calls (one durable consumer per tool)",
			Subjects:    []string{s.ToolCallAll()},
			Retention:   jetstream.WorkQueuePolicy,
			MaxAge:      o.ToolCallsMaxAge,
			Storage:     st,
			Replicas:    o.Replicas,
			Duplicates:  o.DuplicateWindow,
		},
		{
			Name:        events.StreamToolResults,
			Description: "llmworker tool results",
			Subjects:    []string{s.ToolResultAll()},
			Retention:   jetstream.LimitsPolicy,
			MaxAge:      o.ToolResultsMaxAge,
			Storage:     st,
			Replicas:    o.Replicas,
			Duplicates:  o.DuplicateWindow,
			AllowDirect: true,
		},
	}
}

// BucketConfigs returns the KV configurations Provision applies.
func BucketConfigs(o ProvisionOptions) []jetstream.KeyValueConfig {
	o = o.withDefaults()
	kv := func(name, desc string) jetstream.KeyValueConfig {
		return jetstream.KeyValueConfig{Bucket: name, Description: desc, History: 1, Storage: o.storage(), Replicas: o.Replicas}
	}
	return []jetstream.KeyValueConfig{
		kv(events.BucketSessions, "llmworker session transcripts"),
		kv(events.BucketTools, "llmworker tool catalog"),
		kv(events.BucketHooks, "llmworker hook registry"),
		kv(events.BucketTurnState, "llmworker turn checkpoints"),
	}
}

// Provision creates or updates the streams and KV buckets of DESIGN.md
// §5–§8. Every replica of every service calls it on start: it is
// idempotent and safe to run concurrently (CreateOrUpdate with identical
// configurations; a lost creation race is retried once as an update).
func Provision(ctx context.Context, js jetstream.JetStream, o ProvisionOptions) error {
	for _, cfg := range StreamConfigs(o) {
		if err := retryRace(ctx, func() error {
			_, err := js.CreateOrUpdateStream(ctx, cfg)
			return err
		}); err != nil {
			return fmt.Errorf("%w: stream %s: %w", ErrProvision, cfg.Name, err)
		}
	}
	for _, cfg := range BucketConfigs(o) {
		if err := retryRace(ctx, func() error {
			_, err := js.CreateOrUpdateKeyValue(ctx, cfg)
			return err
		}); err != nil {
			return fmt.Errorf("%w: bucket %s: %w", ErrProvision, cfg.Bucket, err)
		}
	}
	return nil
}

// retryRace retries f a few times: two replicas that both see "not found"
// and both create can make one of them fail with "already in use" or a
// transient API error although the end state is right.
func retryRace(ctx context.Context, f func() error) error {
	var err error
	for attempt := range 4 {
		if err = f(); err == nil {
			return nil
		}
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(attempt+1) * 20 * time.Millisecond):
		}
	}
	return err
}
