package turn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/nats-io/nuid"

	"github.com/llmworker/llmworker/internal/leaf/version"
	"github.com/llmworker/llmworker/pkg/agents"
	"github.com/llmworker/llmworker/pkg/emit"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/ingest"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/media"
	"github.com/llmworker/llmworker/pkg/provision"
	"github.com/llmworker/llmworker/pkg/tool"
	"github.com/llmworker/llmworker/pkg/toolexec"
	"github.com/llmworker/llmworker/pkg/transcript"
	"github.com/llmworker/llmworker/pkg/worker"
)

// Service is the turn service: it consumes turn requests from LLMW_TURNS
// and runs each turn with the worker core wired to NATS.
type Service struct {
	nc       *nats.Conn
	js       jetstream.JetStream
	cfg      Config
	log      *slog.Logger
	subjects events.Subjects
	source   string

	pub      *emit.Publisher
	provider llm.Provider
	ingest   *ingest.Client // the provider, unless Config.Provider is set
	tools    *toolexec.Client
	local    map[string]tool.Tool
	registry *agents.Registry // the agents turn requests name (agent.go)

	// Set by Start.
	// root is Start's context without its cancellation: every turn's
	// context derives from it, so values given to Start (a logger, trace
	// context) reach the turns, while the turns live until they end or
	// Stop drains them.
	root      context.Context
	stateKV   jetstream.KeyValue
	svc       micro.Service
	sessionKV jetstream.KeyValue
	cat       *toolexec.Catalog
	catalog   *toolexec.CatalogWatcher
	cons      jetstream.Consumer
	// cancelSub has every replica hear the cancels of one turn (onCancel),
	// queuedCancelSub (queue group ServiceName) one replica every cancel
	// subject (onQueuedCancel).
	cancelSub       *nats.Subscription
	queuedCancelSub *nats.Subscription
	sem             chan struct{}

	watchCancel context.CancelFunc
	// compactCtx is the context of the sessions compacted on demand
	// (onCompact), cancelled by Stop.
	compactCtx    context.Context
	compactCancel context.CancelFunc
	fetchCancel   context.CancelFunc
	fetchDone     chan struct{}
	keepStop      chan struct{}
	keepDone      chan struct{}
	// drain ends when Stop starts to drain (startDrain), and drained
	// is its Done: a parent waiting for a child turn hands its turn off
	// at once, and its read of the child's state ends (children.go).
	drain      context.Context
	startDrain context.CancelFunc
	drained    <-chan struct{}

	media media.Lazy // opened by the first request with large media (media.go)
	// tx stores the turns' and sessions' transcripts (transcripts.go).
	tx *transcript.Store

	mu       sync.Mutex
	started  bool
	stopped  bool
	draining bool
	// cancelClosed: no more cancel handlers may start (Stop waits for aux).
	cancelClosed bool
	running      map[string]*turnRun
	turns        sync.WaitGroup
	aux          sync.WaitGroup // cancel handlers
}

// New returns a Service on nc. Errors match ErrNilConn or ErrInvalidConfig.
func New(nc *nats.Conn, cfg Config) (*Service, error) {
	if nc == nil {
		return nil, ErrNilConn
	}
	if err := cfg.withDefaults(); err != nil {
		return nil, err
	}
	if cfg.Instance == "" {
		cfg.Instance = nuid.Next()
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("turn: jetstream: %w", err)
	}
	s := &Service{
		nc: nc, js: js, cfg: cfg, log: cfg.Logger, subjects: events.NewSubjects(cfg.Prefix), media: media.Lazy{JS: js},
		tx:     transcript.New(js, cfg.Prefix),
		source: events.Source("turn", cfg.Instance), registry: agents.New(js),
		local:   map[string]tool.Tool{},
		running: map[string]*turnRun{},
	}
	s.drain, s.startDrain = context.WithCancel(context.Background())
	s.drained = s.drain.Done()
	s.pub = emit.NewPublisher(nc, emit.PublisherOptions{Prefix: cfg.Prefix, Service: "turn", Instance: cfg.Instance, RetryTimeout: cfg.RetryTimeout})
	s.tools = toolexec.NewClient(nc, js, toolexec.ClientOptions{Prefix: cfg.Prefix, Source: s.source, Logger: cfg.Logger})
	p := cfg.Provider
	if p == nil {
		s.ingest = ingest.NewClient(nc, ingest.ClientOptions{
			Prefix: cfg.Prefix, Source: s.source, RequestTimeout: cfg.IngestTimeout,
			IdleTimeout: cfg.IdleTimeout, Buffer: cfg.StreamBuffer,
		})
		p = s.ingest
	}
	s.provider = shortRequestIDs{p}
	for _, t := range cfg.Tools {
		s.local[t.Name()] = t
	}
	return s, nil
}

// Source is the CloudEvents source of this replica (/llmw/turn/<instance>).
func (s *Service) Source() string { return s.source }

// Running returns the ids of the turns this replica runs now.
func (s *Service) Running() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.running))
	for id := range s.running {
		out = append(out, id)
	}
	return out
}

// Start provisions the streams and buckets (idempotent), creates or binds
// the durable consumer shared by all replicas, subscribes to
// P.turn.cancel.> and starts consuming. It returns once serving.
// Cancelling ctx stops the setup only; the turns derive their contexts
// from ctx's values (a root without its cancellation) and end when they
// finish or Stop drains them.
func (s *Service) Start(ctx context.Context) error {
	s.mu.Lock()
	if s.started {
		s.mu.Unlock()
		return ErrAlreadyStarted
	}
	s.started = true
	s.root = context.WithoutCancel(ctx)
	s.compactCtx, s.compactCancel = context.WithCancel(s.root)
	s.mu.Unlock()

	if err := provision.Provision(ctx, s.js, s.cfg.Provision); err != nil {
		return err
	}
	var err error
	if s.stateKV, err = s.js.KeyValue(ctx, events.BucketTurnState); err != nil {
		return fmt.Errorf("turn: bucket %s: %w", events.BucketTurnState, err)
	}
	if s.sessionKV, err = s.js.KeyValue(ctx, events.BucketSessions); err != nil {
		return fmt.Errorf("turn: bucket %s: %w", events.BucketSessions, err)
	}
	if s.cat, err = toolexec.OpenCatalog(ctx, s.js); err != nil {
		return err
	}
	// The watch lives until Stop, not as long as Start's ctx.
	wctx, wcancel := context.WithCancel(context.WithoutCancel(ctx))
	if s.catalog, err = s.cat.Watch(wctx); err != nil {
		wcancel()
		return err
	}
	s.watchCancel = wcancel
	cc := jetstream.ConsumerConfig{
		Durable:       ConsumerName,
		Description:   "llmworker turn replicas",
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       s.cfg.AckWait,
		MaxAckPending: -1, // each replica bounds itself (MaxConcurrent)
		MaxDeliver:    -1,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	}
	if s.cfg.MaxDeliver > 0 {
		cc.MaxDeliver = s.cfg.MaxDeliver
	}
	for attempt := 0; ; attempt++ {
		s.cons, err = s.js.CreateOrUpdateConsumer(ctx, events.StreamTurns, cc)
		if err == nil || attempt == 3 || ctx.Err() != nil {
			break
		}
		time.Sleep(time.Duration(attempt+1) * 20 * time.Millisecond) // a replica created it concurrently
	}
	if err != nil {
		s.stopWatch()
		return fmt.Errorf("turn: consumer %s on %s: %w", ConsumerName, events.StreamTurns, err)
	}
	s.cancelSub, err = s.nc.Subscribe(s.subjects.TurnCancelAll(), s.onCancel)
	if err == nil {
		s.queuedCancelSub, err = s.nc.QueueSubscribe(s.subjects.TurnCancelAny(), ServiceName, s.onQueuedCancel)
		if err != nil {
			_ = s.cancelSub.Unsubscribe()
		}
	}
	if err != nil {
		s.stopWatch()
		return fmt.Errorf("turn: subscribe %s: %w", s.subjects.TurnCancelAll(), err)
	}
	// The cancel subscription must be live at the server before a turn can
	// start, or an early cancel could be missed.
	if err := s.nc.FlushTimeout(kvTimeout); err != nil {
		s.unsubscribeCancels()
		s.stopWatch()
		return fmt.Errorf("turn: flush: %w", err)
	}
	// Discoverable like the other services ($SRV.PING/INFO llmw-turn);
	// turns arrive through the LLMW_TURNS queue, its one endpoint
	// compacts sessions on demand.
	s.svc, err = micro.AddService(s.nc, micro.Config{
		Name:        ServiceName,
		Version:     version.String(),
		Description: "llmworker turn service (turns from the LLMW_TURNS queue)",
		Metadata: map[string]string{
			"instance": s.cfg.Instance, "prefix": s.subjects.P(),
			"submit": s.subjects.TurnSubmit(), "max_concurrent": strconv.Itoa(s.cfg.MaxConcurrent),
		},
	})
	if err == nil {
		// Sessions compacted on demand (sessioncompact.go).
		err = s.svc.AddEndpoint("compact", micro.HandlerFunc(s.onCompact),
			micro.WithEndpointSubject(s.subjects.SessionCompactAll()), micro.WithEndpointQueueGroup(ServiceName))
		if err != nil {
			_ = s.svc.Stop()
		}
	}
	if err != nil {
		s.unsubscribeCancels()
		s.stopWatch()
		return fmt.Errorf("turn: micro service: %w", err)
	}
	s.sem = make(chan struct{}, s.cfg.MaxConcurrent)
	fctx, cancel := context.WithCancel(s.root)
	s.fetchCancel = cancel
	s.fetchDone = make(chan struct{})
	s.keepStop, s.keepDone = make(chan struct{}), make(chan struct{})
	go s.fetchLoop(fctx)
	go s.keepAlive()
	s.log.Info("turn service started", "instance", s.cfg.Instance, "submit", s.subjects.TurnSubmit(), "max_concurrent", s.cfg.MaxConcurrent)
	return nil
}

// Stop drains: it stops fetching requests, lets running turns reach their
// end or their next step boundary (where the checkpoint is written and the
// turn is left to another replica) within ctx, then drains its cancel
// subscriptions (drainCancels). Turns still running when ctx ends are
// cancelled without publishing anything and their requests are left
// unacknowledged (negatively acknowledged when the connection still
// works) so that another replica resumes them from their checkpoint; Stop
// then returns ctx's error.
func (s *Service) Stop(ctx context.Context) error {
	s.mu.Lock()
	if !s.started {
		s.mu.Unlock()
		return ErrNotStarted
	}
	if s.stopped {
		s.mu.Unlock()
		return nil
	}
	s.stopped = true
	s.mu.Unlock()
	if s.fetchCancel == nil { // Start failed half-way
		return nil
	}
	s.fetchCancel()
	<-s.fetchDone
	s.mu.Lock()
	s.draining = true
	s.mu.Unlock()
	s.startDrain()

	done := make(chan struct{})
	go func() {
		s.turns.Wait()
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
		s.mu.Lock()
		for _, t := range s.running {
			if s.cfg.Ephemeral {
				t.cancel(errEphemeralStop)
			} else {
				t.handOff(errStopping)
			}
		}
		s.mu.Unlock()
		<-done
		if s.cfg.Ephemeral {
			err = nil // every turn ended with an event: none was handed off
		}
	}
	if s.cfg.Ephemeral {
		s.abortPausedTurns()
	}
	s.drainCancels()
	s.compactCancel() // a session compaction in flight ends with an error answer
	_ = s.svc.Stop()
	s.mu.Lock()
	s.cancelClosed = true
	s.mu.Unlock()
	s.aux.Wait()
	close(s.keepStop)
	<-s.keepDone
	s.stopWatch()
	if s.ingest != nil {
		_ = s.ingest.Close() // the turns have ended: nothing reads its streams
	}
	s.log.Info("turn service stopped", "instance", s.cfg.Instance, "handed_off", err != nil && !s.cfg.Ephemeral)
	return err
}

func (s *Service) unsubscribeCancels() {
	_ = s.cancelSub.Unsubscribe()
	_ = s.queuedCancelSub.Unsubscribe()
}

// drainCancels drains the cancel subscriptions: the server sends this
// replica no more cancels, and every cancel it sent already is handled
// (a cancel of a turn this replica does not run starts its settling,
// which Stop waits for), so that a cancel that reached a stopping replica
// is answered. It waits at most kvTimeout (the drain's flush and the
// handlers). A connection that is not connected cannot drain (the server
// dropped the subscriptions with it): they are unsubscribed.
func (s *Service) drainCancels() {
	if !s.nc.IsConnected() {
		s.unsubscribeCancels()
		return
	}
	var closed []<-chan nats.SubStatus
	subs := []*nats.Subscription{s.cancelSub, s.queuedCancelSub}
	for _, sub := range subs {
		ch := sub.StatusChanged(nats.SubscriptionClosed)
		if err := sub.Drain(); err != nil {
			_ = sub.Unsubscribe()
		}
		closed = append(closed, ch)
	}
	ctx, cancel := kvContext(context.Background())
	defer cancel()
	for i, ch := range closed {
		select {
		case <-ch:
		case <-ctx.Done():
			s.log.Warn("turn: stop: cancels not drained in time", "subject", subs[i].Subject, "pending", pendingMsgs(subs[i]))
			_ = subs[i].Unsubscribe()
		}
	}
}

func pendingMsgs(sub *nats.Subscription) int {
	n, _, _ := sub.Pending()
	return n
}

func (s *Service) stopWatch() {
	s.watchCancel()
	_ = s.catalog.Stop()
}

// ServiceName is the micro service every turn replica registers (no
// endpoints: it makes the replicas discoverable with $SRV.PING/INFO).
const ServiceName = "llmw-turn"

var errEphemeralStop = errors.New("the turn service stopped before the turn finished, and its NATS store is temporary (removed on exit), so no replica could continue it")

// abortPausedTurns ends every paused turn of an ephemeral store with
// llmw.turn.aborted at Stop: the store and its checkpoints go with this
// process, so the turns could never be resumed.
func (s *Service) abortPausedTurns() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lister, err := s.stateKV.ListKeys(ctx)
	if err != nil {
		s.log.Warn("turn: stop: list paused turns", "err", err)
		return
	}
	var keys []string
	for k := range lister.Keys() {
		keys = append(keys, k)
	}
	for _, key := range keys {
		e, err := s.stateKV.Get(ctx, key)
		if err != nil {
			continue
		}
		var st State
		if json.Unmarshal(e.Value(), &st) != nil || st.Status != StatusPaused || st.Checkpoint == nil || st.Request == nil {
			continue
		}
		id, rev := st.Request.TurnID, e.Revision()
		s.abortPaused(ctx, id, &st, rev, "the turn was paused when the turn service stopped, and its NATS store is temporary (removed on exit), so it could never be resumed")
		s.log.Info("turn: stop: ended a paused turn", "turn_id", id)
	}
}

var errStopping = fmt.Errorf("the turn service replica is stopping; another replica continues the turn (%w)", worker.ErrDetached)

func (s *Service) isDraining() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.draining
}

// fetchWait is how long one fetch waits for requests. jetstream's
// FetchContext asks the server to end the pull 10% sooner (4.5 s), so
// that its end, which follows every request it delivered, comes before
// the client stops reading. A request the server delivers in the last
// moment of a pull that the client reads only after fetchWait (a process
// starved of CPU for half a second) is dropped by the client: the
// consumer delivers it again after AckWait. fetchLoop logs a fetch that
// the client ended first.
const fetchWait = 5 * time.Second

// fetchLoop pulls requests while slots are free.
func (s *Service) fetchLoop(ctx context.Context) {
	defer close(s.fetchDone)
	backoff := 50 * time.Millisecond
	for ctx.Err() == nil {
		// Wait for one free slot, then take every free one.
		select {
		case s.sem <- struct{}{}:
		case <-ctx.Done():
			return
		}
		n := 1
	more:
		for n < 256 {
			select {
			case s.sem <- struct{}{}:
				n++
			default:
				break more
			}
		}
		fctx, cancel := context.WithTimeout(ctx, fetchWait)
		batch, err := s.cons.Fetch(n, jetstream.FetchContext(fctx))
		got := 0
		if err == nil {
			for m := range batch.Messages() {
				got++
				s.turns.Add(1)
				go s.handle(m)
			}
			err = batch.Error()
		}
		cancel()
		for range n - got {
			<-s.sem
		}
		switch {
		case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil && s.nc.IsConnected():
			// The pull's end never came within fetchWait: a request the
			// server delivered meanwhile went unread.
			s.log.Warn("turn: a fetch ended before the server ended its pull; a request it delivered in its last moment is delivered again after AckWait",
				"fetch_wait", fetchWait, "ack_wait", s.cfg.AckWait)
			backoff = 50 * time.Millisecond
		case err == nil, ctx.Err() != nil, errors.Is(err, nats.ErrTimeout), errors.Is(err, jetstream.ErrNoMessages):
			backoff = 50 * time.Millisecond
		case errors.Is(err, nats.ErrConnectionClosed):
			return
		default:
			s.log.Warn("turn: fetch", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, 2*time.Second)
		}
	}
}

// keepAlive sends in-progress acks for the running turns every AckWait/3,
// from one goroutine for all turns.
func (s *Service) keepAlive() {
	defer close(s.keepDone)
	t := time.NewTicker(max(s.cfg.AckWait/3, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-s.keepStop:
			return
		case <-t.C:
			s.mu.Lock()
			msgs := make([]*request, 0, len(s.running))
			for _, r := range s.running {
				if m := r.currentMsg(); m != nil {
					msgs = append(msgs, m)
				}
			}
			s.mu.Unlock()
			for _, m := range msgs {
				_ = m.ack.InProgress() // not an answer: the request stays the run's
			}
		}
	}
}
