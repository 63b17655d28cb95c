package hooknats_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/fence"
	"github.com/llmworker/llmworker/pkg/hook/hooknats"
)

// A turn that is not the caller's (its fence fails) sends no hook
// request: the hook never hears of it, and the fence's error comes back.
func TestFencedRequestNotSent(t *testing.T) {
	e := start(t)
	reg := events.HookRegistration{Name: "h", Event: events.HookBeforeToolCall, Subject: "test.hook.h"}
	var heard atomic.Int32
	sub, err := e.nc.Subscribe(reg.Subject, func(*nats.Msg) { heard.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	r, err := hooknats.New(e.nc, reg, hooknats.Config{})
	if err != nil {
		t.Fatal(err)
	}
	lost := errors.New("another replica owns the turn")
	c := fence.With(ctx(t), func(context.Context) error { return lost })
	if _, err := r.Request(c, &events.HookRequest{Event: events.HookBeforeToolCall, TurnID: "t1"}); !errors.Is(err, lost) {
		t.Fatalf("Request = %v; want the fence's error", err)
	}
	if err := e.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if n := heard.Load(); n != 0 {
		t.Fatalf("the hook heard %d requests; want none", n)
	}
}
