package provision

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/pkg/events"
)

// Defaults of Options.
const (
	DefaultEventsMaxAge      = 24 * time.Hour
	DefaultToolResultsMaxAge = 24 * time.Hour
	DefaultToolCallsMaxAge   = 24 * time.Hour
	// DefaultTurnsMaxAge drops turn requests (submits, resumes) that no
	// turn replica took within a day, so that requests published while
	// no replica runs cannot pile up without bound.
	DefaultTurnsMaxAge = 24 * time.Hour
	// DefaultSessionsTTL forgets a session's transcript 30 days after its
	// last turn: a client that submits turns with ever new session ids
	// does not grow LLMW_SESSIONS without bound.
	DefaultSessionsTTL = 30 * 24 * time.Hour
	// DefaultMediaMaxAge keeps a media object (pkg/media) as long as a
	// session keeps the transcript that refers to it, counted from its
	// upload.
	DefaultMediaMaxAge = DefaultSessionsTTL
	// DefaultTranscriptsMaxAge keeps a transcript item (pkg/transcript)
	// as long as a session keeps its record after its last turn, counted
	// from the item's append.
	DefaultTranscriptsMaxAge = DefaultSessionsTTL
	// DefaultDuplicateWindow covers a tool call redelivered after AckWait a
	// few times and a turn replica that re-publishes a call on resume.
	DefaultDuplicateWindow = 10 * time.Minute
)

// Options configures Provision. The zero value gives file storage,
// one replica and the defaults above.
type Options struct {
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
	// TurnsMaxAge limits LLMW_TURNS by age: a request no replica took
	// by then is dropped (0 = DefaultTurnsMaxAge; negative = none).
	TurnsMaxAge time.Duration
	// SessionsTTL is how long LLMW_SESSIONS keeps a transcript after the
	// session's last turn wrote it (0 = DefaultSessionsTTL; negative =
	// for ever).
	SessionsTTL time.Duration
	// MediaMaxAge limits LLMW_MEDIA by age (0 = DefaultMediaMaxAge;
	// negative = none).
	MediaMaxAge time.Duration
	// TranscriptsMaxAge limits LLMW_TRANSCRIPTS by age (0 =
	// DefaultTranscriptsMaxAge; negative = none): a session whose first
	// items are older cannot be read (pkg/transcript.ErrMissing).
	TranscriptsMaxAge time.Duration
	// DuplicateWindow of the streams whose messages carry client ids as
	// Nats-Msg-Id (0 = DefaultDuplicateWindow).
	DuplicateWindow time.Duration
	// ApplyLimits makes the age limits and TTLs above replace those of
	// streams and buckets that exist already (`llmworker provision`).
	// Without it an existing stream or bucket keeps its own, and only a
	// missing one gets these: a service that provisions at start does
	// not undo the limits the operator chose.
	ApplyLimits bool
	// VerifyOnly checks that every stream and bucket exists, with this
	// prefix's subjects, and changes nothing: for a service whose NATS
	// identity may only read stream information (the roles of
	// pkg/permissions), once `llmworker provision` has made them with an
	// identity that may create and update them. A missing one is
	// ErrNotProvisioned.
	VerifyOnly bool
}

func (o Options) withDefaults() Options {
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
	o.TurnsMaxAge = orNone(o.TurnsMaxAge, DefaultTurnsMaxAge)
	o.SessionsTTL = orNone(o.SessionsTTL, DefaultSessionsTTL)
	o.MediaMaxAge = orNone(o.MediaMaxAge, DefaultMediaMaxAge)
	o.TranscriptsMaxAge = orNone(o.TranscriptsMaxAge, DefaultTranscriptsMaxAge)
	// The server rejects a duplicate window longer than the max age.
	o.DuplicateWindow = min(o.DuplicateWindow, o.ToolResultsMaxAge, o.ToolCallsMaxAge)
	return o
}

// orNone resolves a limit: 0 is def, negative is none (0 in the server's
// configuration).
func orNone(d, def time.Duration) time.Duration {
	switch {
	case d == 0:
		return def
	case d < 0:
		return 0
	}
	return d
}

func (o Options) storage() jetstream.StorageType {
	if o.Memory {
		return jetstream.MemoryStorage
	}
	return jetstream.FileStorage
}

// StreamConfigs returns the configurations Provision applies, in order
// (LLMW_TURNS, LLMW_EVENTS, LLMW_TOOLCALLS, LLMW_TOOLRESULTS,
// LLMW_TRANSCRIPTS).
func StreamConfigs(o Options) []jetstream.StreamConfig {
	o = o.withDefaults()
	s := events.NewSubjects(o.Prefix)
	st := o.storage()
	return []jetstream.StreamConfig{
		{
			Name:        events.StreamTurns,
			Description: "llmworker turn requests (submit, resume)",
			Subjects:    []string{s.TurnSubmit(), s.TurnResume()},
			Retention:   jetstream.WorkQueuePolicy,
			MaxAge:      o.TurnsMaxAge,
			Storage:     st,
			Replicas:    o.Replicas,
			// The turn service de-duplicates turn requests itself (an
			// identical submit of an existing turn is ignored, a resume
			// applies to a paused turn only); a long window here would
			// drop a resume whose Nats-Msg-Id repeats its submit's, the
			// natural guess (docs/protocol.md §5).
			Duplicates: TurnsDuplicateWindow,
		},
		{
			Name:        events.StreamEvents,
			Description: "llmworker worker events for UIs",
			// The turn service publishes on P.emit.…, fenced
			// (docs/architecture.md#fencing); the stream stores each event
			// it accepts as P.events.… and only then republishes it there,
			// so a subscriber never sees an event the stream refused.
			Subjects:         []string{s.EmitAll()},
			SubjectTransform: &jetstream.SubjectTransformConfig{Source: s.EmitAll(), Destination: s.EventsAll()},
			RePublish:        &jetstream.RePublish{Source: s.EventsAll(), Destination: s.EventsAll()},
			Retention:        jetstream.LimitsPolicy,
			MaxAge:           o.EventsMaxAge,
			Storage:          st,
			Replicas:         o.Replicas,
			AllowDirect:      true,
			// The turn service stores the events that queued behind an
			// acknowledgement as one atomic batch (nats-server ≥ 2.12;
			// an older server ignores the field and the publisher stores
			// them one by one).
			AllowAtomicPublish: true,
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
			// Each result stored is republished on P.tool.stored.…, so
			// that the turn waiting for it has the result of record
			// without reading it back (toolexec.Client.Call).
			RePublish:   &jetstream.RePublish{Source: s.ToolResultAll(), Destination: s.ToolStoredAll()},
			Retention:   jetstream.LimitsPolicy,
			MaxAge:      o.ToolResultsMaxAge,
			Storage:     st,
			Replicas:    o.Replicas,
			Duplicates:  o.DuplicateWindow,
			AllowDirect: true,
		},
		{
			Name:        events.StreamTranscripts,
			Description: "llmworker turn and session transcripts, one message per item",
			// Appends are fenced by the subject's last sequence
			// (pkg/transcript), not de-duplicated by id.
			Subjects:    []string{s.TranscriptAll()},
			Retention:   jetstream.LimitsPolicy,
			MaxAge:      o.TranscriptsMaxAge,
			Storage:     st,
			Replicas:    o.Replicas,
			Duplicates:  TurnsDuplicateWindow,
			AllowDirect: true,
		},
	}
}

// TurnsDuplicateWindow is LLMW_TURNS' de-duplication window: the
// shortest JetStream allows (a publish retried at once).
const TurnsDuplicateWindow = 100 * time.Millisecond

// LimitMarkerTTL is how long a bucket with per-key TTLs keeps the marker
// of a key that expired.
const LimitMarkerTTL = time.Minute

// withKeyTTL allows per-key TTLs in a bucket: the ended turns' states
// expire (turn.Config.FinishedTTL), and so do the catalog entries and host
// claims of tool hosts that stopped renewing them (toolexec.Catalog.Claim).
// An existing bucket gains them on update; the server cannot take them
// away again.
func withKeyTTL(c jetstream.KeyValueConfig) jetstream.KeyValueConfig {
	c.LimitMarkerTTL = LimitMarkerTTL
	return c
}

// withTTL expires every key of a bucket ttl after its last write (0 =
// never).
func withTTL(c jetstream.KeyValueConfig, ttl time.Duration) jetstream.KeyValueConfig {
	c.TTL = ttl
	return c
}

// BucketConfigs returns the KV configurations Provision applies.
func BucketConfigs(o Options) []jetstream.KeyValueConfig {
	o = o.withDefaults()
	kv := func(name, desc string) jetstream.KeyValueConfig {
		return jetstream.KeyValueConfig{Bucket: name, Description: desc, History: 1, Storage: o.storage(), Replicas: o.Replicas}
	}
	return []jetstream.KeyValueConfig{
		withTTL(kv(events.BucketSessions, "llmworker session transcripts"), o.SessionsTTL),
		withKeyTTL(kv(events.BucketTools, "llmworker tool catalog")),
		kv(events.BucketHooks, "llmworker hook registry"),
		withKeyTTL(kv(events.BucketTurnState, "llmworker turn checkpoints")),
		// The provider limits ingest replicas share (pkg/quota): records
		// of a few hundred bytes, one per limit, whose leases expire by
		// the time they hold, not by a TTL of the key.
		kv(events.BucketQuota, "llmworker provider quotas shared by ingest replicas"),
		// Agent definitions (pkg/agents) keep their last revisions, so
		// that "NAME@REV" resolves after a change or a delete.
		withHistory(kv(events.BucketAgents, "llmworker agent definitions"), events.AgentHistory),
		// The push notification configs of A2A tasks (pkg/a2a), kept
		// for as long as a task's events are.
		withTTL(kv(events.BucketA2APush, "llmworker A2A push notification configs"), A2APushTTL),
	}
}

// A2APushTTL is how long LLMW_A2A_PUSH keeps a task's push configs after
// their last change: the default age of LLMW_EVENTS, past which the
// task's events, and so its notifications, are gone.
const A2APushTTL = 24 * time.Hour

// RequestsTTL is how long LLMW_REQUESTS keeps a completion request too
// large for one message: ingest reads it within the model call's reply
// timeout, and the requester deletes it once ingest answered, so only the
// objects of a requester that died in between wait for the TTL.
const RequestsTTL = time.Hour

// withHistory keeps n revisions of each key.
func withHistory(c jetstream.KeyValueConfig, n uint8) jetstream.KeyValueConfig {
	c.History = n
	return c
}

// ObjectStoreConfigs returns the object store configurations Provision
// applies: LLMW_MEDIA (pkg/media) and LLMW_REQUESTS (pkg/ingest).
func ObjectStoreConfigs(o Options) []jetstream.ObjectStoreConfig {
	o = o.withDefaults()
	return []jetstream.ObjectStoreConfig{{
		Bucket: events.BucketMedia, Description: "llmworker media parts (images, files) by sha256",
		TTL: o.MediaMaxAge, Storage: o.storage(), Replicas: o.Replicas,
	}, {
		Bucket: events.BucketRequests, Description: "llmworker completion requests too large for one message",
		TTL: RequestsTTL, Storage: o.storage(), Replicas: o.Replicas,
	}}
}

// Provision creates or updates the streams, KV buckets and object stores of
// docs/protocol.md ("Streams and buckets"). Every replica of every service calls it on start: it is
// idempotent and safe to run concurrently (CreateOrUpdate with identical
// configurations; a lost creation race is retried once as an update).
func Provision(ctx context.Context, js jetstream.JetStream, o Options) error {
	if err := checkPrefix(ctx, js, o); err != nil {
		return err
	}
	if o.VerifyOnly {
		return verify(ctx, js, o)
	}
	for _, cfg := range StreamConfigs(o) {
		if err := retryRace(ctx, func() error {
			if !o.ApplyLimits {
				if err := keepStreamLimits(ctx, js, &cfg); err != nil {
					return err
				}
			}
			_, err := js.CreateOrUpdateStream(ctx, cfg)
			return err
		}); err != nil {
			return fmt.Errorf("%w: stream %s: %w", ErrFailed, cfg.Name, err)
		}
	}
	for _, cfg := range BucketConfigs(o) {
		if err := retryRace(ctx, func() error {
			if !o.ApplyLimits {
				if err := keepBucketTTL(ctx, js, &cfg); err != nil {
					return err
				}
			}
			_, err := js.CreateOrUpdateKeyValue(ctx, cfg)
			return err
		}); err != nil {
			return fmt.Errorf("%w: bucket %s: %w", ErrFailed, cfg.Bucket, err)
		}
	}
	for _, cfg := range ObjectStoreConfigs(o) {
		if err := retryRace(ctx, func() error {
			if !o.ApplyLimits {
				if err := keepObjectStoreTTL(ctx, js, &cfg); err != nil {
					return err
				}
			}
			_, err := js.CreateOrUpdateObjectStore(ctx, cfg)
			return err
		}); err != nil {
			return fmt.Errorf("%w: object store %s: %w", ErrFailed, cfg.Bucket, err)
		}
	}
	return nil
}

// keepObjectStoreTTL gives cfg the TTL of the object store of its name
// when that exists, as keepStreamLimits does for streams.
func keepObjectStoreTTL(ctx context.Context, js jetstream.JetStream, cfg *jetstream.ObjectStoreConfig) error {
	obs, err := js.ObjectStore(ctx, cfg.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	st, err := obs.Status(ctx)
	if err != nil {
		return err
	}
	cfg.TTL = st.TTL()
	return nil
}

// keepStreamLimits gives cfg the age limit of the stream of its name when
// that exists, so that a service's start does not undo what the operator
// provisioned.
func keepStreamLimits(ctx context.Context, js jetstream.JetStream, cfg *jetstream.StreamConfig) error {
	st, err := js.Stream(ctx, cfg.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	cfg.MaxAge = st.CachedInfo().Config.MaxAge
	if cfg.MaxAge > 0 && cfg.Duplicates > cfg.MaxAge {
		cfg.Duplicates = cfg.MaxAge // the server refuses a longer window
	}
	return nil
}

// keepBucketTTL gives cfg the TTL of the bucket of its name when that
// exists, as keepStreamLimits does for streams.
func keepBucketTTL(ctx context.Context, js jetstream.JetStream, cfg *jetstream.KeyValueConfig) error {
	kv, err := js.KeyValue(ctx, cfg.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	st, err := kv.Status(ctx)
	if err != nil {
		return err
	}
	cfg.TTL = st.TTL()
	return nil
}

// verify reports the first stream or bucket that does not exist.
func verify(ctx context.Context, js jetstream.JetStream, o Options) error {
	for _, cfg := range StreamConfigs(o) {
		if _, err := js.Stream(ctx, cfg.Name); errors.Is(err, jetstream.ErrStreamNotFound) {
			return fmt.Errorf("%w: stream %s", ErrNotProvisioned, cfg.Name)
		} else if err != nil {
			return fmt.Errorf("%w: stream %s: %w", ErrFailed, cfg.Name, err)
		}
	}
	for _, cfg := range BucketConfigs(o) {
		if _, err := js.KeyValue(ctx, cfg.Bucket); errors.Is(err, jetstream.ErrBucketNotFound) {
			return fmt.Errorf("%w: bucket %s", ErrNotProvisioned, cfg.Bucket)
		} else if err != nil {
			return fmt.Errorf("%w: bucket %s: %w", ErrFailed, cfg.Bucket, err)
		}
	}
	for _, cfg := range ObjectStoreConfigs(o) {
		if _, err := js.ObjectStore(ctx, cfg.Bucket); errors.Is(err, jetstream.ErrBucketNotFound) {
			return fmt.Errorf("%w: object store %s", ErrNotProvisioned, cfg.Bucket)
		} else if err != nil {
			return fmt.Errorf("%w: object store %s: %w", ErrFailed, cfg.Bucket, err)
		}
	}
	return nil
}

// checkPrefix refuses to take over streams that another prefix's
// installation made: CreateOrUpdateStream would silently rewrite their
// subjects to this prefix and cut the other installation off.
func checkPrefix(ctx context.Context, js jetstream.JetStream, o Options) error {
	for _, cfg := range StreamConfigs(o) {
		// The prefix token of this configuration's own subjects.
		want, _, _ := strings.Cut(cfg.Subjects[0], ".")
		want += "."
		st, err := js.Stream(ctx, cfg.Name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("%w: stream %s: %w", ErrFailed, cfg.Name, err)
		}
		for _, subj := range st.CachedInfo().Config.Subjects {
			if !strings.HasPrefix(subj, want) {
				return fmt.Errorf("%w: stream %s on this NATS account carries %q, not the subjects of prefix %q; another llmworker installation uses it. Use that prefix, or run this one in another NATS account",
					ErrPrefixConflict, cfg.Name, st.CachedInfo().Config.Subjects, strings.TrimSuffix(want, "."))
			}
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
