package toolexec_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmworker/llmworker/pkg/fence"
	"github.com/llmworker/llmworker/pkg/natstest"
	"github.com/llmworker/llmworker/pkg/tool"
	"github.com/llmworker/llmworker/pkg/toolexec"
)

// A host publishes whether its tools may start while the model streams;
// the remote tools a turn builds from the catalog say the same.
func TestCatalogCarriesEager(t *testing.T) {
	e := start(t)
	noop := func(context.Context, struct{}) (string, error) { return "", nil }
	replica(t, e.url, toolexec.Config{},
		tool.Must("look", "reads", noop, tool.WithReadOnly()),
		tool.Must("put", "writes the same again", noop, tool.WithIdempotent()),
		tool.Must("send", "sends", noop),
		tool.Must("fetch", "reads, but waits", noop, tool.WithReadOnly(), tool.WithEager(false)))
	want := map[string]bool{"look": true, "put": true, "send": false, "fetch": false}
	cat, err := toolexec.OpenCatalog(ctx(t), e.js)
	if err != nil {
		t.Fatal(err)
	}
	for name, eager := range want {
		entry, err := cat.Get(ctx(t), name)
		if err != nil {
			t.Fatal(err)
		}
		if entry.Eager != eager {
			t.Errorf("catalog entry of %s: eager %v, want %v", name, entry.Eager, eager)
		}
		if got := tool.EagerOf(e.tc.Tool(entry)); got != eager {
			t.Errorf("remote tool %s: EagerOf %v, want %v", name, got, eager)
		}
	}
}

// CancelCall stops a call wherever it runs, by its turn and call id; a
// fence that fails (a turn replica that lost the turn) stops nothing.
func TestRemoteToolCancelCall(t *testing.T) {
	e := start(t)
	started := make(chan string, 2)
	stopped := make(chan string, 2)
	wait := tool.Must("wait", "Waits.", func(c context.Context, _ struct{}) (string, error) {
		ci, _ := tool.CallFrom(c)
		started <- ci.CallID
		select {
		case <-c.Done():
			stopped <- ci.CallID
			return "", c.Err()
		case <-time.After(30 * time.Second):
			return "not stopped", nil
		}
	}, tool.WithReadOnly())
	replica(t, e.url, toolexec.Config{}, wait)
	rt := remote(t, e, "wait")
	errc := make(chan error, 2)
	for _, id := range []string{"c1", "c2"} {
		go func() {
			_, err := rt.Execute(call(ctx(t), "t1", id), nil)
			errc <- err
		}()
	}
	<-started
	<-started

	lost := errors.New("the turn is another replica's")
	fenced := fence.With(context.Background(), func(context.Context) error { return lost })
	if err := rt.CancelCall(fenced, tool.CallInfo{TurnID: "t1", CallID: "c2"}); !errors.Is(err, lost) {
		t.Fatalf("CancelCall behind a failing fence = %v, want its error", err)
	}
	if err := rt.CancelCall(context.Background(), tool.CallInfo{TurnID: "t1", CallID: "c1"}); err != nil {
		t.Fatal(err)
	}
	if id := <-stopped; id != "c1" {
		t.Fatalf("stopped %s, want c1", id)
	}
	if err := <-errc; err == nil || !strings.Contains(err.Error(), "cancelled") {
		t.Fatalf("the cancelled call's Execute = %v, want its cancelled result", err)
	}
	natstest.Eventually(t, "c1's result stored", func() bool { return resultCount(t, e.js, "t1", "c1") == 1 })
	select {
	case id := <-stopped:
		t.Fatalf("%s stopped too", id)
	default:
	}
	// c2 still runs; the test's cleanup stops it with its replica.
}

// A call whose context ends behind a failing fence is not cancelled on
// its host: the replica that owns the turn now waits for its result.
func TestCallCancelledBehindAFailingFence(t *testing.T) {
	e := start(t)
	started := make(chan string, 2)
	stopped := make(chan string, 2)
	release := make(chan struct{})
	wait := tool.Must("wait", "Waits.", func(c context.Context, _ struct{}) (string, error) {
		ci, _ := tool.CallFrom(c)
		started <- ci.CallID
		select {
		case <-release:
			return "finished", nil
		case <-c.Done():
			stopped <- ci.CallID
			return "", c.Err()
		}
	})
	replica(t, e.url, toolexec.Config{}, wait)
	rt := remote(t, e, "wait")
	var owner atomic.Bool
	owner.Store(true)
	c, cancel := context.WithCancel(fence.With(ctx(t), func(context.Context) error {
		if !owner.Load() {
			return errors.New("lost")
		}
		return nil
	}))
	errc := make(chan error, 2)
	go func() {
		_, err := rt.Execute(call(c, "t2", "c1"), nil)
		errc <- err
	}()
	go func() {
		_, err := rt.Execute(call(ctx(t), "t2", "c9"), nil)
		errc <- err
	}()
	<-started
	<-started
	owner.Store(false)
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("Execute = %v, want context.Canceled", err)
	}
	// A cancel of c1 would have gone out on the client's connection before
	// this one of c9, and reached the host first.
	if err := rt.CancelCall(context.Background(), tool.CallInfo{TurnID: "t2", CallID: "c9"}); err != nil {
		t.Fatal(err)
	}
	if id := <-stopped; id != "c9" {
		t.Fatalf("stopped %s first, want c9", id)
	}
	<-errc
	close(release)
	natstest.Eventually(t, "the call's result stored", func() bool { return resultCount(t, e.js, "t2", "c1") == 1 })
	r, ok, err := e.tc.StoredResult(ctx(t), "t2", "c1")
	if err != nil || !ok || r.IsError || r.Content != "finished" {
		t.Fatalf("stored %+v %v %v, want the call's own result", r, ok, err)
	}
}
