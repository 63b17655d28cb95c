package toolexec_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/fence"
	"github.com/llmworker/llmworker/pkg/provision"
	"github.com/llmworker/llmworker/pkg/toolexec"
)

// A slot that is running a call holds no other: a call published while
// the only slot of replica a is busy runs on replica b, started after it.
func TestBusySlotLeavesCallsToIdleReplicas(t *testing.T) {
	e := start(t)
	b := newBlocker()
	replica(t, e.url, toolexec.Config{Instance: "a", Concurrency: 1}, b.tool("a"))
	rt := remote(t, e, "block")
	done := make(chan string, 2)
	go func() {
		out, _ := rt.Execute(call(ctx(t), "t1", "c1"), nil)
		done <- out
	}()
	if where := <-b.started; where != "a" {
		t.Fatalf("first call ran on %q, want a", where)
	}
	replica(t, e.url, toolexec.Config{Instance: "b", Concurrency: 1}, b.tool("b"))
	go func() {
		out, _ := rt.Execute(call(ctx(t), "t1", "c2"), nil)
		done <- out
	}()
	select {
	case where := <-b.started:
		if where != "b" {
			t.Fatalf("second call ran on %q while a was busy, want b", where)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the second call did not start while a was busy: a holds it")
	}
	close(b.release)
	got := map[string]bool{<-done: true, <-done: true}
	if !got["done by a"] || !got["done by b"] {
		t.Fatalf("results %v, want one from each replica", got)
	}
}

// The fence (the turn's event flush) does not wait for the stored-result
// lookup: here the lookup can only succeed once the fence has run (the
// fence brings back the results stream), and the call still goes through
// well before its deadline.
func TestFenceRunsWhileLookingForStoredResult(t *testing.T) {
	e := start(t)
	var calls atomic.Int32
	replica(t, e.url, toolexec.Config{}, echo(&calls))
	rt := remote(t, e, "echo")
	if err := e.js.DeleteStream(ctx(t), events.StreamToolResults); err != nil {
		t.Fatal(err)
	}
	var fenced atomic.Int32
	c := fence.With(call(ctx(t), "t1", "c1"), func(context.Context) error {
		fenced.Add(1)
		return provision.Provision(context.Background(), e.js, provision.Options{})
	})
	c, cancel := context.WithTimeout(c, 4*time.Second)
	defer cancel()
	out, err := rt.Execute(c, json.RawMessage(`{"text":"ok"}`))
	if err != nil || out != "ok" || fenced.Load() != 1 || calls.Load() != 1 {
		t.Fatalf("Execute = %q, %v; fence ran %d times, tool %d; want ok, 1, 1", out, err, fenced.Load(), calls.Load())
	}
}

// A call whose result is stored gets that result even when the fence
// fails: a stale owner learns the result and publishes nothing.
func TestStoredResultComesBeforeTheFence(t *testing.T) {
	e := start(t)
	var calls atomic.Int32
	replica(t, e.url, toolexec.Config{}, echo(&calls))
	rt := remote(t, e, "echo")
	if out, err := rt.Execute(call(ctx(t), "t1", "c1"), json.RawMessage(`{"text":"first"}`)); err != nil || out != "first" {
		t.Fatalf("Execute = %q, %v", out, err)
	}
	lost := errors.New("another replica owns the turn")
	c := fence.With(call(ctx(t), "t1", "c1"), func(context.Context) error { return lost })
	out, err := rt.Execute(c, json.RawMessage(`{"text":"second"}`))
	if err != nil || out != "first" || calls.Load() != 1 {
		t.Fatalf("Execute = %q, %v, tool ran %d times; want the stored result first, nil, 1", out, err, calls.Load())
	}
}
