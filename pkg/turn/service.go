package turn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/natsrt"
	"github.com/llmworker/llmworker/pkg/tool"
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

	pub      *natsrt.Publisher
	provider llm.Provider
	tools    *natsrt.ToolClient
	local    map[string]tool.Tool

	// Set by Start.
	stateKV   jetstream.KeyValue
	sessionKV jetstream.KeyValue
	cat       *natsrt.Catalog
	catalog   *natsrt.CatalogWatcher
	cons      jetstream.Consumer
	cancelSub *nats.Subscription
	sem       chan struct{}

	watchCancel context.CancelFunc
	fetchCancel context.CancelFunc
	fetchDone   chan struct{}
	keepStop    chan struct{}
	keepDone    chan struct{}

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
		nc: nc, js: js, cfg: cfg, log: cfg.Logger, subjects: events.NewSubjects(cfg.Prefix),
		source:  events.Source("turn", cfg.Instance),
		local:   map[string]tool.Tool{},
		running: map[string]*turnRun{},
	}
	s.pub = natsrt.NewPublisher(nc, natsrt.PublisherOptions{Prefix: cfg.Prefix, Service: "turn", Instance: cfg.Instance})
	s.tools = natsrt.NewToolClient(nc, js, natsrt.ToolClientOptions{Prefix: cfg.Prefix, Source: s.source})
	s.provider = cfg.Provider
	if s.provider == nil {
		s.provider = natsrt.NewIngestClient(nc, natsrt.IngestOptions{
			Prefix: cfg.Prefix, Source: s.source, RequestTimeout: cfg.IngestTimeout,
			IdleTimeout: cfg.IdleTimeout, Buffer: cfg.StreamBuffer,
		})
	}
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
// P.turn.cancel.* and starts consuming. It returns once serving; ctx
// bounds the setup only.
func (s *Service) Start(ctx context.Context) error {
	s.mu.Lock()
	if s.started {
		s.mu.Unlock()
		return ErrAlreadyStarted
	}
	s.started = true
	s.mu.Unlock()

	if err := natsrt.Provision(ctx, s.js, s.cfg.Provision); err != nil {
		return err
	}
	var err error
	if s.stateKV, err = s.js.KeyValue(ctx, events.BucketTurnState); err != nil {
		return fmt.Errorf("turn: bucket %s: %w", events.BucketTurnState, err)
	}
	if s.sessionKV, err = s.js.KeyValue(ctx, events.BucketSessions); err != nil {
		return fmt.Errorf("turn: bucket %s: %w", events.BucketSessions, err)
	}
	if s.cat, err = natsrt.OpenCatalog(ctx, s.js); err != nil {
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
	if err != nil {
		s.stopWatch()
		return fmt.Errorf("turn: subscribe %s: %w", s.subjects.TurnCancelAll(), err)
	}
	// The cancel subscription must be live at the server before a turn can
	// start, or an early cancel could be missed.
	if err := s.nc.FlushTimeout(kvTimeout); err != nil {
		_ = s.cancelSub.Unsubscribe()
		s.stopWatch()
		return fmt.Errorf("turn: flush: %w", err)
	}
	s.sem = make(chan struct{}, s.cfg.MaxConcurrent)
	fctx, cancel := context.WithCancel(context.Background())
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
// turn is left to another replica) within ctx, then unsubscribes. Turns
// still running when ctx ends are cancelled without publishing anything
// and their requests are left unacknowledged (negatively acknowledged when
// the connection still works) so that another replica resumes them from
// their checkpoint; Stop then returns ctx's error.
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
			t.handOff(errStopping)
		}
		s.mu.Unlock()
		<-done
	}
	_ = s.cancelSub.Unsubscribe()
	s.mu.Lock()
	s.cancelClosed = true
	s.mu.Unlock()
	s.aux.Wait()
	close(s.keepStop)
	<-s.keepDone
	s.stopWatch()
	s.log.Info("turn service stopped", "instance", s.cfg.Instance, "handed_off", err != nil)
	return err
}

func (s *Service) stopWatch() {
	s.watchCancel()
	_ = s.catalog.Stop()
}

var errStopping = fmt.Errorf("the turn service replica is stopping; another replica continues the turn (%w)", worker.ErrDetached)

func (s *Service) isDraining() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.draining
}

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
		fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
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
		case err == nil, ctx.Err() != nil, errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout), errors.Is(err, jetstream.ErrNoMessages):
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
			msgs := make([]jetstream.Msg, 0, len(s.running))
			for _, r := range s.running {
				if m := r.currentMsg(); m != nil {
					msgs = append(msgs, m)
				}
			}
			s.mu.Unlock()
			for _, m := range msgs {
				_ = m.InProgress()
			}
		}
	}
}

// onCancel handles P.turn.cancel.<id>: every replica gets it; the one
// running the turn cancels it, the others settle a paused or not yet
// started turn through the checkpoint (one of them wins by revision).
func (s *Service) onCancel(m *nats.Msg) {
	id := events.LastToken(m.Subject)
	if !events.ValidToken(id) {
		return
	}
	s.mu.Lock()
	t := s.running[id]
	s.mu.Unlock()
	if t != nil {
		t.cancel(errCancelRequested)
		return
	}
	s.mu.Lock()
	if s.cancelClosed {
		s.mu.Unlock()
		return
	}
	s.aux.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.aux.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.cancelIdle(ctx, id)
	}()
}

var errCancelRequested = errors.New("cancelled by P.turn.cancel")
