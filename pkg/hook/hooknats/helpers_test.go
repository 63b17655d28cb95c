package hooknats_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/hook"
	"github.com/llmworker/llmworker/pkg/hook/hooknats"
	"github.com/llmworker/llmworker/pkg/natstest"
	"github.com/llmworker/llmworker/pkg/provision"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, natstest.NotOurGoroutines()...)
}

type env struct {
	nc *nats.Conn
	js jetstream.JetStream
	kv jetstream.KeyValue
}

func start(t testing.TB) env {
	t.Helper()
	s := natstest.Start(t, natstest.Options{Provision: true})
	kv, err := hooknats.Bucket(ctx(t), s.JS)
	if err != nil {
		t.Fatal(err)
	}
	return env{nc: s.NC, js: s.JS, kv: kv}
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

// watch starts a watcher on a fresh chain and stops it at cleanup.
func (e env) watch(t testing.TB) (*hook.Chain, *hooknats.Watcher) {
	t.Helper()
	c := &hook.Chain{}
	w, err := hooknats.Watch(ctx(t), e.js, c, hooknats.WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := w.Stop(); err != nil {
			t.Error(err)
		}
	})
	return c, w
}

// register registers reg and waits until w has it in its chain.
func (e env) register(t testing.TB, w *hooknats.Watcher, reg events.HookRegistration) {
	t.Helper()
	rev, err := hooknats.Register(ctx(t), e.kv, reg)
	if err != nil {
		t.Fatal(err)
	}
	if w != nil {
		if err := w.WaitRevision(ctx(t), rev); err != nil {
			t.Fatal(err)
		}
	}
}

// replyMode says how a test responder encodes its reply.
type replyMode int

const (
	binaryCE replyMode = iota
	structuredCE
	bareJSON
	// echoedHeaders is a bare JSON body under the request's own headers,
	// as nats-py's Msg.respond sends it (ce-type llmw.hook.request).
	echoedHeaders
)

// serve answers requests on subject with fn's response, encoded per mode.
// The request is decoded from the binary CloudEvent the turn side sends,
// checking its attributes.
func serve(t testing.TB, nc *nats.Conn, subject string, mode replyMode, fn func(req events.HookRequest) *events.HookResponse) {
	t.Helper()
	sub, err := nc.Subscribe(subject, func(m *nats.Msg) {
		env, err := events.DecodeEnvelope(m.Header, m.Data)
		if err != nil {
			t.Errorf("request is not a CloudEvent: %v", err)
			return
		}
		if env.Type != events.TypeHookRequest || m.Header.Get(events.HeaderSpecVersion) != "1.0" {
			t.Errorf("request type %q, specversion %q", env.Type, m.Header.Get(events.HeaderSpecVersion))
		}
		req, err := events.DecodeData[events.HookRequest](env)
		if err != nil {
			t.Errorf("request data: %v", err)
			return
		}
		if env.TurnID != req.TurnID || env.Subject != req.TurnID {
			t.Errorf("turnid/subject %q/%q, want %q", env.TurnID, env.Subject, req.TurnID)
		}
		resp := fn(req)
		if resp == nil {
			return // no reply: the caller times out
		}
		out := &nats.Msg{Subject: m.Reply, Header: nats.Header{}}
		switch mode {
		case bareJSON:
			out.Data, _ = json.Marshal(resp)
		case echoedHeaders:
			out.Header = m.Header
			out.Data, _ = json.Marshal(resp)
		case binaryCE, structuredCE:
			renv, _ := events.NewEnvelope("/test/responder/1", events.TypeHookResponse, resp)
			if mode == binaryCE {
				renv.WriteBinaryHeader(out.Header)
				out.Data = renv.Data
			} else {
				out.Header.Set("content-type", events.ContentTypeStructured)
				out.Data, _ = renv.StructuredBody()
			}
		}
		if err := m.RespondMsg(out); err != nil {
			t.Errorf("respond: %v", err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

// serveRaw answers with a raw body and headers.
func serveRaw(t testing.TB, nc *nats.Conn, subject string, h nats.Header, body []byte) {
	t.Helper()
	sub, err := nc.Subscribe(subject, func(m *nats.Msg) {
		_ = m.RespondMsg(&nats.Msg{Subject: m.Reply, Header: h, Data: body})
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

func reg(name string, ev events.HookEvent, subject string) events.HookRegistration {
	return events.HookRegistration{Name: name, Event: ev, Subject: subject, TimeoutMS: 5000}
}

func texts(msgs []events.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = string(m.Role) + ":" + m.Text()
	}
	return out
}

func turn(obs hook.Observer) *hook.Turn {
	return &hook.Turn{ID: "turn-1", SessionID: "s1", Step: 1, Observer: obs}
}

// server starts a Server for hooks and stops it at cleanup.
func (e env) server(t testing.TB, hooks ...hooknats.Hook) *hooknats.Server {
	t.Helper()
	b, err := hooknats.NewServer(e.nc, hooknats.ServerConfig{Hooks: hooks, Provision: provision.Options{Memory: true}})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(ctx(t)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Stop(ctx(t)); err != nil {
			t.Error(err)
		}
	})
	return b
}

// chain watches the registry into a fresh chain, in sync at return.
func (e env) chain(t testing.TB) (*hook.Chain, *hooknats.Watcher) {
	t.Helper()
	c, w := e.watch(t)
	if err := w.Sync(ctx(t)); err != nil {
		t.Fatal(err)
	}
	return c, w
}
