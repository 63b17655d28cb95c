package turn_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/llmworker/llmworker/internal/leaf/natsutil"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/ingest"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/natstest"
	"github.com/llmworker/llmworker/pkg/tool"
	"github.com/llmworker/llmworker/pkg/toolexec"
	"github.com/llmworker/llmworker/pkg/turn"
)

// The genai SDK's dependencies start an opencensus worker in an init
// function; it is not ours and lives as long as the process. So is the
// event broker a2a-go's a2asrv (the tests' remote agents) can leave
// behind: its task manager destroys a finished task's event queue before
// it forgets the task, and a SubscribeToTask in between (a child that
// follows its remote task as it ends) creates a queue nobody destroys.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, append(natstest.NotOurGoroutines(),
		goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"),
		goleak.IgnoreTopFunction("github.com/a2aproject/a2a-go/v2/a2asrv/eventqueue.newInMemoryEventBroker.func1"))...)
}

const waitFor = 20 * time.Second

func quietLogger() *slog.Logger {
	if os.Getenv("LLMW_TEST_LOGS") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// env is one embedded NATS server with a client connection.
type env struct {
	t    testing.TB
	url  string
	emb  *natsutil.Embedded
	nc   *nats.Conn
	js   jetstream.JetStream
	subj events.Subjects
}

func newEnv(t testing.TB) *env {
	t.Helper()
	s := natstest.Start(t, natstest.Options{})
	return &env{t: t, url: s.URL(), emb: s.Embedded, nc: s.NC, js: s.JS}
}

func (e *env) connect() *nats.Conn {
	e.t.Helper()
	nc, err := nats.Connect(e.url)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(nc.Close)
	return nc
}

// startIngest runs ingest with providers on its own connection.
func (e *env) startIngest(providers map[string]ingest.Factory) *ingest.Service {
	e.t.Helper()
	s, err := ingest.New(e.connect(), ingest.Config{Providers: providers, Logger: quietLogger()})
	if err != nil {
		e.t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		_ = s.Stop(ctx)
	})
	return s
}

// scripted runs ingest serving every "test:" model with p.
func (e *env) scripted(p llm.Provider) {
	e.startIngest(map[string]ingest.Factory{"test": ingest.Static(p)})
}

// startTurn runs a turn service on its own connection; it is stopped at
// the end of the test.
func (e *env) startTurn(cfg turn.Config) *turn.Service {
	e.t.Helper()
	return e.startTurnOn(e.connect(), cfg)
}

func (e *env) startTurnOn(nc *nats.Conn, cfg turn.Config) *turn.Service {
	e.t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quietLogger()
	}
	s, err := turn.New(nc, cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		_ = s.Stop(ctx)
	})
	return s
}

// startToolexec hosts tools on their own connection.
func (e *env) startToolexec(cfg toolexec.Config, tools ...tool.Tool) *toolexec.Server {
	e.t.Helper()
	return e.startToolexecOn(e.connect(), cfg, tools...)
}

func (e *env) startToolexecOn(nc *nats.Conn, cfg toolexec.Config, tools ...tool.Tool) *toolexec.Server {
	e.t.Helper()
	s, err := toolexec.New(nc, cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := s.Register(tools...); err != nil {
		e.t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		_ = s.Stop(ctx)
	})
	return s
}

// publish sends a CloudEvent of typ with data to subject through JetStream
// (binary mode, Nats-Msg-Id = msgID).
func (e *env) publish(subject, typ, msgID string, data any) {
	e.t.Helper()
	env, err := events.NewEnvelope(events.Source("test", "client"), typ, data)
	if err != nil {
		e.t.Fatal(err)
	}
	m := &nats.Msg{Subject: subject, Header: nats.Header(env.BinaryHeader()), Data: env.Data}
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	var opts []jetstream.PublishOpt
	if msgID != "" {
		opts = append(opts, jetstream.WithMsgID(msgID))
	}
	if _, err := e.js.PublishMsg(ctx, m, opts...); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) submit(req events.TurnRequest) {
	e.t.Helper()
	e.publish(e.subj.TurnSubmit(), events.TypeTurnSubmit, req.TurnID, req)
}

func (e *env) resume(req events.ResumeRequest) {
	e.t.Helper()
	e.publish(e.subj.TurnResume(), events.TypeTurnResume, "", req)
}

func (e *env) cancelTurn(id string) {
	e.t.Helper()
	if err := e.nc.Publish(e.subj.TurnCancel(id), []byte("{}")); err != nil {
		e.t.Fatal(err)
	}
}

// ev is one received worker event.
type ev struct {
	Subject string
	Type    string
	Seq     uint64
	Data    json.RawMessage
}

// watcher collects the worker events of one turn from a core NATS
// subscription (what a live UI does).
type watcher struct {
	t    testing.TB
	sub  *nats.Subscription
	mu   sync.Mutex
	evs  []ev
	cond chan struct{}
}

func (e *env) watch(turnID string) *watcher {
	e.t.Helper()
	w := &watcher{t: e.t, cond: make(chan struct{}, 1)}
	sub, err := e.nc.Subscribe(e.subj.EventsOfTurn(turnID), func(m *nats.Msg) {
		env, err := events.DecodeEnvelope(m.Header, m.Data)
		if err != nil {
			return
		}
		w.mu.Lock()
		w.evs = append(w.evs, ev{Subject: m.Subject, Type: env.Type, Seq: env.Seq, Data: append(json.RawMessage(nil), env.Data...)})
		w.mu.Unlock()
		select {
		case w.cond <- struct{}{}:
		default:
		}
	})
	if err != nil {
		e.t.Fatal(err)
	}
	if err := e.nc.Flush(); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = sub.Unsubscribe() })
	w.sub = sub
	return w
}

func (w *watcher) events() []ev {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]ev(nil), w.evs...)
}

// waitFor waits until f is true of the events so far.
func (w *watcher) waitFor(what string, f func([]ev) bool) []ev {
	w.t.Helper()
	deadline := time.After(waitFor)
	for {
		evs := w.events()
		if f(evs) {
			return evs
		}
		select {
		case <-w.cond:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			w.t.Fatalf("timed out waiting for %s; events: %s", what, describe(evs))
		}
	}
}

var terminal = map[string]bool{events.TypeTurnCompleted: true, events.TypeTurnFailed: true,
	events.TypeTurnAborted: true, events.TypeTurnPaused: true}

// waitType waits for an event of type typ and returns the events so far.
func (w *watcher) waitType(typ string) []ev {
	w.t.Helper()
	return w.waitFor(typ, func(evs []ev) bool { return find(evs, typ) >= 0 })
}

// waitEnd waits for a terminal event (completed, failed, aborted, paused).
func (w *watcher) waitEnd() ev {
	w.t.Helper()
	evs := w.waitFor("the end of the turn", func(evs []ev) bool {
		for _, e := range evs {
			if terminal[e.Type] {
				return true
			}
		}
		return false
	})
	for _, e := range evs {
		if terminal[e.Type] {
			return e
		}
	}
	panic("unreachable")
}

func find(evs []ev, typ string) int {
	for i, e := range evs {
		if e.Type == typ {
			return i
		}
	}
	return -1
}

func count(evs []ev, typ string) int {
	n := 0
	for _, e := range evs {
		if e.Type == typ {
			n++
		}
	}
	return n
}

func describe(evs []ev) string {
	s := ""
	for _, e := range evs {
		d := string(e.Data)
		if len(d) > 160 {
			d = d[:160] + "…"
		}
		s += fmt.Sprintf("\n  #%d %s %s", e.Seq, e.Type, d)
	}
	return s
}

// checkSeq asserts the events are ordered by seq 1, 2, 3, … without gaps.
func checkSeq(t testing.TB, evs []ev) {
	t.Helper()
	for i, e := range evs {
		if e.Seq != uint64(i+1) {
			t.Fatalf("event %d (%s) has seq %d, want %d:%s", i, e.Type, e.Seq, i+1, describe(evs))
		}
	}
}

// stored reads every worker event of a turn from LLMW_EVENTS with an
// ordered consumer (what a late UI does), sorted as stored.
func (e *env) stored(turnID string) []ev {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	st, err := e.js.Stream(ctx, events.StreamEvents)
	if err != nil {
		e.t.Fatal(err)
	}
	last, err := st.GetLastMsgForSubject(ctx, e.subj.EventsOfTurn(turnID))
	if err != nil {
		e.t.Fatalf("last event of %s: %v", turnID, err)
	}
	oc, err := e.js.OrderedConsumer(ctx, events.StreamEvents, jetstream.OrderedConsumerConfig{FilterSubjects: []string{e.subj.EventsOfTurn(turnID)}})
	if err != nil {
		e.t.Fatal(err)
	}
	var out []ev
	for {
		m, err := oc.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			e.t.Fatalf("replay %s: %v", turnID, err)
		}
		env, err := events.DecodeEnvelope(m.Headers(), m.Data())
		if err != nil {
			e.t.Fatal(err)
		}
		out = append(out, ev{Subject: m.Subject(), Type: env.Type, Seq: env.Seq, Data: env.Data})
		md, _ := m.Metadata()
		if md.Sequence.Stream >= last.Sequence {
			return out
		}
	}
}

// decode unmarshals an event's data.
func decode[T any](t testing.TB, e ev) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(e.Data, &v); err != nil {
		t.Fatalf("decode %s: %v", e.Type, err)
	}
	return v
}

// completed waits for llmw.turn.completed and returns its data.
func (w *watcher) completed() events.TurnCompleted {
	w.t.Helper()
	end := w.waitEnd()
	if end.Type != events.TypeTurnCompleted {
		w.t.Fatalf("turn ended with %s %s, want completed:%s", end.Type, end.Data, describe(w.events()))
	}
	return decode[events.TurnCompleted](w.t, end)
}

var idSeq struct {
	sync.Mutex
	n int
}

// newID returns a unique turn id for a test.
func newID(prefix string) string {
	idSeq.Lock()
	defer idSeq.Unlock()
	idSeq.n++
	return prefix + "-" + strconv.Itoa(idSeq.n)
}

// toolUses returns the tool_use parts of a transcript, and the results by
// tool_use id.
func toolUses(msgs []events.Message) (uses []events.Part, results map[string]events.Part) {
	results = map[string]events.Part{}
	for _, m := range msgs {
		for _, p := range m.Content {
			switch p.Type {
			case events.PartToolUse:
				uses = append(uses, p)
			case events.PartToolResult:
				results[p.ToolUseID] = p
			}
		}
	}
	sort.SliceStable(uses, func(i, j int) bool { return false })
	return uses, results
}

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// rejections subscribes to P.turn.rejected.<turnID> ("_" for an id a
// subject cannot carry); next returns the next answer.
func (e *env) rejections(turnID string) func() events.TurnRejected {
	e.t.Helper()
	ch := make(chan *nats.Msg, 64)
	sub, err := e.nc.ChanSubscribe(e.subj.TurnRejected(turnID), ch)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := e.nc.Flush(); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = sub.Unsubscribe() })
	return func() events.TurnRejected {
		e.t.Helper()
		select {
		case m := <-ch:
			env, err := events.DecodeEnvelope(m.Header, m.Data)
			if err != nil || env.Type != events.TypeTurnRejected {
				e.t.Fatalf("not a llmw.turn.rejected: %v %s", err, m.Data)
			}
			rj, err := events.DecodeData[events.TurnRejected](env)
			if err != nil {
				e.t.Fatal(err)
			}
			return rj
		case <-time.After(waitFor):
			e.t.Fatalf("no llmw.turn.rejected for %q within %s", turnID, waitFor)
			return events.TurnRejected{}
		}
	}
}
