// Package protocol_test walks docs/protocol.md as a user in another
// language would: each documented example is played message by message
// with raw nats.Msg values (no project client code) against the real
// services, and the documented answer is checked. The services run
// in-process on an embedded NATS server; the provider is scripted.
package protocol_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/llmworker/llmworker/pkg/ingest"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/natstest"
	"github.com/llmworker/llmworker/pkg/tool"
	"github.com/llmworker/llmworker/pkg/toolexec"
	"github.com/llmworker/llmworker/pkg/turn"
)

const waitFor = 20 * time.Second

func quiet() *slog.Logger {
	if os.Getenv("LLMW_TEST_LOGS") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// stack is one embedded NATS server; the services a walk needs are
// started on it with the start* methods and stopped at the end of the test.
// nc is the "user's" connection: walks publish and subscribe on it with
// plain nats.Msg values only.
type stack struct {
	t   *testing.T
	srv *natstest.Server
	nc  *nats.Conn
}

func newStack(t *testing.T) *stack {
	t.Helper()
	srv := natstest.Start(t, natstest.Options{})
	return &stack{t: t, srv: srv, nc: srv.Connect(t)}
}

// startIngest serves every "test:<model>" model with p.
func (s *stack) startIngest(p llm.Provider) { s.startIngestAs("test", p) }

// startIngestAs serves every "<provider>:<model>" model with p.
func (s *stack) startIngestAs(provider string, p llm.Provider) {
	s.t.Helper()
	svc, err := ingest.New(s.srv.Connect(s.t), ingest.Config{Providers: map[string]ingest.Factory{provider: ingest.Static(p)}, Logger: quiet()})
	if err != nil {
		s.t.Fatal(err)
	}
	if err := svc.Start(context.Background()); err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { s.stop(svc.Stop) })
}

// startTurn runs the turn service; cfg's zero value is the default.
func (s *stack) startTurn(cfg turn.Config) *turn.Service {
	s.t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quiet()
	}
	svc, err := turn.New(s.srv.Connect(s.t), cfg)
	if err != nil {
		s.t.Fatal(err)
	}
	if err := svc.Start(context.Background()); err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { s.stop(svc.Stop) })
	return svc
}

// startToolexec hosts tools with the project's tool host (for walks of
// the UI and hook roles; the tool-host walk plays the host by hand).
func (s *stack) startToolexec(tools ...tool.Tool) {
	s.t.Helper()
	svc, err := toolexec.New(s.srv.Connect(s.t), toolexec.Config{Logger: quiet()})
	if err != nil {
		s.t.Fatal(err)
	}
	if err := svc.Register(tools...); err != nil {
		s.t.Fatal(err)
	}
	if err := svc.Start(context.Background()); err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { s.stop(svc.Stop) })
}

func (s *stack) stop(f func(context.Context) error) {
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	_ = f(ctx)
}

// subscribe collects the messages of subject (subscribed before the walk
// publishes anything, as the document tells a client to).
func (s *stack) subscribe(subject string) *inbox {
	s.t.Helper()
	ch := make(chan *nats.Msg, 4096)
	sub, err := s.nc.ChanSubscribe(subject, ch)
	if err != nil {
		s.t.Fatal(err)
	}
	if err := s.nc.Flush(); err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { _ = sub.Unsubscribe() })
	return &inbox{t: s.t, ch: ch}
}

// inbox is a subscription read in order.
type inbox struct {
	t    *testing.T
	ch   chan *nats.Msg
	seen []*nats.Msg
}

// next returns the next message, failing the test after waitFor.
func (in *inbox) next() *nats.Msg {
	in.t.Helper()
	select {
	case m := <-in.ch:
		in.seen = append(in.seen, m)
		return m
	case <-time.After(waitFor):
		in.t.Fatalf("no message within %s (after %d)", waitFor, len(in.seen))
		return nil
	}
}

// until returns messages up to and including the first whose ce-type
// header is one of types.
func (in *inbox) until(types ...string) []*nats.Msg {
	in.t.Helper()
	var out []*nats.Msg
	for {
		m := in.next()
		out = append(out, m)
		for _, typ := range types {
			if m.Header.Get("ce-type") == typ {
				return out
			}
		}
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
