package toolexec_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/pkg/events"
)

// A turn continued from its checkpoint (a call not published for the
// first time) that finds a stored result it cannot read takes it as the
// call's error result at once, naming the field: it is the result of
// record, and waiting, or publishing the call again, only ends at the
// deadline (docs/protocol.md §6, "A result the turn cannot read").
func TestUnreadableStoredResultIsTheCallsResult(t *testing.T) {
	e := start(t)
	h := nats.Header{}
	for k, v := range map[string]string{"ce-specversion": "1.0", "ce-id": "r1", "ce-source": "/host", "ce-type": events.TypeToolResult,
		"content-type": "application/json", jetstream.MsgIDHeader: "t1.c1"} {
		h.Set(k, v)
	}
	if _, err := e.js.PublishMsg(ctx(t), &nats.Msg{Subject: "llmw.tool.result.t1.c1", Header: h,
		Data: []byte(`{"call_id":"c1","turn_id":"t1","name":"echo","content":42,"is_error":false}`)}); err != nil {
		t.Fatal(err)
	}

	r, ok, err := e.tc.StoredResult(ctx(t), "t1", "c1")
	if err != nil || !ok || !r.IsError || r.CallID != "c1" || !strings.Contains(r.Content, `field "content"`) {
		t.Fatalf("StoredResult = %+v %v %v, want an error result naming content", r, ok, err)
	}

	// The deadline is far; the answer must not wait for it.
	cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err = e.tc.Call(cctx, events.ToolCallRequest{CallID: "c1", TurnID: "t1", Name: "echo", Input: json.RawMessage(`{}`),
		Deadline: time.Now().Add(time.Hour)}, 0)
	if err != nil || !r.IsError || !strings.Contains(r.Content, `field "content"`) || !strings.Contains(r.Content, `tool "echo"`) {
		t.Fatalf("Call = %+v, %v; want the error result of the unreadable stored result", r, err)
	}
	// Answered from the store: the call was not published.
	st, err := e.js.Stream(ctx(t), events.StreamToolCalls)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := st.Info(ctx(t)); err != nil || info.State.Msgs != 0 {
		t.Fatalf("LLMW_TOOLCALLS holds %d calls (%v), want none", info.State.Msgs, err)
	}
}
