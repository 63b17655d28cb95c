package ingest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/ingest"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/natstest"
)

// The genai SDK's dependencies start an opencensus worker in an init
// function; it is not ours and lives as long as the process.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, append(natstest.NotOurGoroutines(), goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"))...)
}

const waitFor = 10 * time.Second

// startNATS starts an embedded server for one test.
func startNATS(t testing.TB) string {
	t.Helper()
	return natstest.Start(t, natstest.Options{}).URL()
}

func connect(t testing.TB, url string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// quietLogger keeps test output readable; set LLMW_TEST_LOGS to see logs.
func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// startService starts ingest on its own connection and stops it (with a
// deadline) at the end of the test.
func startService(t testing.TB, url string, cfg ingest.Config) *ingest.Service {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quietLogger()
	}
	nc := connect(t, url)
	s, err := ingest.New(nc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		if err := s.Stop(ctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return s
}

// --- fake providers -------------------------------------------------------

// script is a provider stream for tests: it plays evs, then optionally
// blocks (until ctx ends or release is closed), then ends with err.
type script struct {
	evs     []events.Event
	err     error
	block   bool
	release chan struct{}
	// reached is closed when the stream has played evs and starts to block.
	reached chan struct{}
	// panicAt panics in Next at that event number (1-based; 0 = never).
	panicAt int
}

type scriptStream struct {
	ctx context.Context
	sc  *script
	i   int
	cur events.Event
	err error
}

func (s *scriptStream) Next() bool {
	if s.sc.panicAt > 0 && s.i+1 == s.sc.panicAt {
		panic("provider bug")
	}
	if s.i < len(s.sc.evs) {
		s.cur = s.sc.evs[s.i]
		s.i++
		return true
	}
	if s.sc.block {
		if s.sc.reached != nil {
			close(s.sc.reached)
			s.sc.reached = nil
		}
		select {
		case <-s.ctx.Done():
			s.err = s.ctx.Err()
			return false
		case <-s.sc.release:
		}
		s.sc.block = false
	}
	if s.err == nil {
		s.err = s.sc.err
	}
	return false
}

func (s *scriptStream) Current() events.Event { return s.cur }
func (s *scriptStream) Err() error            { return s.err }
func (s *scriptStream) Close() error          { return nil }

// fake is a Provider that plays one script per call and records the
// requests and the contexts it got.
type fake struct {
	mu      sync.Mutex
	scripts []*script
	reqs    []events.CompletionRequest
	ctxs    []context.Context
	openErr error
}

var _ llm.Provider = (*fake)(nil)

func (f *fake) Stream(ctx context.Context, req *llm.Request) (llm.Stream, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reqs = append(f.reqs, *req)
	f.ctxs = append(f.ctxs, ctx)
	if f.openErr != nil {
		return nil, f.openErr
	}
	sc := &script{}
	if len(f.scripts) > 0 {
		sc = f.scripts[0]
		if len(f.scripts) > 1 {
			f.scripts = f.scripts[1:]
		}
	}
	return &scriptStream{ctx: ctx, sc: sc}, nil
}

func (f *fake) requests() []events.CompletionRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]events.CompletionRequest(nil), f.reqs...)
}

func (f *fake) lastCtx() context.Context {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ctxs[len(f.ctxs)-1]
}

// --- requests and streams -------------------------------------------------

func completionData(id, model string) []byte {
	b, _ := json.Marshal(events.CompletionRequest{
		RequestID: id, Model: model,
		Messages: []events.Message{events.UserText("What is the capital of the UK?")},
	})
	return b
}

// binaryRequest is a binary-mode llmw.llm.complete CloudEvent with the given
// extensions set on the envelope.
func binaryRequest(subject string, data []byte, ext func(*events.Envelope)) *nats.Msg {
	env := &events.Envelope{ID: events.NewID(), Source: "/test/client", Type: events.TypeLLMComplete, Time: time.Now(), Data: data}
	if ext != nil {
		ext(env)
	}
	return &nats.Msg{Subject: subject, Header: nats.Header(env.BinaryHeader()), Data: data}
}

// received is one stream message, decoded.
type received struct {
	msg *nats.Msg
	env *events.Envelope
	ev  events.Event
}

// streamSub collects the events of one stream subject.
type streamSub struct {
	t   testing.TB
	sub *nats.Subscription
}

func subscribeStream(t testing.TB, nc *nats.Conn, subject string) *streamSub {
	t.Helper()
	sub, err := nc.SubscribeSync(subject)
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return &streamSub{t: t, sub: sub}
}

// next returns the next stream event.
func (s *streamSub) next() received {
	s.t.Helper()
	m, err := s.sub.NextMsg(waitFor)
	if err != nil {
		s.t.Fatalf("waiting for a stream event: %v", err)
	}
	env, err := events.DecodeEnvelope(m.Header, m.Data)
	if err != nil {
		s.t.Fatalf("decode envelope: %v (headers %v, body %s)", err, m.Header, m.Data)
	}
	ev, err := events.DecodeStreamEvent(env.Type, env.Data)
	if err != nil {
		s.t.Fatalf("decode %s: %v (%s)", env.Type, err, env.Data)
	}
	return received{msg: m, env: env, ev: ev}
}

// untilTerminal reads events until (and including) a terminal status.
func (s *streamSub) untilTerminal() []received {
	s.t.Helper()
	var out []received
	for {
		r := s.next()
		out = append(out, r)
		if st, ok := r.ev.(events.StatusEvent); ok && st.Status.Terminal() {
			return out
		}
	}
}

// untilEvent reads events until one for which match is true.
func (s *streamSub) untilEvent(match func(events.Event) bool) []received {
	s.t.Helper()
	var out []received
	for {
		r := s.next()
		out = append(out, r)
		if match(r.ev) {
			return out
		}
	}
}

func evs(rs []received) []events.Event {
	out := make([]events.Event, len(rs))
	for i, r := range rs {
		out[i] = r.ev
	}
	return out
}

// request sends m as a request and returns the reply message.
func request(t testing.TB, nc *nats.Conn, m *nats.Msg) *nats.Msg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	r, err := nc.RequestMsgWithContext(ctx, m)
	if err != nil {
		t.Fatalf("request: %v", err)
	}
	return r
}

// complete sends a valid request for id and returns the reply.
func complete(t testing.TB, nc *nats.Conn, id, model string) events.CompletionReply {
	t.Helper()
	r := request(t, nc, binaryRequest("llmw.llm.complete", completionData(id, model), nil))
	rep, err := ingest.DecodeReply(r)
	if err != nil {
		t.Fatalf("reply: %v", err)
	}
	return rep
}

func jsonEq(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}
