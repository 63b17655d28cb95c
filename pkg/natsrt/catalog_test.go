package natsrt_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/natsrt"
	"github.com/llmworker/llmworker/pkg/worker"
)

func TestCatalogPutGetListWatch(t *testing.T) {
	e := start(t, true)
	c := ctx(t)
	cat, err := natsrt.OpenCatalog(c, e.js)
	if err != nil {
		t.Fatal(err)
	}
	a := events.ToolCatalogEntry{Name: "a", Description: "tool a", InputSchema: json.RawMessage(`{"type":"object"}`), TimeoutMS: 1500, Version: "2"}
	if err := cat.Put(c, a); err != nil {
		t.Fatal(err)
	}
	if err := cat.Put(c, events.ToolCatalogEntry{Name: "bad name"}); !errors.Is(err, events.ErrInvalid) {
		t.Errorf("invalid entry: %v", err)
	}
	got, err := cat.Get(c, "a")
	if err != nil || got.TimeoutMS != 1500 || got.Version != "2" || got.Description != "tool a" {
		t.Fatalf("Get = %+v, %v", got, err)
	}
	if _, err := cat.Get(c, "missing"); !errors.Is(err, natsrt.ErrNotFound) {
		t.Errorf("Get(missing) = %v, want ErrNotFound", err)
	}
	w, err := cat.Watch(c)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if es := w.Entries(); len(es) != 1 || es[0].Name != "a" {
		t.Fatalf("watch initial %v", es)
	}
	b := a
	b.Name = "b"
	if err := cat.Put(c, b); err != nil {
		t.Fatal(err)
	}
	eventually(t, "watch sees b", func() bool { _, ok := w.Get("b"); return ok })
	if err := cat.Delete(c, "a"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "watch drops a", func() bool { _, ok := w.Get("a"); return !ok })
	list, err := cat.List(c)
	if err != nil || len(list) != 1 || list[0].Name != "b" {
		t.Errorf("List = %v, %v", list, err)
	}
}

func TestRemoteToolNeedsCallInfo(t *testing.T) {
	e := start(t, true)
	rt := natsrt.NewToolClient(e.nc, e.js, natsrt.ToolClientOptions{}).Tool(events.ToolCatalogEntry{Name: "x", InputSchema: json.RawMessage(`{}`)})
	if _, err := rt.Execute(context.Background(), nil); !errors.Is(err, natsrt.ErrNoCallInfo) {
		t.Fatalf("err = %v, want ErrNoCallInfo", err)
	}
	ci := natsrt.CallInfo{TurnID: "t", CallID: "c"}
	got, ok := natsrt.CallFrom(natsrt.WithCall(context.Background(), ci))
	if !ok || got != ci {
		t.Errorf("CallFrom = %v %v", got, ok)
	}
}

func TestRemoteToolTakesWorkerCallInfo(t *testing.T) {
	e := start(t, true)
	rt := natsrt.NewToolClient(e.nc, e.js, natsrt.ToolClientOptions{}).Tool(events.ToolCatalogEntry{Name: "x", InputSchema: json.RawMessage(`{}`)})
	// With the worker's call info the call is sent (and, nobody hosting
	// x, times out) instead of failing for lack of ids.
	c, cancel := context.WithTimeout(worker.WithCallInfo(context.Background(), worker.CallInfo{TurnID: "t", CallID: "c"}), 100*time.Millisecond)
	defer cancel()
	if _, err := rt.Execute(c, nil); errors.Is(err, natsrt.ErrNoCallInfo) || err == nil {
		t.Fatalf("err = %v", err)
	}
}
