package toolexec_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/natstest"
	"github.com/llmworker/llmworker/pkg/tool"
	"github.com/llmworker/llmworker/pkg/toolexec"
)

// A started replica hosts more tools (Add) and stops hosting some
// (Remove), as an MCP server's tools come and go: an added tool is in the
// catalog and answers calls; a removed one leaves the catalog, its calls
// wait in the queue for a replica that hosts it, and its direct invoke
// here is answered 503; added again, it answers the waiting call.
func TestAddAndRemoveWhileRunning(t *testing.T) {
	e := start(t)
	var echoes atomic.Int32
	s, _ := replica(t, e.url, toolexec.Config{}, echo(nil))
	if err := s.Add(ctx(t), nil); !errors.Is(err, toolexec.ErrInvalidTool) {
		t.Errorf("a nil tool: %v", err)
	}
	if err := s.Add(ctx(t), echo(nil)); !errors.Is(err, toolexec.ErrInvalidTool) {
		t.Errorf("a tool hosted already: %v", err)
	}
	upper := tool.Must("upper", "Upper-cases.", func(_ context.Context, a EchoArgs) (string, error) {
		echoes.Add(1)
		return "UP:" + a.Text, nil
	})
	if err := s.Add(ctx(t), upper); err != nil {
		t.Fatal(err)
	}
	cat, err := toolexec.OpenCatalog(ctx(t), e.js)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cat.Get(ctx(t), "upper"); err != nil {
		t.Fatalf("the added tool is not in the catalog: %v", err)
	}
	res, err := e.tc.Call(ctx(t), events.ToolCallRequest{TurnID: "t1", CallID: "c1", Name: "upper", Input: json.RawMessage(`{"text":"a"}`)}, 0)
	if err != nil || res.Content != "UP:a" {
		t.Fatalf("call of the added tool: %+v %v", res, err)
	}

	if err := s.Remove(ctx(t), "upper", "not-hosted"); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, "the removed tool left the catalog", func() bool {
		_, err := cat.Get(ctx(t), "upper")
		return errors.Is(err, toolexec.ErrNotFound)
	})
	m, err := e.nc.Request(toolexec.InvokeSubject("", "upper"), []byte(`{}`), 5*time.Second)
	if err != nil || m.Header.Get("Nats-Service-Error-Code") != "503" {
		t.Errorf("invoke of the removed tool: %v %v", m, err)
	}
	waiting := make(chan events.ToolCallResult, 1)
	go func() {
		res, _ := e.tc.Call(context.Background(), events.ToolCallRequest{TurnID: "t1", CallID: "c2", Name: "upper", Input: json.RawMessage(`{"text":"b"}`)}, 20*time.Second)
		waiting <- res
	}()
	select {
	case res := <-waiting:
		t.Fatalf("a removed tool answered: %+v", res)
	case <-time.After(500 * time.Millisecond):
	}
	if n := echoes.Load(); n != 1 {
		t.Fatalf("the removed tool ran %d times, want 1", n)
	}
	if err := s.Add(ctx(t), upper); err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-waiting:
		if res.Content != "UP:b" {
			t.Fatalf("the waiting call: %+v", res)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the waiting call was not answered once the tool was added again")
	}

	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Stop(c); err != nil {
		t.Fatal(err)
	}
	if err := s.Add(ctx(t), upper); !errors.Is(err, toolexec.ErrNotStarted) {
		t.Errorf("Add after Stop: %v", err)
	}
	if err := s.Remove(ctx(t), "echo"); !errors.Is(err, toolexec.ErrNotStarted) {
		t.Errorf("Remove after Stop: %v", err)
	}
}
