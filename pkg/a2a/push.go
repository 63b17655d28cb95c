package a2a

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	spec "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv/push"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/gateway"
)

// Push notifications: a task's configs are one key of LLMW_A2A_PUSH (the
// task id), a JSON list changed with optimistic concurrency on the key's
// revision. Every gateway replica binds to the durable consumer
// PushConsumer on the turn channel of LLMW_EVENTS, so each turn event is
// handled by one replica: the A2A events the Mapper makes of it are
// posted to each of the task's configs with a2a-go's push.HTTPPushSender.
// A post that fails makes the event be delivered again after
// PushBackoff, at most len(PushBackoff)+1 times; a redelivery posts to
// every config of the task again (at least once).
const PushConsumer = "a2a_push"

// PushBackoff are the waits before each redelivery of an event whose
// notification failed.
var PushBackoff = []time.Duration{time.Second, 5 * time.Second, 30 * time.Second, 2 * time.Minute}

// maxPushConfigs bounds the configs of one task.
const maxPushConfigs = 10

type pushList struct {
	Configs []*spec.PushConfig `json:"configs"`
}

// pushBucket opens LLMW_A2A_PUSH.
func (s *Server) pushBucket(ctx context.Context) (jetstream.KeyValue, error) {
	kv, err := s.js.KeyValue(ctx, events.BucketA2APush)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, spec.NewError(spec.ErrPushNotificationNotSupported, "bucket "+events.BucketA2APush+" does not exist (run llmworker provision)")
	}
	return kv, err
}

// pushConfigs reads a task's configs and the key's revision (0: none).
func (s *Server) pushConfigs(ctx context.Context, kv jetstream.KeyValue, taskID string) ([]*spec.PushConfig, uint64, error) {
	e, err := kv.Get(ctx, taskID)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("a2a: push configs of %s: %w", taskID, err)
	}
	var l pushList
	if err := json.Unmarshal(e.Value(), &l); err != nil {
		return nil, 0, fmt.Errorf("a2a: push configs of %s: %w", taskID, err)
	}
	return l.Configs, e.Revision(), nil
}

// changePush applies change to a task's configs, again when another
// writer changed them in between.
func (s *Server) changePush(ctx context.Context, taskID string, change func([]*spec.PushConfig) ([]*spec.PushConfig, error)) error {
	kv, err := s.pushBucket(ctx)
	if err != nil {
		return err
	}
	for range 10 {
		cur, rev, err := s.pushConfigs(ctx, kv, taskID)
		if err != nil {
			return err
		}
		next, err := change(cur)
		if err != nil {
			return err
		}
		b, err := json.Marshal(pushList{Configs: next})
		if err != nil {
			return err
		}
		if rev == 0 {
			_, err = kv.Create(ctx, taskID, b)
		} else {
			_, err = kv.Update(ctx, taskID, b, rev)
		}
		if errors.Is(err, jetstream.ErrKeyExists) || isWrongSequence(err) {
			continue
		}
		return err
	}
	return fmt.Errorf("a2a: push configs of %s: changed by others ten times in a row", taskID)
}

func isWrongSequence(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence
}

// checkPushConfig checks a config a client sets and completes its id.
func checkPushConfig(c *spec.PushConfig) error {
	if c == nil {
		return invalidParams("push config: missing")
	}
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return invalidParams("push config url: must be an absolute http(s) URL, got %q", c.URL)
	}
	if c.ID == "" {
		c.ID = nuid.Next()
	}
	return nil
}

// savePush adds (or replaces, by id) a config of the task.
func (s *Server) savePush(ctx context.Context, taskID string, c *spec.PushConfig) (*spec.PushConfig, error) {
	if err := checkPushConfig(c); err != nil {
		return nil, err
	}
	saved := *c
	saved.TaskID = spec.TaskID(taskID)
	err := s.changePush(ctx, taskID, func(cur []*spec.PushConfig) ([]*spec.PushConfig, error) {
		out := slices.DeleteFunc(slices.Clone(cur), func(x *spec.PushConfig) bool { return x.ID == saved.ID })
		if len(out) >= maxPushConfigs {
			return nil, invalidParams("task %s has %d push configs, the most it may have", taskID, maxPushConfigs)
		}
		return append(out, &saved), nil
	})
	if err != nil {
		return nil, err
	}
	return &saved, nil
}

// CreateTaskPushConfig sets a push config of a task the caller may
// write: its events are posted to the config's URL from then on.
func (h *handler) CreateTaskPushConfig(ctx context.Context, c *spec.PushConfig) (*spec.PushConfig, error) {
	if c == nil {
		return nil, invalidParams("push config: missing")
	}
	ref, err := h.lookup(ctx, c.TaskID, gateway.Write)
	if err != nil {
		return nil, err
	}
	return h.s.savePush(ctx, ref.id, c)
}

// GetTaskPushConfig reads one push config of a task the caller may read.
func (h *handler) GetTaskPushConfig(ctx context.Context, req *spec.GetTaskPushConfigRequest) (*spec.PushConfig, error) {
	cs, err := h.listPush(ctx, req.TaskID)
	if err != nil {
		return nil, err
	}
	for _, c := range cs {
		if c.ID == req.ID {
			return c, nil
		}
	}
	return nil, invalidParams("task %s has no push config %q", req.TaskID, req.ID)
}

// ListTaskPushConfigs lists the push configs of a task the caller may
// read.
func (h *handler) ListTaskPushConfigs(ctx context.Context, req *spec.ListTaskPushConfigRequest) (*spec.ListTaskPushConfigResponse, error) {
	cs, err := h.listPush(ctx, req.TaskID)
	if err != nil {
		return nil, err
	}
	if cs == nil {
		cs = []*spec.PushConfig{}
	}
	return &spec.ListTaskPushConfigResponse{Configs: cs}, nil
}

func (h *handler) listPush(ctx context.Context, id spec.TaskID) ([]*spec.PushConfig, error) {
	ref, err := h.lookup(ctx, id, gateway.Read)
	if err != nil {
		return nil, err
	}
	kv, err := h.s.pushBucket(ctx)
	if err != nil {
		return nil, err
	}
	cs, _, err := h.s.pushConfigs(ctx, kv, ref.id)
	return cs, err
}

// DeleteTaskPushConfig removes a push config of a task the caller may
// write.
func (h *handler) DeleteTaskPushConfig(ctx context.Context, req *spec.DeleteTaskPushConfigRequest) error {
	ref, err := h.lookup(ctx, req.TaskID, gateway.Write)
	if err != nil {
		return err
	}
	return h.s.changePush(ctx, ref.id, func(cur []*spec.PushConfig) ([]*spec.PushConfig, error) {
		out := slices.DeleteFunc(slices.Clone(cur), func(x *spec.PushConfig) bool { return x.ID == req.ID })
		if len(out) == len(cur) {
			return nil, invalidParams("task %s has no push config %q", req.TaskID, req.ID)
		}
		return out, nil
	})
}

// startPush binds to the durable consumer of the notifications and
// handles its events until stop.
func (s *Server) startPush(ctx context.Context) (stop func(), err error) {
	cons, err := s.js.CreateOrUpdateConsumer(ctx, events.StreamEvents, jetstream.ConsumerConfig{
		Durable:       PushConsumer,
		Description:   "llmworker A2A push notifications (pkg/a2a)",
		FilterSubject: s.subj.Events("*", "*", events.ChannelTurn),
		DeliverPolicy: jetstream.DeliverNewPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       time.Minute,
		MaxDeliver:    len(PushBackoff) + 1,
		MaxAckPending: 256,
		// Removed a day after the last replica left: an installation
		// without a gateway keeps no backlog of notifications.
		InactiveThreshold: 24 * time.Hour,
	})
	if err != nil {
		return nil, fmt.Errorf("a2a: push consumer: %w", err)
	}
	sender := push.NewHTTPPushSender(&push.HTTPSenderConfig{Timeout: 10 * time.Second, FailOnError: true})
	cc, err := cons.Consume(func(msg jetstream.Msg) { s.notify(sender, msg) })
	if err != nil {
		return nil, fmt.Errorf("a2a: push consumer: %w", err)
	}
	return func() {
		// The notifications under way finish; the rest go to another
		// replica.
		cc.Drain()
		<-cc.Closed()
	}, nil
}

// notify posts the A2A events of one turn event to its task's configs.
func (s *Server) notify(sender push.Sender, msg jetstream.Msg) {
	parts := strings.Split(strings.TrimPrefix(msg.Subject(), s.subj.P()+".events."), ".")
	if len(parts) < 3 || !strings.HasPrefix(parts[1], "a2a-") {
		_ = msg.Ack()
		return
	}
	session, turnID := parts[0], parts[1]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kv, err := s.pushBucket(ctx)
	if err != nil {
		_ = msg.Ack() // no bucket, no configs
		return
	}
	configs, _, err := s.pushConfigs(ctx, kv, turnID)
	if err != nil || len(configs) == 0 {
		s.retry(msg, err)
		return
	}
	env, err := events.DecodeEnvelope(msg.Headers(), msg.Data())
	var ev events.WorkerEvent
	if err == nil {
		ev, err = events.DecodeWorkerEnvelope(env)
	}
	if err != nil || !notifies(ev) {
		_ = msg.Ack() // not a worker event this server knows, or no change of state
		return
	}
	at := time.Now()
	if md, err := msg.Metadata(); err == nil {
		at = md.Timestamp
	}
	for _, e := range NewMapper(turnID, session).Map(nil, ev, at) {
		for _, c := range configs {
			if err := sender.SendPush(ctx, c, e); err != nil {
				s.retry(msg, fmt.Errorf("push to %s: %w", c.URL, err))
				return
			}
		}
	}
	_ = msg.Ack()
}

// notifies reports whether a turn event changes its task's state: the
// turn's start (not a replica's takeover), pause, resume and end.
func notifies(ev events.WorkerEvent) bool {
	switch e := ev.(type) {
	case events.TurnStarted:
		return !e.Resumed
	case events.TurnPaused, events.TurnResumed, events.TurnCompleted, events.TurnFailed, events.TurnAborted:
		return true
	}
	return false
}

// retry acknowledges msg when err is nil, else asks for it again after
// the backoff of its delivery count.
func (s *Server) retry(msg jetstream.Msg, err error) {
	if err == nil {
		_ = msg.Ack()
		return
	}
	n := 1
	if md, mdErr := msg.Metadata(); mdErr == nil {
		n = int(md.NumDelivered)
	}
	if n > len(PushBackoff) {
		s.cfg.Logger.Warn("a2a: push notification dropped", "subject", msg.Subject(), "deliveries", n, "err", err)
		_ = msg.Term()
		return
	}
	s.cfg.Logger.Info("a2a: push notification failed; again later", "subject", msg.Subject(), "in", PushBackoff[n-1], "err", err)
	_ = msg.NakWithDelay(PushBackoff[n-1])
}
